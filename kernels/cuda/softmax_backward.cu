// Softmax / log-softmax backward from the forward's output. Along the last dim: a block per row,
// the row's sum in one pass and gx in a second that finds the row in cache. Along another dim of
// [outer, n, inner]: a thread per column, coalesced across columns, the sum kept in double (a
// sequential sum, as the CPU reference keeps it).
#include "cuda/norm_backward.h"
#include "cuda/row_chunks.cuh"

namespace {

using namespace eng_kc;
using namespace eng_kc::chunks;

constexpr unsigned kMaxBlocks = 1u << 20;
constexpr int kColBlock = 256;

__device__ __forceinline__ float exp_acc(float v) { return expf(v); }
__device__ __forceinline__ double exp_acc(double v) { return exp(v); }

template <typename T>
__global__ void __launch_bounds__(1024)
    softmax_backward_rows(const T *__restrict__ gy, const T *__restrict__ y, T *gx, int64_t rows,
                          int64_t n, bool log_out, bool vec) {
  using A = acc_t<T>;
  __shared__ A slots[2][1][32];
  int turn = 0;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *gr = gy + r * n, *yr = y + r * n;
    A s[1] = {0};
    for_chunks(n, vec, [&](int64_t k0, auto width) {
      constexpr int M = decltype(width)::value;
      A g[M], v[M];
      ld<M>(gr + k0, g);
      ld<M>(yr + k0, v);
#pragma unroll
      for (int e = 0; e < M; e++) s[0] += log_out ? g[e] : g[e] * v[e];
    });
    block_sums<1>(s, slots[turn++ & 1]);
    const A sum = s[0];
    for_chunks(n, vec, [&](int64_t k0, auto width) {
      constexpr int M = decltype(width)::value;
      A g[M], v[M];
      ld<M>(gr + k0, g);
      ld<M>(yr + k0, v);
#pragma unroll
      for (int e = 0; e < M; e++) g[e] = log_out ? g[e] - exp_acc(v[e]) * sum : v[e] * (g[e] - sum);
      st<M>(gx + r * n + k0, g);
    });
  }
}

template <typename T>
__global__ void __launch_bounds__(kColBlock)
    softmax_backward_cols(const T *__restrict__ gy, const T *__restrict__ y, T *gx, int64_t outer,
                          int64_t n, int64_t inner, bool log_out) {
  using A = acc_t<T>;
  const int64_t cols = outer * inner, step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += step) {
    const int64_t base = (c / inner) * n * inner + c % inner;
    double s = 0;
    for (int64_t k = 0; k < n; k++) {
      const int64_t at = base + k * inner;
      s += log_out ? (double)load(gy + at) : (double)load(gy + at) * (double)load(y + at);
    }
    const A sum = (A)s;
    for (int64_t k = 0; k < n; k++) {
      const int64_t at = base + k * inner;
      const A g = load(gy + at), v = load(y + at);
      store(gx + at, log_out ? g - exp_acc(v) * sum : v * (g - sum));
    }
  }
}

template <typename T>
int softmax_backward_typed(bool log_out, const T *gy, const T *y, T *gx, int64_t outer, int64_t n,
                           int64_t inner, cudaStream_t s) {
  if (inner > 1) {
    softmax_backward_cols<T><<<blocks_for(outer * inner, kColBlock, kMaxBlocks), kColBlock, 0, s>>>(
        gy, y, gx, outer, n, inner, log_out);
  } else {
    const bool vec = chunk_rows(gy, n) && chunk_rows(y, n) && chunk_rows(gx, n);
    const unsigned blocks = (unsigned)(outer < (int64_t)kMaxBlocks ? outer : kMaxBlocks);
    softmax_backward_rows<T><<<blocks, row_threads(n, vec), 0, s>>>(gy, y, gx, outer, n, log_out,
                                                                     vec);
  }
  return (int)cudaGetLastError();
}

}  // namespace

extern "C" int eng_kcuda_softmax_backward(eng_dtype_t dt, int log_out, const void *gy, const void *y,
                                          void *gx, int64_t outer, int64_t n, int64_t inner,
                                          cudaStream_t stream) {
  if (outer == 0 || n == 0 || inner == 0) return cudaSuccess;
  ENG_KC_FLOAT_TYPES(dt, return softmax_backward_typed<T>(log_out != 0, static_cast<const T *>(gy),
                                                          static_cast<const T *>(y),
                                                          static_cast<T *>(gx), outer, n, inner,
                                                          stream));
  return cudaErrorInvalidValue;
}
