// E88 forward: see e88_common.cuh for the shared parts and e88.cu for the design.
#include "cuda/e88_common.cuh"

namespace eng_e88 {
namespace {

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

}  // namespace

int launch_forward(eng_dtype_t dt, int n, const Params &p, cudaStream_t st) {
  E88_DISPATCH(dt, n, return launch_forward<T, N>(p, st));
}

}  // namespace eng_e88
