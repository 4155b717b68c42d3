// Where the host time of one tiny op goes: the raw CUDA launch floor (an empty kernel through
// cudaLaunchKernel) against the pieces of the engine's path, timed from C without Lua.
// Build: nvcc -O2 -arch=sm_90 -Iengine/include scripts/bench/launch_floor.cu -Lbuild-gpu -lengine
//        -Xlinker -rpath,$PWD/build-gpu -o build-gpu/launch_floor
#include <chrono>
#include <cstdio>

#include <cuda_runtime.h>

#include "eng_cuda.h"
#include "eng_ops.h"

__global__ void empty_kernel() {}

static double now_us() {
  using namespace std::chrono;
  return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

#define TIME(label, n, ...)                                                           \
  do {                                                                                \
    for (int i_ = 0; i_ < 1000; i_++) { __VA_ARGS__; }                                     \
    cudaDeviceSynchronize();                                                          \
    double t_ = now_us();                                                             \
    for (int i_ = 0; i_ < (n); i_++) { __VA_ARGS__; }                                      \
    double per_ = (now_us() - t_) / (n);                                              \
    cudaDeviceSynchronize();                                                          \
    printf("%-44s %6.2f us\n", label, per_);                                          \
  } while (0)

int main() {
  const int n = 20000;
  cudaStream_t s = (cudaStream_t)eng_cuda_current_stream(0);
  TIME("cudaLaunchKernel, empty kernel", n, empty_kernel<<<1, 32, 0, s>>>());
  TIME("cudaGetLastError", n, (void)cudaGetLastError());
  void *p = nullptr;
  TIME("eng_cuda_malloc + eng_cuda_free (512 B)", n,
       { eng_cuda_malloc(0, 2, s, &p); eng_cuda_free(0, p); });
  int64_t shape[2] = {1, 1};
  eng_device_t gpu = {ENG_DEV_CUDA, 0};
  eng_tensor_t *x = nullptr, *y = nullptr, *z = nullptr;
  eng_tensor_ones(shape, 2, ENG_BF16, gpu, &x);
  eng_tensor_ones(shape, 2, ENG_BF16, gpu, &y);
  TIME("eng_tensor_empty + release on cuda", n,
       { eng_tensor_empty(shape, 2, ENG_BF16, gpu, &z); eng_tensor_release(z); });
  TIME("eng_op_binary add [1,1] bf16 (C, no Lua)", n,
       { eng_op_binary(ENG_BINARY_ADD, x, y, &z); eng_tensor_release(z); });
  eng_cuda_nvtx_enable(0);
  TIME("the same, NVTX off", n, { eng_op_binary(ENG_BINARY_ADD, x, y, &z); eng_tensor_release(z); });
  eng_tensor_t *xc = nullptr, *yc = nullptr;
  eng_tensor_ones(shape, 2, ENG_BF16, ENG_CPU_DEVICE, &xc);
  eng_tensor_ones(shape, 2, ENG_BF16, ENG_CPU_DEVICE, &yc);
  TIME("eng_op_binary add on cpu tensors", n, { eng_op_binary(ENG_BINARY_ADD, xc, yc, &z); eng_tensor_release(z); });
  return 0;
}
