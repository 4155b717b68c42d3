// E88's shared device code (the forward in e88_fwd.cu, the backward in e88_bwd.cu, the C entry
// points in e88.cu): the kernels' parameters, the lanes' layout of S, the hardware tanh, the
// column sums, and the loads of a chunk's inputs.
#ifndef ENG_KCUDA_E88_COMMON_CUH
#define ENG_KCUDA_E88_COMMON_CUH
#include <type_traits>

#include "cuda/approx_math.cuh"
#include "cuda/common.cuh"
#include "cuda/cp_async.cuh"
#include "cuda/mbarrier.cuh"
#include "cuda/e88.h"

namespace eng_e88 {

using namespace eng_kc;

constexpr float kEps = 1e-6f;  // the l2 normalization's epsilon
constexpr unsigned kFull = 0xffffffffu;
constexpr int kBwdMaxSeg = 64;       // ckpt_every limit of the backward
constexpr int kMaxStateSize = 4096;  // n * v: the backward's block of n*v/16 threads a (b, h)

// How S sits in a warp: a lane holds RL rows of one column, P = N/RL lanes a column, CW = 32/P
// columns a warp. Columns are independent chains, so the chain's column sums (S^T k^, S^T q^,
// the backward's dP^T k^) are RL FMAs and log2(P) shuffles.
template <int N> struct Lay {
  static constexpr int RL = N >= 32 ? 16 : 8;
  static constexpr int P = N / RL;
  static constexpr int CW = 32 / P;
  static_assert(N % RL == 0 && 32 % P == 0, "n must be 16, 32 or 64");
};

// Sum over the P lanes of a column (lanes lane ^ CW, lane ^ 2 CW, ..); every lane takes part.
template <int N> __device__ __forceinline__ float colsum(float x) {
#pragma unroll
  for (int m = Lay<N>::CW; m < 32; m <<= 1) x += __shfl_xor_sync(kFull, x, m);
  return x;
}

// a . b with K interleaved FMA chains (K = 4 in the forward, whose step waits on their latency;
// 2 in the backward, whose registers are at their limit).
template <int K = 4, int RL> __device__ __forceinline__ float dot(const float (&a)[RL], const float (&b)[RL]) {
  static_assert(RL % K == 0 && (K == 2 || K == 4), "K chains of RL / K terms");
  float c[K];
#pragma unroll
  for (int x = 0; x < K; x++) c[x] = a[x] * b[x];
#pragma unroll
  for (int r = K; r < RL; r++) c[r % K] = fmaf(a[r], b[r], c[r % K]);
  return K == 4 ? (c[0] + c[1]) + (c[K - 2] + c[K - 1]) : c[0] + c[1];
}

// RL consecutive floats at p (16-byte aligned), their 16-byte pieces taken in the order 0 ^ rx,
// 1 ^ rx, .. (rx: the backward's per-lane permutation of its rows, e88_bwd.cu's Scatter).
template <int RL> __device__ __forceinline__ void load_rows(const float *p, float (&x)[RL], int rx = 0) {
#pragma unroll
  for (int c = 0; c < RL / 4; c++) {
    const float4 a = reinterpret_cast<const float4 *>(p)[c ^ rx];
    x[4 * c] = a.x, x[4 * c + 1] = a.y, x[4 * c + 2] = a.z, x[4 * c + 3] = a.w;
  }
}

// The gate's sigmoid, the same in the forward's silu and the backward's: for 16-bit values
// 0.5 + 0.5 tanh(x / 2) with tanh.approx (error near 2^-12, below their rounding; one MUFU and
// no range fix-ups), for f32 1 / (1 + e^-x) without a division's slow path.
template <bool FAST> __device__ __forceinline__ float sigmoid(float x) {
  return FAST ? fmaf(0.5f, tanh_approx(0.5f * x), 0.5f) : __fdividef(1.f, 1.f + __expf(-x));
}

// The state's activation: the hardware tanh for 16-bit values, tanhf for f32.
template <bool FAST> __device__ __forceinline__ float act(float x, bool lin) {
  if (lin) return x;
  return FAST ? tanh_approx(x) : tanhf(x);
}

struct Params {
  const void *q, *k, *v, *decay, *g, *dy;
  const float *S0, *ckpt_in, *dS_T;
  void *y, *dq, *dk, *dv, *ddecay, *dg;
  float *S_T, *ckpt, *dS0;
  int B, T, H, V, C, nck, L;  // L: steps per chunk (forward) or per replayed chunk (backward)
  int S;  // backward: steps a staged segment, a multiple of C (its inputs in shared memory)
  int64_t cklen;              // ckpt's floats a (b, h): checkpoints, then delta and o (cpu/e88.h)
  int split_from;             // forward: blocks from this one hold half of a head's columns
  bool l2, lin, gate;
  bool prefetch;  // the inputs are copied with cp.async (every 16-byte piece aligned)
};

// Where a (b, h)'s ckpt row (Params::cklen floats) keeps its delta and o parts: [T][V] each,
// after the nck checkpoints of N * V.
__host__ __device__ inline int64_t delta_at(const Params &p, int N) { return (int64_t)p.nck * N * p.V; }
__host__ __device__ inline int64_t o_at(const Params &p, int N) { return delta_at(p, N) + (int64_t)p.T * p.V; }

__device__ __forceinline__ int64_t row_of(const Params &p, int b, int t, int h) {
  return ((int64_t)b * p.T + t) * p.H + h;
}

// PW consecutive elements at src as f32: one 16-byte load when PW fills 16 bytes (the caller
// checked the alignment), else one element.
template <typename T, int PW> __device__ __forceinline__ void load_piece(const T *src, float (&x)[PW]) {
  if constexpr (PW * sizeof(T) == 16) {
    const uint4 raw = *reinterpret_cast<const uint4 *>(src);
    const T *e = reinterpret_cast<const T *>(&raw);
#pragma unroll
    for (int w = 0; w < PW; w++) x[w] = load(e + w);
  } else {
#pragma unroll
    for (int w = 0; w < PW; w++) x[w] = load(src + w);
  }
}

// PW floats to dst: 16-byte stores when PW is a multiple of 4 (dst is then 16-byte aligned).
template <int PW> __device__ __forceinline__ void store_f32(float *dst, const float (&x)[PW]) {
  if constexpr (PW % 4 == 0) {
#pragma unroll
    for (int w = 0; w < PW; w += 4)
      reinterpret_cast<float4 *>(dst)[w / 4] = make_float4(x[w], x[w + 1], x[w + 2], x[w + 3]);
  } else {
#pragma unroll
    for (int w = 0; w < PW; w++) dst[w] = x[w];
  }
}

// The pieces (u, j) of a [len][per_row] grid that a thread visits: e = first, first + stride, ..
// as u = e / per_row, j = e % per_row, with one division (then both advance by stride's).
struct Grid {
  int u, j, du, dj, per_row;
  __device__ Grid(int first, int per_row_, int stride = 32) : per_row(per_row_) {
    u = first / per_row, j = first - u * per_row, du = stride / per_row, dj = stride - du * per_row;
  }
  __device__ void next() {
    u += du, j += dj;
    if (j >= per_row) j -= per_row, u++;
  }
};

// The approximate reciprocal square root and division (rsqrt_ftz, div_ftz: cuda/approx_math.cuh)
// have no subnormal fix-ups. norm_rows gives a row whose squares sum below 2^-126 (subnormal:
// rsqrt_ftz would see 0 and give inf) a = 0 and 1 / (a + eps) = 1 / eps, which is what the exact
// forms give there (eps dominates), and the l2 backward's second term, which is below 2^-43 of the
// first there, is dropped as at x = 0.

// How a warp splits rows of N values into pieces of PW: PPR lanes a row, PE values a lane, RPI
// rows a warp at a time.
template <int N, int PW> struct RowSplit {
  static constexpr int PPR = N / PW < 32 ? N / PW : 32, PE = N / PPR, RPI = 32 / PPR;
};

// Rows 0 .. 2 len - 1 of k (r < len: k's row r) and q (q's row r - len), row u at u * row_step
// elements, as f32 and normalized when l2; the warp takes RPI rows at a time from row `first`,
// then `stride` rows on. put(isk, u, at, x, a, inv) gets a lane's PE values (elements at ..
// at + PE - 1 of the row), the row's norm a and 1 / (a + eps). For 16-bit values the square root
// and the division are approximate (rsqrt_ftz, div_ftz: errors near 2^-22, below their rounding).
// The forward (with aligned inputs) and the backward normalize with this at the same PW, so in
// the same order: the backward's k^ is the forward's, and its replay with the forward's delta
// gives the same states.
template <typename T, int N, int PW, typename Put>
__device__ __forceinline__ void norm_rows(const T *k, const T *q, int64_t row_step, bool l2, int len, int first,
                                          int stride, int lane, Put put) {
  using RS = RowSplit<N, PW>;
  constexpr bool FAST = !std::is_same<T, float>::value;
  const int sub = lane / RS::PPR, at = (lane % RS::PPR) * RS::PE;
  for (int r0 = first; r0 < 2 * len; r0 += stride) {
    const int r = r0 + sub;
    const bool isk = r < len, valid = r < 2 * len;
    const int u = isk ? r : r - len;
    float x[RS::PE];
    const T *src = (isk ? k : q) + u * row_step + at;
#pragma unroll
    for (int w = 0; w < RS::PE; w += PW) {
      float y[PW];
      if (valid) load_piece<T, PW>(src + w, y);
#pragma unroll
      for (int z = 0; z < PW; z++) x[w + z] = valid ? y[z] : 0.f;
    }
    float ss = 0.f;
#pragma unroll
    for (int w = 0; w < RS::PE; w++) ss = fmaf(x[w], x[w], ss);
#pragma unroll
    for (int m = 1; m < RS::PPR; m <<= 1) ss += __shfl_xor_sync(kFull, ss, m);
    const float a = FAST ? (ss >= 0x1p-126f ? ss * rsqrt_ftz(ss) : 0.f) : sqrtf(ss);
    const float inv = FAST ? div_ftz(1.f, a + kEps) : 1.f / (a + kEps);
    if (l2) {
#pragma unroll
      for (int w = 0; w < RS::PE; w++) x[w] *= inv;
    }
    if (valid) put(isk, u, at, x, a, inv);
  }
}

// Runs the body with T the value type and N the state size as compile-time constants.
#define E88_DISPATCH(dt, n, ...)                                                     \
  switch (dt) {                                                                       \
  case ENG_F32: { using T = float; E88_DISPATCH_N(n, __VA_ARGS__); }                         \
  case ENG_F16: { using T = __half; E88_DISPATCH_N(n, __VA_ARGS__); }                        \
  case ENG_BF16: { using T = __nv_bfloat16; E88_DISPATCH_N(n, __VA_ARGS__); }                \
  default: return (int)cudaErrorInvalidValue;                                         \
  }
#define E88_DISPATCH_N(n, ...)                                                       \
  switch (n) {                                                                        \
  case 16: { constexpr int N = 16; __VA_ARGS__; }                                            \
  case 32: { constexpr int N = 32; __VA_ARGS__; }                                            \
  case 64: { constexpr int N = 64; __VA_ARGS__; }                                            \
  default: return (int)cudaErrorInvalidValue;                                         \
  }

// The chunk length a launcher chose last, per host thread and kernel instance: choosing it takes
// occupancy queries (microseconds a call), and a model calls each layer with the same shape.
struct ChunkMemo {
  const void *kernel = nullptr;
  int dev = -1, value = 0;
  int64_t key[3] = {};
  bool find(const void *k, int d, int64_t a, int64_t b, int64_t c, int *out) const {
    if (k != kernel || d != dev || a != key[0] || b != key[1] || c != key[2]) return false;
    *out = value;
    return true;
  }
  void keep(const void *k, int d, int64_t a, int64_t b, int64_t c, int v) {
    kernel = k, dev = d, key[0] = a, key[1] = b, key[2] = c, value = v;
  }
};

// The forward and backward launchers (e88_fwd.cu, e88_bwd.cu); p carries the shape and tensors.
// With chunk set, launch_backward launches nothing and gives the replay chunk it would take.
int launch_forward(eng_dtype_t dt, int n, const Params &p, cudaStream_t st);
int launch_backward(eng_dtype_t dt, int n, const Params &p, cudaStream_t st, int *chunk = nullptr);

}  // namespace eng_e88
#endif
