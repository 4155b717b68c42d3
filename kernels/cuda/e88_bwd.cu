// E88 backward: see e88_common.cuh for the shared parts and e88.cu for the design.
//
// Layout: a lane holds RL rows of one column (P = N/RL lanes a column, CW = 32/P columns a
// warp), so the walk's column sum dP^T k^ is RL FMAs and log2(P) shuffles; the replay, given the
// forward's delta, is elementwise. A block is one (b, h): ceil(V/CW) warps; the lanes of columns
// j >= V compute with zero inputs and store nothing. The row sums (dq^, dk^), which nothing in the
// chain waits for, are reduce-scatters by shuffles (row_scatter) into a per-chunk accumulator:
// dq^'s in the replay, which has the time (its chains are independent), dk^'s in the walk. (A
// transpose through shared memory did the same with twice the shared-memory wavefronts: that pipe
// bounds this kernel; docs/PERF.md, session 20.)
// Measured and dropped (docs/PERF.md, session 14): 8 rows a lane at n = 32 (4 warps a head: +25%
// instructions, and the larger buffers cost the sixth block an SM); dq^ on tensor cores after the
// replay (a step's B fragments, scales and stores cost what the walk's transpose round saved).
#include "cuda/e88_common.cuh"

namespace eng_e88 {
namespace {

constexpr int kBwdMinChunk = 8;  // the shortest replay chunk the occupancy rule may pick
// A staged segment holds the inputs of about this many steps (whole checkpoint intervals): its
// l2 norms, copies and barriers are paid once a segment, however short the intervals.
constexpr int kBwdStage = 16;

// The floats a row of kq or acc takes: 2N and 4 of padding, so that the chunk end's and the l2
// norms' 16-byte accesses to neighbouring rows (N/8 lanes a row) fall in different banks.
__host__ __device__ constexpr int row_floats(int N) { return 2 * N + 4; }

template <int N> struct BGeo : Lay<N> {
  using Lay<N>::RL, Lay<N>::P, Lay<N>::CW;
  static constexpr int MAXT = N == 16 ? 512 : 256;  // n*v <= 4096
  // 6 blocks of 64 threads an SM at n = 32 (the layer's 664 heads on 132 SMs at once)
  static constexpr int MAXREG = N == 16 ? 128 : 168;
  static constexpr int RW = row_floats(N);
};

constexpr int log2c(int x) { return x > 1 ? 1 + log2c(x / 2) : 0; }

// The row sums of a row group: its CW lanes (one column each) hold RL partial rows, and
// row_scatter sums each row over the lanes by a reduce-scatter of log2(CW) shuffle steps, each
// halving a lane's slots (RL/CW rows end in a lane where RL >= CW, else one row in CW/RL lanes).
// A step keeps the lane's first half of its slots and adds the partner's second half, which
// must hold the same rows: so slot r of a lane holds row r ^ (4 piece_xor(lane)), the lane's
// bits permuting its 16-byte pieces (where its rows load as whole pieces, load_rows). The steps
// past the piece bits select instead (rows within a piece keep their order).
template <int RL, int CW> struct Scatter {
  static constexpr int L = log2c(CW), SB = log2c(RL), PB = SB - 2;  // lane, slot and piece bits
  static_assert(PB >= 1 && PB <= L, "RL of 8 or 16, CW of 8 or 16");
  // piece bit PB-1-k is flipped by lane bit L-1-k (the lane bit of step k)
  __device__ static int piece_xor(int lane) {
    int x = 0;
#pragma unroll
    for (int k = 0; k < PB; k++) x |= ((lane >> (L - 1 - k)) & 1) << (PB - 1 - k);
    return x;
  }
  // The first of the lane's rows (within the row group) and how many: its lane bits, read from
  // the top, are the row's bits from the top.
  static constexpr int F = RL >= CW ? RL / CW : 1;
  __device__ static int first_row(int lane) {
    const int c = lane % CW;
    return L <= SB ? c << (SB - L) : c >> (L - SB);
  }
};

// Step K of row_scatter on the lane's slots v (2 half of them live): the piece steps keep the
// first half (the partner's second half holds the same rows); the rest are scatter_halves'.
template <int RL, int CW, int K>
__device__ __forceinline__ void scatter_step(float (&v)[RL], int lane) {
  using Sc = Scatter<RL, CW>;
  constexpr int off = CW >> (K + 1), half = (RL >> K) / 2;
  if constexpr (K < Sc::PB) {
#pragma unroll
    for (int r = 0; r < half; r++) v[r] += __shfl_xor_sync(kFull, v[r + half], off);
    scatter_step<RL, CW, K + 1>(v, lane);
  } else {
    scatter_halves<2 * half, off>(v, lane);
  }
}

template <int RL, int CW>
__device__ __forceinline__ void row_scatter(const float (&part)[RL], int lane, float *row) {
  using Sc = Scatter<RL, CW>;
  float v[RL];
#pragma unroll
  for (int r = 0; r < RL; r++) v[r] = part[r];
  scatter_step<RL, CW, 0>(v, lane);
  float *out = row + Sc::first_row(lane);
  if constexpr (Sc::F == 2) *reinterpret_cast<float2 *>(out) = make_float2(v[0], v[1]);
  else *out = v[0];
}

// The backward's shared memory, in bytes (each part 16-byte aligned): the chunk's states but its
// last (Lb-1 steps of RL values a thread, SH each), k^ and q^ of the staged segment of S steps
// ([S][RW] f32, RW = row_floats(N): k^ then q^ of a step, then padding), the chunk's (delta, dL/do)
// per column [Lb][VW] float2 (the walk, once it has read a step's, writes the lanes' ddecay
// partials over it), each warp's sums over its columns of the chunk's dq^/dk^ rows [warps][Lb][RW]
// (shared-memory f32 atomics are compare-and-swap loops: the chunk's end sums the warps instead),
// decay [S], the l2 backward's factors of q and k ([2][S] float2), the segment's delta and o from
// the ckpt row ([S][V] f32 each; o only with the gate) and its raw inputs (q, k [S][N], g, dy
// [S][V] of T).
struct BwdLayout {
  size_t states, kq, cb, acc, df, nf, rdl, ro, rq, rk, rg, rdy, total;
  __host__ __device__ BwdLayout(int N, int RL, int V, int S, int Lb, int nthreads, size_t ssize,
                                size_t tsize, bool gate) {
    const int nwarps = nthreads / 32, VW = nwarps * (32 * RL / N);
    size_t at = 0;
    auto take = [&](size_t bytes) {
      const size_t here = at;
      at = (at + bytes + 15) & ~(size_t)15;
      return here;
    };
    states = take((size_t)(Lb - 1) * nthreads * RL * ssize);
    kq = take(sizeof(float) * S * row_floats(N));
    cb = take(sizeof(float2) * Lb * VW);
    acc = take(sizeof(float) * nwarps * Lb * row_floats(N));
    df = take(sizeof(float) * S);
    nf = take(sizeof(float2) * 2 * S);
    rdl = take(sizeof(float) * S * V);
    ro = take(gate ? sizeof(float) * S * V : 0);
    rq = take(tsize * S * N);
    rk = take(tsize * S * N);
    rg = take(gate ? tsize * S * V : 0);
    rdy = take(tsize * S * V);
    total = at;
  }
};

// A thread's RL state values of one step: U 16-byte pieces at p[0], p[stride], .. (consecutive
// threads on consecutive 16 bytes); f16 pairs packed by one cvt each.
template <typename SH, int RL>
__device__ __forceinline__ void put_state(uint4 *p, int stride, const float (&s)[RL]) {
  if constexpr (std::is_same<SH, __half>::value) {
#pragma unroll
    for (int c = 0; c < RL / 8; c++) {
      uint4 w;
      unsigned *e = reinterpret_cast<unsigned *>(&w);
#pragma unroll
      for (int x = 0; x < 4; x++) {
        const __half2 h = __floats2half2_rn(s[8 * c + 2 * x], s[8 * c + 2 * x + 1]);
        e[x] = *reinterpret_cast<const unsigned *>(&h);
      }
      p[c * stride] = w;
    }
  } else {
#pragma unroll
    for (int c = 0; c < RL / 4; c++)
      reinterpret_cast<float4 *>(p)[c * stride] =
          make_float4(s[4 * c], s[4 * c + 1], s[4 * c + 2], s[4 * c + 3]);
  }
}

template <typename SH, int RL>
__device__ __forceinline__ void get_state(const uint4 *p, int stride, float (&s)[RL]) {
  if constexpr (std::is_same<SH, __half>::value) {
#pragma unroll
    for (int c = 0; c < RL / 8; c++) {
      const uint4 w = p[c * stride];
      const unsigned *e = reinterpret_cast<const unsigned *>(&w);
#pragma unroll
      for (int x = 0; x < 4; x++) {
        const float2 f = __half22float2(*reinterpret_cast<const __half2 *>(e + x));
        s[8 * c + 2 * x] = f.x, s[8 * c + 2 * x + 1] = f.y;
      }
    }
  } else {
#pragma unroll
    for (int c = 0; c < RL / 4; c++) {
      const float4 f = reinterpret_cast<const float4 *>(p)[c * stride];
      s[4 * c] = f.x, s[4 * c + 1] = f.y, s[4 * c + 2] = f.z, s[4 * c + 3] = f.w;
    }
  }
}

// 8 consecutive values at out: 16-byte stores where out is aligned (as the tensors are), else
// element by element.
template <typename T> __device__ __forceinline__ void store8(T *out, const float (&x)[8]) {
  constexpr int NV = 8 * (int)sizeof(T) / 16;  // 16-byte pieces
  if ((reinterpret_cast<uintptr_t>(out) & 15) == 0) {
    uint4 w[NV];
    T *e = reinterpret_cast<T *>(w);
#pragma unroll
    for (int i = 0; i < 8; i++) store(e + i, x[i]);
    uint4 *o = reinterpret_cast<uint4 *>(out);
#pragma unroll
    for (int v = 0; v < NV; v++) o[v] = w[v];
  } else {
#pragma unroll
    for (int i = 0; i < 8; i++) store(out + i, x[i]);
  }
}

// Two consecutive elements as one access (p aligned to both of them).
template <typename T> struct alignas(2 * sizeof(T)) Pair { T a, b; };
template <typename T> __device__ __forceinline__ float2 load2(const T *p) {
  const Pair<T> x = *reinterpret_cast<const Pair<T> *>(p);
  return make_float2(load(&x.a), load(&x.b));
}
template <typename T> __device__ __forceinline__ void store2(T *p, float a, float b) {
  Pair<T> x;
  store(&x.a, a), store(&x.b, b);
  *reinterpret_cast<Pair<T> *>(p) = x;
}

// A segment's inputs in shared memory: delta, o (f32, from the ckpt row), q, k, g, dy (raw T).
template <typename T> struct SegBufs {
  float *dl, *o;
  T *q, *k, *g, *dy;
};

// Copies staged segment seg's inputs (steps seg S .. seg S + S - 1) into sb (cp.async, 16 bytes a
// copy, when the launcher found every piece aligned; else element by element) and its decay into
// registers d0, d1 (step tid and tid + nt: S <= 64 and nt >= 32). trace: the (b, h)'s ckpt row.
// V and nt: v and the block's threads, as the kernel has them (constants where it has v compiled
// in).
template <typename T, int N, bool GATE>
__device__ __forceinline__ void fetch_segment(const Params &p, int64_t row_base, const float *trace, int seg,
                                              const SegBufs<T> &sb, T &d0, T &d1, int V, int nt) {
  const int t0 = seg * p.S, len = min(p.S, p.T - t0), tid = threadIdx.x;
  const int64_t row0 = row_base + (int64_t)t0 * p.H, vstep = (int64_t)p.H * V;
  const float *dl = trace + delta_at(p, N) + (int64_t)t0 * V, *o = trace + o_at(p, N) + (int64_t)t0 * V;
  const T *q = (const T *)p.q + row0 * N, *k = (const T *)p.k + row0 * N,
          *g = GATE ? (const T *)p.g + row0 * V : nullptr, *dy = (const T *)p.dy + row0 * V,
          *dec = (const T *)p.decay;
  if (p.prefetch) {
    constexpr int W = 16 / sizeof(T), RP = N / W;  // elements a piece, pieces a row of q or k
    // delta and o: len * V contiguous floats each
    for (int e = 4 * tid; e < len * V; e += 4 * nt) {
      cp_async16(sb.dl + e, dl + e);
      if (GATE) cp_async16(sb.o + e, o + e);
    }
    // q and k: a thread keeps its piece of the row (nt is a multiple of RP)
    const int x = (tid % RP) * W;
    for (int u = tid / RP; u < len; u += nt / RP) {
      cp_async16(sb.q + u * N + x, q + u * (int64_t)p.H * N + x);
      cp_async16(sb.k + u * N + x, k + u * (int64_t)p.H * N + x);
    }
    for (Grid e(tid, V / W, nt); e.u < len; e.next()) {
      const int u = e.u, jj = e.j * W;
      if (GATE) cp_async16(sb.g + u * V + jj, g + u * vstep + jj);
      cp_async16(sb.dy + u * V + jj, dy + u * vstep + jj);
    }
    cp_async_commit();
  } else {
    for (int e = tid; e < len * V; e += nt) {
      sb.dl[e] = dl[e];
      if (GATE) sb.o[e] = o[e];
    }
    for (int e = tid; e < len * N; e += nt) {
      const int u = e / N, x = e - u * N;
      sb.q[e] = q[u * (int64_t)p.H * N + x];
      sb.k[e] = k[u * (int64_t)p.H * N + x];
    }
    for (int e = tid; e < len * V; e += nt) {
      const int u = e / V, jj = e - u * V;
      if (GATE) sb.g[e] = g[u * vstep + jj];
      sb.dy[e] = dy[u * vstep + jj];
    }
  }
  if (tid < len) d0 = dec[row0 + (int64_t)tid * p.H];
  if (tid + nt < len) d1 = dec[row0 + (int64_t)(tid + nt) * p.H];
}

// SH: how the replayed states are kept (f16 for 16-bit values and a tanh state: they lie in
// (-1, 1), where f16's 2^-12 absolute error is below the 2^-11 relative error of tanh.approx;
// f32 otherwise). LIN and GATE are p.lin and p.gate as constants: runtime flags cost branches
// (and predicated tanh) in every step. VC: v when it is compiled in (launch_backward_v), else 0: a
// known v turns the index arithmetic of the segment's and the chunk's staging, the checkpoint
// loads and the chunk's end into constants and immediate offsets.
template <typename T, typename SH, int N, bool LIN, bool GATE, int VC>
__global__ void __launch_bounds__(BGeo<N>::MAXT) __maxnreg__(BGeo<N>::MAXREG)
    e88_backward_kernel(Params p) {
  using G = BGeo<N>;
  constexpr int RL = G::RL, CW = G::CW, RW = G::RW;
  constexpr int U = RL * (int)sizeof(SH) / 16;  // 16-byte pieces of a thread's state
  constexpr bool FAST = !std::is_same<T, float>::value;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int V = VC ? VC : p.V, nt = VC ? (VC + CW - 1) / CW * 32 : blockDim.x;
  const int col = warp * CW + lane % CW, i0 = (lane / CW) * RL;
  // Slot r of a lane holds row i0 + (r ^ 4 rx) (Scatter: the row sums' reduce-scatter).
  const int rx = Scatter<RL, CW>::piece_xor(lane);
  auto row_at = [&](int r) { return r ^ (rx << 2); };
  const bool active = col < V, rg0 = lane < CW;  // rg0: the column's first lane (stores it)
  // The lane's ddecay slot (in floats) from its column's cb entry: the warp's 2 CW floats of a step
  // (n = 64: 16, so lane ^ 16 adds first).
  const int dslot = lane - 2 * (lane % CW);
  const int C = p.C, S = p.S, Lb = p.L, VW = (nt / 32) * CW, bh = blockIdx.x, b = bh / p.H,
            h = bh % p.H;
  extern __shared__ uint4 smem[];
  char *base = reinterpret_cast<char *>(smem);
  const BwdLayout lay(N, RL, V, S, Lb, nt, sizeof(SH), sizeof(T), GATE);
  uint4 *states = reinterpret_cast<uint4 *>(base + lay.states);
  float *kq = reinterpret_cast<float *>(base + lay.kq),
        *acc = reinterpret_cast<float *>(base + lay.acc), *df = reinterpret_cast<float *>(base + lay.df);
  float2 *nf = reinterpret_cast<float2 *>(base + lay.nf);  // q's steps, then k's
  float2 *cb = reinterpret_cast<float2 *>(base + lay.cb);
  const SegBufs<T> sb{reinterpret_cast<float *>(base + lay.rdl), reinterpret_cast<float *>(base + lay.ro),
                      reinterpret_cast<T *>(base + lay.rq), reinterpret_cast<T *>(base + lay.rk),
                      reinterpret_cast<T *>(base + lay.rg), reinterpret_cast<T *>(base + lay.rdy)};
  T *dq = (T *)p.dq, *dk = (T *)p.dk, *dv = (T *)p.dv, *ddecay = (T *)p.ddecay, *dg = (T *)p.dg;

  // One round: part summed over the CW lanes of each row group into the warp's row[i0 ..].
  auto row_sums = [&](const float (&part)[RL], float *row) { row_scatter<RL, CW>(part, lane, row + i0); };

  const int64_t sbase = (int64_t)bh * N * V + (int64_t)i0 * V + col;
  float dS[RL];
#pragma unroll
  for (int r = 0; r < RL; r++) dS[r] = p.dS_T && active ? p.dS_T[sbase + (int64_t)row_at(r) * V] : 0.f;

  const int64_t row_base = row_of(p, b, 0, h), vstep = (int64_t)p.H * V;  // step t: row_base + t H
  const float *trace = p.ckpt_in + (int64_t)bh * p.cklen;  // the checkpoints, delta, o
  T dn0{}, dn1{};
  // s: a chunk's replayed state, loaded with the segment's checkpoint ahead of the chunk (its
  // latency hidden by the staging or the previous chunk's end).
  float s[RL];
  // Inactive lanes replay column 0 (its checkpoint and delta): their dL/do is zero, so their dS and
  // every partial they add stay zero. (A select here would wait for the load at once.)
  auto load_ckpt = [&](int sg) {
    const float *ck = trace + (int64_t)sg * N * V + i0 * V + (active ? col : 0);
#pragma unroll
    for (int r = 0; r < RL; r++) s[r] = ck[row_at(r) * V];
  };
  // The staged segments (S steps, whole checkpoint intervals), the last first.
  const int nseg = (p.T + S - 1) / S;
  if (nseg > 0) {
    load_ckpt(p.nck - 1);
    fetch_segment<T, N, GATE>(p, row_base, trace, nseg - 1, sb, dn0, dn1, V, nt);
  }
  for (int seg = nseg - 1; seg >= 0; seg--) {
    const int t0 = seg * S, t1 = min(t0 + S, p.T), len = t1 - t0;
    cp_async_wait();
    __syncthreads();  // the raw copy landed; the previous segment is done with kq, df, nf
    {
      using RS = RowSplit<N, 16 / (int)sizeof(T)>;
      norm_rows<T, N, 16 / (int)sizeof(T)>(
          sb.k, sb.q, N, p.l2, len, warp * RS::RPI, (nt / 32) * RS::RPI, lane,
          [&](bool isk, int u, int at, const float(&x)[RS::PE], float a, float inv) {
            store_f32<RS::PE>(kq + u * RW + (isk ? 0 : N) + at, x);
            // dx = (dx^ - x^ (x^ . dx^) d / a) / d, d = a + eps (0 at x = 0)
            const float da = a > 0.f ? (FAST ? div_ftz(a + kEps, a) : (a + kEps) / a) : 0.f;
            if (at == 0) nf[isk * S + u] = make_float2(da, inv);
          });
      if (tid < len) df[tid] = load(&dn0);
      if (tid + nt < len) df[tid + nt] = load(&dn1);
    }
    __syncthreads();
    // Chunks of at most Lb steps from the segment's end, none across a checkpoint: each is replayed
    // from the checkpoint of its interval (ck, starting at step k0), so a chunk that starts at one
    // replays nothing twice.
    for (int c1 = t1, c0 = 0; c1 > t0; c1 = c0) {
      const int ck = (c1 - 1) / C, k0 = ck * C;
      c0 = max(k0, c1 - Lb);
      const int n = c1 - c0;
      // (delta, dL/do) of the chunk's steps and the warp's columns into cb, and dg = dy o silu'(g)
      // with dL/do = dy silu(g) (gate; else dL/do = dy): a lane takes a pair of columns (V and the
      // pairs are even) of every SPI-th step. Columns j >= V get zeros (their dS stays 0).
      {
        constexpr int PPS = CW / 2, SPI = 32 / PPS;  // lanes a step, steps an iteration
        const int pc = warp * CW + 2 * (lane % PPS), u0 = lane / PPS;
        const bool on = pc < V;
        const int at = (c0 - t0 + u0) * V + (on ? pc : 0);
        const float *dlq = sb.dl + at, *oq = sb.o + at;
        const T *gp = sb.g + at, *dyp = sb.dy + at;
        T *dgp = GATE ? dg + (row_base + (int64_t)(c0 + u0) * p.H) * V + pc : nullptr;
        float4 *c = reinterpret_cast<float4 *>(cb + u0 * VW + pc);
        for (int u = u0; u < n; u += SPI) {
          const float2 dl = *reinterpret_cast<const float2 *>(dlq), dy = load2(dyp);
          float4 e = make_float4(dl.x, dy.x, dl.y, dy.y);
          if constexpr (GATE) {
            const float2 o = *reinterpret_cast<const float2 *>(oq), g = load2(gp);
            const float sx = sigmoid<FAST>(g.x), sy = sigmoid<FAST>(g.y), ux = g.x * sx, uy = g.y * sy;
            if (on) store2(dgp, dy.x * o.x * fmaf(ux, 1.f - sx, sx), dy.y * o.y * fmaf(uy, 1.f - sy, sy));
            e.y = dy.x * ux, e.w = dy.y * uy;
          }
          *c = on ? e : make_float4(0.f, 0.f, 0.f, 0.f);
          dlq += SPI * V, oq += SPI * V, gp += SPI * V, dyp += SPI * V, c += SPI * VW / 2;
          if constexpr (GATE) dgp += SPI * vstep;
        }
      }
      __syncwarp();  // cb's entries of a column written by its lanes
      // Replay k0 .. c1-1 from the checkpoint in s with the saved delta (no sum over rows): prev
      // gets the state before c0; states u = 0 .. n-2 of the chunk go to shared memory, the last
      // stays in s. Each replayed state of the chunk also gives dq^ = S_t dL/do_t, which nothing in
      // the walk's chain waits for: its row-sum round runs here, among the replay's independent
      // chains, instead of in the walk, whose instructions wait on each other.
      float prev[RL];
      const float *kqp = kq + (k0 - t0) * RW + i0,
                  *dlp = sb.dl + (k0 - t0) * V + (active ? col : 0);
      auto advance = [&](int us) {
        float kh[RL];
        load_rows<RL>(kqp, kh, rx);
        const float delta = *dlp, dec = df[us];
#pragma unroll
        for (int r = 0; r < RL; r++) s[r] = act<FAST>(fmaf(kh[r], delta, dec * s[r]), LIN);
        kqp += RW, dlp += V;
      };
      for (int us = k0 - t0; us < c0 - t0; us++) advance(us);
#pragma unroll
      for (int r = 0; r < RL; r++) prev[r] = s[r];
      {
        uint4 *sp = states + tid;
        const float2 *cbr = cb + col;
        float *accr = acc + warp * Lb * RW;
        // Step u's round runs in step u + 1, beside its replay (one block of independent work).
        float part[RL];
        auto take = [&](int u) {
          const float dov = cbr[u * VW].y;
#pragma unroll
          for (int r = 0; r < RL; r++) part[r] = s[r] * dov;
        };
        auto dq_round = [&](int u) { row_sums(part, accr + u * RW); };
        advance(c0 - t0);
        take(0);
        for (int u = 1; u < n; u++, sp += U * nt) {
          put_state<SH, RL>(sp, nt, s);  // step u - 1's
          advance(c0 - t0 + u);
          dq_round(u - 1);
          take(u);
        }
        dq_round(n - 1);
      }
      if (c0 == t0 && seg > 0) {
        __syncthreads();  // every warp done reading this segment's inputs
        fetch_segment<T, N, GATE>(p, row_base, trace, seg - 1, sb, dn0, dn1, V, nt);
      }
      // Walk back c1-1 .. c0: dS in registers, sn the state after the step, sp before it.
      {
        float (&sn)[RL] = s;  // s is reloaded (load_ckpt) after the walk
        const float *kqw = kq + (c1 - 1 - t0) * RW + i0, *dfw = df + (c1 - 1 - t0);
        float2 *cbw = cb + (n - 1) * VW + col;
        float *accw = acc + (warp * Lb + n - 1) * RW;
        T *dvw = dv + (row_base + (int64_t)(c1 - 1) * p.H) * V + col;
        const uint4 *spw = states + tid + (n > 1 ? (n - 2) * U * nt : 0);
        // A step's dk^ round runs in the step after it, among that step's dependent chain.
        float part[RL];
        auto dk_round = [&] { row_sums(part, accw + RW + N); };  // the step walked last
        auto walk_step = [&](const float (&sp)[RL], bool later) {
          const float2 dd = *cbw;
          const float delta = dd.x, dov = dd.y;
          {
            float qh[RL];
            load_rows<RL>(kqw + N, qh, rx);
#pragma unroll
            for (int r = 0; r < RL; r++) dS[r] = fmaf(qh[r], dov, dS[r]);
          }
          if (later) dk_round();
          if constexpr (!LIN) {
#pragma unroll
            for (int r = 0; r < RL; r++) dS[r] *= fmaf(-sn[r], sn[r], 1.f);  // dP
          }
          float kh[RL];
          load_rows<RL>(kqw, kh, rx);
          const float ddl = colsum<N>(dot<4>(dS, kh)), dec = *dfw;
          {
            float ddp = dot<2>(dS, sp);  // every lane read the step's cb before colsum's shuffles
#pragma unroll
            for (int m = 2 * CW; m < 32; m <<= 1) ddp += __shfl_xor_sync(kFull, ddp, m);
            if (lane < 2 * CW) reinterpret_cast<float *>(cbw)[dslot] = ddp;
          }
#pragma unroll
          for (int r = 0; r < RL; r++) {
            part[r] = fmaf(dS[r], delta, -sp[r] * ddl);  // dk^
            dS[r] = fmaf(dec, dS[r], -kh[r] * ddl);
            sn[r] = sp[r];
          }
          if (rg0 && active) store(dvw, ddl);
          kqw -= RW, dfw--, cbw -= VW, accw -= RW, dvw -= vstep;
        };
        auto stored_step = [&](bool later) {
          float sp[RL];
          get_state<SH, RL>(spw, nt, sp);
          spw -= U * nt;
          walk_step(sp, later);
        };
        if (n > 1) {  // the first step apart, so that the loop's body is one block
          stored_step(false);
          for (int u = n - 2; u > 0; u--) stored_step(true);
        }
        walk_step(prev, n > 1);
        dk_round();
      }
      if (c0 > k0) {
        load_ckpt(ck);  // the next chunk's
      } else if (ck > 0) {
        load_ckpt(ck - 1);
      }
      __syncthreads();
      // The chunk's dq, dk rows, summed over the warps, through the l2 backward: N/8 lanes a row,
      // 8 elements a lane, 256/N rows a warp at a time (the loop is warp-uniform: shuffles).
      {
        constexpr int LPR = N / 8, RPW = 32 / LPR;
        const int e = 8 * (lane % LPR);
        const bool l2 = p.l2;
        for (int r0 = warp * RPW; r0 < 2 * n; r0 += (nt / 32) * RPW) {
          const int rr = r0 + lane / LPR, kind = rr >= n, u = rr - kind * n;  // kind 0: dq, 1: dk
          const bool ok = rr < 2 * n;
          float g[8] = {}, x[8] = {};
          if (ok) {
            const float *a = acc + u * RW + kind * N + e;
#pragma unroll(VC ? 8 : 1)  // a few warps; all loads at once where their count is known
            for (int w = 0; w < nt / 32; w++, a += Lb * RW) {
              float y[8];
              load_rows<8>(a, y);
#pragma unroll
              for (int i = 0; i < 8; i++) g[i] += y[i];
            }
            load_rows<8>(kq + (c0 - t0 + u) * RW + (kind ? 0 : N) + e, x);
          }
          if (l2) {
            float xg = dot<4>(x, g);
#pragma unroll
            for (int m = LPR / 2; m >= 1; m >>= 1) xg += __shfl_xor_sync(kFull, xg, m);
            if (ok) {
              const float2 f = nf[kind * S + c0 - t0 + u];
              const float coef = xg * f.x;
#pragma unroll
              for (int i = 0; i < 8; i++) g[i] = (g[i] - x[i] * coef) * f.y;
            }
          }
          if (ok) store8((kind ? dk : dq) + row_of(p, b, c0 + u, h) * N + e, g);
        }
      }
      // ddecay: the 2 VW partials of a step over 8 lanes (16-byte pieces q, q + 8, .. of the
      // step's VW / 2: a quarter-warp reads 128 consecutive bytes), 4 steps a warp at a time, so
      // that every warp takes part. A block of one warp instead takes 8 steps a pass, 4 lanes a
      // step (VW / 8 pieces each): there a pass's latency is the cost (session 20: +3 to +8% for
      // heads of one warp with 8 lanes a step).
      if (nt == 32) {
        for (int u0 = 0; u0 < n; u0 += 8) {
          const int u = u0 + lane / 4, q4 = lane & 3;
          float sum = 0.f;
          if (u < n) {
            const float4 *a = reinterpret_cast<const float4 *>(cb + u * VW) + q4 * (VW / 8);
#pragma unroll 1
            for (int i = 0; i < VW / 8; i++) {
              const float4 x = a[i];
              sum += (x.x + x.y) + (x.z + x.w);
            }
          }
          sum += __shfl_xor_sync(kFull, sum, 1);
          sum += __shfl_xor_sync(kFull, sum, 2);
          if (u < n && q4 == 0) store(ddecay + row_of(p, b, c0 + u, h), sum);
        }
      } else {
        for (int u0 = warp * 4; u0 < n; u0 += nt / 8) {
          const int u = u0 + lane / 8, q = lane & 7;
          float sum = 0.f;
          if (u < n) {
            const float4 *a = reinterpret_cast<const float4 *>(cb + u * VW);
            for (int i = q; i < VW / 2; i += 8) {
              const float4 x = a[i];
              sum += (x.x + x.y) + (x.z + x.w);
            }
          }
#pragma unroll
          for (int m = 1; m < 8; m <<= 1) sum += __shfl_xor_sync(kFull, sum, m);
          if (u < n && q == 0) store(ddecay + row_of(p, b, c0 + u, h), sum);
        }
      }
      __syncthreads();  // the sums are read before the next chunk's walk rewrites them
    }
  }
  if (p.dS0 && active) {
#pragma unroll
    for (int r = 0; r < RL; r++) p.dS0[sbase + (int64_t)row_at(r) * V] = dS[r];
  }
}

// Whether fetch_segment can copy with cp.async: every row and column piece 16-byte aligned (the
// ckpt rows' parts are multiples of 4 floats: n * v and v are multiples of 4). dg is written in
// pairs of elements (v is even), so its base must hold a pair's alignment.
template <typename T> bool prefetchable(const Params &p) {
  const uintptr_t ptrs =
      (uintptr_t)p.q | (uintptr_t)p.k | (uintptr_t)p.g | (uintptr_t)p.dy | (uintptr_t)p.ckpt_in;
  return (p.V * sizeof(T)) % 16 == 0 && (ptrs & 15) == 0;
}

// The staged segment S: whole checkpoint intervals, kBwdStage steps or one interval where that is
// longer. The replay chunk Lb (a longer one replays fewer steps), as the forward's forward_chunk:
// the blocks should all be resident at once (a second wave of a few blocks runs nearly alone: at
// the layer's shape 664 blocks need 6 an SM), so the longest chunk, up to the interval,
// whose shared memory lets ceil(blocks / SMs) blocks (as far as registers allow) share an SM, and
// at least kBwdMinChunk. Never more than the opt-in limit.
template <typename T, typename SH, int N, bool LIN, bool GATE, int VC>
int launch_backward_sh(const Params &p0, cudaStream_t st, int *chunk) {
  Params p = p0;
  const void *kernel = reinterpret_cast<const void *>(e88_backward_kernel<T, SH, N, LIN, GATE, VC>);
  constexpr int CW = BGeo<N>::CW;
  const int nthreads = (p.V + CW - 1) / CW * 32;
  p.prefetch = prefetchable<T>(p);
  p.S = p.C * (p.C < kBwdStage ? kBwdStage / p.C : 1);
  if (GATE && ((uintptr_t)p.dg & (2 * sizeof(T) - 1))) return (int)cudaErrorMisalignedAddress;
  auto bytes = [&](int Lb) {
    return BwdLayout(N, BGeo<N>::RL, p.V, p.S, Lb, nthreads, sizeof(SH), sizeof(T), GATE).total;
  };
  // The chosen chunk is kept per shape (ChunkMemo): a model calls each layer with the same shape,
  // and the device queries, the shared-memory opt-in and the occupancy search cost microseconds.
  // On a hit the opt-in set on the miss still holds (the memo keeps the last key only).
  int dev = 0;
  if (cudaGetDevice(&dev)) return (int)cudaErrorInvalidConfiguration;
  const int first = p.C < p.T ? p.C : p.T > 1 ? p.T : 1;  // T = 0 still writes dS0
  const int64_t blocks = (int64_t)p.B * p.H, shape = (int64_t)p.V << 32 | (uint32_t)p.C;
  thread_local ChunkMemo memo;
  if (!memo.find(kernel, dev, blocks, shape, first, &p.L)) {
    int sms = 0, optin = 0, cap = 0, most = 0, Lb = first;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) || sms < 1)
      return (int)cudaErrorInvalidConfiguration;
    while (Lb > 1 && bytes(Lb) > (size_t)optin) Lb--;
    if (bytes(Lb) > (size_t)optin) return (int)cudaErrorInvalidConfiguration;
    cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes(Lb));
    if (e != cudaSuccess) return (int)e;
    const int least = Lb < kBwdMinChunk ? Lb : kBwdMinChunk;
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&cap, kernel, nthreads, bytes(least));
    if (e != cudaSuccess) return (int)e;
    const int64_t per_sm = (blocks + sms - 1) / sms, want = per_sm < cap ? per_sm : cap;
    for (; Lb > least; Lb--) {
      e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&most, kernel, nthreads, bytes(Lb));
      if (e != cudaSuccess) return (int)e;
      if (most >= want) break;
    }
    memo.keep(kernel, dev, blocks, shape, first, Lb);
    p.L = Lb;
  }
  if (chunk) {
    *chunk = p.L;
    return 0;
  }
  e88_backward_kernel<T, SH, N, LIN, GATE, VC><<<(unsigned)blocks, nthreads, bytes(p.L), st>>>(p);
  return (int)cudaGetLastError();
}

// The state type (f16 only for a 16-bit tanh state) and the flags as constants, and v too for the
// layer's heads (bf16, n = v = 32, tanh state: a known v takes ~1.2% off the backward there; the
// other combinations keep one kernel each, which the build compiles for every architecture).
template <typename T, typename SH, int N, bool LIN, bool GATE>
int launch_backward_v(const Params &p, cudaStream_t st, int *chunk) {
  if constexpr (N == 32 && !LIN && std::is_same<T, __nv_bfloat16>::value) {
    if (p.V == N) return launch_backward_sh<T, SH, N, LIN, GATE, N>(p, st, chunk);
  }
  return launch_backward_sh<T, SH, N, LIN, GATE, 0>(p, st, chunk);
}
template <typename T, int N, bool GATE>
int launch_backward_g(const Params &p, cudaStream_t st, int *chunk) {
  using SH = typename std::conditional<std::is_same<T, float>::value, float, __half>::type;
  if (p.lin) return launch_backward_v<T, float, N, true, GATE>(p, st, chunk);
  return launch_backward_v<T, SH, N, false, GATE>(p, st, chunk);
}

template <typename T, int N> int launch_backward(const Params &p, cudaStream_t st, int *chunk) {
  return p.gate ? launch_backward_g<T, N, true>(p, st, chunk)
                : launch_backward_g<T, N, false>(p, st, chunk);
}
}  // namespace

int launch_backward(eng_dtype_t dt, int n, const Params &p, cudaStream_t st, int *chunk) {
  E88_DISPATCH(dt, n, return launch_backward<T, N>(p, st, chunk));
}

}  // namespace eng_e88
