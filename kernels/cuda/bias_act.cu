// Bias and activation over a contiguous [rows, cols] result, in place.
#include "cuda/bias_act.h"
#include "cuda/common.cuh"
#include "eng_ops.h"

namespace {

constexpr int THREADS = 256;

// The formulas of kernels/cpu/bias_act.c; gelu is the tanh approximation, as in cuBLASLt.
template <typename A> __device__ __forceinline__ A activate(A v, int act) {
  if (act == ENG_ACT_RELU) return v < A(0) ? A(0) : v;
  if (act == ENG_ACT_GELU_TANH) {
    const A c = A(0.7978845608028654);  // sqrt(2 / pi)
    return A(0.5) * v * (A(1) + tanh(c * (v + A(0.044715) * v * v * v)));
  }
  return v;
}

template <typename T>
__global__ void bias_act(T *y, const T *bias, int64_t n, int64_t cols, int act) {
  using A = eng_kc::acc_t<T>;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    A v = eng_kc::load(y + i);
    if (bias) v += eng_kc::load(bias + i % cols);
    eng_kc::store(y + i, activate(v, act));
  }
}

}  // namespace

extern "C" int eng_kcuda_bias_act(void *y, const void *bias, eng_dtype_t dtype, int64_t rows,
                                  int64_t cols, int act, cudaStream_t stream) {
  int64_t n = rows * cols;
  if (n == 0) return 0;
  ENG_KC_FLOAT_TYPES(dtype, bias_act<T><<<eng_kc::blocks_for(n, THREADS), THREADS, 0, stream>>>(
                                (T *)y, (const T *)bias, n, cols, act));
  return (int)cudaGetLastError();
}
