/* Devices: parsing "cpu" / "cuda" / "cuda:N", names, and the GPU count. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_base.h"

#ifdef ENG_HAVE_CUDA
#include "cuda/device.h"
#endif

int eng_cuda_device_count(void) {
#ifdef ENG_HAVE_CUDA
  /* Asking the runtime is slow (it may initialise the driver): ask once. -1 = not asked yet. */
  static int cached = -1;
  int n = __atomic_load_n(&cached, __ATOMIC_ACQUIRE);
  if (n < 0) {
    n = eng_cuda_runtime_device_count();
    if (n < 0) n = 0;
    __atomic_store_n(&cached, n, __ATOMIC_RELEASE);
  }
  return n;
#else
  return 0;
#endif
}

/* Why the cuda device `name` cannot be used. */
static eng_status_t cuda_unavailable(const char *name) {
#ifndef ENG_HAVE_CUDA
  return eng_error(ENG_ERR_DEVICE, "device: '%s' requested, but this engine was built without CUDA",
                   name);
#else
  int count = eng_cuda_device_count();
  if (count == 0)
    return eng_error(ENG_ERR_DEVICE, "device: '%s' requested, but no CUDA GPU was found", name);
  return eng_error(ENG_ERR_DEVICE, "device: '%s' requested, but only %d CUDA device%s (cuda:0..cuda:%d)",
                   name, count, count == 1 ? " is present" : "s are present", count - 1);
#endif
}

eng_status_t eng_device_parse(const char *name, eng_device_t *out) {
  if (!name) return eng_error(ENG_ERR_DEVICE, "device: no device name given");
  if (strcmp(name, "cpu") == 0) {
    *out = ENG_CPU_DEVICE;
    return ENG_OK;
  }
  long idx = -1;
  if (strcmp(name, "cuda") == 0) {
    idx = 0;
  } else if (strncmp(name, "cuda:", 5) == 0 && name[5] >= '0' && name[5] <= '9') {
    char *end;
    idx = strtol(name + 5, &end, 10);
    if (*end || idx > 1000000) idx = -1;
  }
  if (idx < 0)
    return eng_error(ENG_ERR_DEVICE, "device: unknown device '%s' (expected cpu, cuda or cuda:N)", name);
  if (idx >= eng_cuda_device_count()) return cuda_unavailable(name);
  *out = (eng_device_t){ENG_DEV_CUDA, (int)idx};
  return ENG_OK;
}

const char *eng_device_name(eng_device_t d, char *buf, size_t n) {
  if (d.type == ENG_DEV_CUDA)
    snprintf(buf, n, "cuda:%d", d.index);
  else
    snprintf(buf, n, "cpu");
  return buf;
}

int eng_device_equal(eng_device_t a, eng_device_t b) {
  if (a.type != b.type) return 0;
  return a.type == ENG_DEV_CPU || a.index == b.index;
}

eng_device_t eng_device_default(void) {
  if (eng_cuda_device_count() > 0) return (eng_device_t){ENG_DEV_CUDA, 0};
  return ENG_CPU_DEVICE;
}
