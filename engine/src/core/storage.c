/* Refcounted storage. CPU memory is 64-byte aligned (cache lines, AVX-512 loads); CUDA memory comes
 * from the caching allocator (eng_cuda.h), for the device's current stream. */
#include <stdlib.h>

#include "eng_cuda.h"
#include "eng_tensor.h"

#define CPU_ALIGN 64

static size_t cpu_live;

size_t eng_cpu_bytes_live(void) { return __atomic_load_n(&cpu_live, __ATOMIC_RELAXED); }

static void cpu_free(void *ctx, void *data, size_t nbytes, eng_device_t device) {
  (void)ctx;
  (void)device;
  free(data);
  __atomic_fetch_sub(&cpu_live, nbytes, __ATOMIC_RELAXED);
}

static void cuda_free(void *ctx, void *data, size_t nbytes, eng_device_t device) {
  (void)ctx;
  (void)nbytes;
  eng_cuda_free(device.index, data);
}

static eng_status_t cuda_storage_new(size_t nbytes, eng_device_t dev, eng_storage_t **out) {
  eng_storage_t *s = malloc(sizeof *s);
  if (!s) return eng_error(ENG_ERR_OOM, "storage: out of host memory for a storage record");
  void *data = NULL;
  eng_status_t st = eng_cuda_malloc(dev.index, nbytes, NULL, &data);
  if (st) {
    free(s);
    return st;
  }
  *s = (eng_storage_t){.refcount = 1, .data = data, .nbytes = nbytes, .device = dev,
                       .free_fn = cuda_free};
  *out = s;
  return ENG_OK;
}

eng_status_t eng_storage_new(size_t nbytes, eng_device_t dev, eng_storage_t **out) {
  if (dev.type == ENG_DEV_CUDA) return cuda_storage_new(nbytes, dev, out);
  if (dev.type != ENG_DEV_CPU)
    return eng_error(ENG_ERR_DEVICE, "storage: unknown device type %d", dev.type);
  if (nbytes > SIZE_MAX - CPU_ALIGN)
    return eng_error(ENG_ERR_OOM, "storage: cannot allocate %zu bytes on cpu", nbytes);
  eng_storage_t *s = malloc(sizeof *s);
  /* aligned_alloc wants a multiple of the alignment; a zero-byte storage still gets a block so
   * that its data pointer is valid. */
  size_t padded = (nbytes + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN;
  void *data = aligned_alloc(CPU_ALIGN, padded ? padded : CPU_ALIGN);
  if (!s || !data) {
    free(s);
    free(data);
    return eng_error(ENG_ERR_OOM, "storage: out of memory allocating %zu bytes on cpu", nbytes);
  }
  *s = (eng_storage_t){.refcount = 1, .data = data, .nbytes = nbytes, .device = dev,
                       .free_fn = cpu_free};
  __atomic_fetch_add(&cpu_live, nbytes, __ATOMIC_RELAXED);
  *out = s;
  return ENG_OK;
}

eng_storage_t *eng_storage_wrap(void *data, size_t nbytes, eng_device_t dev) {
  eng_storage_t *s = malloc(sizeof *s);
  if (!s) return NULL;
  *s = (eng_storage_t){.refcount = 1, .data = data, .nbytes = nbytes, .device = dev};
  return s;
}

void eng_storage_retain(eng_storage_t *s) { __atomic_fetch_add(&s->refcount, 1, __ATOMIC_RELAXED); }

void eng_storage_release(eng_storage_t *s) {
  if (!s || __atomic_sub_fetch(&s->refcount, 1, __ATOMIC_ACQ_REL) != 0) return;
  if (s->free_fn) s->free_fn(s->free_ctx, s->data, s->nbytes, s->device);
  free(s);
}
