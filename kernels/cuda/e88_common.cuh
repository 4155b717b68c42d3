// E88's shared device code (the forward in e88_fwd.cu, the backward in e88_bwd.cu, the C entry
// points in e88.cu): the kernels' parameters, the hardware tanh, and the staging of a chunk's
// inputs (q^, k^ normalized once per step, silu(g) once) into shared memory.
#ifndef ENG_KCUDA_E88_COMMON_CUH
#define ENG_KCUDA_E88_COMMON_CUH
#include <type_traits>

#include "cuda/common.cuh"
#include "cuda/e88.h"

namespace eng_e88 {

using namespace eng_kc;

constexpr int R = 8;           // rows of a column per thread
constexpr float kEps = 1e-6f;  // the l2 normalization's epsilon
constexpr unsigned kFull = 0xffffffffu;
constexpr int kFwdMaxChunk = 32;  // steps a chunk (see forward_chunk)
constexpr int kFwdMinChunk = 8;
constexpr int kBwdMaxSeg = 64;                 // ckpt_every limit of the backward
constexpr size_t kFwdSmem = 48 * 1024;         // forward chunk budget (no opt-in needed)
constexpr size_t kBwdSmem = 74 * 1024;         // backward budget when the device cannot be asked
constexpr size_t kMaxSmem = 200 * 1024;        // and what it may grow to then
constexpr int kMaxThreads = 512;               // n*v/8 threads a block; the backward's ~100
                                               // registers a thread allow no more

template <int N> struct Geo {
  static constexpr int P = N / R;    // lanes per column
  static constexpr int CW = 32 / P;  // columns per warp
  static_assert(N % R == 0 && 32 % (N / R) == 0 && N / R >= 2, "n must be 16, 32 or 64");
};

__device__ __forceinline__ float tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// The state's activation: the hardware tanh for 16-bit values, tanhf for f32.
template <bool FAST> __device__ __forceinline__ float act(float x, bool lin) {
  if (lin) return x;
  return FAST ? tanh_approx(x) : tanhf(x);
}

__device__ __forceinline__ float sigmoidf_(float x) { return 1.f / (1.f + __expf(-x)); }

// Sum over the P lanes of a column (lanes lane ^ CW, lane ^ 2CW, ...).
template <int N> __device__ __forceinline__ float column_sum(float x) {
#pragma unroll
  for (int m = Geo<N>::CW; m < 32; m <<= 1) x += __shfl_xor_sync(kFull, x, m);
  return x;
}

// column_sum of CPT independent values, level by level (the shuffles overlap).
template <int N, int CPT> __device__ __forceinline__ void column_sums(float (&x)[CPT]) {
#pragma unroll
  for (int m = Geo<N>::CW; m < 32; m <<= 1) {
#pragma unroll
    for (int c = 0; c < CPT; c++) x[c] += __shfl_xor_sync(kFull, x[c], m);
  }
}

__device__ __forceinline__ void load8(const float *p, float (&x)[R]) {
  const float4 a = reinterpret_cast<const float4 *>(p)[0], b = reinterpret_cast<const float4 *>(p)[1];
  x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
}

// A thread's 8 states of replayed step u, as two float4 planes [u][2][threads]: consecutive
// threads touch consecutive 16 bytes (no bank conflicts).
__device__ __forceinline__ void store_state(float *states, int u, const float (&x)[R]) {
  float4 *p = reinterpret_cast<float4 *>(states) + (size_t)u * 2 * blockDim.x + threadIdx.x;
  p[0] = make_float4(x[0], x[1], x[2], x[3]);
  p[blockDim.x] = make_float4(x[4], x[5], x[6], x[7]);
}

__device__ __forceinline__ void load_state(const float *states, int u, float (&x)[R]) {
  const float4 *p = reinterpret_cast<const float4 *>(states) + (size_t)u * 2 * blockDim.x + threadIdx.x;
  const float4 a = p[0], b = p[blockDim.x];
  x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
}

__device__ __forceinline__ float dot8(const float (&a)[R], const float (&b)[R]) {
  float x = a[0] * b[0], y = a[1] * b[1];
#pragma unroll
  for (int r = 2; r < R; r += 2) {
    x = fmaf(a[r], b[r], x);
    y = fmaf(a[r + 1], b[r + 1], y);
  }
  return x + y;
}

struct Params {
  const void *q, *k, *v, *decay, *g, *dy;
  const float *S0, *ckpt_in, *dS_T;
  void *y, *dq, *dk, *dv, *ddecay, *dg;
  float *S_T, *ckpt, *dS0;
  int B, T, H, V, C, nck, L;  // L: steps per chunk (forward) or per replayed chunk (backward)
  int splits;                 // blocks per (b, h), each with V/splits columns (forward only)
  bool l2, lin, gate;
  bool prefetch;  // backward: the segments' inputs come through fetch_async (see its launcher)
};

// The thread's place: CPT columns j, j + nslot, .. (jl, jl + nslot, .. within the block's Vb
// columns col0 ..), rows i0 .. i0+7; (b, h) of the block.
template <int N, int CPT = 1> struct Place {
  int tid, lane, warp, nwarps, rg, jl, nslot, Vb, col0, j, i0, bh, b, h;
  __device__ Place(int H, int splits) {
    tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nwarps = blockDim.x >> 5;
    rg = lane / Geo<N>::CW;
    jl = warp * Geo<N>::CW + lane % Geo<N>::CW;
    nslot = nwarps * Geo<N>::CW;
    Vb = nslot * CPT;
    col0 = (blockIdx.x % splits) * Vb;
    j = col0 + jl;
    i0 = rg * R;
    bh = blockIdx.x / splits, b = bh / H, h = bh % H;
  }
};

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

// A thread's row of N values of q or k into dst, normalized in place when l2 (its norm into
// *norm when given).
template <typename T, int N, int PW>
__device__ __forceinline__ void stage_row(const T *src, float *dst, bool l2, float *norm) {
  float ss = 0.f;
#pragma unroll 1  // unrolled, the whole row would stay in registers (and cost occupancy)
  for (int i = 0; i < N; i += PW) {
    float x[PW];
    load_piece<T, PW>(src + i, x);
#pragma unroll
    for (int w = 0; w < PW; w++) {
      ss = fmaf(x[w], x[w], ss);
      dst[i + w] = x[w];
    }
  }
  if (!l2) return;
  const float nrm = sqrtf(ss), inv = 1.f / (nrm + kEps);
  float4 *d4 = reinterpret_cast<float4 *>(dst);
#pragma unroll 4
  for (int i = 0; i < N / 4; i++) {
    float4 x = d4[i];
    x.x *= inv, x.y *= inv, x.z *= inv, x.w *= inv;
    d4[i] = x;
  }
  if (norm) *norm = nrm;
}

// Where a chunk's inputs are read from: the tensors in global memory (step u of the chunk at
// u * qk_step elements from q, k and u * col_step from v, g, dy, which point at the chunk's first
// step and the block's first column), or their packed copy in shared memory (fetch_async).
template <typename T> struct Src {
  const T *q, *k, *v, *g, *dy;
  int64_t qk_step, col_step;
  bool rows_vec, cols_vec;  // 16-byte pieces allowed
};

template <typename T, int N>
__device__ __forceinline__ Src<T> global_src(const Params &p, int64_t row0, int col0, int Vb) {
  constexpr int W = 16 / sizeof(T);
  const int64_t at = row0 * p.V + col0;
  Src<T> s;
  s.q = (const T *)p.q + row0 * N, s.k = (const T *)p.k + row0 * N, s.qk_step = (int64_t)p.H * N;
  s.v = (const T *)p.v + at, s.g = p.g ? (const T *)p.g + at : nullptr;
  s.dy = p.dy ? (const T *)p.dy + at : nullptr, s.col_step = (int64_t)p.H * p.V;
  s.rows_vec = (((uintptr_t)p.q | (uintptr_t)p.k) & 15) == 0;
  s.cols_vec = Vb % W == 0 && (p.V * sizeof(T)) % 16 == 0 &&
               (((uintptr_t)p.v | (uintptr_t)p.g | (uintptr_t)p.dy) & 15) == 0;
  return s;
}

// Pieces of PW columns of v, g and dy (len steps, Vb columns), a thread per piece; see stage()
// for what goes into gf and dyf.
template <typename T, int PW>
__device__ void stage_columns(const Src<T> &src, bool gate, int len, int Vb, float *vf, float *gf,
                              float *dyf) {
  const int per_row = Vb / PW;
  for (int e = threadIdx.x; e < len * per_row; e += blockDim.x) {
    const int u = e / per_row, jj = (e - u * per_row) * PW;
    const int64_t at = u * src.col_step + jj;
    float v[PW], g[PW], d[PW];
    load_piece<T, PW>(src.v + at, v);
    if (gate) load_piece<T, PW>(src.g + at, g);
    if (dyf) load_piece<T, PW>(src.dy + at, d);
    float *vo = vf + u * Vb + jj, *go = gf + u * Vb + jj, *dyo = dyf + u * Vb + jj;
#pragma unroll
    for (int w = 0; w < PW; w++) {
      vo[w] = v[w];
      const float x = gate ? g[w] : 0.f, sg = sigmoidf_(x), silu = x * sg;
      if (!dyf) {
        if (gate) go[w] = silu;
        continue;
      }
      dyo[w] = gate ? d[w] * silu : d[w];
      if (gate) go[w] = d[w] * fmaf(silu, 1.f - sg, sg);
    }
  }
}

// The rows of q, k and the columns of v, g, dy of len steps from src (see stage()); no barrier.
template <typename T, int N>
__device__ void stage_from(const Src<T> &src, bool l2, bool gate, int len, int Vb, float *qf,
                           float *kf, float *qn, float *kn, float *vf, float *gf, float *dyf) {
  constexpr int W = 16 / sizeof(T);  // elements in 16 bytes
  static_assert(N % W == 0, "a row of q or k is whole 16-byte pieces");
  for (int r = threadIdx.x; r < 2 * len; r += blockDim.x) {
    const bool isk = r < len;
    const int u = isk ? r : r - len;
    const T *row = (isk ? src.k : src.q) + u * src.qk_step;
    float *dst = (isk ? kf : qf) + u * N, *norm = isk ? (kn ? kn + u : nullptr) : (qn ? qn + u : nullptr);
    if (src.rows_vec) stage_row<T, N, W>(row, dst, l2, norm);
    else stage_row<T, N, 1>(row, dst, l2, norm);
  }
  if (src.cols_vec) stage_columns<T, W>(src, gate, len, Vb, vf, gf, dyf);
  else stage_columns<T, 1>(src, gate, len, Vb, vf, gf, dyf);
}

// Stages steps t0 .. t0+len-1 of (b, h): q, k into qf, kf [len][N] (normalized when l2, with the
// norms into qn, kn when given), columns col0 .. col0+Vb-1 of v into vf [len][Vb], decay into df
// [len], and per element of g and dy [len][Vb]: for the forward gf = silu(g); for the backward
// (dyf given) the gate's factors dyf = dy * silu(g) (the gradient reaching o; dy without a gate)
// and gf = dy * silu'(g) (times o it is dg), so that the walk back computes no sigmoid. A thread
// per row of q or k and per 16 bytes of v, g, dy (element by element where the pointers or the
// row length are not 16-byte aligned). Ends with a barrier.
template <typename T, int N>
__device__ void stage(const Params &p, int b, int h, int t0, int len, int col0, int Vb,
                      float *qf, float *kf, float *qn, float *kn, float *vf, float *gf,
                      float *dyf, float *df) {
  const int64_t row0 = row_of(p, b, t0, h);  // the row of step t0 + u is row0 + u * H
  stage_from<T, N>(global_src<T, N>(p, row0, col0, Vb), p.l2, p.gate, len, Vb, qf, kf, qn, kn, vf, gf,
                   dyf);
  const T *dec = (const T *)p.decay;
  for (int u = threadIdx.x; u < len; u += blockDim.x) df[u] = load(dec + row0 + (int64_t)u * p.H);
  __syncthreads();
}

// ---- the backward's prefetch: the next segment's inputs copied raw into shared memory ----

__device__ __forceinline__ void cp_async16(void *dst, const void *src) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
}

// A segment's raw inputs in shared memory: q, k [C][N], v, g, dy [C][V] in T.
template <typename T> struct Raw {
  T *q, *k, *v, *g, *dy;
};

// Starts copying len steps from row0 into raw, 16 bytes a copy (the launcher checked that every
// piece is 16-byte aligned: prefetchable). cp_async_wait() completes it.
template <typename T, int N>
__device__ void fetch_async(const Params &p, int64_t row0, int len, const Raw<T> &raw) {
  constexpr int W = 16 / sizeof(T), RP = N / W;  // elements a piece, pieces a row
  for (int e = threadIdx.x; e < 2 * len * RP; e += blockDim.x) {
    const int r = e / RP, x = (e - r * RP) * W;
    const bool isk = r < len;
    const int u = isk ? r : r - len;
    cp_async16((isk ? raw.k : raw.q) + u * N + x,
               (const T *)(isk ? p.k : p.q) + (row0 + (int64_t)u * p.H) * N + x);
  }
  const int V = p.V, per_row = V / W;
  for (int e = threadIdx.x; e < len * per_row; e += blockDim.x) {
    const int u = e / per_row, jj = (e - u * per_row) * W;
    const int64_t at = (row0 + (int64_t)u * p.H) * V + jj;
    cp_async16(raw.v + u * V + jj, (const T *)p.v + at);
    if (p.gate) cp_async16(raw.g + u * V + jj, (const T *)p.g + at);
    cp_async16(raw.dy + u * V + jj, (const T *)p.dy + at);
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
}

__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_all;" ::: "memory"); }

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

// The forward and backward launchers (e88_fwd.cu, e88_bwd.cu); p carries the shape and tensors.
int launch_forward(eng_dtype_t dt, int n, const Params &p, cudaStream_t st);
int launch_backward(eng_dtype_t dt, int n, const Params &p, cudaStream_t st);

}  // namespace eng_e88
#endif
