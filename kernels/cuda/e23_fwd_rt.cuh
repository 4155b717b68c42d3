// The E23 forward with the tape in registers, e23_fwd_rt (included by cuda/e23.cu after
// e23_fwd_tc, whose helpers and exchanges it shares): for d = 512 on clusters of 8 CTAs of
// R = 64 units, N = 64 slots and 5 batch rows a cluster (B = 64 N = 64's plan). There e23_fwd_tc's
// tape loops walk 80 KB of shared memory a step on 8 warps, latency-bound (~3 800 of its ~7 800
// cycles a step); here each of the 320 threads of warps 0-9 holds 8 slots x 8 units of a batch
// row's tape slice as floats, and the scores (over the units) and the read (over the slots) are
// reduce-scatters by shuffles (scripts/bench/e23_tape_registers.cu: ~1 700 cycles against ~4 500
// for the same work in shared memory). The tape takes the registers that the weight slices'
// fragments would: both slices stay in shared memory as scaled f16 and every product loads its A
// fragments from there.
//
// Warps 10 and 11 hold no tape and run both products: warp 10 + p takes the slice's units 32 p ..
// 32 p + 31 over all of d, so its sums are whole (no partial products to add), then w_t's step
// (w, its checkpoint, the CTA's half of w . h). The tape warps' scores thus run beside W_write's
// product instead of after it. The step's two chains meet at the softmaxes: h_t, its all-gather,
// W_write's product, w . h and its all-gather (the longer), against h_t, the tape's write, the
// scores, their reduce-scatter and all-gather. So the softmax of the scores (a_t) runs as soon as
// their sums arrive, and only the second (r_{t+1}) waits for w . h. The stores that are not on
// the chain follow its sends or move to warps with time to spare: w_t's five stores a lane took
// ~500 cycles on it, and rank 0's trace stores in the split softmaxes 0.6 us a step. B = 64 N = 64:
// 4.50 -> 3.50 us a step (docs/PERF.md, session 27); the scores' exchange in two rounds: 3.29
// (session 29); per-source waits for h, w on other warps: 3.24 (session 30); the products on warps
// of their own, the softmaxes apart, the stores off the chain: 2.65 (session 33).
//
// Thread tid < 320: tape row tn = tid / 64 of the group, half = tid / 32 % 2, lane = 8 sg + ug:
// slots 32 half + 8 sg + j and units 8 ug + u (j, u < 8) of the CTA's R. The finishing threads
// are e23_fwd_tc's pairs (the first bg R / 2 threads, warps 0-4): h_t of units (r, r + 1) of
// batch row n; warp g < bg then takes row g's softmaxes. Warps 8 and 9 sum the scores' slot
// groups the CTA owns (rt_owned); warps 5-9 write rank 0's trace of the previous step.

constexpr int kRtRows = 5, kRtN = 64, kRtR = 64;
constexpr int kRtTapeWarps = 2 * kRtRows, kRtProductWarps = 2, kRtGatherWarp = 8;
constexpr int kRtTapeThreads = 32 * kRtTapeWarps;
constexpr int kRtThreads = kRtTapeThreads + 32 * kRtProductWarps;
// R = 64 of d = 512, 8 CTAs: its NW (8) sets d here; the products are rt_product's.
using RtStep = tc::Step<__half, 2, 4, 8, tc::kSingle>;

// Shared memory after the state buffers: red (W_h's product, [8][ldr(R)] column-major: the
// product warps' tiles), red2 (W_write's), the two weight slices [R][d + 8] f16 (rows padded: the
// fragment loads free of bank conflicts), the partial scores of the slot groups the CTA sums part
// [cs][2][32], the scores sc [bg][N], the CTAs' two halves of w . h qpart [2 cs][bg], r and a
// [bg][N], the CTA's h and w [bg][R], the halves' partial reads up [2][bg][R], and 2 CS + 3
// mbarriers.
struct RtLay {
  size_t red, red2, wh, ww, part, sc, qpart, rbuf, abuf, hl, wl, up, bars, total;
};
__host__ __device__ inline RtLay rt_layout(int64_t d, int cs) {
  RtLay l{};
  Carve cv{tc::hb_bytes(d)};
  auto take = [&](size_t bytes) { return cv.take(bytes); };
  l.red = take((size_t)8 * tc::ldr(kRtR) * sizeof(float));
  l.red2 = take((size_t)8 * tc::ldr(kRtR) * sizeof(float));
  l.wh = take((size_t)kRtR * (d + 8) * 2);
  l.ww = take((size_t)kRtR * (d + 8) * 2);
  l.part = take((size_t)cs * 2 * 32 * sizeof(float));
  l.sc = take((size_t)kRtRows * kRtN * sizeof(float));
  l.qpart = take((size_t)2 * cs * kRtRows * sizeof(float));
  l.rbuf = take((size_t)kRtRows * kRtN * sizeof(float));
  l.abuf = take((size_t)kRtRows * kRtN * sizeof(float));
  l.hl = take((size_t)kRtRows * kRtR * sizeof(float));
  l.wl = take((size_t)kRtRows * kRtR * sizeof(float));
  l.up = take((size_t)2 * kRtRows * kRtR * sizeof(float));
  l.bars = take((2 * 8 + 3) * 8);
  l.total = cv.at;
  return l;
}

// Rows r0 .. r0 + kRtR - 1 of W [d][d] (of W^T where tr) into Wp [kRtR][d + 8] as f16 scaled
// by a power of two (tc::to_f16_scaled, the pads zero; scratch: 32 floats); returns the factor
// that scales the products back. Staged in T at the same places (tc::stage_slice), then
// converted in place.
template <typename T>
__device__ float rt_stage(__half *Wp, const T *W, int64_t d, int64_t r0, float *scratch,
                          bool tr = false) {
  T *Ws = reinterpret_cast<T *>(Wp);
  for (int64_t rr = threadIdx.x; rr < kRtR; rr += blockDim.x)
    *reinterpret_cast<uint4 *>(Ws + rr * (d + 8) + d) = make_uint4(0u, 0u, 0u, 0u);
  tc::stage_slice(Ws, W, d, r0, kRtR, tr, d + 8);
  __syncthreads();
  return tc::to_f16_scaled(Ws, kRtR * (d + 8), scratch);
}

// Eight floats from shared memory (16-byte aligned).
__device__ __forceinline__ void load8(float (&v)[8], const float *x) {
  *reinterpret_cast<float4 *>(v) = *reinterpret_cast<const float4 *>(x);
  *reinterpret_cast<float4 *>(v + 4) = *reinterpret_cast<const float4 *>(x + 4);
}

// Eight floats to global memory: two 16-byte stores where `a16`, else one by one.
__device__ __forceinline__ void store8(float *x, const float (&v)[8], bool a16) {
  if (a16) {
    *reinterpret_cast<float4 *>(x) = *reinterpret_cast<const float4 *>(v);
    *reinterpret_cast<float4 *>(x + 4) = *reinterpret_cast<const float4 *>(v + 4);
  } else {
#pragma unroll
    for (int u = 0; u < 8; u++) x[u] = v[u];
  }
}

// A thread's J x 8 block of a [.., d] row-major tensor at src (rows d apart; zeros unless `in`):
// the rows' 16-byte loads in flight together where aligned (a row's 8 values: one load of 16-bit
// T, two of float).
template <int J, typename T>
__device__ __forceinline__ void load_block(float (&X)[J][8], const T *src, int64_t d, bool in) {
  constexpr int V = 16 / sizeof(T), P = 8 / V;  // values a load, loads a row
  const bool a16 = (reinterpret_cast<uintptr_t>(src) & 15) == 0 && d % V == 0;
  uint4 raw[J][P] = {};
#pragma unroll
  for (int j = 0; j < J; j++)
#pragma unroll
    for (int k = 0; k < P; k++)
      if (in && a16) raw[j][k] = *reinterpret_cast<const uint4 *>(src + j * d + k * V);
#pragma unroll
  for (int j = 0; j < J; j++) {
#pragma unroll
    for (int k = 0; k < P; k++) unpack(raw[j][k], X[j] + k * V, src);
    if (in && !a16)
#pragma unroll
      for (int u = 0; u < 8; u++) X[j][u] = load(src + j * d + u);
  }
}

// The block back as 16-bit T, 16-byte stores where aligned.
template <int J, typename T>
__device__ __forceinline__ void store_block(T *dst, const float (&X)[J][8], int64_t d) {
  static_assert(sizeof(T) == 2, "a row's 8 values in one 16-byte store");
  const bool a16 = (reinterpret_cast<uintptr_t>(dst) & 15) == 0 && d % 8 == 0;
#pragma unroll
  for (int j = 0; j < J; j++) {
    T e[8];
#pragma unroll
    for (int u = 0; u < 8; u++) store(e + u, X[j][u]);
    if (a16) {
      *reinterpret_cast<uint4 *>(dst + j * d) = *reinterpret_cast<const uint4 *>(e);
    } else {
#pragma unroll
      for (int u = 0; u < 8; u++) dst[j * d + u] = e[u];
    }
  }
}

// The slot groups (a warp's 32 slots of a batch row) whose partial scores CTA `rank` sums: groups
// rank and rank + CS of the 2 bg.
__device__ __forceinline__ int rt_owned(int rank, int64_t bg) {
  constexpr int CS = RtStep::CS;
  return max(0, min(2, ((int)(2 * bg) - rank + CS - 1) / CS));
}

// Product warp p's 32 units of the slice Wp [R][d + 8] times state buffer b (all of d) into
// dst's column-major [8][ldr(R)] tile at units 32 p: four accumulators (one a k step of each
// source's 64 columns), the A fragments of the next source loaded before the wait for this one.
// WAIT: each source CTA's columns waited for first (hx's mbarrier b CS + q; `arm` re-arms it).
template <bool WAIT, int NBH>
__device__ __forceinline__ void rt_product(const RtStep &st, int b, const __half *Wp, float *dst,
                                           int p, AsyncFills<NBH> &hx, bool arm) {
  using S = RtStep;
  namespace wmma = tc::wmma;
  constexpr int CS = S::CS, KS = 4;
  constexpr unsigned LW = (unsigned)S::D + 8;
  static_assert(S::D == CS * KS * 16, "a source's columns: KS k steps");
  typename S::FC c[KS];
#pragma unroll
  for (int s = 0; s < KS; s++) wmma::fill_fragment(c[s], 0.f);
  const __half *hi = st.row(b, 0, 0), *wa = Wp + p * 32 * LW;
  typename S::FA a[2][KS];
#pragma unroll
  for (int s = 0; s < KS; s++) S::load_a_shared(a[0][s], wa + s * 16, LW);
#pragma unroll
  for (int q = 0; q < CS; q++) {
    if (q + 1 < CS)
#pragma unroll
      for (int s = 0; s < KS; s++)
        S::load_a_shared(a[(q + 1) & 1][s], wa + (q + 1) * KS * 16 + s * 16, LW);
    if (WAIT) hx.wait(b * CS + q, arm);
#pragma unroll
    for (int s = 0; s < KS; s++) {
      typename S::FB f;
      S::load_b(f, hi + q * KS * 16 + s * 16);
      wmma::mma_sync(c[s], a[q & 1][s], f, c[s]);
    }
  }
#pragma unroll
  for (int e = 0; e < c[0].num_elements; e++)
    c[0].x[e] = (c[0].x[e] + c[1].x[e]) + (c[2].x[e] + c[3].x[e]);
  wmma::store_matrix_sync(dst + p * 32, c[0], (unsigned)tc::ldr(kRtR), wmma::mem_col_major);
}

// The kernel's named barriers (cuda/common.cuh's bar_sync, bar_arrive) besides __syncthreads:
// 1, the tape warps (h_t in hl before the scores); 2, the softmaxes' weights (the tape warps
// wait, the product warps arrive once w_t is in wl); 3, h_t in hl for w . h (warps 0-4 arrive,
// the product warps wait).
constexpr int kRtHCount = 32 * kRtRows + 32 * kRtProductWarps;  // barrier 3's threads

template <typename T>
__global__ void __launch_bounds__(kRtThreads, 1) e23_fwd_rt(P23<T> p) {
  using S = RtStep;
  constexpr int R = kRtR, N = kRtN, LR = (int)tc::ldr(kRtR);
  constexpr int64_t d = S::D;
  extern __shared__ __align__(128) unsigned char rt_smem[];
  int rank, cs, group;
  cluster_pos<true>(&rank, &cs, &group);
  if (cs != S::CS || p.d != d || p.N != N || p.bg > kRtRows || blockDim.x != kRtThreads) __trap();
  const int64_t bg = p.bg, gb = (int64_t)group * bg, r0 = (int64_t)rank * R, B = p.B;
  const RtLay l = rt_layout(d, cs);
  __half *Wh = reinterpret_cast<__half *>(rt_smem + l.wh);
  __half *Ww = reinterpret_cast<__half *>(rt_smem + l.ww);
  auto fs = [&](size_t at) { return reinterpret_cast<float *>(rt_smem + at); };
  float *red = fs(l.red), *red2 = fs(l.red2), *part = fs(l.part), *sc = fs(l.sc);
  float *qpart = fs(l.qpart), *rbuf = fs(l.rbuf), *abuf = fs(l.abuf), *hl = fs(l.hl);
  float *wl = fs(l.wl), *up = fs(l.up);
  // prologue: both slices as scaled f16 (the state buffers are the conversion's scratch, so
  // before init_state), the state, the tape
  S sh(rt_smem);
  float *scratch = reinterpret_cast<float *>(rt_smem);
  const float uh = rt_stage(Wh, p.Wh, d, r0, scratch);  // W_h's products are scaled back by uh
  const float uw = rt_stage(Ww, p.Ww, d, r0, scratch);  // W_write's by uw
  sh.init_state(p.h0, gb, bg, B);
  __syncthreads();
  // h_t into state buffer b = (t + 1) & 1, CTA q's units counted on mbarrier CS b + q: the
  // product warps take the sources in turn, each as it arrives (docs/PERF.md, session 30).
  constexpr int NBH = 2 * S::CS;
  AsyncFills<NBH> hx;
  AsyncFills<1> px;  // a step's summed scores into sc
  AsyncFills<1> rs;  // the partial scores of the CTA's slot groups into part
  AsyncFills<1> qx;  // the CTAs' halves of w . h into qpart
  init_forward<S>(p, hx, px, rt_smem + l.bars, gb, r0, hl, wl,
                  (uint32_t)(bg * N * (int64_t)sizeof(float)));
  const int tid = (int)threadIdx.x, warp = tid >> 5, lane = tid & 31;
  // The scores' exchange is a reduce-scatter, then an all-gather: slot group gi = 2 row + half
  // (a warp's 32 slots) is summed by CTA gi % 8 (the 10 groups of 5 rows: CTAs 0 and 1 take two),
  // where warps 8 and 9 add the CTAs' partials and send the sums to every CTA. Each CTA sends 1
  // store a slot instead of cs, and the bytes (not the latency) set this exchange's time:
  // 5 x 65 floats from each of 8 CTAs to all took ~1 280 cycles, 5 floats ~290
  // (scripts/bench/dsmem_send_patterns.cu).
  rs.init(rt_smem + l.bars + 8 * (NBH + 1),
          (uint32_t)(cs * rt_owned(rank, bg) * 32 * (int64_t)sizeof(float)));
  qx.init(rt_smem + l.bars + 8 * (NBH + 2), (uint32_t)(2 * cs * bg * (int64_t)sizeof(float)));
  // the thread's tape block: row tn, slots s0 + j, units u0 + u (the product warps: none)
  const int tn = tid / 64, half = warp & 1, sg = lane >> 3, ug = lane & 7, s0 = 32 * half + 8 * sg,
            u0 = 8 * ug;
  const bool trow = tn < bg, treal = trow && gb + tn < B;
  const bool c16 = p.ck_len % 4 == 0 && (reinterpret_cast<uintptr_t>(p.ckpt) & 15) == 0;
  float *ckrow = p.ckpt + (gb + tn) * p.ck_len + r0 + u0;  // (treal only)
  float H[8][8];
  {
    const T *src = p.tape0 + ((gb + tn) * N + s0) * d + r0 + u0;
    const bool t16 = (reinterpret_cast<uintptr_t>(p.tape0) & 15) == 0;
    const bool in = treal && p.tape0;
    uint4 raw[8] = {};  // the 8 slots' loads in flight together
#pragma unroll
    for (int j = 0; j < 8; j++)
      if (in && t16) raw[j] = *reinterpret_cast<const uint4 *>(src + j * d);
#pragma unroll
    for (int j = 0; j < 8; j++) {
      unpack(raw[j], H[j], src);  // (zeros unless in and t16)
      if (in && !t16)
#pragma unroll
        for (int u = 0; u < 8; u++) H[j][u] = load(src + j * d + u);
      if (treal) store8(ckrow + (s0 + j) * d, H[j], c16);  // checkpoint 0
    }
  }
  sync_all<true>();  // every CTA started and initialized before the first remote store
  if (warp >= kRtTapeWarps) {
    // The product warps: W_write's product, w_t's step, then W_h's product for h_{t+1}. Why no
    // CTA refills a state buffer that another still reads: CTA X sends h_{t+2} into buffer
    // (t + 1) & 1 after its softmaxes of step t + 1, which wait for every CTA Y's w . h of step
    // t + 1, which Y's product warps send after their W_h product of step t (the buffer's last
    // read). qpart: Y sends w . h of step t + 1 after its wait for X's h_{t+1}, which X sends
    // after its softmaxes of step t (which read qpart).
    const int pw = warp - kRtTapeWarps, u = 32 * pw + lane;
    const bool arm = pw == 0 && lane == 0;
    bar_arrive<2, kRtThreads>();  // (the tape warps' r_0: no w yet)
    rt_product<false>(sh, 0, Wh, red, pw, hx, false);  // step 0's W_h h0
    for (int64_t t = 0; t < p.nt; t++) {
      const int buf = (int)(t & 1);
      __syncthreads();
      rt_product<true>(sh, buf ^ 1, Ww, red2, pw, hx, arm);
      __syncwarp();
      bar_sync<3, kRtHCount>();  // h_t in hl
      // w_t at unit u of the group's rows, the CTA's half of w . h summed over the warp; the
      // sends first, then the stores (wl, w_t's checkpoint), which took ~500 cycles before them
      // (3.11 -> 3.01 us a step)
      float w[kRtRows], q[kRtRows];
#pragma unroll
      for (int k = 0; k < kRtRows; k++) {
        w[k] = k < bg ? red2[k * LR + u] * uw : 0.f;
        q[k] = k < bg ? w[k] * hl[k * R + u] : 0.f;
      }
#pragma unroll
      for (int k = 0; k < kRtRows; k++) q[k] = warp_sum(q[k]);
      float v = 0.f;  // lane k < bg sends row k's
#pragma unroll
      for (int k = 0; k < kRtRows; k++) v = lane == k ? q[k] : v;
      if (lane < bg) put_all_async<S::CS>(qpart + (rank * 2 + pw) * bg + lane, v, qx.of(0));
#pragma unroll
      for (int k = 0; k < kRtRows; k++)
        if (k < bg) {
          wl[k * R + u] = w[k];
          if (gb + k < B) p.ckpt[(gb + k) * p.ck_len + p.ck_w + t * d + r0 + u] = w[k];  // w_t
        }
      bar_arrive<2, kRtThreads>();  // wl
      if (t + 1 < p.nt) rt_product<false>(sh, buf ^ 1, Wh, red, pw, hx, false);
    }
    return;
  }
  // The finishing threads: e23_fwd_tc's pairs, thread q units (r, r + 1) of batch row n.
  const int pairs = (int)bg * (R / 2), n = tid / (R / 2), r = 2 * (tid % (R / 2));
  const bool fin = tid < pairs && gb + n < B;
  const int64_t c = r0 + r, base = (gb + n) * p.nt * d + c;
  const float scale2 = (1.f / sqrtf((float)d)) * 1.44269504088896340736f;  // as attend_lanes
  float bias[2] = {};  // b at (c, c + 1)
  T xr[2] = {};  // step t's xw as loaded: converted at h_t, so the load has a step to land
  auto fetch = [&](int64_t t) {
#pragma unroll
    for (int k = 0; k < 2; k++) xr[k] = p.xw[base + t * d + k];
  };
  if (fin && p.nt > 0) {
    bias[0] = load(p.b + c), bias[1] = load(p.b + c + 1);
    fetch(0);
  }
  // This CTA's partial scores H h of the thread's batch row into the part of the CTA that sums
  // the warp's slot group: the thread's 8 slots' dots over its 8 units, reduce-scattered over the
  // 8 unit groups so lane ug holds slot s0 + ug (a warp's lanes: consecutive slots).
  auto scores = [&]() {
    if (!trow) return;  // (whole warps)
    float h[8], v[8];
    load8(h, hl + tn * R + u0);
    block_dots(H, h, v);
    fold<4>(v, ug & 4, 4);
    fold<2>(v, ug & 2, 2);
    fold<1>(v, ug & 1, 1);
    const int gi = 2 * tn + half;
    put_some_async<S::CS, S::CS>(part + (rank * 2 + gi / S::CS) * 32 + lane, v[0], rs.of(0),
                                 gi % S::CS);
  };
  // The CTA's slot groups (warp kRtGatherWarp + m: group rank + CS m): the CTAs' partials added
  // in rank order (as attend_lanes added them), the sums into every CTA's sc. Why no CTA refills
  // part or sc early: X sends step t + 1's partial scores after its h_{t+1}, so after its
  // softmaxes of step t, which waited for every owner's sums of step t (sent after reading part);
  // an owner sends step t + 1's sums once every CTA's partials of step t + 1 arrived.
  auto gather = [&]() {
    const int m = warp - kRtGatherWarp;
    if (m < 0 || m >= rt_owned(rank, bg)) return;
    rs.wait(0, tid == kRtGatherWarp * 32);
    float v = 0.f;
#pragma unroll
    for (int q = 0; q < S::CS; q++) v += part[(q * 2 + m) * 32 + lane];
    const int gi = rank + S::CS * m;
    put_all_async<S::CS>(sc + (gi / 2) * N + 32 * (gi % 2) + lane, v, px.of(0));
  };
  // Row g = warp's softmaxes in two halves (attend_lanes' math, slot lane + 32 k in register k,
  // base 2): attend_a waits for the summed scores alone (a_t; at t = -1 r_0 alone), attend_r for
  // w . h too (r_{t+1}); x and pa carry the row between them. The trace's stores are trace_copy's.
  float ax[2], pa[2];
  auto attend_a = [&](int64_t t) {
    if (warp >= bg) return;
#pragma unroll
    for (int k = 0; k < 2; k++) ax[k] = sc[warp * N + lane + 32 * k] * scale2;
    lanes_softmax<2>(ax, pa, N, lane);
#pragma unroll
    for (int k = 0; k < 2; k++) (t >= 0 ? abuf : rbuf)[warp * N + lane + 32 * k] = pa[k];
  };
  auto attend_r = [&]() {
    if (warp >= bg) return;
    qx.wait(0);
    float q = 0.f, x[2], rn[2];
#pragma unroll
    for (int k = 0; k < 2 * S::CS; k++) q += qpart[k * bg + warp];
    q *= scale2;
#pragma unroll
    for (int k = 0; k < 2; k++) x[k] = (1.f - pa[k]) * ax[k] + pa[k] * q;
    lanes_softmax<2>(x, rn, N, lane);
#pragma unroll
    for (int k = 0; k < 2; k++) rbuf[warp * N + lane + 32 * k] = rn[k];
  };
  // Step t's weights into rank 0's trace (cpu/e23.h): a_t and r_{t+1} (t = -1: r_0 alone) from
  // abuf and rbuf, by warps 5-9 at the head of step t + 1 (before barrier 1, after which the
  // softmaxes refill them). On warps 0-4, these stores delayed the softmaxes' chain.
  auto trace_copy = [&](int64_t t) {
    if (rank != 0 || warp < kRtRows) return;
    for (int k = tid - kRtRows * 32; k < (int)bg * N; k += kRtTapeThreads - kRtRows * 32) {
      const int g = k / N, i = k % N;
      if (gb + g >= B) continue;
      float *row = p.ckpt + (gb + g) * p.ck_len;
      if (t >= 0) row[p.ck_a + t * N + i] = abuf[k];
      if (t + 1 < p.nt) row[p.ck_r + (t + 1) * N + i] = rbuf[k];
    }
  };
  // The block's part of the next read u = sum_i r_i H_new[i] after step t's attention weights
  // (t = -1: r_0 alone, from tape0), from the tape before step t's write: H_new[i] = (1 - a_i)
  // H[i] + a_i w, so u = sum_i r_i (1 - a_i) H[i] + (sum_i r_i a_i) w. Reduce-scattered over the
  // warp's 4 slot groups (lane: units u0 + 4 (sg >> 1) + 2 (sg & 1) + {0, 1}) into up[half]; the
  // finishing threads add the two halves after the barrier that starts the next step. The write
  // itself waits (write_step) until that barrier: the next h_t needs only u, so the write leaves
  // the step's chain for the wait for h_t's exchange.
  float ap[8] = {}, wr[8] = {};  // a_t of the thread's slots, w_t at its units: for the write
  auto read_next = [&](bool step) {
    if (!trow) return;
    float rr[8], v[8] = {}, e = 0.f;
    load8(rr, rbuf + tn * N + s0);
    if (step) load8(ap, abuf + tn * N + s0), load8(wr, wl + tn * R + u0);
#pragma unroll
    for (int j = 0; j < 8; j++) {
      const float cj = step ? rr[j] * (1.f - ap[j]) : rr[j];
      if (step) e += rr[j] * ap[j];
#pragma unroll
      for (int u = 0; u < 8; u++) v[u] += cj * H[j][u];
    }
    if (step)
#pragma unroll
      for (int u = 0; u < 8; u++) v[u] += e * wr[u];
    fold<4>(v, sg & 2, 16);
    fold<2>(v, sg & 1, 8);
    const int uo = u0 + 4 * (sg >> 1) + 2 * (sg & 1);
    *reinterpret_cast<float2 *>(up + (half * kRtRows + tn) * R + uo) = make_float2(v[0], v[1]);
  };
  // A step's write H <- (1 - a) H + a w^T of the thread's block (tape_write: the backward replays
  // the same expression), its new values into the checkpoint of segment seg (seg > 0).
  auto write_step = [&](int64_t seg) {
    if (!trow) return;
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
      for (int u = 0; u < 8; u++) H[j][u] = tape_write(H[j][u], ap[j], wr[u]);
    if (seg > 0 && treal)
#pragma unroll
      for (int j = 0; j < 8; j++) store8(ckrow + (seg * N + s0 + j) * d, H[j], c16);
  };
  scores();
  gather();
  px.wait(0);
  attend_a(-1);
  bar_sync<2, kRtThreads>();
  read_next(false);
  int64_t next_ck = p.C, seg = 1;  // the next checkpoint: before step next_ck, segment seg
  int64_t write_seg = -1;  // the write of step t - 1, due at step t: its checkpoint (0: none)
  // The state buffers as e23_fwd_tc's; the scores' and w . h's buffers: gather's and the
  // product warps' comments.
  for (int64_t t = 0; t < p.nt; t++) {
    const int buf = (int)(t & 1);
    __syncthreads();  // the halves' partial reads in up, W_h's product in red
    if (fin) {
      const float2 s = *reinterpret_cast<const float2 *>(red + n * LR + r);
      const float2 ua = *reinterpret_cast<const float2 *>(up + n * R + r);
      const float2 ub = *reinterpret_cast<const float2 *>(up + (kRtRows + n) * R + r);
      float hv[2];  // h_t at (c, c + 1)
      hv[0] = tanhf(s.x * uh + load(&xr[0]) + bias[0] + (ua.x + ub.x));
      hv[1] = tanhf(s.y * uh + load(&xr[1]) + bias[1] + (ua.y + ub.y));
      *reinterpret_cast<float2 *>(hl + n * R + r) = make_float2(hv[0], hv[1]);
      sh.put_async(buf ^ 1, n, c, hv[0], hv[1], hx.of((buf ^ 1) * S::CS + rank));
      const int64_t at = base + t * d;
#pragma unroll
      for (int k = 0; k < 2; k++) {
        store(p.hs + at + k, hv[k]);
        if (t == p.nt - 1) store(p.hT + (gb + n) * d + c + k, hv[k]);
      }
      if (t + 1 < p.nt) fetch(t + 1);
    }
    if (warp < kRtRows) bar_arrive<3, kRtHCount>();  // h_t in hl
    trace_copy(t - 1);
    if (write_seg >= 0) write_step(write_seg);
    bar_sync<1, kRtTapeThreads>();  // h_t in hl
    scores();
    gather();
    px.wait(0);
    attend_a(t);
    attend_r();
    bar_sync<2, kRtThreads>();  // r, a in rbuf, abuf; w_t in wl
    read_next(true);
    write_seg = t + 1 == next_ck && t + 1 < p.nt ? seg : 0;
    if (t + 1 == next_ck) next_ck += p.C, seg++;
  }
  trace_copy(p.nt - 1);
  if (write_seg >= 0) write_step(write_seg);  // the last step's
  if (treal) store_block(p.tapeT + ((gb + tn) * N + s0) * d + r0 + u0, H, d);  // the final tape
}
