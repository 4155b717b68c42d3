// What the standalone CUDA microbenchmarks (scripts/bench/*.cu) share: the error check (a failed
// runtime call prints itself and its error and exits 1) and a launch timed by events.
#pragma once
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CK(x)                                           \
  do {                                                  \
    cudaError_t ck_e = (x);                             \
    if (ck_e != cudaSuccess) {                          \
      printf("%s: %s\n", #x, cudaGetErrorString(ck_e)); \
      exit(1);                                          \
    }                                                   \
  } while (0)

// Milliseconds between events recorded around launch() on the default stream, after it finished.
template <class F>
float time_ms(F launch) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventRecord(e0));
  launch();
  CK(cudaGetLastError());
  CK(cudaEventRecord(e1));
  CK(cudaEventSynchronize(e1));
  float ms = 0.f;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return ms;
}
