// E88 backward: see e88_common.cuh for the shared parts and e88.cu for the design.
#include "cuda/e88_common.cuh"

namespace eng_e88 {
namespace {

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


// Whether the backward's fetch_async can copy the inputs: every row and column piece 16-byte
// aligned, and a segment's decay one register a thread.
template <typename T> bool prefetchable(const Params &p, int nthreads) {
  const uintptr_t ptrs = (uintptr_t)p.q | (uintptr_t)p.k | (uintptr_t)p.v | (uintptr_t)p.g |
                         (uintptr_t)p.dy;
  return (p.V * sizeof(T)) % 16 == 0 && nthreads >= p.C && (ptrs & 15) == 0;
}

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
}  // namespace

int launch_backward(eng_dtype_t dt, int n, const Params &p, cudaStream_t st) {
  E88_DISPATCH(dt, n, return launch_backward<T, N>(p, st));
}

}  // namespace eng_e88
