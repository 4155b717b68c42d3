// Cross-entropy backward: one block counts the rows that take part (n_valid, kept on the device),
// then a block per row writes (softmax - onehot) * gloss / n_valid in three passes over the row
// (max, sum of exponentials, write; the later ones find the row in cache). gloss is read on the
// device, so the op runs inside CUDA graph capture.
#include "cuda/norm_backward.h"
#include "cuda/row_chunks.cuh"

namespace {

using namespace eng_kc;
using namespace eng_kc::chunks;
using namespace eng_kc::rows;

constexpr unsigned kMaxBlocks = 1u << 20;
constexpr int kCountBlock = 1024;

template <typename TT>
__global__ void __launch_bounds__(kCountBlock)
    count_valid(const TT *__restrict__ target, int64_t rows, int64_t ignore, int64_t *count) {
  __shared__ int64_t scratch[32];
  int64_t n = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) n += (int64_t)target[r] != ignore;
  n = block_sum(n, scratch);
  if (threadIdx.x == 0) *count = n;
}

template <typename T, typename TT>
__global__ void __launch_bounds__(1024)
    cross_entropy_backward_rows(const T *__restrict__ x, const TT *__restrict__ target,
                                AnyPtr gloss, const int64_t *__restrict__ count, T *gx,
                                int64_t rows, int64_t c, int64_t ignore, bool vec) {
  using A = acc_t<T>;
  __shared__ A slots[2][32];
  int turn = 0;
  const auto add = [](A a, A b) { return a + b; };
  const auto max = [](A a, A b) { return nanmax(a, b); };
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t tg = (int64_t)target[r];  // the same for the whole block: branches stay uniform
    const T *xr = x + r * c;
    T *gr = gx + r * c;
    if (tg == ignore) {
      for_chunks(c, vec, [&](int64_t k0, auto width) {
        constexpr int M = decltype(width)::value;
        A o[M] = {};
        st<M>(gr + k0, o);
      });
      continue;
    }
    A mx = -(A)INFINITY;
    for_chunks(c, vec, [&](int64_t k0, auto width) {
      constexpr int M = decltype(width)::value;
      A v[M];
      ld<M>(xr + k0, v);
#pragma unroll
      for (int e = 0; e < M; e++) mx = nanmax(mx, v[e]);
    });
    mx = group_reduce<false>(mx, slots[turn++ & 1], max);
    A s = 0;
    for_chunks(c, vec, [&](int64_t k0, auto width) {
      constexpr int M = decltype(width)::value;
      A v[M];
      ld<M>(xr + k0, v);
#pragma unroll
      for (int e = 0; e < M; e++) s += exp(v[e] - mx);
    });
    s = group_reduce<false>(s, slots[turn++ & 1], add);
    // a target out of range (not checked here: that would synchronise) makes its row NaN
    const A scale = tg < 0 || tg >= c ? (A)NAN : (A)(gloss.get_f64(0) / (double)*count);
    const A inv = A(1) / s;
    for_chunks(c, vec, [&](int64_t k0, auto width) {
      constexpr int M = decltype(width)::value;
      A v[M];
      ld<M>(xr + k0, v);
#pragma unroll
      for (int e = 0; e < M; e++) v[e] = (exp(v[e] - mx) * inv - (k0 + e == tg ? A(1) : A(0))) * scale;
      st<M>(gr + k0, v);
    });
  }
}

template <typename T, typename TT>
int ce_backward_typed(const T *x, const TT *target, AnyPtr gloss, T *gx, int64_t rows, int64_t c,
                      int64_t ignore, void *workspace, cudaStream_t s) {
  int64_t *count = static_cast<int64_t *>(workspace);
  count_valid<TT><<<1, kCountBlock, 0, s>>>(target, rows, ignore, count);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess || rows == 0 || c == 0) return (int)e;
  const bool vec = chunk_rows(x, c) && chunk_rows(gx, c);
  const unsigned blocks = (unsigned)(rows < (int64_t)kMaxBlocks ? rows : kMaxBlocks);
  cross_entropy_backward_rows<T, TT><<<blocks, row_threads(c, vec), 0, s>>>(x, target, gloss, count,
                                                                             gx, rows, c, ignore, vec);
  return (int)cudaGetLastError();
}

template <typename T>
int ce_backward_targets(const T *x, eng_dtype_t target_dt, const void *target, AnyPtr gloss, T *gx,
                        int64_t rows, int64_t c, int64_t ignore, void *ws, cudaStream_t s) {
  switch (target_dt) {
  case ENG_I32:
    return ce_backward_typed(x, static_cast<const int32_t *>(target), gloss, gx, rows, c, ignore, ws, s);
  case ENG_I64:
    return ce_backward_typed(x, static_cast<const int64_t *>(target), gloss, gx, rows, c, ignore, ws, s);
  case ENG_U8:
    return ce_backward_typed(x, static_cast<const uint8_t *>(target), gloss, gx, rows, c, ignore, ws, s);
  default: return cudaErrorInvalidValue;
  }
}

}  // namespace

extern "C" size_t eng_kcuda_cross_entropy_backward_workspace(void) { return sizeof(int64_t); }

extern "C" int eng_kcuda_cross_entropy_backward(eng_dtype_t dt, const void *x, eng_dtype_t target_dt,
                                                const void *target, eng_kcuda_arg_t gloss,
                                                void *glogits, int64_t rows, int64_t c,
                                                int64_t ignore_index, void *workspace,
                                                cudaStream_t stream) {
  const AnyPtr g{gloss.p, (int)gloss.dt};
  ENG_KC_FLOAT_TYPES(dt, return ce_backward_targets(static_cast<const T *>(x), target_dt, target, g,
                                                    static_cast<T *>(glogits), rows, c,
                                                    ignore_index, workspace, stream));
  return cudaErrorInvalidValue;
}
