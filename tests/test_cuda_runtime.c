/* The CUDA runtime layer (eng_cuda.h): devices, the caching allocator, host<->device copies,
 * streams and events, graphs. The tests that need a GPU skip themselves without one; the first
 * runs everywhere and checks what a missing device says. Criterion runs each test in a fresh
 * process, so each starts with an empty allocator. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_cuda.h"
#include "support.h"

#define MiB ((size_t)1 << 20)
#define CUDA0 ((eng_device_t){ENG_DEV_CUDA, 0})

static void need_gpu(void) {
  if (eng_cuda_device_count() == 0) cr_skip_test("no CUDA GPU");
}

static eng_cuda_mem_stats_t stats(void) {
  eng_cuda_mem_stats_t s;
  T_OK(eng_cuda_memory_stats(0, &s));
  return s;
}

/* n pseudo-random bytes (xorshift64*), so that misplaced bytes cannot go unnoticed. */
static unsigned char *random_bytes(size_t n, uint64_t seed) {
  unsigned char *p = malloc(n ? n : 1);
  cr_assert_not_null(p);
  uint64_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i++) {
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    p[i] = (unsigned char)((x * 0x2545F4914F6CDD1Dull) >> 56);
  }
  return p;
}

/* Every element of t (a float tensor on any device) equals v. */
static void assert_all(const eng_tensor_t *t, double v) {
  double *got = t_values(t);
  int64_t n = eng_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) cr_assert_eq(got[i], v, "[%lld] = %g, expected %g", (long long)i, got[i], v);
  free(got);
}

Test(cuda_runtime, a_missing_device_is_a_clear_error) {
  int n = eng_cuda_device_count();
  char want[96];
#ifdef ENG_HAVE_CUDA
  snprintf(want, sizeof want, "cuda: device %d does not exist (", n);
#else
  snprintf(want, sizeof want, "cuda: this engine was built without CUDA");
#endif
  T_FAILS(eng_cuda_check_device(n), ENG_ERR_DEVICE, want);
  void *p = NULL;
  T_FAILS(eng_cuda_malloc(n, 16, NULL, &p), ENG_ERR_DEVICE, want);
  cr_assert_null(p);
  eng_cuda_props_t props;
  T_FAILS(eng_cuda_properties(n, &props), ENG_ERR_DEVICE, want);
  eng_cuda_mem_stats_t s;
  T_FAILS(eng_cuda_memory_stats(n, &s), ENG_ERR_DEVICE, want);
  T_FAILS(eng_cuda_synchronize(n), ENG_ERR_DEVICE, want);
  cr_assert_null(eng_cuda_current_stream(n));
  cr_assert(!eng_cuda_is_capturing(n));
  if (n == 0) cr_assert_eq(eng_cuda_bytes_live(), 0);
}

Test(cuda_runtime, properties_are_sane) {
  need_gpu();
  eng_cuda_props_t p;
  T_OK(eng_cuda_properties(0, &p));
  cr_assert(strlen(p.name) > 0, "a GPU has a name");
  cr_assert_gt(p.sm_count, 0);
  cr_assert_gt(p.total_memory, (size_t)1 << 30);
  cr_assert(p.major >= 7 && p.minor >= 0, "compute capability %d.%d", p.major, p.minor);
  cr_assert(p.l2_bytes > 0 && p.smem_per_block_optin >= 48 * 1024 && p.max_threads_per_sm > 0);
  cr_assert(p.clock_khz > 0 && p.memory_clock_khz > 0 && p.memory_bus_bits > 0);
  cr_assert_leq(stats().device_total, p.total_memory + MiB, "memory_stats sees the same GPU");
  T_FAILS(eng_cuda_check_device(-1), ENG_ERR_DEVICE, "cuda: device -1 does not exist");
}

Test(cuda_runtime, a_freed_block_is_reused_on_its_stream_only) {
  need_gpu();
  eng_stream_t def = eng_cuda_current_stream(0), other;
  cr_assert_not_null(def);
  cr_assert_eq(eng_cuda_current_stream(0), def, "the default stream is made once");
  T_OK(eng_cuda_stream_new(0, &other));
  eng_cuda_mem_stats_t s0 = stats();
  void *a, *b, *c;
  T_OK(eng_cuda_malloc(0, 3000, def, &a));
  eng_cuda_free(0, a);
  T_OK(eng_cuda_malloc(0, 3000, def, &b));
  cr_assert_eq(b, a, "same size, same stream: the cached block");
  eng_cuda_mem_stats_t s1 = stats();
  cr_assert_eq(s1.n_alloc - s0.n_alloc, 2);
  cr_assert_eq(s1.n_cache_hit - s0.n_cache_hit, 1);
  cr_assert_eq(s1.n_segment - s0.n_segment, 1);
  eng_cuda_free(0, b);
  T_OK(eng_cuda_malloc(0, 3000, other, &c));
  cr_assert_neq(c, b, "a block cached for one stream is not handed to another");
  eng_cuda_mem_stats_t s2 = stats();
  cr_assert_eq(s2.n_cache_hit, s1.n_cache_hit);
  cr_assert_eq(s2.n_segment, s1.n_segment + 1);
  eng_cuda_free(0, c);
  T_OK(eng_cuda_malloc(0, 3000, NULL, &a));
  cr_assert_eq(a, b, "no stream means the current one (the default)");
  eng_cuda_free(0, a);
  eng_cuda_stream_free(other);
}

Test(cuda_runtime, a_large_block_splits_and_merges_back) {
  need_gpu();
  void *big, *piece[8];
  T_OK(eng_cuda_malloc(0, 64 * MiB, NULL, &big));
  eng_cuda_free(0, big);
  eng_cuda_mem_stats_t s0 = stats();
  for (int i = 0; i < 8; i++) T_OK(eng_cuda_malloc(0, 8 * MiB, NULL, &piece[i]));
  eng_cuda_mem_stats_t s1 = stats();
  cr_assert_eq(s1.reserved, s0.reserved, "the pieces are carved from the cached 64 MiB segment");
  cr_assert_eq(s1.n_segment, s0.n_segment);
  cr_assert_eq(s1.n_cache_hit - s0.n_cache_hit, 8);
  cr_assert_eq(s1.allocated - s0.allocated, 64 * MiB);
  for (int i = 0; i < 8; i++)
    cr_assert_eq((char *)piece[i], (char *)big + (size_t)i * 8 * MiB, "piece %d", i);
  const int order[8] = {5, 0, 7, 2, 6, 1, 4, 3}; /* frees that leave holes before they close */
  for (int i = 0; i < 8; i++) eng_cuda_free(0, piece[order[i]]);
  void *again;
  T_OK(eng_cuda_malloc(0, 64 * MiB, NULL, &again));
  cr_assert_eq(again, big, "the pieces merged back into one 64 MiB block");
  eng_cuda_mem_stats_t s2 = stats();
  cr_assert_eq(s2.reserved, s0.reserved);
  cr_assert_eq(s2.n_segment, s0.n_segment);
  eng_cuda_free(0, again);
}

Test(cuda_runtime, stats_count_blocks_and_the_peak) {
  need_gpu();
  eng_cuda_mem_stats_t s0 = stats();
  void *a, *b, *c, *d;
  /* 1.5 MiB from a new 2 MiB segment: the 0.5 MiB rest is not worth a block, so it goes too */
  T_OK(eng_cuda_malloc(0, 3 * MiB / 2, NULL, &c));
  cr_assert_eq(stats().allocated - s0.allocated, 2 * MiB);
  eng_cuda_free(0, c);
  T_OK(eng_cuda_malloc(0, 3 * MiB, NULL, &a)); /* too big for c's block: a 4 MiB segment, split */
  cr_assert_eq(stats().allocated - s0.allocated, 3 * MiB);
  T_OK(eng_cuda_malloc(0, 1000, NULL, &b)); /* small: rounded to 1024 */
  cr_assert_eq(stats().allocated - s0.allocated, 3 * MiB + 1024);
  cr_assert_eq(eng_cuda_bytes_live(), stats().allocated, "one device in use");
  eng_cuda_free(0, a);
  eng_cuda_mem_stats_t s1 = stats();
  cr_assert_eq(s1.allocated - s0.allocated, 1024);
  cr_assert_geq(s1.peak_allocated, s0.allocated + 3 * MiB + 1024);
  cr_assert_eq(s1.reserved - s0.reserved, 2 * MiB + 4 * MiB + 2 * MiB, "freed segments stay cached");
  cr_assert_eq(s1.n_segment - s0.n_segment, 3);
  eng_cuda_reset_peak(0);
  cr_assert_eq(stats().peak_allocated, s1.allocated, "the reset peak starts at the live bytes");
  T_OK(eng_cuda_malloc(0, 2 * MiB, NULL, &d)); /* c's cached block fits exactly */
  cr_assert_eq(d, c);
  cr_assert_eq(stats().allocated - s1.allocated, 2 * MiB);
  cr_assert_eq(stats().peak_allocated, s1.allocated + 2 * MiB);
  eng_cuda_free(0, d);
  eng_cuda_free(0, b);
  cr_assert_eq(stats().allocated, s0.allocated);
  cr_assert_eq(stats().peak_allocated, s1.allocated + 2 * MiB, "freeing leaves the peak");
  cr_assert_eq(stats().reserved, s1.reserved);
}

Test(cuda_runtime, empty_cache_keeps_only_segments_in_use) {
  need_gpu();
  T_OK(eng_cuda_empty_cache(0));
  eng_cuda_mem_stats_t s0 = stats();
  void *small, *large;
  T_OK(eng_cuda_malloc(0, 1000, NULL, &small));
  T_OK(eng_cuda_malloc(0, 8 * MiB, NULL, &large));
  eng_cuda_free(0, large);
  cr_assert_eq(stats().reserved, s0.reserved + 10 * MiB);
  T_OK(eng_cuda_empty_cache(0));
  eng_cuda_mem_stats_t s1 = stats();
  cr_assert_eq(s1.reserved, s0.reserved + 2 * MiB, "the small block's segment stays");
  cr_assert_eq(s1.allocated, s0.allocated + 1024);
  eng_cuda_free(0, small);
  T_OK(eng_cuda_empty_cache(0));
  cr_assert_eq(stats().reserved, s0.reserved);
}

static void count_calls(void *user) { (*(int *)user)++; }

Test(cuda_runtime, out_of_memory_flushes_retries_and_says_why) {
  need_gpu();
  int calls = 0;
  eng_cuda_set_oom_hook(count_calls, &calls);
  void *keep, *cached, *p = NULL;
  T_OK(eng_cuda_malloc(0, 4 * MiB, NULL, &keep));
  T_OK(eng_cuda_malloc(0, 8 * MiB, NULL, &cached));
  eng_cuda_free(0, cached);
  eng_cuda_mem_stats_t s0 = stats();
  eng_status_t st = eng_cuda_malloc(0, (size_t)1 << 50, NULL, &p);
  const char *msg = eng_last_error();
  cr_assert_eq(st, ENG_ERR_OOM, "status %d: %s", (int)st, msg);
  cr_assert_null(p);
  cr_assert(strstr(msg, "cuda:0: out of memory allocating 1.00 PiB (") != NULL, "%s", msg);
  cr_assert(strstr(msg, "allocated 4.00 MiB") != NULL, "%s", msg);
  cr_assert(strstr(msg, "cached 0 B") != NULL, "the retry flushed the cache: %s", msg);
  cr_assert(strstr(msg, "free on device ") != NULL && strstr(msg, " GiB of ") != NULL, "%s", msg);
  cr_assert_eq(calls, 1, "the hook runs once, before the retry");
  eng_cuda_mem_stats_t s1 = stats();
  cr_assert_eq(s1.n_oom_retry, s0.n_oom_retry + 1);
  cr_assert_eq(s1.reserved, s0.reserved - 8 * MiB, "the cached segment went back to CUDA");
  cr_assert_eq(s1.allocated, s0.allocated);
  /* and nothing is broken: memory can still be had and used */
  unsigned char *src = random_bytes(4096, 1), back[4096];
  T_OK(eng_cuda_malloc(0, 4096, NULL, &p));
  T_OK(eng_cuda_copy_h2d(0, p, src, 4096, NULL));
  T_OK(eng_cuda_copy_d2h(0, back, p, 4096, NULL));
  cr_assert(memcmp(src, back, 4096) == 0);
  cr_assert_eq(calls, 1);
  free(src);
  eng_cuda_free(0, p);
  eng_cuda_free(0, keep);
  eng_cuda_set_oom_hook(NULL, NULL);
}

Test(cuda_runtime, host_device_copies_round_trip) {
  need_gpu();
  const size_t sizes[] = {1, 7, 4097, 8 * MiB, 20 * MiB + 3}; /* 20 MiB + 3: three staging chunks */
  eng_stream_t user;
  T_OK(eng_cuda_stream_new(0, &user));
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    size_t n = sizes[k];
    unsigned char *src = random_bytes(n, k + 1), *guard = random_bytes(16, 99), *whole = malloc(n + 16);
    cr_assert_not_null(whole);
    void *d;
    T_OK(eng_cuda_malloc(0, n + 16, NULL, &d));
    T_OK(eng_cuda_copy_h2d(0, d, guard, 16, NULL)); /* known bytes in front of the target */
    char *at = (char *)d + 3;                       /* an odd device address */
    /* to the device on a user stream, back on the default one: h2d is complete on return */
    T_OK(eng_cuda_copy_h2d(0, at, src, n, k % 2 ? user : NULL));
    memset(whole, 0xA5, n + 16);
    T_OK(eng_cuda_copy_d2h(0, whole, d, n + 3, NULL));
    cr_assert(memcmp(whole, guard, 3) == 0, "n = %zu: the bytes before the target are untouched", n);
    cr_assert(memcmp(whole + 3, src, n) == 0, "n = %zu: round trip", n);
    cr_assert_eq(whole[n + 3], 0xA5, "n = %zu: d2h wrote past its end", n);
    eng_cuda_free(0, d);
    free(src);
    free(guard);
    free(whole);
  }
  T_OK(eng_cuda_copy_h2d(0, NULL, NULL, 0, NULL));
  T_OK(eng_cuda_copy_d2h(0, NULL, NULL, 0, NULL));
  eng_cuda_stream_free(user);
}

Test(cuda_runtime, streams_and_events) {
  need_gpu();
  eng_stream_t def = eng_cuda_current_stream(0), s;
  T_OK(eng_cuda_stream_new(0, &s));
  T_OK(eng_cuda_set_current_stream(0, s));
  cr_assert_eq(eng_cuda_current_stream(0), s);
  eng_event_t start, stop, never;
  T_OK(eng_cuda_event_new(0, &start));
  T_OK(eng_cuda_event_new(0, &stop));
  T_OK(eng_cuda_event_new(0, &never));
  T_OK(eng_cuda_event_record(start, s));
  int64_t shape[1] = {1 << 24};
  eng_tensor_t *t;
  T_OK(eng_tensor_empty(shape, 1, ENG_F32, CUDA0, &t)); /* for s, filled on s */
  T_OK(eng_tensor_fill_(t, 2.5));
  T_OK(eng_cuda_event_record(stop, s));
  T_OK(eng_cuda_event_synchronize(stop));
  float ms = -1;
  T_OK(eng_cuda_event_elapsed(start, stop, &ms));
  cr_assert(ms >= 0 && ms < 10000, "elapsed %g ms", (double)ms);
  int64_t last[1] = {(1 << 24) - 1};
  double v = 0;
  T_OK(eng_tensor_get(t, last, &v));
  cr_assert_eq(v, 2.5);
  T_FAILS(eng_cuda_event_elapsed(never, stop, &ms), ENG_ERR_DEVICE, "cudaEventElapsedTime");
  T_FAILS(eng_cuda_event_record(start, NULL), ENG_ERR_ARG, "needs an event and a stream");
  T_OK(eng_cuda_stream_synchronize(s));
  T_OK(eng_cuda_synchronize(0));
  T_OK(eng_cuda_set_current_stream(0, NULL));
  cr_assert_eq(eng_cuda_current_stream(0), def, "NULL restores the default stream");
  T_OK(eng_cuda_set_current_stream(0, s));
  eng_cuda_stream_free(s);
  cr_assert_eq(eng_cuda_current_stream(0), def, "a freed stream stops being current");
  eng_tensor_release(t);
  eng_cuda_event_free(start);
  eng_cuda_event_free(stop);
  eng_cuda_event_free(never);
}

Test(cuda_runtime, a_graph_replays_its_ops_on_memory_of_its_own) {
  need_gpu();
  int64_t shape[1] = {4096};
  eng_tensor_t *a, *b, *c, *y, *z;
  T_OK(eng_tensor_empty(shape, 1, ENG_F32, CUDA0, &a));
  T_OK(eng_tensor_empty(shape, 1, ENG_F32, CUDA0, &b));
  T_OK(eng_tensor_fill_(a, 1.5));
  T_OK(eng_tensor_fill_(b, 2.0));
  eng_stream_t def = eng_cuda_current_stream(0);

  eng_cuda_graph_t *g = NULL;
  T_OK(eng_cuda_graph_begin(0, &g));
  cr_assert(eng_cuda_is_capturing(0));
  cr_assert_neq(eng_cuda_current_stream(0), def, "capture runs on a stream of its own");
  float host[4] = {0};
  T_FAILS(eng_cuda_copy_h2d(0, eng_tensor_data(a), host, sizeof host, NULL), ENG_ERR_DEVICE,
          "cannot be captured");
  T_FAILS(eng_cuda_synchronize(0), ENG_ERR_DEVICE, "while a graph is being captured");
  T_FAILS(eng_cuda_set_current_stream(0, NULL), ENG_ERR_DEVICE, "cannot change");
  T_FAILS(eng_cuda_empty_cache(0), ENG_ERR_DEVICE, "while a graph is being captured");
  eng_cuda_graph_t *nested;
  T_FAILS(eng_cuda_graph_begin(0, &nested), ENG_ERR_DEVICE, "already being captured");
  T_OK(eng_tensor_empty(shape, 1, ENG_F32, CUDA0, &c));
  T_OK(eng_tensor_fill_(c, 0.25));
  T_OK(eng_op_binary(ENG_BINARY_ADD, a, c, &y));
  T_OK(eng_op_binary(ENG_BINARY_MUL, y, b, &z));
  void *graph_ptrs[3] = {eng_tensor_data(c), eng_tensor_data(y), eng_tensor_data(z)};
  T_OK(eng_cuda_graph_end(&g));
  cr_assert_not_null(g);
  cr_assert(!eng_cuda_is_capturing(0));
  cr_assert_eq(eng_cuda_current_stream(0), def, "the stream from before capture is back");
  eng_tensor_release(c); /* the intermediates go; their memory stays the graph's */
  eng_tensor_release(y);

  T_OK(eng_cuda_graph_replay(g));
  assert_all(z, (1.5 + 0.25) * 2.0);
  /* eager memory never overlaps the graph's, even for the same sizes */
  eng_tensor_t *eager[8];
  for (int i = 0; i < 8; i++) {
    T_OK(eng_tensor_empty(shape, 1, ENG_F32, CUDA0, &eager[i]));
    T_OK(eng_tensor_fill_(eager[i], 100.0 + i));
    for (int k = 0; k < 3; k++) cr_assert_neq(eng_tensor_data(eager[i]), graph_ptrs[k], "eager %d", i);
  }
  T_OK(eng_tensor_fill_(a, -3.0)); /* replays read the inputs as they are now */
  T_OK(eng_cuda_graph_replay(g));
  T_OK(eng_cuda_graph_replay(g));
  assert_all(z, (-3.0 + 0.25) * 2.0);
  for (int i = 0; i < 8; i++) {
    assert_all(eager[i], 100.0 + i);
    eng_tensor_release(eager[i]);
  }

  /* z outlives the graph; its segment goes back to CUDA once z goes too */
  eng_cuda_graph_free(g);
  assert_all(z, (-3.0 + 0.25) * 2.0);
  eng_cuda_mem_stats_t before = stats();
  eng_tensor_release(z);
  eng_cuda_mem_stats_t after = stats();
  cr_assert_eq(before.reserved - after.reserved, 2 * MiB, "the private pool's last segment is freed");
  cr_assert_eq(before.allocated - after.allocated, 16384);
  eng_tensor_release(a);
  eng_tensor_release(b);
}

Test(cuda_runtime, graph_edge_cases) {
  need_gpu();
  eng_stream_t def = eng_cuda_current_stream(0);
  eng_cuda_graph_t *g = NULL;
  /* nothing captured: replay does nothing */
  T_OK(eng_cuda_graph_begin(0, &g));
  T_OK(eng_cuda_graph_end(&g));
  cr_assert_not_null(g);
  T_OK(eng_cuda_graph_replay(g));
  eng_cuda_graph_free(g);
  /* freed while capturing: the capture ends and the stream comes back */
  int64_t shape[1] = {100};
  eng_tensor_t *t;
  T_OK(eng_cuda_graph_begin(0, &g));
  T_OK(eng_tensor_empty(shape, 1, ENG_F32, CUDA0, &t));
  T_OK(eng_tensor_fill_(t, 1.0));
  eng_cuda_graph_free(g);
  cr_assert(!eng_cuda_is_capturing(0));
  cr_assert_eq(eng_cuda_current_stream(0), def);
  eng_tensor_release(t);
  /* ending twice: the second end fails and frees the graph */
  T_OK(eng_cuda_graph_begin(0, &g));
  T_OK(eng_cuda_graph_end(&g));
  T_FAILS(eng_cuda_graph_end(&g), ENG_ERR_ARG, "not being captured");
  cr_assert_null(g);
  /* everything still works */
  T_OK(eng_tensor_empty(shape, 1, ENG_F32, CUDA0, &t));
  T_OK(eng_tensor_fill_(t, 4.0));
  assert_all(t, 4.0);
  eng_tensor_release(t);
}
