// clamp and where: the formulas of kernels/cpu/elementwise.c, per dtype.
#include "cuda/elementwise.h"
#include "cuda/elementwise_launch.cuh"
#include "cuda/elementwise_math.cuh"

namespace eng_kc {
namespace ew {
namespace {

// min(max(x, lo), hi), so that lo > hi gives hi like torch; NaN fails both tests and stays.
template <typename T> struct Clamp {
  using Out = T;
  using In0 = T;
  using In1 = T;
  using In2 = T;
  static constexpr int kArity = 1;
  compute_t<T> lo, hi;
  __device__ __forceinline__ T operator()(const T &x) const {
    const compute_t<T> v = widen(x);
    const compute_t<T> w = v < lo ? lo : v;
    return narrow<T>(w > hi ? hi : w);
  }
};

// cond is read as raw bits: nonzero is true; for floating conds the sign bit is masked off, so
// -0 is false and NaN true, like `cond != 0`.
template <typename Cond, bool kFloat, typename V> struct Where {
  using Out = V;
  using In0 = Cond;
  using In1 = V;
  using In2 = V;
  static constexpr int kArity = 3;
  __device__ __forceinline__ V operator()(const Cond &c, const V &a, const V &b) const {
    constexpr Cond kSign = (Cond)(Cond(1) << (8 * sizeof(Cond) - 1));
    constexpr Cond kMask = kFloat ? (Cond)~kSign : (Cond)~Cond(0);
    return (c & kMask) ? a : b;
  }
};

template <typename T>
int clamp_as(compute_t<T> lo, compute_t<T> hi, void *y, const void *x, const eng_kcuda_ew_geom_t *g,
             cudaStream_t stream) {
  const void *in[1] = {x};
  return launch(Clamp<T>{lo, hi}, g, y, in, stream);
}

template <typename Cond, bool kFloat>
int where_as(size_t elsize, void *out, const void *const *in, const eng_kcuda_ew_geom_t *g,
             cudaStream_t stream) {
  switch (elsize) {
  case 1: return launch(Where<Cond, kFloat, uint8_t>{}, g, out, in, stream);
  case 2: return launch(Where<Cond, kFloat, uint16_t>{}, g, out, in, stream);
  case 4: return launch(Where<Cond, kFloat, uint32_t>{}, g, out, in, stream);
  case 8: return launch(Where<Cond, kFloat, uint64_t>{}, g, out, in, stream);
  default: return (int)cudaErrorInvalidValue;
  }
}

} // namespace
} // namespace ew
} // namespace eng_kc

extern "C" int eng_kcuda_clamp(eng_dtype_t dt, double lo, double hi, int64_t ilo, int64_t ihi,
                               void *y, const void *x, const eng_kcuda_ew_geom_t *g,
                               cudaStream_t stream) {
  using namespace eng_kc::ew;
  switch (dt) {
  case ENG_F64: return clamp_as<double>(lo, hi, y, x, g, stream);
  case ENG_F32: return clamp_as<float>((float)lo, (float)hi, y, x, g, stream);
  case ENG_F16: return clamp_as<__half>((float)lo, (float)hi, y, x, g, stream);
  case ENG_BF16: return clamp_as<__nv_bfloat16>((float)lo, (float)hi, y, x, g, stream);
  case ENG_I32: return clamp_as<int32_t>((int32_t)ilo, (int32_t)ihi, y, x, g, stream);
  case ENG_I64: return clamp_as<int64_t>(ilo, ihi, y, x, g, stream);
  case ENG_U8: return clamp_as<uint8_t>((uint8_t)ilo, (uint8_t)ihi, y, x, g, stream);
  default: return (int)cudaErrorInvalidValue;
  }
}

extern "C" int eng_kcuda_where(eng_dtype_t cond_dt, size_t elsize, void *out, const void *cond,
                               const void *a, const void *b, const eng_kcuda_ew_geom_t *g,
                               cudaStream_t stream) {
  using namespace eng_kc::ew;
  const void *in[3] = {cond, a, b};
  switch (cond_dt) {
  case ENG_F64: return where_as<uint64_t, true>(elsize, out, in, g, stream);
  case ENG_F32: return where_as<uint32_t, true>(elsize, out, in, g, stream);
  case ENG_F16:
  case ENG_BF16: return where_as<uint16_t, true>(elsize, out, in, g, stream);
  case ENG_I64: return where_as<uint64_t, false>(elsize, out, in, g, stream);
  case ENG_I32: return where_as<uint32_t, false>(elsize, out, in, g, stream);
  case ENG_U8: return where_as<uint8_t, false>(elsize, out, in, g, stream);
  default: return (int)cudaErrorInvalidValue;
  }
}
