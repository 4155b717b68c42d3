// Fused residual add + RMS norm, the pre-norm entry of a residual block: a block per row adds x
// and the residual in f32 (f64 for f64), stores the sum into residual_out and sums its squares in
// the same pass, then writes y from the stored values (its own writes, found in cache).
#include <type_traits>

#include "cuda/norm_backward.h"
#include "cuda/row_chunks.cuh"

namespace {

using namespace eng_kc;
using namespace eng_kc::chunks;

constexpr unsigned kMaxBlocks = 1u << 20;

// TH (float or double) is the residual stream's type, and the arithmetic's.
template <typename TX, typename TR, typename TH>
__global__ void __launch_bounds__(1024)
    add_rms_norm_rows(const TX *__restrict__ x, const TR *__restrict__ res, AnyPtr w, TX *y, TH *h,
                      int64_t rows, int64_t d, TH eps, bool vec) {
  using A = TH;
  __shared__ A slots[2][1][32];
  int turn = 0;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    TH *hr = h + r * d;
    A s[1] = {0};
    for_chunks(d, vec, [&](int64_t k0, auto width) {
      constexpr int M = decltype(width)::value;
      A v[M];
      ld<M>(x + r * d + k0, v);
      if (res) {
        A rv[M];
        ld<M>(res + r * d + k0, rv);
#pragma unroll
        for (int e = 0; e < M; e++) v[e] += rv[e];
      }
#pragma unroll
      for (int e = 0; e < M; e++) s[0] += v[e] * v[e];
      st<M>(hr + k0, v);
    });
    block_sums<1>(s, slots[turn++ & 1]);
    const A rstd = A(1) / sqrt(s[0] / (A)d + eps);
    for_chunks(d, vec, [&](int64_t k0, auto width) {
      constexpr int M = decltype(width)::value;
      A v[M];
      ld<M>(hr + k0, v);
#pragma unroll
      for (int e = 0; e < M; e++) v[e] = v[e] * rstd * w.at<A>(k0 + e);
      st<M>(y + r * d + k0, v);
    });
  }
}

template <typename TX, typename TR>
int add_rms_norm_typed(const void *x, const void *res, AnyPtr w, double eps, void *y, void *h,
                       int64_t rows, int64_t d, cudaStream_t s) {
  using TH = std::conditional_t<std::is_same_v<TX, double> || std::is_same_v<TR, double>, double,
                                float>;
  const bool vec = chunk_rows(x, d) && chunk_rows(res, d) && chunk_rows(y, d) && chunk_rows(h, d);
  const unsigned blocks = (unsigned)(rows < (int64_t)kMaxBlocks ? rows : kMaxBlocks);
  add_rms_norm_rows<TX, TR, TH><<<blocks, row_threads(d, vec), 0, s>>>(
      static_cast<const TX *>(x), static_cast<const TR *>(res), w, static_cast<TX *>(y),
      static_cast<TH *>(h), rows, d, (TH)eps, vec);
  return (int)cudaGetLastError();
}

}  // namespace

extern "C" int eng_kcuda_add_rms_norm(eng_kcuda_arg_t x, eng_kcuda_arg_t residual,
                                      eng_kcuda_arg_t w, double eps, void *y, void *residual_out,
                                      eng_dtype_t h_dt, int64_t rows, int64_t d,
                                      cudaStream_t stream) {
  if (rows == 0 || d == 0) return cudaSuccess;
  const AnyPtr wp{w.p, (int)w.dt};
  // an absent residual takes x's type (never read)
  const eng_dtype_t r_dt = residual.p ? residual.dt : x.dt;
  const bool wide = x.dt == ENG_F64 || r_dt == ENG_F64;
  if (h_dt != (wide ? ENG_F64 : ENG_F32)) return cudaErrorInvalidValue;
  if (r_dt == ENG_F32) {
    ENG_KC_FLOAT_TYPES(x.dt, return add_rms_norm_typed<T, float>(x.p, residual.p, wp, eps, y,
                                                                  residual_out, rows, d, stream));
  }
  if (r_dt == ENG_F64) {
    ENG_KC_FLOAT_TYPES(x.dt, return add_rms_norm_typed<T, double>(x.p, residual.p, wp, eps, y,
                                                                   residual_out, rows, d, stream));
  }
  if (r_dt == x.dt) {
    ENG_KC_FLOAT_TYPES(x.dt, return add_rms_norm_typed<T, T>(x.p, residual.p, wp, eps, y,
                                                              residual_out, rows, d, stream));
  }
  return cudaErrorInvalidValue;
}
