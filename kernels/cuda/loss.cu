// Cross-entropy. A warp (a block, for long rows) per row computes logsumexp minus the target's
// logit in two passes over the row (max, then the sum of exponentials, which finds the row in
// cache); then one block sums the row losses in double, counts the rows that take part and finds
// the first bad target. Every step stays on the device.
#include <type_traits>

#include "cuda/loss.h"
#include "cuda/rows.cuh"

namespace {

using namespace eng_kc;
using namespace eng_kc::rows;

constexpr int kWarpBlock = 256;  // 8 rows per block
constexpr int kRowBlock = 512;
constexpr int kFinishBlock = 1024;
constexpr int64_t kWarpRowMax = 2048;  // longer rows get a block each
constexpr unsigned kMaxBlocks = 1u << 20;
constexpr size_t kLossOffset = 256;  // the row losses follow the {row, value} record

// loss[r] = logsumexp(x[r, :]) - x[r, target[r]]; 0 for an ignored row, NaN for a bad target.
template <typename T, typename TT, bool WARP>
__global__ void __launch_bounds__(WARP ? kWarpBlock : kRowBlock)
    row_losses(const T *__restrict__ x, const TT *__restrict__ target, acc_t<T> *__restrict__ loss,
               int64_t rows, int64_t c, int64_t ignore, bool vec) {
  using A = acc_t<T>;
  __shared__ A scratch[32];
  const Group<WARP> g;
  const int t = g.rank(), G = g.size();
  for (int64_t r = g.first(); r < rows; r += g.step()) {
    const int64_t tg = (int64_t)target[r];  // the same for the whole group: branches stay uniform
    if (tg == ignore || tg < 0 || tg >= c) {
      if (t == 0) loss[r] = tg == ignore ? A(0) : (A)NAN;
      continue;
    }
    const T *row = x + r * c;
    A mx = -(A)INFINITY;
    for_row(row, c, vec, t, G, [&](int64_t, A a) { mx = nanmax(mx, a); });
    mx = group_max<WARP>(mx, scratch);
    A s = 0;
    for_row(row, c, vec, t, G, [&](int64_t, A a) { s += exp(a - mx); });
    s = group_sum<WARP>(s, scratch);
    if (t == 0) loss[r] = mx + log(s) - load(row + tg);
  }
}

// Block-wide min; every thread gets the result. `scratch` holds 32 values (shared).
__device__ int64_t block_min(int64_t v, int64_t *scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) {
    int64_t w = __shfl_xor_sync(0xffffffffu, v, o);
    v = w < v ? w : v;
  }
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < (int)(blockDim.x >> 5) ? scratch[lane] : INT64_MAX;
    for (int o = 16; o > 0; o >>= 1) {
      int64_t w = __shfl_xor_sync(0xffffffffu, v, o);
      v = w < v ? w : v;
    }
    if (lane == 0) scratch[0] = v;
  }
  __syncthreads();
  return scratch[0];
}

// One block: *y = (sum of the row losses that take part) / (their count), and bad = {first bad
// row, its target} or {-1, 0}.
template <typename A, typename TT, typename O>
__global__ void __launch_bounds__(kFinishBlock)
    finish(const A *__restrict__ loss, const TT *__restrict__ target, int64_t rows, int64_t c,
           int64_t ignore, O *y, int64_t *bad) {
  __shared__ double sum_scratch[32];
  __shared__ int64_t count_scratch[32], bad_scratch[32];
  double sum = 0;
  int64_t count = 0, first_bad = INT64_MAX;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    const int64_t tg = (int64_t)target[r];
    if (tg == ignore) continue;
    if ((tg < 0 || tg >= c) && r < first_bad) first_bad = r;
    sum += (double)loss[r];
    count++;
  }
  sum = block_sum(sum, sum_scratch);
  count = block_sum(count, count_scratch);
  first_bad = block_min(first_bad, bad_scratch);
  if (threadIdx.x == 0) {
    store(y, sum / (double)count);  // no row taking part: 0 / 0 = NaN, like torch
    bad[0] = first_bad == INT64_MAX ? -1 : first_bad;
    bad[1] = first_bad == INT64_MAX ? 0 : (int64_t)target[first_bad];
  }
}

template <typename T, typename TT>
cudaError_t ce_typed(const T *x, const TT *target, void *y, int64_t rows, int64_t c, int64_t ignore,
                     void *workspace, cudaStream_t s) {
  using A = acc_t<T>;
  using O = std::conditional_t<std::is_same_v<T, double>, double, float>;
  int64_t *bad = static_cast<int64_t *>(workspace);
  A *loss = reinterpret_cast<A *>(static_cast<char *>(workspace) + kLossOffset);
  if (rows > 0) {
    const bool vec = vec_rows<T>(x, c);
    if (c <= kWarpRowMax) {
      row_losses<T, TT, true><<<blocks_for(rows, kWarpBlock / 32, kMaxBlocks), kWarpBlock, 0, s>>>(
          x, target, loss, rows, c, ignore, vec);
    } else {
      const unsigned blocks = (unsigned)(rows < (int64_t)kMaxBlocks ? rows : kMaxBlocks);
      row_losses<T, TT, false><<<blocks, kRowBlock, 0, s>>>(x, target, loss, rows, c, ignore, vec);
    }
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  finish<A, TT, O><<<1, kFinishBlock, 0, s>>>(loss, target, rows, c, ignore, static_cast<O *>(y), bad);
  return cudaGetLastError();
}

template <typename T>
cudaError_t ce_targets(const T *x, eng_dtype_t target_dt, const void *target, void *y, int64_t rows,
                       int64_t c, int64_t ignore, void *workspace, cudaStream_t s) {
  switch (target_dt) {
  case ENG_I32:
    return ce_typed(x, static_cast<const int32_t *>(target), y, rows, c, ignore, workspace, s);
  case ENG_I64:
    return ce_typed(x, static_cast<const int64_t *>(target), y, rows, c, ignore, workspace, s);
  case ENG_U8:
    return ce_typed(x, static_cast<const uint8_t *>(target), y, rows, c, ignore, workspace, s);
  default: return cudaErrorInvalidValue;
  }
}

}  // namespace

extern "C" size_t eng_kcuda_cross_entropy_workspace(eng_dtype_t dt, int64_t rows) {
  return kLossOffset + (size_t)rows * (dt == ENG_F64 ? sizeof(double) : sizeof(float));
}

extern "C" int eng_kcuda_cross_entropy(eng_dtype_t dt, const void *x, eng_dtype_t target_dt,
                                       const void *target, void *y, int64_t rows, int64_t c,
                                       int64_t ignore_index, void *workspace, cudaStream_t stream) {
  cudaError_t e = cudaSuccess;
  ENG_KC_FLOAT_TYPES(dt, e = ce_targets(static_cast<const T *>(x), target_dt, target, y, rows, c,
                                        ignore_index, workspace, stream));
  return (int)e;
}
