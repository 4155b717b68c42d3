/* CUDA runtime queries for the C core. */
#include <cuda_runtime.h>

#include "cuda/device.h"

extern "C" int eng_cuda_runtime_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError(); /* clear the sticky error so later calls start clean */
    return 0;
  }
  return n;
}
