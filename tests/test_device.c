/* Devices (parsing, names, the no-GPU errors) and the per-thread error messages. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "support.h"

Test(device, cpu_parses_and_names) {
  eng_device_t d = {ENG_DEV_CUDA, 5};
  char buf[32];
  T_OK(eng_device_parse("cpu", &d));
  cr_assert_eq(d.type, ENG_DEV_CPU);
  cr_assert_eq(d.index, 0);
  cr_assert_str_eq(eng_device_name(d, buf, sizeof buf), "cpu");
  cr_assert_str_eq(eng_device_name((eng_device_t){ENG_DEV_CUDA, 3}, buf, sizeof buf), "cuda:3");
}

Test(device, equality) {
  cr_assert(eng_device_equal(ENG_CPU_DEVICE, ENG_CPU_DEVICE));
  cr_assert(eng_device_equal((eng_device_t){ENG_DEV_CUDA, 1}, (eng_device_t){ENG_DEV_CUDA, 1}));
  cr_assert(!eng_device_equal((eng_device_t){ENG_DEV_CUDA, 0}, (eng_device_t){ENG_DEV_CUDA, 1}));
  cr_assert(!eng_device_equal(ENG_CPU_DEVICE, (eng_device_t){ENG_DEV_CUDA, 0}));
}

Test(device, unknown_names) {
  const char *bad[] = {"xyz", "CPU", "cuda:", "cuda:x", "cuda:1x", "cuda:-1", "cuda0", "gpu", ""};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    eng_device_t d;
    char want[64];
    snprintf(want, sizeof want, "device: unknown device '%s' (expected cpu, cuda or cuda:N)", bad[i]);
    T_FAILS(eng_device_parse(bad[i], &d), ENG_ERR_DEVICE, want);
  }
  eng_device_t d;
  T_FAILS(eng_device_parse(NULL, &d), ENG_ERR_DEVICE, "no device name");
}

Test(device, cuda_follows_the_gpu_count) {
  int n = eng_cuda_device_count();
  cr_assert_geq(n, 0);
  cr_assert_eq(eng_cuda_device_count(), n, "the count is cached and stable");
  eng_device_t d, def = eng_device_default();
  if (n == 0) {
    cr_assert_eq(def.type, ENG_DEV_CPU);
#ifdef ENG_HAVE_CUDA
    const char *why = "no CUDA GPU was found";
#else
    const char *why = "built without CUDA";
#endif
    T_FAILS(eng_device_parse("cuda", &d), ENG_ERR_DEVICE, why);
    T_FAILS(eng_device_parse("cuda:0", &d), ENG_ERR_DEVICE, "'cuda:0' requested");
  } else {
    cr_assert_eq(def.type, ENG_DEV_CUDA);
    cr_assert_eq(def.index, 0);
    T_OK(eng_device_parse("cuda", &d));
    cr_assert(d.type == ENG_DEV_CUDA && d.index == 0);
    char name[32];
    snprintf(name, sizeof name, "cuda:%d", n - 1);
    T_OK(eng_device_parse(name, &d));
    cr_assert(d.type == ENG_DEV_CUDA && d.index == n - 1);
    snprintf(name, sizeof name, "cuda:%d", n);
    T_FAILS(eng_device_parse(name, &d), ENG_ERR_DEVICE, "CUDA device");
  }
  T_FAILS(eng_device_parse("cuda:4000", &d), ENG_ERR_DEVICE, "'cuda:4000' requested");
}

Test(error, records_formats_and_returns_the_code) {
  cr_assert_eq(eng_error(ENG_ERR_SHAPE, "matmul: inner dims differ: %s @ %s", "[4,3]", "[5,2]"),
               ENG_ERR_SHAPE);
  cr_assert_str_eq(eng_last_error(), "matmul: inner dims differ: [4,3] @ [5,2]");
  eng_clear_error();
  cr_assert_str_eq(eng_last_error(), "");
}

Test(error, prefix_and_self_reference) {
  eng_error(ENG_ERR_ARG, "bad value %d", 7);
  eng_error_prefix("op");
  cr_assert_str_eq(eng_last_error(), "op: bad value 7");
  eng_error(ENG_ERR_ARG, "outer (%s)", eng_last_error()); /* the argument is the old message */
  cr_assert_str_eq(eng_last_error(), "outer (op: bad value 7)");
}

Test(error, long_messages_are_cut_safely) {
  char big[3000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = 0;
  eng_error(ENG_ERR_ARG, "%s", big);
  size_t n = strlen(eng_last_error());
  cr_assert(n > 900 && n < 1024, "length %zu", n);
  eng_error_prefix("prefix");
  cr_assert_eq(strncmp(eng_last_error(), "prefix: xxx", 11), 0);
  cr_assert_lt(strlen(eng_last_error()), 1024);
}

static void *other_thread(void *arg) {
  (void)arg;
  eng_error(ENG_ERR_IO, "from the other thread");
  return NULL;
}

Test(error, messages_are_per_thread) {
  eng_error(ENG_ERR_ARG, "mine");
  pthread_t th;
  pthread_create(&th, NULL, other_thread, NULL);
  pthread_join(th, NULL);
  cr_assert_str_eq(eng_last_error(), "mine");
}

Test(error, status_names) {
  cr_assert_str_eq(eng_status_name(ENG_OK), "ENG_OK");
  cr_assert_str_eq(eng_status_name(ENG_ERR_SHAPE), "ENG_ERR_SHAPE");
  cr_assert_str_eq(eng_status_name(ENG_ERR_UNSUPPORTED), "ENG_ERR_UNSUPPORTED");
  cr_assert_str_eq(eng_status_name(ENG_ERR_INTERNAL), "ENG_ERR_INTERNAL");
  cr_assert_str_eq(eng_status_name((eng_status_t)99), "ENG_ERR_UNKNOWN");
}
