/* What the files of the CUDA runtime layer (runtime.c, allocator.c, transfer.c, graph.c) share, and
 * the few hooks the core calls when built with CUDA (dispatch: NVTX ranges, device selection). */
#ifndef ENG_CUDA_INTERNAL_H
#define ENG_CUDA_INTERNAL_H

#include <cuda_runtime.h>

#include "eng_cuda.h"

/* Per-device state lives in fixed arrays; devices beyond this index are refused. */
#define ENG_CUDA_MAX_DEVICES 64

/* ---- runtime.c ---- */
/* Records "cuda: <what> failed: <CUDA's message> (<error name>)" and returns ENG_ERR_OOM for
 * cudaErrorMemoryAllocation, else ENG_ERR_DEVICE. Clears CUDA's (non-sticky) last error. */
eng_status_t eng_cuda_error(cudaError_t err, const char *what);
/* Checks the device and makes it the calling thread's CUDA device (every runtime call that creates
 * or allocates something needs it current; nothing restores the previous one). */
eng_status_t eng_cuda_select(int device);
/* eng_cuda_current_stream with a status (the public one returns NULL on failure). */
eng_status_t eng_cuda_stream_of(int device, cudaStream_t *out);
/* Opens an NVTX range named `name` when NVTX is enabled; returns whether it did, so the caller
 * pops exactly the ranges it pushed even if NVTX is switched in between. */
int eng_cuda_nvtx_push(const char *name);
void eng_cuda_nvtx_pop(void);

/* ---- allocator.c: private pools and capture routing (used by graph.c) ---- */
typedef struct eng_cuda_pool eng_cuda_pool_t;
/* A pool owned by one graph; NULL when out of host memory. */
eng_cuda_pool_t *eng_cuda_pool_new(int device);
/* The graph is gone: the pool's cached segments are freed, and the pool itself once its last live
 * block (a tensor made during capture that outlives the graph) is freed. */
void eng_cuda_pool_release(eng_cuda_pool_t *pool);
/* From capture_begin to capture_end, this thread's allocations on `device` come from `pool`, and
 * the allocator calls no cudaFree on the device (it would synchronize, which capture forbids). */
void eng_cuda_capture_begin(int device, eng_cuda_pool_t *pool);
void eng_cuda_capture_end(int device);
/* The pool this thread is capturing into on `device`, or NULL. */
eng_cuda_pool_t *eng_cuda_capture_pool(int device);

#endif
