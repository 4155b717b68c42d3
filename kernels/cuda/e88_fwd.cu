// E88 forward (version 3). A block is one (b, h), or a group of up to 4 warps of its columns.
// Its compute warps hold S in the layout of e88_common.cuh (Lay): no barrier sits inside the
// recurrence. One more warp, the producer, stages the next chunk of steps (k^ and q^
// normalized, v, silu(g), decay, as f32) into the other of two shared-memory buffers while the
// compute warps run the current one; mbarriers hand the buffers over. The global loads' latency,
// which the version-2 kernel's warps paid at every chunk (40% of its stall samples), is off the
// chain's path.
#include "cuda/e88_common.cuh"

namespace eng_e88 {
namespace {

constexpr int kFwdMaxChunk = 32;  // steps a chunk
constexpr size_t kFwdSmem = 48 * 1024;  // both buffers (no opt-in needed)

// CTA-scope mbarriers (mbarrier.cuh) hand the two buffers over: buffer b's "full" (the
// producer's 32 lanes arrive, the compute warps wait) and "empty" (the other way). Named barriers
// would do, but an SM has few of them: 4 ids a block held the layer's blocks to 4 an SM instead
// of the 6 that keep all 664 resident.

// One chunk's buffer: k^, q^ [L][N], v, silu(g) [L][Vb], decay [L], and the compute warps' o
// partial sums with delta [L][P + 1][Vb] (the producer sums them into y, and writes o and delta
// into the ckpt row: the o sums' shuffles, y's scaling and the stores stay off the compute warps'
// in-order issue).
struct Chunk {
  float *k, *q, *v, *g, *d, *o;
  __device__ Chunk(float *base, int L, int N, int Vb)
      : k(base), q(base + L * N), v(q + L * N), g(v + L * Vb), d(g + L * Vb), o(d + L) {}
};
__host__ __device__ inline size_t chunk_floats(int L, int N, int P, int Vb) {
  return ((size_t)L * (2 * N + (3 + P) * Vb + 1) + 3) & ~(size_t)3;  // buffers stay 16-byte aligned
}

// silu(x) = x sigmoid(x) (e88_common.cuh: one MUFU for 16-bit values).
template <bool FAST> __device__ __forceinline__ float silu(float x) { return x * sigmoid<FAST>(x); }

// Where the producer reads a chunk's inputs: the tensors (row u of q/k at u * row_step elements
// from k, q; columns at u * col_step from v, g: the chunk's first step and the block's first
// column), or their raw copy in shared memory (fetch_raw).
template <typename T> struct Inputs {
  const T *k, *q, *v, *g;
  int64_t row_step, col_step;
};

// A chunk's raw copy: k, q [L][N] and v, g [L][Vb] in T.
template <typename T> struct RawChunk {
  T *k, *q, *v, *g;
  __device__ RawChunk(T *base, int L, int N, int Vb) : k(base), q(k + L * N), v(q + L * N), g(v + L * Vb) {}
  __device__ Inputs<T> inputs(int N, int Vb) const { return {k, q, v, g, N, Vb}; }
};

// Starts copying len steps into raw with cp.async, 16 bytes a copy (the launcher checked that
// every piece is aligned: vector_inputs), so that a chunk's loads are all in flight at once.
template <typename T, int N>
__device__ void fetch_raw(const Inputs<T> &in, int len, int Vb, bool gate, const RawChunk<T> &raw, int lane) {
  constexpr int W = 16 / sizeof(T), PPR = N / W;
  for (int e = lane; e < 2 * len * PPR; e += 32) {
    const int r = e / PPR, x = (e - r * PPR) * W;
    const bool isk = r < len;
    const int u = isk ? r : r - len;
    cp_async16((isk ? raw.k : raw.q) + u * N + x, (isk ? in.k : in.q) + u * in.row_step + x);
  }
  for (Grid e(lane, Vb / W); e.u < len; e.next()) {
    const int u = e.u, j = e.j * W;
    cp_async16(raw.v + u * Vb + j, in.v + u * in.col_step + j);
    if (gate) cp_async16(raw.g + u * Vb + j, in.g + u * in.col_step + j);
  }
  cp_async_commit();
}

// The rows of q and k of len steps into ch (f32, normalized when l2), PPR lanes a row (norm_rows).
template <typename T, int N, int PW>
__device__ void fill_rows(const Inputs<T> &in, bool l2, int len, const Chunk &ch, int lane) {
  using RS = RowSplit<N, PW>;
  norm_rows<T, N, PW>(in.k, in.q, in.row_step, l2, len, 0, RS::RPI, lane,
                      [&](bool isk, int u, int at, const float(&x)[RS::PE], float, float) {
                        store_f32<RS::PE>((isk ? ch.k : ch.q) + u * N + at, x);
                      });
}

// Which columns a block holds: up to kGroupWarps compute warps of a head's columns, so that a
// wide head (n = v = 64: 8 warps) is two blocks, each with its own producer.
constexpr int kGroupWarps = 4;
template <int N> struct Groups {
  int per_head, ncw;  // blocks a (b, h), compute warps a block
  __host__ __device__ explicit Groups(int V) {
    const int warps = (V + Lay<N>::CW - 1) / Lay<N>::CW;
    per_head = (warps + kGroupWarps - 1) / kGroupWarps;
    ncw = (warps + per_head - 1) / per_head;
  }
};

// Columns 0 .. Vb-1 of v and silu(g) of len steps into ch, a lane per PW columns; columns at or
// past `real` are padding (zero state and output).
template <typename T, int PW>
__device__ void fill_columns(const Inputs<T> &in, bool gate, int len, int Vb, int real, const Chunk &ch,
                             int lane) {
  for (Grid e(lane, Vb / PW); e.u < len; e.next()) {
    const int u = e.u, j = e.j * PW;
    const int64_t at = u * in.col_step + j;
    float vv[PW], gg[PW];
    if (PW > 1 || j < real) {
      load_piece<T, PW>(in.v + at, vv);
      if (gate) load_piece<T, PW>(in.g + at, gg);
    } else {
#pragma unroll
      for (int w = 0; w < PW; w++) vv[w] = gg[w] = 0.f;
    }
#pragma unroll
    for (int w = 0; w < PW; w++) gg[w] = silu<!std::is_same<T, float>::value>(gg[w]);
    store_f32<PW>(ch.v + u * Vb + j, vv);
    if (gate) store_f32<PW>(ch.g + u * Vb + j, gg);
  }
}

// Whether every 16-byte piece of q, k, v, g a block reads and of y it writes is aligned (then
// they go through fetch_raw and 16-byte stores, else element by element).
template <typename T> bool vector_inputs(const Params &p, int Vb) {
  constexpr int W = 16 / sizeof(T);
  const uintptr_t ptrs =
      (uintptr_t)p.q | (uintptr_t)p.k | (uintptr_t)p.v | (uintptr_t)p.g | (uintptr_t)p.y | (uintptr_t)p.ckpt;
  return (ptrs & 15) == 0 && p.V % Vb == 0 && Vb % W == 0 && p.V % W == 0;
}

// y of a chunk's len steps from its o partials: y = (sum over the P lanes of a column) * silu(g),
// PW columns a lane (16-byte stores when every piece is aligned); columns at or past `real` are
// padding. y0: element (b, t0, h, col0) of y. SAVE: also delta and o into the ckpt row from tr,
// (t0, col0) of its delta part (its o part is tr + T V).
template <typename T, int N, int PW, bool SAVE>
__device__ void emit_y_cols(const Params &p, const Chunk &ch, int64_t y0, float *tr, int len, int Vb, int real,
                            int lane) {
  constexpr int P = Lay<N>::P;
  const int64_t step = (int64_t)p.H * p.V, o_off = (int64_t)p.T * p.V;
  for (Grid e(lane, Vb / PW); e.u < len; e.next()) {
    const int u = e.u, j = e.j * PW;
    alignas(16) T out[PW];
    float os[PW], ds[PW];
    const float *part = ch.o + u * (P + 1) * Vb + j;
#pragma unroll
    for (int w = 0; w < PW; w++) {
      float o = 0.f;
#pragma unroll
      for (int q = 0; q < P; q++) o += part[q * Vb + w];
      if (SAVE) os[w] = o, ds[w] = part[P * Vb + w];
      out[w] = (T)(p.gate ? o * ch.g[u * Vb + j + w] : o);
    }
    T *dst = (T *)p.y + y0 + u * step + j;
    if constexpr (PW * sizeof(T) == 16) {
      *reinterpret_cast<uint4 *>(dst) = *reinterpret_cast<const uint4 *>(out);
      if (SAVE) store_f32<PW>(tr + u * p.V + j, ds), store_f32<PW>(tr + o_off + u * p.V + j, os);
    } else if (j < real) {
      *dst = out[0];
      if (SAVE) tr[u * p.V + j] = ds[0], tr[o_off + u * p.V + j] = os[0];
    }
  }
}
template <typename T, int N>
__device__ void emit_y(const Params &p, const Chunk &ch, int64_t y0, float *tr, int len, int Vb, int real, bool vec,
                       int lane) {
  constexpr int W = 16 / sizeof(T);
  if (vec) {
    if (tr) emit_y_cols<T, N, W, true>(p, ch, y0, tr, len, Vb, real, lane);
    else emit_y_cols<T, N, W, false>(p, ch, y0, tr, len, Vb, real, lane);
  } else {
    if (tr) emit_y_cols<T, N, 1, true>(p, ch, y0, tr, len, Vb, real, lane);
    else emit_y_cols<T, N, 1, false>(p, ch, y0, tr, len, Vb, real, lane);
  }
}

// The producer warp: chunk after chunk into the two buffers, each once the compute warps are
// done with it. With vector inputs, chunk c + 1's copy (fetch_raw) is in flight while the
// producer waits to convert chunk c; decay rides along in a register (a lane a step: L <= 32).
template <typename T, int N>
__device__ void produce(const Params &p, int b, int h, int col0, int Vb, float *bufs, size_t buf_floats,
                        T *raw_base, uint64_t *full, uint64_t *empty, int lane) {
  const int L = p.L, nchunks = (p.T + L - 1) / L;
  const bool vec = raw_base != nullptr;
  const RawChunk<T> raw(raw_base, L, N, Vb);
  auto global = [&](int c) {
    const int64_t row0 = row_of(p, b, c * L, h), at0 = row0 * p.V + col0;
    return Inputs<T>{(const T *)p.k + row0 * N, (const T *)p.q + row0 * N, (const T *)p.v + at0,
                     p.gate ? (const T *)p.g + at0 : nullptr, (int64_t)p.H * N, (int64_t)p.H * p.V};
  };
  auto decay_of = [&](int c) {
    const int len = min(L, p.T - c * L);
    return lane < len ? load((const T *)p.decay + row_of(p, b, c * L + lane, h)) : 0.f;
  };
  // y (and delta, o into the ckpt row) of chunk c from its buffer once the compute warps are done
  float *tr = p.ckpt ? p.ckpt + (int64_t)(b * p.H + h) * p.cklen + delta_at(p, N) + col0 : nullptr;
  auto emit = [&](int c) {
    mbar_wait_cta(smem_addr(empty + (c & 1)), (c >> 1) & 1);
    const Chunk ch(bufs + (c & 1) * buf_floats, L, N, Vb);
    emit_y<T, N>(p, ch, row_of(p, b, c * L, h) * p.V + col0, tr ? tr + (int64_t)c * L * p.V : nullptr,
                 min(L, p.T - c * L), Vb, p.V - col0, vec, lane);
  };
  float dnext = 0.f;
  if (vec && nchunks > 0) fetch_raw<T, N>(global(0), min(L, p.T), Vb, p.gate, raw, lane), dnext = decay_of(0);
  for (int c = 0; c < nchunks; c++) {
    const int len = min(L, p.T - c * L);
    if (c >= 2) emit(c - 2);
    const Chunk ch(bufs + (c & 1) * buf_floats, L, N, Vb);
    if (vec) {
      cp_async_wait();
      __syncwarp();
      const Inputs<T> in = raw.inputs(N, Vb);
      fill_rows<T, N, 16 / sizeof(T)>(in, p.l2, len, ch, lane);
      fill_columns<T, 16 / sizeof(T)>(in, p.gate, len, Vb, Vb, ch, lane);
      if (lane < len) ch.d[lane] = dnext;
      __syncwarp();  // every lane is done with the raw copy
      if (c + 1 < nchunks) fetch_raw<T, N>(global(c + 1), min(L, p.T - (c + 1) * L), Vb, p.gate, raw, lane), dnext = decay_of(c + 1);
    } else {
      const Inputs<T> in = global(c);
      fill_rows<T, N, 1>(in, p.l2, len, ch, lane);
      fill_columns<T, 1>(in, p.gate, len, Vb, p.V - col0, ch, lane);
      if (lane < len) ch.d[lane] = decay_of(c);
    }
    mbar_arrive(smem_addr(full + (c & 1)));
  }
  for (int c = nchunks < 2 ? 0 : nchunks - 2; c < nchunks; c++) emit(c);
}

// The registers decide how many blocks share an SM: at n = 64, 80 a thread lets 5 blocks of 4
// compute warps (the 656 blocks of B=8 H=41 v=64 on 132 SMs); at n = 32, 96 lets 7 of 2 (the
// layer's 664 blocks need 6).
template <typename T, int N, bool LIN>
__global__ void __maxnreg__(N == 64 ? 80 : 96) e88_forward_kernel(Params p) {
  using G = Lay<N>;
  constexpr int RL = G::RL;
  constexpr bool FAST = !std::is_same<T, float>::value;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, ncw = blockDim.x / 32 - 1;
  const int V = p.V, L = p.L, nchunks = (p.T + L - 1) / L, per_head = Groups<N>(V).per_head;
  // The block's head, first column and compute warps: a column group, or (the tail heads, see
  // the launcher) half of a head of one group
  int bh, col0, nact = ncw;
  if ((int)blockIdx.x < p.split_from) {
    bh = blockIdx.x / per_head, col0 = (blockIdx.x % per_head) * ncw * G::CW;
  } else {
    const int x = blockIdx.x - p.split_from;
    nact = ncw / 2, bh = p.split_from + x / 2, col0 = (x % 2) * nact * G::CW;
  }
  const int Vb = nact * G::CW, b = bh / p.H, h = bh % p.H;
  extern __shared__ float4 smem4[];
  uint64_t *full = reinterpret_cast<uint64_t *>(smem4), *empty = full + 2;
  float *const bufs = reinterpret_cast<float *>(smem4) + 8;  // after the 4 mbarriers
  const size_t buf_floats = chunk_floats(L, N, Lay<N>::P, Vb);
  if (threadIdx.x == 0) {
    for (int x = 0; x < 2; x++) mbar_init(smem_addr(full + x), 32), mbar_init(smem_addr(empty + x), nact * 32);
  }
  __syncthreads();
  if (warp >= nact && warp < ncw) return;  // a half head's idle compute warps

  if (warp == ncw) {
    T *raw = p.prefetch ? reinterpret_cast<T *>(bufs + 2 * buf_floats) : nullptr;
    produce<T, N>(p, b, h, col0, Vb, bufs, buf_floats, raw, full, empty, lane);
    return;
  }

  const int rg = lane / G::CW, jl = warp * G::CW + lane % G::CW, i0 = rg * RL, j = col0 + jl;
  const bool active = j < V;  // padding columns (V not a multiple of CW) compute zeros
  const int64_t sbase = (int64_t)bh * N * V + (int64_t)i0 * V + j;
  float s[RL];
#pragma unroll
  for (int r = 0; r < RL; r++) s[r] = p.S0 && active ? p.S0[sbase + (int64_t)r * V] : 0.f;
  // the next checkpoint: its step and where it goes (a counter, not t % C: that is a division)
  int next_ck = 0;
  float *ck = p.ckpt && active ? p.ckpt + (int64_t)bh * p.cklen + (int64_t)i0 * V + j : nullptr;

  for (int c = 0; c < nchunks; c++) {
    const int t0 = c * L, len = min(L, p.T - t0);
    mbar_wait_cta(smem_addr(full + (c & 1)), (c >> 1) & 1);
    const Chunk ch(bufs + (c & 1) * buf_floats, L, N, Vb);
    const float *kp = ch.k + i0, *qp = ch.q + i0, *vp = ch.v + jl, *dp = ch.d;
    float *op = ch.o + rg * Vb + jl;
    // steps from checkpoint to checkpoint, so that the step loop tests no checkpoint
    for (int u = 0; u < len;) {
      if (ck && t0 + u == next_ck) {
#pragma unroll
        for (int r = 0; r < RL; r++) ck[(int64_t)r * V] = s[r];
        ck += (int64_t)N * V;
        next_ck += p.C;
      }
      const int stop = ck ? min(len, next_ck - t0) : len;
      for (; u < stop; u++, kp += N, qp += N, vp += Vb, dp++, op += (G::P + 1) * Vb) {
        float kh[RL], qh[RL];
        load_rows(kp, kh);
        load_rows(qp, qh);
        const float vj = *vp, dec = *dp;  // loaded before the chain needs them
        const float delta = vj - colsum<N>(dot(s, kh));
        if (rg == 0) op[G::P * Vb] = delta;  // beside the o partials (rg == 0: op is slot 0)
#pragma unroll
        for (int r = 0; r < RL; r++) s[r] = act<FAST>(fmaf(kh[r], delta, dec * s[r]), LIN);
        *op = dot(s, qh);
      }
    }
    mbar_arrive(smem_addr(empty + (c & 1)));
  }
  if (p.S_T && active) {
#pragma unroll
    for (int r = 0; r < RL; r++) p.S_T[sbase + (int64_t)r * V] = s[r];
  }
}

// The chunk length: the longest, up to kFwdMaxChunk and within kFwdSmem, whose shared memory
// (per_step bytes a step) lets ceil(blocks / SMs) blocks (as far as registers and threads allow)
// share an SM: a second wave of a few blocks would run nearly alone after the first.
int forward_chunk(const void *kernel, size_t per_step, int64_t blocks, int nthreads) {
  int L = (int)((kFwdSmem - 64) / per_step);  // 64: the mbarriers and the buffers' rounding
  L = L > kFwdMaxChunk ? kFwdMaxChunk : L < 1 ? 1 : L;
  int dev = 0, sms = 0, per_sm = 0, reserved = 0, most = 0;
  thread_local ChunkMemo memo;
  int known = 0;
  if (!cudaGetDevice(&dev) && memo.find(kernel, dev, (int64_t)per_step, blocks, nthreads, &known)) return known;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) ||
      cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev) ||
      cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, dev) ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&most, kernel, nthreads, 0) || sms < 1 ||
      most < 1) {
    cudaGetLastError();
    return L;
  }
  int64_t want = (blocks + sms - 1) / sms;
  want = want > most ? most : want;
  const int64_t fit = ((int64_t)per_sm / want - reserved - 64) / (int64_t)per_step;
  if (fit < L) L = fit > 1 ? (int)fit : 1;
  memo.keep(kernel, dev, (int64_t)per_step, blocks, nthreads, L);
  return L;
}

template <typename T, int N> int launch_forward(const Params &p0, cudaStream_t st) {
  Params p = p0;
  const Groups<N> gr(p.V);
  const int Vb = gr.ncw * Lay<N>::CW, nthreads = (gr.ncw + 1) * 32;
  const int64_t heads = (int64_t)p.B * p.H;
  p.prefetch = vector_inputs<T>(p, Vb);
  // An SM's time follows its blocks' instructions (docs/PERF.md, E88): where the heads past a
  // whole number a SM would put a 6th head on a few SMs (the layer's 664 on 132), each of those
  // tail heads runs as two blocks of half its columns instead, so that no SM gets more than half
  // a head extra. Only for heads of one group of an even number of warps.
  int sms = 0, dev = 0;
  if (cudaGetDevice(&dev) || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) {
    cudaGetLastError();
    sms = 0;
  }
  const int64_t tail = sms > 0 ? heads % sms : 0;
  const bool split = gr.per_head == 1 && gr.ncw % 2 == 0 && heads > sms && tail > 0 && 2 * tail <= sms &&
                     (!p.prefetch || vector_inputs<T>(p, Vb / 2));
  p.split_from = (int)(split ? heads - tail : heads * gr.per_head);
  const int64_t blocks = p.split_from + (split ? 2 * tail : 0);
  auto kernel = p.lin ? e88_forward_kernel<T, N, true> : e88_forward_kernel<T, N, false>;
  // two f32 buffers (Chunk) and, with the prefetch, one raw copy
  const size_t per_step = 2 * sizeof(float) * (2 * N + (3 + Lay<N>::P) * Vb + 1) +
                          (p.prefetch ? sizeof(T) * (2 * N + 2 * Vb) : 0);
  int L = forward_chunk(reinterpret_cast<const void *>(kernel), per_step, blocks, nthreads);
  if (p.T > 0 && L > p.T) L = p.T;
  p.L = L;
  const size_t smem = 32 + 2 * sizeof(float) * chunk_floats(L, N, Lay<N>::P, Vb) +  // 32: the mbarriers
                      (p.prefetch ? sizeof(T) * L * (2 * N + 2 * Vb) : 0);
  kernel<<<(unsigned)blocks, nthreads, smem, st>>>(p);
  return (int)cudaGetLastError();
}

}  // namespace

int launch_forward(eng_dtype_t dt, int n, const Params &p, cudaStream_t st) {
  E88_DISPATCH(dt, n, return launch_forward<T, N>(p, st));
}

}  // namespace eng_e88
