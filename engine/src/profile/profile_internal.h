/* Shared by the profiler's files: growable arrays, and the GPU backend's interface (cupti.c, or
 * the answers of a build without CUDA in the same file). */
#ifndef ENG_PROFILE_INTERNAL_H
#define ENG_PROFILE_INTERNAL_H

#include <stdlib.h>

#include "eng_profile.h"

/* Makes room for `need` elements of `elem` bytes in *p (capacity *cap, doubling from `first`).
 * Returns 0, or -1 when memory ran out (the array is left as it was). */
static inline int eng_prof_reserve(void **p, size_t *cap, size_t need, size_t elem, size_t first) {
  if (need <= *cap) return 0;
  size_t c = *cap ? *cap : first;
  while (c < need) c *= 2;
  void *q = realloc(*p, c * elem);
  if (!q) return -1;
  *p = q;
  *cap = c;
  return 0;
}

/* ---- the GPU backend ---- */
/* Whether CUPTI can be used: a CUDA build and a GPU present. Calls nothing of CUPTI. */
int eng_prof_gpu_available(void);
/* Enables the activity kinds (kernels, memcpy, memset, runtime, driver, external correlation);
 * CUPTI timestamps are put on eng_profile_now_ns()'s clock. */
eng_status_t eng_prof_gpu_start(void);
/* Flushes every buffer, disables the kinds, and links the records to ops. */
void eng_prof_gpu_stop(void);
/* The op (seq) running on this thread: GPU work launched until the matching pop belongs to it. */
void eng_prof_gpu_push(uint32_t seq);
void eng_prof_gpu_pop(void);
/* Fills the GPU part of d (kernels, copies, apis, dropped). */
void eng_prof_gpu_data(eng_profile_data_t *d);
void eng_prof_gpu_clear(void);

#endif
