// E88 forward and backward. The recurrence is a chain of T dependent steps per (b, h), but its
// columns are independent chains: column j of S only needs k^, q^, decay and v_j, g_j. Each
// column is owned by P = n/8 lanes of one warp, each holding 8 rows of it in registers; a warp
// holds CW = 32/P columns. The column dot products S^T k^ and S^T q^ are 8 FMAs and log2(P)
// shuffles, with no block barrier inside the chain. The forward runs a (b, h) as one or two
// blocks (half the columns each, to even out the SMs' loads); the inputs of a chunk of steps are
// staged in shared memory (k^ and q^ normalized once per step, silu(g) once) between barriers,
// and the other resident blocks hide each one's staging.
//
// The backward replays each checkpointed segment from its checkpoint, keeping the states of up
// to Lb steps in shared memory (each thread its own 8 values), then walks them backward with dS
// in registers; the next segment's inputs arrive meanwhile (cp.async, fetch_async). The gradients that sum over columns (dq^, dk^, ddecay) are reduce-scattered
// within the warp and summed across warps at the end of each chunk, where the normalization's
// backward turns dq^, dk^ into dq, dk.
#include <type_traits>

#include "cuda/common.cuh"
#include "cuda/e88.h"

namespace {

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

// ---------------- forward ----------------

// CPT columns a thread: the k^ and q^ a step loads from shared memory serve all of them. The
// forward is bound by its instructions a warp-step, each paying its latency (~2.5 warps a
// scheduler at the layer's shape: docs/PERF.md, E88).
template <typename T, int N, int CPT>
__global__ void e88_forward_kernel(Params p) {
  constexpr bool FAST = !std::is_same<T, float>::value;
  const Place<N, CPT> pl(p.H, p.splits);
  const int V = p.V, L = p.L, Vb = pl.Vb, ns = pl.nslot;
  extern __shared__ float4 smem4[];
  float *kf = reinterpret_cast<float *>(smem4), *qf = kf + L * N, *vf = qf + L * N,
        *gf = vf + L * Vb, *df = gf + L * Vb;
  const int64_t sbase = (int64_t)pl.bh * N * V + (int64_t)pl.i0 * V + pl.j;
  // y of the thread's first column at the current step (row group 0 stores it from the loop)
  T *yp = (T *)p.y + row_of(p, pl.b, 0, pl.h) * V + pl.j;
  const int64_t ystep = (int64_t)p.H * V;
  float s[CPT][R];
#pragma unroll
  for (int c = 0; c < CPT; c++)
#pragma unroll
    for (int r = 0; r < R; r++) s[c][r] = p.S0 ? p.S0[sbase + c * ns + (int64_t)r * V] : 0.f;

  // the next checkpoint: its step and where it goes (a counter, not t % C: that is a division)
  int next_ck = 0;
  float *ck = p.ckpt ? p.ckpt + (int64_t)pl.bh * p.nck * N * V + (int64_t)pl.i0 * V + pl.j : nullptr;
  for (int t0 = 0; t0 < p.T; t0 += L) {
    const int len = min(L, p.T - t0);
    stage<T, N>(p, pl.b, pl.h, t0, len, pl.col0, Vb, qf, kf, nullptr, nullptr, vf, gf, nullptr, df);
    for (int u = 0; u < len; u++) {
      if (ck && t0 + u == next_ck) {
#pragma unroll
        for (int c = 0; c < CPT; c++)
#pragma unroll
          for (int r = 0; r < R; r++) ck[c * ns + (int64_t)r * V] = s[c][r];
        ck += (int64_t)N * V;
        next_ck += p.C;
      }
      float kh[R], qh[R], x[CPT];
      load8(kf + u * N + pl.i0, kh);
      load8(qf + u * N + pl.i0, qh);
#pragma unroll
      for (int c = 0; c < CPT; c++) x[c] = dot8(s[c], kh);
      column_sums<N, CPT>(x);
      const float dec = df[u];
#pragma unroll
      for (int c = 0; c < CPT; c++) {
        const float delta = vf[u * Vb + pl.jl + c * ns] - x[c];
#pragma unroll
        for (int r = 0; r < R; r++) s[c][r] = act<FAST>(fmaf(kh[r], delta, dec * s[c][r]), p.lin);
      }
#pragma unroll
      for (int c = 0; c < CPT; c++) x[c] = dot8(s[c], qh);
      column_sums<N, CPT>(x);
      if (pl.rg == 0) {
#pragma unroll
        for (int c = 0; c < CPT; c++) {
          const int at = u * Vb + pl.jl + c * ns;
          store(yp + c * ns, p.gate ? x[c] * gf[at] : x[c]);
        }
      }
      yp += ystep;
    }
    __syncthreads();  // every warp done with the chunk's staged inputs
  }
  if (p.S_T) {
#pragma unroll
    for (int c = 0; c < CPT; c++)
#pragma unroll
      for (int r = 0; r < R; r++) p.S_T[sbase + c * ns + (int64_t)r * V] = s[c][r];
  }
}

// ---------------- backward ----------------

// Reduce-scatter of 16 values over the CW lanes of a row group: afterwards lane c holds in
// a[0 .. 16/CW) the sums of values c*16/CW ... One level per template instance, so every index
// into a[] is a compile-time constant (as a runtime loop, nvcc kept a[] in registers picked by
// predicated moves: a third of the backward's instructions).
template <int M, int HALF> __device__ __forceinline__ void reduce_scatter_level(float (&a)[2 * R], int lane) {
  const bool upper = (lane & M) != 0;
#pragma unroll
  for (int x = 0; x < HALF; x++) {
    const float send = upper ? a[x] : a[x + HALF], keep = upper ? a[x + HALF] : a[x];
    a[x] = keep + __shfl_xor_sync(kFull, send, M);
  }
  if constexpr (M > 1) reduce_scatter_level<M / 2, HALF / 2>(a, lane);
}

template <int N> __device__ __forceinline__ void reduce_scatter(float (&a)[2 * R], int lane) {
  constexpr int CW = Geo<N>::CW;
  if constexpr (CW > 1) reduce_scatter_level<CW / 2, R>(a, lane);
}

// The backward's shared memory, in floats, for chunks of Lb steps and segments of C.
struct BwdLayout {
  int states, kf, qf, vf, gf, dyf, df, kn, qn, dl, of, red, rdd, raw, total;
  __host__ __device__ BwdLayout(int N, int V, int C, int Lb, int nthreads) {
    const int nwarps = nthreads / 32;
    states = 0;
    kf = states + Lb * nthreads * R;
    qf = kf + C * N;
    vf = qf + C * N;
    gf = vf + C * V;
    dyf = gf + C * V;
    dl = dyf + C * V;
    of = dl + Lb * V;
    red = of + Lb * V;
    rdd = red + nwarps * Lb * 2 * N;
    df = rdd + nwarps * Lb;
    kn = df + C;
    qn = kn + C;
    raw = (qn + C + 3) & ~3;
    total = raw;
  }
  // With prefetch, the raw copy of a segment (Raw: q, k [C][N], v, g, dy [C][V] of T) follows.
  __host__ __device__ size_t bytes(bool prefetch, int N, int V, int C, size_t tsize) const {
    return sizeof(float) * (size_t)total + (prefetch ? tsize * (size_t)C * (2 * N + 3 * V) : 0);
  }
};

template <typename T, int N>
__global__ void __launch_bounds__(kMaxThreads) e88_backward_kernel(Params p) {
  constexpr bool FAST = !std::is_same<T, float>::value;
  constexpr int CW = Geo<N>::CW, PER = 2 * R / CW;  // reduce-scatter values per lane
  const Place<N> pl(p.H, 1);
  const int V = p.V, C = p.C, Lb = p.L;
  extern __shared__ float4 smem4[];
  float *sm = reinterpret_cast<float *>(smem4);
  const BwdLayout lay(N, V, C, Lb, blockDim.x);
  float *states = sm + lay.states, *kf = sm + lay.kf, *qf = sm + lay.qf, *vf = sm + lay.vf,
        *gf = sm + lay.gf, *dyf = sm + lay.dyf, *df = sm + lay.df, *kn = sm + lay.kn,
        *qn = sm + lay.qn, *dl = sm + lay.dl, *of = sm + lay.of, *red = sm + lay.red,
        *rdd = sm + lay.rdd;
  const int64_t sbase = (int64_t)pl.bh * N * V + (int64_t)pl.i0 * V + pl.j;
  T *dq = (T *)p.dq, *dk = (T *)p.dk, *dv = (T *)p.dv, *ddecay = (T *)p.ddecay, *dg = (T *)p.dg;

  float dS[R];
#pragma unroll
  for (int r = 0; r < R; r++) dS[r] = p.dS_T ? p.dS_T[sbase + (int64_t)r * V] : 0.f;
  // element (b, 0, h, j) of dv and dg, and the distance between steps
  const int64_t at0 = row_of(p, pl.b, 0, pl.h) * V + pl.j, step_elems = (int64_t)p.H * V;

  // With prefetch, segment seg - 1's inputs are copied raw into shared memory while segment seg
  // runs (its decay waits in a register), as in the forward.
  Raw<T> raw{};
  if (p.prefetch) {
    raw.q = reinterpret_cast<T *>(sm + lay.raw);
    raw.k = raw.q + C * N, raw.v = raw.k + C * N, raw.g = raw.v + C * V, raw.dy = raw.g + C * V;
  }
  const T *dec = (const T *)p.decay;
  const int64_t row_base = row_of(p, pl.b, 0, pl.h);  // step t is row row_base + t H
  T dnext{};
  auto prefetch = [&](int seg) {
    const int t0 = seg * C, len = min(C, p.T - t0);
    fetch_async<T, N>(p, row_base + (int64_t)t0 * p.H, len, raw);
    if (pl.tid < len) dnext = dec[row_base + (int64_t)(t0 + pl.tid) * p.H];
  };
  if (p.prefetch) prefetch(p.nck - 1);
  for (int seg = p.nck - 1; seg >= 0; seg--) {
    const int t0 = seg * C, t1 = min(t0 + C, p.T);
    if (p.prefetch) {
      cp_async_wait();
      __syncthreads();  // the copies landed; the previous segment is done with the staged inputs
      const Src<T> src{raw.q, raw.k, raw.v, raw.g, raw.dy, N, V, true, true};
      stage_from<T, N>(src, p.l2, p.gate, t1 - t0, V, qf, kf, qn, kn, vf, gf, dyf);
      if (pl.tid < t1 - t0) df[pl.tid] = load(&dnext);
      __syncthreads();
      if (seg > 0) prefetch(seg - 1);
    } else {
      __syncthreads();  // the previous segment is done with the staged inputs
      stage<T, N>(p, pl.b, pl.h, t0, t1 - t0, 0, V, qf, kf, qn, kn, vf, gf, dyf, df);
    }
    for (int c1 = t1; c1 > t0; c1 -= Lb) {
      const int c0 = max(t0, c1 - Lb);
      // replay t0 .. c1-1 from the checkpoint, keeping the states of c0 .. c1-1
      float s[R], prev[R];
      const float *ck = p.ckpt_in + ((int64_t)pl.bh * p.nck + seg) * N * V + (int64_t)pl.i0 * V + pl.j;
#pragma unroll
      for (int r = 0; r < R; r++) prev[r] = s[r] = ck[(int64_t)r * V];
      for (int t = t0; t < c1; t++) {
        const int us = t - t0;
        float kh[R];
        load8(kf + us * N + pl.i0, kh);
        const float delta = vf[us * V + pl.j] - column_sum<N>(dot8(s, kh)), dec = df[us];
#pragma unroll
        for (int r = 0; r < R; r++) s[r] = act<FAST>(fmaf(kh[r], delta, dec * s[r]), p.lin);
        if (t == c0 - 1) {
#pragma unroll
          for (int r = 0; r < R; r++) prev[r] = s[r];
        }
        if (t >= c0) {
          const int u = t - c0;
          store_state(states, u, s);
          float o = 0.f;
          if (p.gate) {
            float qh[R];
            load8(qf + us * N + pl.i0, qh);
            o = column_sum<N>(dot8(s, qh));
          }
          if (pl.rg == 0) {
            dl[u * V + pl.j] = delta;
            of[u * V + pl.j] = o;
          }
        }
      }
      __syncwarp();
      // walk c1-1 .. c0 backward; element (b, t, h, j) of dv and dg is at at_t
      int64_t at_t = at0 + (int64_t)(c1 - 1) * step_elems;
      float sn[R];  // the state after step t: the previous iteration's sp
      load_state(states, c1 - 1 - c0, sn);
      for (int t = c1 - 1; t >= c0; t--) {
        const int u = t - c0, us = t - t0;
        float sp[R], kh[R], qh[R], a[2 * R];
        if (u > 0) {
          load_state(states, u - 1, sp);
        } else {
#pragma unroll
          for (int r = 0; r < R; r++) sp[r] = prev[r];
        }
        load8(kf + us * N + pl.i0, kh);
        load8(qf + us * N + pl.i0, qh);
        const float dov = dyf[us * V + pl.j], delta = dl[u * V + pl.j], dec = df[us];
        const float dgj = p.gate ? gf[us * V + pl.j] * of[u * V + pl.j] : 0.f;
        float dP[R];
#pragma unroll
        for (int r = 0; r < R; r++) {
          dS[r] = fmaf(qh[r], dov, dS[r]);
          a[r] = sn[r] * dov;  // dq^ partial
          dP[r] = p.lin ? dS[r] : dS[r] * fmaf(-sn[r], sn[r], 1.f);
        }
        const float ddl = column_sum<N>(dot8(dP, kh));
        const float ddec_part = dot8(dP, sp);
#pragma unroll
        for (int r = 0; r < R; r++) {
          a[R + r] = fmaf(dP[r], delta, -sp[r] * ddl);  // dk^ partial
          dS[r] = fmaf(dec, dP[r], -kh[r] * ddl);
        }
        if (pl.rg == 0) {
          store(dv + at_t, ddl);
          if (p.gate) store(dg + at_t, dgj);
        }
        at_t -= step_elems;
        reduce_scatter<N>(a, pl.lane);
        const int c = pl.lane % CW;
        float *rw = red + ((pl.warp * Lb + u) * 2) * N;
#pragma unroll
        for (int x = 0; x < PER; x++) {
          const int idx = c * PER + x, kind = idx / R;  // 0: dq^, 1: dk^
          rw[kind * N + pl.i0 + idx % R] = a[x];
        }
        const float dd = warp_sum(ddec_part);
        if (pl.lane == 0) rdd[pl.warp * Lb + u] = dd;
#pragma unroll
        for (int r = 0; r < R; r++) sn[r] = sp[r];
      }
      __syncthreads();
      // the chunk's dq, dk rows (one warp a row) and ddecay
      const int len = c1 - c0;
      for (int rr = pl.warp; rr < 2 * len; rr += pl.nwarps) {
        const int kind = rr / len, u = rr - kind * len, us = c0 + u - t0;
        const float *xh = (kind == 0 ? qf : kf) + us * N;
        float g0 = 0.f, g1 = 0.f;
        for (int w = 0; w < pl.nwarps; w++) {
          const float *rw = red + ((w * Lb + u) * 2 + kind) * N;
          if (pl.lane < N) g0 += rw[pl.lane];
          if (pl.lane + 32 < N) g1 += rw[pl.lane + 32];
        }
        if (p.l2) {
          const float x0 = pl.lane < N ? xh[pl.lane] : 0.f, x1 = pl.lane + 32 < N ? xh[pl.lane + 32] : 0.f;
          const float dot = warp_sum(x0 * g0 + x1 * g1), a = (kind == 0 ? qn : kn)[us],
                      d = a + kEps, coef = a > 0.f ? dot * d / a : 0.f, inv_d = 1.f / d;
          g0 = (g0 - x0 * coef) * inv_d;
          g1 = (g1 - x1 * coef) * inv_d;
        }
        T *out = (kind == 0 ? dq : dk) + row_of(p, pl.b, c0 + u, pl.h) * N;
        if (pl.lane < N) store(out + pl.lane, g0);
        if (pl.lane + 32 < N) store(out + pl.lane + 32, g1);
      }
      for (int u = pl.tid; u < len; u += blockDim.x) {
        float sum = 0.f;
        for (int w = 0; w < pl.nwarps; w++) sum += rdd[w * Lb + u];
        store(ddecay + row_of(p, pl.b, c0 + u, pl.h), sum);
      }
      __syncthreads();  // red, rdd, dl, of are rewritten by the next chunk
    }
  }
  if (p.dS0) {
#pragma unroll
    for (int r = 0; r < R; r++) p.dS0[sbase + (int64_t)r * V] = dS[r];
  }
}

// ---------------- launchers ----------------

bool n_supported(int64_t n) { return n == 16 || n == 32 || n == 64; }

// The forward's chunk length. Long chunks amortize the staging's barriers, but the grid's blocks
// (latency-bound chains) should all be resident at once where they can be: a second wave of a few
// blocks runs nearly alone after the first (the layer's 1328 blocks at 10 an SM instead of 11:
// 598 against 381 us). So the longest chunk, up to kFwdMaxChunk and within kFwdSmem, whose shared
// memory lets ceil(blocks / SMs) blocks (as far as registers and threads allow) share an SM, and
// at least kFwdMinChunk.
int forward_chunk(const void *kernel, size_t per_step, int64_t blocks, int nthreads) {
  int L = (int)(kFwdSmem / per_step);
  L = L > kFwdMaxChunk ? kFwdMaxChunk : L < 1 ? 1 : L;
  int dev = 0, sms = 0, per_sm = 0, reserved = 0, most = 0;
  if (cudaGetDevice(&dev) || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) ||
      cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev) ||
      cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, dev) ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&most, kernel, nthreads, 0) || sms < 1 ||
      most < 1) {
    cudaGetLastError();
    return L;
  }
  int64_t want = (blocks + sms - 1) / sms;
  want = want > most ? most : want;
  const int64_t fit = ((int64_t)per_sm / want - reserved - 16) / (int64_t)per_step;  // 16: alignment
  if (fit < L) L = fit > kFwdMinChunk ? (int)fit : kFwdMinChunk;
  return L;
}

// Whether the backward's fetch_async can copy the inputs: every row and column piece 16-byte
// aligned, and a segment's decay one register a thread.
template <typename T> bool prefetchable(const Params &p, int nthreads) {
  const uintptr_t ptrs = (uintptr_t)p.q | (uintptr_t)p.k | (uintptr_t)p.v | (uintptr_t)p.g |
                         (uintptr_t)p.dy;
  return (p.V * sizeof(T)) % 16 == 0 && nthreads >= p.C && (ptrs & 15) == 0;
}

template <typename T, int N, int CPT> int launch_forward_cols(const Params &p0, cudaStream_t st) {
  Params p = p0;
  // Two blocks per (b, h) where the columns split evenly: with 5.03 heads per SM at the layer's
  // shape, half-heads even out the SMs' loads (91% against 84% for whole heads).
  constexpr int CW = Geo<N>::CW;
  p.splits = p.V % (2 * CW * CPT) == 0 ? 2 : 1;
  const int Vb = p.V / p.splits, nthreads = Vb * N / (R * CPT);
  const size_t per_step = sizeof(float) * (size_t)(2 * N + 2 * Vb + 1);
  const int64_t blocks = (int64_t)p.B * p.H * p.splits;
  int L = forward_chunk(reinterpret_cast<const void *>(e88_forward_kernel<T, N, CPT>), per_step,
                        blocks, nthreads);
  if (p.T > 0 && L > p.T) L = p.T;
  p.L = L;
  const size_t smem = per_step * (size_t)L;
  e88_forward_kernel<T, N, CPT><<<(unsigned)blocks, nthreads, smem, st>>>(p);
  return (int)cudaGetLastError();
}

// Two columns a thread where a warp's rows and columns allow it.
template <typename T, int N> int launch_forward(const Params &p, cudaStream_t st) {
  if (p.V % (2 * Geo<N>::CW) == 0) return launch_forward_cols<T, N, 2>(p, st);
  return launch_forward_cols<T, N, 1>(p, st);
}

// The backward's shared memory a block, which sets the replay chunk Lb (a longer chunk replays
// fewer steps). It must not hold an SM to fewer blocks than the registers allow, up to 3: at the
// layer's shape 4 blocks of Lb=8 and 3 of Lb=12 run alike and 2 of Lb=16 26% slower. Where the
// registers allow only one or two blocks (n=64: 512 threads), the chunk takes what they leave
// (n=64 measured 4439 us at Lb=2 and 3772 at Lb=3). *limit: the most a block may opt into.
template <typename T, int N> size_t bwd_smem_budget(int nthreads, size_t *limit) {
  static int regs = -1;  // the kernel's registers a thread, asked once
  if (regs < 0) {
    cudaFuncAttributes a{};
    regs = cudaFuncGetAttributes(&a, e88_backward_kernel<T, N>) ? 0 : a.numRegs;
  }
  int dev = 0, per_sm = 0, regs_sm = 0, optin = 0;
  if (!regs || cudaGetDevice(&dev) ||
      cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev) ||
      cudaDeviceGetAttribute(&regs_sm, cudaDevAttrMaxRegistersPerMultiprocessor, dev) ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev)) {
    cudaGetLastError();
    *limit = kMaxSmem;
    return kBwdSmem;
  }
  int blocks = regs_sm / (((regs + 7) / 8) * 8 * nthreads);  // registers go by 8 a thread
  blocks = blocks < 1 ? 1 : blocks > 3 ? 3 : blocks;
  const size_t budget = (size_t)per_sm / blocks - 1024;  // 1 KB a block is the system's
  *limit = (size_t)optin;
  return budget < *limit ? budget : *limit;
}

template <typename T, int N> int launch_backward(const Params &p0, cudaStream_t st) {
  Params p = p0;
  const int nthreads = p.V * N / R;
  p.prefetch = prefetchable<T>(p, nthreads);
  auto bytes = [&](int Lb) {
    return BwdLayout(N, p.V, p.C, Lb, nthreads).bytes(p.prefetch, N, p.V, p.C, sizeof(T));
  };
  size_t limit = 0;
  const size_t budget = bwd_smem_budget<T, N>(nthreads, &limit);
  int Lb = p.C;
  while (Lb > 1 && bytes(Lb) > budget) Lb--;
  if (bytes(Lb) > limit) return (int)cudaErrorInvalidConfiguration;
  p.L = Lb;
  const size_t smem = bytes(Lb);
  cudaError_t e = cudaFuncSetAttribute(e88_backward_kernel<T, N>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (e != cudaSuccess) return (int)e;
  e88_backward_kernel<T, N><<<p.B * p.H, nthreads, smem, st>>>(p);
  return (int)cudaGetLastError();
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

Params params_of(const eng_e88_shape_t *s) {
  Params p = {};
  p.B = (int)s->B, p.T = (int)s->T, p.H = (int)s->H, p.V = (int)s->v, p.C = (int)s->ckpt_every;
  p.nck = (int)eng_e88_n_ckpt(s->T, s->ckpt_every);
  p.l2 = s->l2 != 0, p.lin = s->linear_state != 0;
  return p;
}

}  // namespace

extern "C" int eng_kcuda_e88_supported(const eng_e88_shape_t *s, int backward, const char **why) {
  const char *no = NULL;
  if (!n_supported(s->n)) no = "n_state must be 16, 32 or 64";
  else if (s->v % (256 / s->n) != 0) no = "head_v_dim must be a multiple of 256/n_state";
  else if (s->n * s->v > 8 * kMaxThreads) no = "n_state * head_v_dim must be at most 4096";
  else if (s->B * s->H > 0x3fffffff || s->T > 0x7fffffff) no = "B*H must be below 2^30 and T below 2^31";
  else if (backward && s->ckpt_every > kBwdMaxSeg) no = "ckpt_every must be at most 64";
  if (why) *why = no;
  return no == NULL;
}

extern "C" int eng_kcuda_e88_forward(eng_dtype_t dt, const eng_e88_shape_t *s, const void *q,
                                     const void *k, const void *v, const void *decay,
                                     const void *g, const float *S0, void *y, float *S_T,
                                     float *ckpt, cudaStream_t stream) {
  if (!eng_kcuda_e88_supported(s, 0, NULL)) return (int)cudaErrorInvalidValue;
  if (s->B * s->H == 0) return 0;
  Params p = params_of(s);
  p.q = q, p.k = k, p.v = v, p.decay = decay, p.g = g, p.S0 = S0, p.y = y, p.S_T = S_T,
  p.ckpt = ckpt, p.gate = g != NULL;
  E88_DISPATCH(dt, s->n, return launch_forward<T, N>(p, stream));
}

extern "C" int eng_kcuda_e88_backward(eng_dtype_t dt, const eng_e88_shape_t *s, const void *q,
                                      const void *k, const void *v, const void *decay,
                                      const void *g, const float *ckpt, const void *dy,
                                      const float *dS_T, void *dq, void *dk, void *dv,
                                      void *ddecay, void *dg, float *dS0, cudaStream_t stream) {
  if (!eng_kcuda_e88_supported(s, 1, NULL)) return (int)cudaErrorInvalidValue;
  if (s->B * s->H == 0) return 0;
  Params p = params_of(s);
  p.q = q, p.k = k, p.v = v, p.decay = decay, p.g = g, p.dy = dy, p.ckpt_in = ckpt,
  p.dS_T = dS_T, p.dq = dq, p.dk = dk, p.dv = dv, p.ddecay = ddecay, p.dg = dg, p.dS0 = dS0,
  p.gate = g != NULL;
  E88_DISPATCH(dt, s->n, return launch_backward<T, N>(p, stream));
}
