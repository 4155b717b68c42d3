// Unary elementwise ops: the formulas of kernels/cpu/elementwise.c, per dtype.
#include "cuda/elementwise.h"
#include "cuda/elementwise_launch.cuh"
#include "cuda/elementwise_math.cuh"

namespace eng_kc {
namespace ew {
namespace {

template <typename T, eng_unary_op_t OP> struct UnaryFloat {
  using Out = T;
  using In0 = T;
  using In1 = T;
  using In2 = T;
  static constexpr int kArity = 1;
  __device__ __forceinline__ T operator()(const T &x) const {
    using C = compute_t<T>;
    const C v = widen(x);
    C r;
    if constexpr (OP == ENG_UNARY_NEG) r = -v;
    else if constexpr (OP == ENG_UNARY_ABS) r = m_fabs(v);
    else if constexpr (OP == ENG_UNARY_EXP) r = m_exp(v);
    else if constexpr (OP == ENG_UNARY_LOG) r = m_log(v);
    else if constexpr (OP == ENG_UNARY_SQRT) r = m_sqrt(v);
    else if constexpr (OP == ENG_UNARY_RSQRT) r = C(1) / m_sqrt(v);
    else if constexpr (OP == ENG_UNARY_TANH) r = m_tanh(v);
    else if constexpr (OP == ENG_UNARY_SIGMOID) r = C(1) / (C(1) + m_exp(-v));
    else if constexpr (OP == ENG_UNARY_SILU) r = v / (C(1) + m_exp(-v));
    else if constexpr (OP == ENG_UNARY_GELU)
      r = C(0.5) * v * (C(1) + m_erf(v * C(0.70710678118654752440084436210484903928)));
    else if constexpr (OP == ENG_UNARY_RELU) r = v < C(0) ? C(0) : v; // keeps NaN and -0
    else r = v > C(20) ? v : m_log1p(m_exp(v));                       // softplus
    return narrow<T>(r);
  }
};

// Negation through the unsigned type, so that the most negative value wraps. Unsigned values are
// their own abs and relu.
template <typename T, eng_unary_op_t OP> struct UnaryInt {
  using Out = T;
  using In0 = T;
  using In1 = T;
  using In2 = T;
  static constexpr int kArity = 1;
  __device__ __forceinline__ T operator()(const T &v) const {
    using U = std::make_unsigned_t<T>;
    if constexpr (std::is_unsigned_v<T>) return v;
    else if constexpr (OP == ENG_UNARY_NEG) return (T)(U(0) - (U)v);
    else if constexpr (OP == ENG_UNARY_ABS) return v < 0 ? (T)(U(0) - (U)v) : v;
    else return v < 0 ? T(0) : v; // relu
  }
};

struct Args {
  const eng_kcuda_ew_geom_t *g;
  void *y;
  const void *in[1];
  cudaStream_t stream;
};

#define ENG_EW_UNARY_CASE(FUNCTOR, OP)                                                             \
  case OP: return launch(FUNCTOR<T, OP>{}, a.g, a.y, a.in, a.stream);

template <typename T> int unary_float(eng_unary_op_t op, const Args &a) {
  switch (op) {
    ENG_EW_UNARY_CASE(UnaryFloat, ENG_UNARY_NEG)
    ENG_EW_UNARY_CASE(UnaryFloat, ENG_UNARY_ABS)
    ENG_EW_UNARY_CASE(UnaryFloat, ENG_UNARY_EXP)
    ENG_EW_UNARY_CASE(UnaryFloat, ENG_UNARY_LOG)
    ENG_EW_UNARY_CASE(UnaryFloat, ENG_UNARY_SQRT)
    ENG_EW_UNARY_CASE(UnaryFloat, ENG_UNARY_RSQRT)
    ENG_EW_UNARY_CASE(UnaryFloat, ENG_UNARY_TANH)
    ENG_EW_UNARY_CASE(UnaryFloat, ENG_UNARY_SIGMOID)
    ENG_EW_UNARY_CASE(UnaryFloat, ENG_UNARY_SILU)
    ENG_EW_UNARY_CASE(UnaryFloat, ENG_UNARY_GELU)
    ENG_EW_UNARY_CASE(UnaryFloat, ENG_UNARY_RELU)
    ENG_EW_UNARY_CASE(UnaryFloat, ENG_UNARY_SOFTPLUS)
  default: return (int)cudaErrorInvalidValue;
  }
}

template <typename T> int unary_signed(eng_unary_op_t op, const Args &a) {
  switch (op) {
    ENG_EW_UNARY_CASE(UnaryInt, ENG_UNARY_NEG)
    ENG_EW_UNARY_CASE(UnaryInt, ENG_UNARY_ABS)
    ENG_EW_UNARY_CASE(UnaryInt, ENG_UNARY_RELU)
  default: return (int)cudaErrorInvalidValue;
  }
}

// u8 takes abs and relu, both the identity.
int unary_u8(eng_unary_op_t op, const Args &a) {
  if (op != ENG_UNARY_ABS && op != ENG_UNARY_RELU) return (int)cudaErrorInvalidValue;
  return launch(UnaryInt<uint8_t, ENG_UNARY_ABS>{}, a.g, a.y, a.in, a.stream);
}

#undef ENG_EW_UNARY_CASE

} // namespace
} // namespace ew
} // namespace eng_kc

extern "C" int eng_kcuda_unary(eng_unary_op_t op, eng_dtype_t dt, void *y, const void *x,
                               const eng_kcuda_ew_geom_t *g, cudaStream_t stream) {
  using namespace eng_kc::ew;
  const Args a = {g, y, {x}, stream};
  switch (dt) {
  case ENG_F64: return unary_float<double>(op, a);
  case ENG_F32: return unary_float<float>(op, a);
  case ENG_F16: return unary_float<__half>(op, a);
  case ENG_BF16: return unary_float<__nv_bfloat16>(op, a);
  case ENG_I32: return unary_signed<int32_t>(op, a);
  case ENG_I64: return unary_signed<int64_t>(op, a);
  case ENG_U8: return unary_u8(op, a);
  default: return (int)cudaErrorInvalidValue;
  }
}
