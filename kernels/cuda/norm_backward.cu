// RMS norm and layer norm backward. A block per row (grid-stride over rows): the row sums in one
// pass (with the mean first for layer norm), one fused block reduction, then gx in a second pass
// that finds the row in cache. The block adds each row's gy * xhat (and gy) into its own partial
// row: in shared memory when it fits, else directly in its row of the workspace (each element
// owned by one thread: no atomics); sum_partials then adds the blocks' rows in a fixed order.
#include "cuda/norm_backward.h"
#include "cuda/row_chunks.cuh"

namespace {

using namespace eng_kc;
using namespace eng_kc::chunks;

constexpr int64_t kRowsPerBlock = 4;   // fewer partial rows than rows: the workspace stays small
constexpr int64_t kMaxPartials = 1024; // enough blocks to fill any GPU
constexpr size_t kSmemMax = 40 * 1024; // partial rows up to this size live in shared memory
                                       // (with the static slots, under the 48 KiB default)
constexpr int kSumCols = 32, kSumLanes = 8;

int64_t partial_rows(int64_t rows) {
  const int64_t p = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  return p < 1 ? 1 : p > kMaxPartials ? kMaxPartials : p;
}

template <typename TX, typename TG, bool LAYER>
__global__ void __launch_bounds__(1024)
    norm_backward_rows(const TG *__restrict__ gy, const TX *__restrict__ x, AnyPtr w, TX *gx,
                       acc_t<TX> *partial, int64_t rows, int64_t d, acc_t<TX> eps, bool vec,
                       bool sums, bool in_smem) {
  using A = acc_t<TX>;
  constexpr int K = LAYER ? 3 : 2;  // sum of (x - mean)^2, of g * (x - mean), of g (g = gy * w)
  constexpr int NACC = LAYER ? 2 : 1;
  __shared__ A slots[2][K][32];
  extern __shared__ __align__(16) unsigned char smem[];
  A *acc = in_smem ? reinterpret_cast<A *>(smem) : partial + (int64_t)blockIdx.x * NACC * d;
  if (sums) {
    for (int64_t k = threadIdx.x; k < NACC * d; k += blockDim.x) acc[k] = 0;
    __syncthreads();
  }
  int turn = 0;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const TG *gr = gy + r * d;
    const TX *xr = x + r * d;
    A mean = 0;
    if constexpr (LAYER) {
      A s[1] = {0};
      for_chunks(d, vec, [&](int64_t k0, auto width) {
        constexpr int M = decltype(width)::value;
        A xv[M];
        ld<M>(xr + k0, xv);
#pragma unroll
        for (int e = 0; e < M; e++) s[0] += xv[e];
      });
      block_sums<1>(s, slots[turn++ & 1]);
      mean = s[0] / (A)d;
    }
    A s[K] = {};
    for_chunks(d, vec, [&](int64_t k0, auto width) {
      constexpr int M = decltype(width)::value;
      A xv[M], gv[M];
      ld<M>(xr + k0, xv);
      ld<M>(gr + k0, gv);
#pragma unroll
      for (int e = 0; e < M; e++) {
        const A c = xv[e] - mean, g = gv[e] * w.at<A>(k0 + e);
        s[0] += c * c;
        s[1] += g * c;
        if constexpr (LAYER) s[2] += g;
      }
    });
    block_sums<K>(s, slots[turn++ & 1]);
    const A rstd = A(1) / sqrt(s[0] / (A)d + eps);
    // rms: gx = rstd * g - x * rstd^3 * mean(g * x)
    // layer: gx = rstd * (g - mean(g) - xhat * mean(g * xhat)), xhat = (x - mean) * rstd
    const A cx = rstd * rstd * rstd * s[1] / (A)d;
    A cg = 0;
    if constexpr (LAYER) cg = rstd * s[K - 1] / (A)d;
    A *accw = acc, *accb = acc + d;
    for_chunks(d, vec, [&](int64_t k0, auto width) {
      constexpr int M = decltype(width)::value;
      A xv[M], gv[M], o[M];
      ld<M>(xr + k0, xv);
      ld<M>(gr + k0, gv);
#pragma unroll
      for (int e = 0; e < M; e++) {
        const A c = xv[e] - mean;
        o[e] = rstd * gv[e] * w.at<A>(k0 + e) - cg - c * cx;
        if (sums) {
          accw[k0 + e] += gv[e] * c * rstd;
          if constexpr (LAYER) accb[k0 + e] += gv[e];
        }
      }
      st<M>(gx + r * d + k0, o);
    });
  }
  if (sums && in_smem) {
    __syncthreads();
    A *out = partial + (int64_t)blockIdx.x * NACC * d;
    for (int64_t k = threadIdx.x; k < NACC * d; k += blockDim.x) out[k] = acc[k];
  }
}

__device__ __forceinline__ void store_any(void *p, int dt, int64_t k, double v) {
  switch (dt) {
  case ENG_F64: static_cast<double *>(p)[k] = v; break;
  case ENG_F32: static_cast<float *>(p)[k] = (float)v; break;
  case ENG_F16: store(static_cast<__half *>(p) + k, (float)v); break;
  default: store(static_cast<__nv_bfloat16 *>(p) + k, (float)v); break;
  }
}

// out[k] = sum over p of partial[p][which][k], p in a fixed order: 8 lanes of 32 columns each
// take every 8th partial row, then lane 0 adds the 8 lane sums in order.
template <typename A>
__global__ void __launch_bounds__(kSumCols *kSumLanes)
    sum_partials(const A *__restrict__ partial, int64_t parts, int64_t d, int nacc, int which,
                 void *out, int out_dt) {
  __shared__ A lanes[kSumLanes][kSumCols + 1];
  const int col = threadIdx.x % kSumCols, lane = threadIdx.x / kSumCols;
  const int64_t k = (int64_t)blockIdx.x * kSumCols + col;
  A s = 0;
  if (k < d)
    for (int64_t p = lane; p < parts; p += kSumLanes) s += partial[(p * nacc + which) * d + k];
  lanes[lane][col] = s;
  __syncthreads();
  if (lane == 0 && k < d) {
    for (int l = 1; l < kSumLanes; l++) s += lanes[l][col];
    store_any(out, out_dt, k, (double)s);
  }
}

template <typename TX, typename TG>
int norm_backward_typed(bool layer, const void *gy, const void *x, AnyPtr w, double eps, void *gx,
                        void *gw, int gw_dt, void *gb, int gb_dt, int64_t rows, int64_t d,
                        void *workspace, cudaStream_t s) {
  using A = acc_t<TX>;
  const bool vec = chunk_rows(gy, d) && chunk_rows(x, d) && chunk_rows(gx, d);
  const bool sums = gw || gb;
  const int nacc = layer ? 2 : 1;
  const int64_t parts = sums ? partial_rows(rows) : (rows < (1 << 20) ? rows : (1 << 20));
  const size_t smem_bytes = (size_t)nacc * (size_t)d * sizeof(A);
  const bool in_smem = sums && smem_bytes <= kSmemMax;
  const unsigned threads = row_threads(d, vec);
  A *partial = static_cast<A *>(workspace);
  if (layer)
    norm_backward_rows<TX, TG, true><<<(unsigned)parts, threads, in_smem ? smem_bytes : 0, s>>>(
        static_cast<const TG *>(gy), static_cast<const TX *>(x), w, static_cast<TX *>(gx), partial,
        rows, d, (A)eps, vec, sums, in_smem);
  else
    norm_backward_rows<TX, TG, false><<<(unsigned)parts, threads, in_smem ? smem_bytes : 0, s>>>(
        static_cast<const TG *>(gy), static_cast<const TX *>(x), w, static_cast<TX *>(gx), partial,
        rows, d, (A)eps, vec, sums, in_smem);
  cudaError_t e = cudaGetLastError();
  const unsigned col_blocks = (unsigned)((d + kSumCols - 1) / kSumCols);
  if (e == cudaSuccess && gw) {
    sum_partials<A><<<col_blocks, kSumCols * kSumLanes, 0, s>>>(partial, parts, d, nacc, 0, gw, gw_dt);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess && gb) {
    sum_partials<A><<<col_blocks, kSumCols * kSumLanes, 0, s>>>(partial, parts, d, nacc, 1, gb, gb_dt);
    e = cudaGetLastError();
  }
  return (int)e;
}

}  // namespace

extern "C" int eng_kcuda_norm_backward_pair(eng_dtype_t gy_dt, eng_dtype_t x_dt) {
  return gy_dt == x_dt || x_dt == ENG_F32;
}

extern "C" size_t eng_kcuda_norm_backward_workspace(eng_dtype_t x_dt, int64_t rows, int64_t d,
                                                    int layer) {
  const size_t a = x_dt == ENG_F64 ? sizeof(double) : sizeof(float);
  return (size_t)partial_rows(rows) * (size_t)(layer ? 2 : 1) * (size_t)(d > 0 ? d : 1) * a;
}

extern "C" int eng_kcuda_norm_backward(int layer, eng_kcuda_arg_t gy, eng_kcuda_arg_t x,
                                       eng_kcuda_arg_t w, double eps, void *gx, void *gw,
                                       eng_dtype_t gw_dt, void *gb, eng_dtype_t gb_dt, int64_t rows,
                                       int64_t d, void *workspace, cudaStream_t stream) {
  if (d == 0) return cudaSuccess;
  if (!eng_kcuda_norm_backward_pair(gy.dt, x.dt)) return cudaErrorInvalidValue;
  const AnyPtr wp{w.p, (int)w.dt};
  if (rows == 0) {
    // no rows: the parameter gradients are empty sums
    cudaError_t e = cudaSuccess;
    if (gw) e = cudaMemsetAsync(gw, 0, (size_t)d * eng_dtype_size(gw_dt), stream);
    if (e == cudaSuccess && gb) e = cudaMemsetAsync(gb, 0, (size_t)d * eng_dtype_size(gb_dt), stream);
    return (int)e;
  }
  if (x.dt == ENG_F32) {
    ENG_KC_FLOAT_TYPES(gy.dt, return norm_backward_typed<float, T>(layer != 0, gy.p, x.p, wp, eps,
                                                                    gx, gw, gw_dt, gb, gb_dt, rows,
                                                                    d, workspace, stream));
  }
  ENG_KC_FLOAT_TYPES(x.dt, return norm_backward_typed<T, T>(layer != 0, gy.p, x.p, wp, eps, gx, gw,
                                                             gw_dt, gb, gb_dt, rows, d, workspace,
                                                             stream));
  return cudaErrorInvalidValue;
}
