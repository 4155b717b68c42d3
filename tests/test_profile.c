/* The profiler's recorder through its C API (eng_profile.h), without Lua: one record per
 * dispatched op with its inputs, times, thread and phase; ops from several threads at once; the
 * session rules (no nesting, stop without start); CPU peak memory per phase; the records of the
 * previous session stay readable until the next one starts. */
#include <pthread.h>
#include <string.h>

#include "eng_ops.h"
#include "eng_profile.h"
#include "support.h"

static eng_tensor_t *rand2(int64_t r, int64_t c, uint64_t seed) {
  int64_t shape[2] = {r, c};
  return t_rand_tensor(shape, 2, ENG_F32, seed, -1, 1);
}

static eng_profile_data_t stop_and_read(void) {
  T_OK(eng_profile_stop());
  eng_profile_data_t d;
  eng_profile_data(&d);
  return d;
}

/* A site callback that numbers the calls, so each op's site says which call it was. */
static uint32_t site_calls;
static void count_sites(void *user, uint32_t *site, uint32_t *frame) {
  cr_assert_eq(user, &site_calls);
  *site = ++site_calls;
  *frame = 1000 + site_calls;
}

Test(profile, records_each_op_with_inputs_times_and_sites) {
  eng_tensor_t *a = rand2(5, 7, 1), *b = rand2(7, 3, 2), *c = NULL, *s = NULL, *ln = NULL;
  site_calls = 0;
  eng_profile_opts_t opts = {.site = count_sites, .site_user = &site_calls};
  uint64_t before = eng_profile_now_ns();
  T_OK(eng_profile_start(&opts));
  cr_assert(eng_profile_running());
  T_OK(eng_op_matmul(a, b, &c));
  T_OK(eng_op_softmax(c, -1, &s));
  T_OK(eng_op_layer_norm(c, NULL, NULL, 1e-5, &ln));
  eng_profile_data_t d = stop_and_read();
  uint64_t after = eng_profile_now_ns();
  cr_assert(!eng_profile_running());
  cr_assert_eq(d.n_ops, 3);
  const char *names[3] = {"matmul", "softmax", "layer_norm"};
  const char *inputs[3] = {"f32[5,7], f32[7,3]", "f32[5,3]", "f32[5,3], -, -"};
  char buf[128];
  for (size_t i = 0; i < 3; i++) {
    const eng_prof_op_t *o = &d.ops[i];
    cr_expect_str_eq(o->name, names[i]);
    cr_expect_eq(o->seq, i + 1);
    cr_expect_eq(o->parent, 0);
    cr_expect_eq(o->site, i + 1, "op %zu site %u", i, o->site);
    cr_expect_eq(o->frame, 1001 + i);
    cr_expect_eq(o->device, -1);
    cr_expect_eq(o->backward, 0);
    cr_expect_str_eq(eng_profile_op_inputs(&d, o, buf, sizeof buf), inputs[i]);
    cr_expect(o->t0 >= before && o->t1 > o->t0 && o->t1 <= after, "op %zu times", i);
    if (i) cr_expect(o->t0 >= d.ops[i - 1].t1, "op %zu starts after the previous ends", i);
  }
  cr_expect(d.t0 <= d.ops[0].t0 && d.t1 >= d.ops[2].t1 && d.t1 <= after);
  cr_expect_eq(d.n_kernels, 0);
  cr_expect_eq(d.cuda, 0);
  /* a short buffer is cut, not overrun */
  char tiny[8];
  eng_profile_op_inputs(&d, &d.ops[0], tiny, sizeof tiny);
  cr_expect_str_eq(tiny, "f32[5,7");
  eng_tensor_release(a), eng_tensor_release(b), eng_tensor_release(c);
  eng_tensor_release(s), eng_tensor_release(ln);
  eng_profile_clear();
}

Test(profile, phases_split_the_ops_and_keep_their_cpu_peak) {
  eng_tensor_t *a = rand2(4, 4, 3), *big = NULL, *x = NULL, *y = NULL;
  eng_profile_opts_t opts = {.first_phase = "setup"};
  T_OK(eng_profile_start(&opts));
  int64_t shape[1] = {1 << 20};
  T_OK(eng_tensor_full(shape, 1, 2.0, ENG_F32, ENG_CPU_DEVICE, &big)); /* 4 MiB */
  eng_profile_phase("setup"); /* the current phase again: nothing changes */
  eng_tensor_release(big);
  eng_profile_phase("optimizer");
  T_OK(eng_op_softmax(a, 0, &x));
  eng_profile_phase("a name longer than thirty-one bytes is cut");
  T_OK(eng_op_softmax(a, 1, &y));
  eng_profile_data_t d = stop_and_read();
  cr_assert_eq(d.n_phases, 3);
  cr_expect_str_eq(d.phases[0].name, "setup");
  cr_expect_str_eq(d.phases[1].name, "optimizer");
  cr_expect_str_eq(d.phases[2].name, "a name longer than thirty-one b");
  cr_expect(d.phases[0].peak_cpu >= 4 << 20, "setup held the 4 MiB tensor: %lld",
            (long long)d.phases[0].peak_cpu);
  cr_expect(d.phases[1].peak_cpu < 4 << 20, "freed before optimizer: %lld", (long long)d.phases[1].peak_cpu);
  cr_expect_eq(d.phases[0].peak_cuda, -1);
  cr_expect(d.phases[0].t1 == d.phases[1].t0 && d.phases[1].t1 == d.phases[2].t0 && d.phases[2].t1 == d.t1);
  size_t softmaxes = 0;
  for (size_t i = 0; i < d.n_ops; i++) {
    if (strcmp(d.ops[i].name, "softmax") != 0) continue;
    cr_expect_eq(d.ops[i].phase, softmaxes + 1, "softmax %zu in phase %u", softmaxes, d.ops[i].phase);
    softmaxes++;
  }
  cr_expect_eq(softmaxes, 2);
  eng_tensor_release(a), eng_tensor_release(x), eng_tensor_release(y);
  eng_profile_clear();
}

#define THREADS 4
#define OPS_PER_THREAD 500

static void *dispatch_many(void *arg) {
  eng_tensor_t *a = arg;
  for (int i = 0; i < OPS_PER_THREAD; i++) {
    eng_tensor_t *y = NULL;
    if (eng_op_softmax(a, -1, &y) != ENG_OK) return (void *)1;
    eng_tensor_release(y);
  }
  return NULL;
}

Test(profile, ops_from_several_threads_are_all_recorded) {
  eng_tensor_t *a = rand2(3, 5, 4);
  eng_profile_opts_t opts = {0};
  T_OK(eng_profile_start(&opts));
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++) cr_assert_eq(pthread_create(&th[i], NULL, dispatch_many, a), 0);
  for (int i = 0; i < THREADS; i++) {
    void *rc;
    pthread_join(th[i], &rc);
    cr_assert_null(rc);
  }
  eng_profile_data_t d = stop_and_read();
  cr_assert_eq(d.n_ops, THREADS * OPS_PER_THREAD);
  int32_t tids[THREADS] = {0};
  int counts[THREADS] = {0};
  for (size_t i = 0; i < d.n_ops; i++) {
    const eng_prof_op_t *o = &d.ops[i];
    cr_assert_eq(o->seq, i + 1);
    cr_assert(o->t1 >= o->t0 && o->t1 != 0);
    int k = 0;
    while (k < THREADS && tids[k] && tids[k] != o->thread) k++;
    cr_assert(k < THREADS, "more threads than started");
    tids[k] = o->thread;
    counts[k]++;
  }
  for (int k = 0; k < THREADS; k++) cr_expect_eq(counts[k], OPS_PER_THREAD, "thread %d", k);
  eng_tensor_release(a);
  eng_profile_clear();
}

Test(profile, sessions_do_not_nest_and_data_lives_until_the_next_start) {
  eng_profile_opts_t opts = {0};
  eng_tensor_t *a = rand2(2, 2, 5), *y = NULL;
  T_FAILS(eng_profile_stop(), ENG_ERR_ARG, "no profile is running");
  T_OK(eng_profile_start(&opts));
  T_FAILS(eng_profile_start(&opts), ENG_ERR_ARG, "a profile is already running");
  T_OK(eng_op_softmax(a, 0, &y));
  eng_profile_data_t d = stop_and_read();
  cr_assert_eq(d.n_ops, 1);
  eng_tensor_release(y);
  y = NULL;
  T_OK(eng_op_softmax(a, 0, &y)); /* not recorded: no session */
  eng_profile_data(&d);
  cr_assert_eq(d.n_ops, 1, "the stopped session's records stay");
  if (!eng_profile_cuda_available()) {
    eng_profile_opts_t gpu = {.cuda = 1};
    T_FAILS(eng_profile_start(&gpu), ENG_ERR_DEVICE, "profile:");
    cr_assert(!eng_profile_running());
  }
  eng_profile_clear();
  eng_profile_data(&d);
  cr_assert_eq(d.n_ops, 0);
  eng_tensor_release(a), eng_tensor_release(y);
}
