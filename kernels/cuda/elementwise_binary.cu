// Binary elementwise ops with broadcasting: the formulas of kernels/cpu/elementwise.c, per dtype.
#include "cuda/elementwise.h"
#include "cuda/elementwise_launch.cuh"
#include "cuda/elementwise_math.cuh"

namespace eng_kc {
namespace ew {
namespace {

__host__ __device__ constexpr bool is_comparison(eng_binary_op_t op) { return op >= ENG_BINARY_EQ; }

// The comparisons, in the dtype's compute type; u8 0/1.
template <eng_binary_op_t OP, typename C> __device__ __forceinline__ uint8_t compare(C x, C y) {
  if constexpr (OP == ENG_BINARY_EQ) return x == y;
  else if constexpr (OP == ENG_BINARY_NE) return x != y;
  else if constexpr (OP == ENG_BINARY_LT) return x < y;
  else if constexpr (OP == ENG_BINARY_LE) return x <= y;
  else if constexpr (OP == ENG_BINARY_GT) return x > y;
  else return x >= y;
}

// maximum/minimum propagate NaN from either side, like torch.
template <typename T, eng_binary_op_t OP> struct BinaryFloat {
  using Out = std::conditional_t<is_comparison(OP), uint8_t, T>;
  using In0 = T;
  using In1 = T;
  using In2 = T;
  static constexpr int kArity = 2;
  __device__ __forceinline__ Out operator()(const T &a, const T &b) const {
    using C = compute_t<T>;
    const C x = widen(a), y = widen(b);
    if constexpr (is_comparison(OP)) return compare<OP>(x, y);
    else if constexpr (OP == ENG_BINARY_ADD) return narrow<T>(x + y);
    else if constexpr (OP == ENG_BINARY_SUB) return narrow<T>(x - y);
    else if constexpr (OP == ENG_BINARY_MUL) return narrow<T>(x * y);
    else if constexpr (OP == ENG_BINARY_DIV) return narrow<T>(x / y);
    else if constexpr (OP == ENG_BINARY_POW) return narrow<T>(m_pow(x, y));
    else if constexpr (OP == ENG_BINARY_MAXIMUM) return narrow<T>((x != x || x > y) ? x : y);
    else return narrow<T>((x != x || x < y) ? x : y); // minimum
  }
};

// x^y by squaring in wrapping 64-bit arithmetic; the caller narrows, which wraps the same way.
__device__ __forceinline__ int64_t int_pow(int64_t x, int64_t y) {
  uint64_t r = 1, b = (uint64_t)x;
  for (; y; y >>= 1) {
    if (y & 1) r *= b;
    b *= b;
  }
  return (int64_t)r;
}

// add/sub/mul through the unsigned type: exact, wrapping on overflow, never UB. A negative
// exponent gives 0 and raises *bad (when given). DIV never reaches integers.
template <typename T, eng_binary_op_t OP> struct BinaryInt {
  using Out = std::conditional_t<is_comparison(OP), uint8_t, T>;
  using In0 = T;
  using In1 = T;
  using In2 = T;
  static constexpr int kArity = 2;
  int *bad;
  __device__ __forceinline__ Out operator()(const T &x, const T &y) const {
    using U = std::make_unsigned_t<T>;
    if constexpr (is_comparison(OP)) return compare<OP>(x, y);
    else if constexpr (OP == ENG_BINARY_ADD) return (T)((U)x + (U)y);
    else if constexpr (OP == ENG_BINARY_SUB) return (T)((U)x - (U)y);
    else if constexpr (OP == ENG_BINARY_MUL) return (T)((U)x * (U)y);
    else if constexpr (OP == ENG_BINARY_POW) {
      if constexpr (std::is_signed_v<T>) {
        if (y < 0) {
          if (bad) *bad = 1;
          return T(0);
        }
      }
      return (T)int_pow((int64_t)x, (int64_t)y);
    } else if constexpr (OP == ENG_BINARY_MAXIMUM) return x > y ? x : y;
    else return x < y ? x : y; // minimum
  }
};

struct Args {
  const eng_kcuda_ew_geom_t *g;
  void *out;
  const void *in[2];
  int *bad;
  cudaStream_t stream;
};

#define ENG_EW_FLOAT_CASE(OP)                                                                      \
  case OP:                                                                                         \
    return launch(BinaryFloat<T, OP>{}, a.g, a.out, a.in, a.stream);
#define ENG_EW_INT_CASE(OP)                                                                        \
  case OP: return launch(BinaryInt<T, OP>{a.bad}, a.g, a.out, a.in, a.stream);

template <typename T> int binary_float(eng_binary_op_t op, const Args &a) {
  switch (op) {
    ENG_EW_FLOAT_CASE(ENG_BINARY_ADD)
    ENG_EW_FLOAT_CASE(ENG_BINARY_SUB)
    ENG_EW_FLOAT_CASE(ENG_BINARY_MUL)
    ENG_EW_FLOAT_CASE(ENG_BINARY_DIV)
    ENG_EW_FLOAT_CASE(ENG_BINARY_POW)
    ENG_EW_FLOAT_CASE(ENG_BINARY_MAXIMUM)
    ENG_EW_FLOAT_CASE(ENG_BINARY_MINIMUM)
    ENG_EW_FLOAT_CASE(ENG_BINARY_EQ)
    ENG_EW_FLOAT_CASE(ENG_BINARY_NE)
    ENG_EW_FLOAT_CASE(ENG_BINARY_LT)
    ENG_EW_FLOAT_CASE(ENG_BINARY_LE)
    ENG_EW_FLOAT_CASE(ENG_BINARY_GT)
    ENG_EW_FLOAT_CASE(ENG_BINARY_GE)
  default: return (int)cudaErrorInvalidValue;
  }
}

template <typename T> int binary_int(eng_binary_op_t op, const Args &a) {
  switch (op) {
    ENG_EW_INT_CASE(ENG_BINARY_ADD)
    ENG_EW_INT_CASE(ENG_BINARY_SUB)
    ENG_EW_INT_CASE(ENG_BINARY_MUL)
    ENG_EW_INT_CASE(ENG_BINARY_POW)
    ENG_EW_INT_CASE(ENG_BINARY_MAXIMUM)
    ENG_EW_INT_CASE(ENG_BINARY_MINIMUM)
    ENG_EW_INT_CASE(ENG_BINARY_EQ)
    ENG_EW_INT_CASE(ENG_BINARY_NE)
    ENG_EW_INT_CASE(ENG_BINARY_LT)
    ENG_EW_INT_CASE(ENG_BINARY_LE)
    ENG_EW_INT_CASE(ENG_BINARY_GT)
    ENG_EW_INT_CASE(ENG_BINARY_GE)
  default: return (int)cudaErrorInvalidValue;
  }
}

#undef ENG_EW_FLOAT_CASE
#undef ENG_EW_INT_CASE

} // namespace
} // namespace ew
} // namespace eng_kc

extern "C" int eng_kcuda_binary(eng_binary_op_t op, eng_dtype_t dt, void *out, const void *a,
                                const void *b, const eng_kcuda_ew_geom_t *g, int *bad_pow,
                                cudaStream_t stream) {
  using namespace eng_kc::ew;
  const Args args = {g, out, {a, b}, bad_pow, stream};
  switch (dt) {
  case ENG_F64: return binary_float<double>(op, args);
  case ENG_F32: return binary_float<float>(op, args);
  case ENG_F16: return binary_float<__half>(op, args);
  case ENG_BF16: return binary_float<__nv_bfloat16>(op, args);
  case ENG_I32: return binary_int<int32_t>(op, args);
  case ENG_I64: return binary_int<int64_t>(op, args);
  case ENG_U8: return binary_int<uint8_t>(op, args);
  default: return (int)cudaErrorInvalidValue;
  }
}
