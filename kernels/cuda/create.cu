// arange/linspace and eye on the device. Values are formed in double exactly as kernels/cpu/create.c
// forms them: the CPU does a separate multiply and add, so the _rn intrinsics keep nvcc from
// fusing them into one fma (which rounds once and would give different bits).
#include "cuda/common.cuh"
#include "cuda/convert.cuh"
#include "cuda/create.h"

namespace {

using namespace eng_kc;
using namespace eng_kc::cvt;

constexpr int THREADS = 256;

template <int D>
__global__ void arange_fill(st_t<D> *dst, int64_t n, double start, double step, double end, int64_t back_from) {
  const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = first; i < n; i += stride) {
    const double v = i >= back_from ? __dsub_rn(end, __dmul_rn((double)(n - 1 - i), step))
                                    : __dadd_rn(start, __dmul_rn((double)i, step));
    dst[i] = from_f64<D>(v);
  }
}

// The k diagonal elements of a zeroed rows x cols matrix.
template <int D> __global__ void eye_diagonal(st_t<D> *dst, int64_t k, int64_t cols) {
  const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = first; i < k; i += stride) dst[i * cols + i] = from_f64<D>(1.0);
}

}  // namespace

extern "C" int eng_kcuda_arange(void *dst, eng_dtype_t dt, int64_t n, double start, double step,
                                double end, int linspace, cudaStream_t stream) {
  if (n == 0) return 0;
  const int64_t back_from = linspace && n > 1 ? n / 2 : n;
  int err = (int)cudaErrorInvalidValue;
  ENG_KC_DTYPE_CASES(D, dt,
    arange_fill<D><<<blocks_for(n, THREADS), THREADS, 0, stream>>>(static_cast<st_t<D> *>(dst), n, start, step, end, back_from);
    err = (int)cudaGetLastError());
  return err;
}

extern "C" int eng_kcuda_eye(void *dst, eng_dtype_t dt, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return 0;
  int err = (int)cudaMemsetAsync(dst, 0, (size_t)(rows * cols) * dtype_bytes(dt), stream);
  if (err) return err;
  const int64_t k = rows < cols ? rows : cols;
  err = (int)cudaErrorInvalidValue;
  ENG_KC_DTYPE_CASES(D, dt,
    eye_diagonal<D><<<blocks_for(k, THREADS), THREADS, 0, stream>>>(static_cast<st_t<D> *>(dst), k, cols);
    err = (int)cudaGetLastError());
  return err;
}
