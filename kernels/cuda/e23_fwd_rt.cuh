// The E23 forward with the tape in registers, e23_fwd_rt (included by cuda/e23.cu after
// e23_fwd_tc, whose helpers and exchanges it shares): for d = 512 on clusters of 8 CTAs of
// R = 64 units, N = 64 slots and 5 batch rows a cluster (B = 64 N = 64's plan). There e23_fwd_tc's
// tape loops walk 80 KB of shared memory a step on 8 warps, latency-bound (~3 800 of its ~7 800
// cycles a step); here each of 320 threads holds 8 slots x 8 units of a batch row's tape slice
// as floats, and the scores (over the units) and the read (over the slots) are reduce-scatters
// by shuffles (scripts/bench/e23_tape_registers.cu: ~1 700 cycles against ~4 500 for the same
// work in shared memory). The registers the tape takes are those of the weight slices'
// fragments: both slices stay in shared memory as scaled f16 and every step loads the A
// fragments from there (tc::Step::product_from; ~390 cycles more a product,
// scripts/bench/e23_product_ldmatrix.cu). B = 64 N = 64: 4.50 -> 3.50 us a step (docs/PERF.md,
// session 27); the scores' exchange in two rounds (a reduce-scatter, then an all-gather), the
// products' partial sums apart: 3.29 (session 29); per-source waits for h, w on other warps: 3.24
// (session 30).
//
// Thread tid: tape row tn = tid / 64 of the group (threads of rows >= bg hold nothing), half =
// tid / 32 % 2, lane = 8 sg + ug: slots 32 half + 8 sg + j and units 8 ug + u (j, u < 8) of the
// CTA's R. The finishing threads are e23_fwd_tc's pairs (the first bg R / 2 threads); h_t's
// exchange is e23_fwd_tc's, each product warp waiting for its own source's part. Warp kRtRows + n
// finishes w_t of batch row n. The warps past the products' kRtProductWarps sum the scores' slot
// groups the CTA owns (rt_owned).

constexpr int kRtRows = 5, kRtThreads = 64 * kRtRows, kRtN = 64, kRtR = 64, kRtProductWarps = 8;
using RtStep = tc::Step<__half, 2, 4, kRtProductWarps, tc::kSingle>;  // R = 64 of d = 512, 8 CTAs

// Shared memory after the state buffers: red (RtStep's, right after them; W_h's product), red2
// (W_write's: the two products' partial sums apart, so W_h's needs no barrier after w), the two
// weight slices [R][d + 8] f16 (rows padded: the fragment loads free of bank conflicts), the
// partial scores of the slot groups the CTA sums part [cs][2][32], the scores sc [bg][N], the
// CTAs' partial w . h qpart [cs][bg], r and a [bg][N], the CTA's h and w [bg][R], the halves'
// partial reads up [2][bg][R], and 2 CS + 2 mbarriers.
struct RtLay {
  size_t red, red2, wh, ww, part, sc, qpart, rbuf, abuf, hl, wl, up, bars, total;
};
__host__ __device__ inline RtLay rt_layout(int64_t d, int cs) {
  RtLay l{};
  Carve cv{tc::hb_bytes(d)};
  auto take = [&](size_t bytes) { return cv.take(bytes); };
  l.red = take((size_t)8 * 8 * tc::ldr(kRtR) * sizeof(float));
  l.red2 = take((size_t)8 * 8 * tc::ldr(kRtR) * sizeof(float));
  l.wh = take((size_t)kRtR * (d + 8) * 2);
  l.ww = take((size_t)kRtR * (d + 8) * 2);
  l.part = take((size_t)cs * 2 * 32 * sizeof(float));
  l.sc = take((size_t)kRtRows * kRtN * sizeof(float));
  l.qpart = take((size_t)cs * kRtRows * sizeof(float));
  l.rbuf = take((size_t)kRtRows * kRtN * sizeof(float));
  l.abuf = take((size_t)kRtRows * kRtN * sizeof(float));
  l.hl = take((size_t)kRtRows * kRtR * sizeof(float));
  l.wl = take((size_t)kRtRows * kRtR * sizeof(float));
  l.up = take((size_t)2 * kRtRows * kRtR * sizeof(float));
  l.bars = take((2 * 8 + 2) * 8);
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

// The attention weights of batch row g as attend_lanes (one warp, slot lane + 32 k in register
// k, base 2), from the summed scores sc [bg][N] and for a step the CTAs' partial w . h, qpart
// [CS][bg] (the scores summed in attend_lanes' order: the same values); into r and a, and where
// given into the trace's ta and tr too.
template <int CS>
__device__ void rt_attend(const float *sc, const float *qpart, int bg, int g, float scale2,
                          bool step, int lane, float *r, float *a, float *ta, float *tr) {
  constexpr int K = kRtN / 32;
  float x[K], p[K];
#pragma unroll
  for (int k = 0; k < K; k++) x[k] = sc[g * kRtN + lane + 32 * k] * scale2;
  lanes_softmax<K>(x, p, kRtN, lane);
  if (step) {
    float q = 0.f, rn[K];
#pragma unroll
    for (int c = 0; c < CS; c++) q += qpart[c * bg + g];
    q *= scale2;
#pragma unroll
    for (int k = 0; k < K; k++) x[k] = (1.f - p[k]) * x[k] + p[k] * q;
    lanes_softmax<K>(x, rn, kRtN, lane);
#pragma unroll
    for (int k = 0; k < K; k++) {
      const int i = lane + 32 * k;
      a[i] = p[k], r[i] = rn[k];
      if (ta) ta[i] = p[k];
      if (tr) tr[i] = rn[k];
    }
  } else {
#pragma unroll
    for (int k = 0; k < K; k++) {
      r[lane + 32 * k] = p[k];
      if (tr) tr[lane + 32 * k] = p[k];
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kRtThreads, 1) e23_fwd_rt(P23<T> p) {
  using S = RtStep;
  constexpr int R = kRtR, N = kRtN;
  constexpr int64_t d = S::D, LW = d + 8;
  extern __shared__ __align__(128) unsigned char rt_smem[];
  int rank, cs, group;
  cluster_pos<true>(&rank, &cs, &group);
  if (cs != S::CS || p.d != d || p.N != N || p.bg > kRtRows || blockDim.x != kRtThreads) __trap();
  const int64_t bg = p.bg, gb = (int64_t)group * bg, r0 = (int64_t)rank * R, B = p.B;
  const RtLay l = rt_layout(d, cs);
  __half *Wh = reinterpret_cast<__half *>(rt_smem + l.wh);
  __half *Ww = reinterpret_cast<__half *>(rt_smem + l.ww);
  float *part = reinterpret_cast<float *>(rt_smem + l.part);
  float *sc = reinterpret_cast<float *>(rt_smem + l.sc);
  float *qpart = reinterpret_cast<float *>(rt_smem + l.qpart);
  float *rbuf = reinterpret_cast<float *>(rt_smem + l.rbuf);
  float *abuf = reinterpret_cast<float *>(rt_smem + l.abuf);
  float *hl = reinterpret_cast<float *>(rt_smem + l.hl);
  float *wl = reinterpret_cast<float *>(rt_smem + l.wl);
  float *up = reinterpret_cast<float *>(rt_smem + l.up);
  // prologue: both slices as scaled f16 (the state buffers are the conversion's scratch, so
  // before init_state), the state, the tape
  S sh(rt_smem), sw(rt_smem, reinterpret_cast<float *>(rt_smem + l.red2));
  float *scratch = reinterpret_cast<float *>(rt_smem);
  const float uh = rt_stage(Wh, p.Wh, d, r0, scratch);  // W_h's products are scaled back by uh
  const float uw = rt_stage(Ww, p.Ww, d, r0, scratch);  // W_write's by uw
  sh.init_state(p.h0, gb, bg, B);
  __syncthreads();
  // h_t into state buffer b = (t + 1) & 1, CTA q's units counted on mbarrier CS b + q: product
  // warp w's k slice is CTA w's units, so it waits for that CTA's fill alone and starts while
  // the others' are in flight (B = 64 N = 64: 3.32 -> 3.26 us a step, docs/PERF.md session 30).
  constexpr int NBH = 2 * S::CS;
  static_assert(S::D / kRtProductWarps == S::R, "product warp w reads CTA w's units");
  AsyncFills<NBH> hx;
  AsyncFills<1> px;  // a step's scores into sc and its partial w . h into qpart
  AsyncFills<1> rs;  // the partial scores of the CTA's slot groups into part
  init_forward<S>(p, hx, px, rt_smem + l.bars, gb, r0, hl, wl,
                  (uint32_t)((bg * N + cs * bg) * (int64_t)sizeof(float)));
  const int tid = (int)threadIdx.x, warp = tid >> 5, lane = tid & 31;
  // The scores' exchange is a reduce-scatter, then an all-gather: slot group gi = 2 row + half
  // (a warp's 32 slots) is summed by CTA gi % 8 (the 10 groups of 5 rows: CTAs 0 and 1 take two),
  // where the warps past the products add the CTAs' partials and send the sums to every CTA. Each
  // CTA sends 1 store a slot instead of cs, and the bytes (not the latency) set this exchange's
  // time: 5 x 65 floats from each of 8 CTAs to all took ~1 280 cycles, 5 floats ~290
  // (scripts/bench/dsmem_send_patterns.cu).
  rs.init(rt_smem + l.bars + 8 * (NBH + 1),
          (uint32_t)(cs * rt_owned(rank, bg) * 32 * (int64_t)sizeof(float)));
  // the thread's tape block: row tn, slots s0 + j, units u0 + u
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
  // The finishing threads: e23_fwd_tc's pairs, thread q units (r, r + 1) of batch row n.
  const int pairs = (int)bg * (R / 2), n = tid / (R / 2), r = 2 * (tid % (R / 2));
  const bool fin = tid < pairs && gb + n < B;
  const int64_t c = r0 + r, base = (gb + n) * p.nt * d + c;
  const float scale2 = (1.f / sqrtf((float)d)) * 1.44269504088896340736f;  // as attend_lanes
  float bias[2] = {};  // b at (c, c + 1)
  T xr[2] = {};  // step t's xw as loaded: converted after the product, so the load overlaps it
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
  // The CTA's partial w . h of batch row `row` (0 before the first step; then w_step's) into
  // every CTA's qpart.
  auto send_q = [&](float q, int row) {
    q = warp_sum(q);
    if (lane == 0) put_all_async<S::CS>(qpart + rank * bg + row, q, px.of(0));
  };
  // The CTA's slot groups (warp kRtProductWarps + m: group rank + CS m): the CTAs' partials added
  // in rank order (as attend_lanes added them), the sums into every CTA's sc.
  auto gather = [&]() {
    const int m = warp - kRtProductWarps;
    if (m < 0 || m >= rt_owned(rank, bg)) return;
    rs.wait(0, tid == kRtProductWarps * 32);
    float v = 0.f;
#pragma unroll
    for (int q = 0; q < S::CS; q++) v += part[(q * 2 + m) * 32 + lane];
    const int gi = rank + S::CS * m;
    put_all_async<S::CS>(sc + (gi / 2) * N + 32 * (gi % 2) + lane, v, px.of(0));
  };
  // Step t's weights, rank 0's also into the trace (cpu/e23.h): a_t and the next read weights
  // r_{t+1} (t = -1: r_0 alone).
  auto attend = [&](int64_t t) {
    for (int g = warp; g < bg; g += kRtThreads / 32) {
      float *row = rank == 0 && gb + g < B ? p.ckpt + (gb + g) * p.ck_len : nullptr;
      float *ta = row && t >= 0 ? row + p.ck_a + t * N : nullptr;
      float *tr = row && t + 1 < p.nt ? row + p.ck_r + (t + 1) * N : nullptr;
      rt_attend<S::CS>(sc, qpart, (int)bg, g, scale2, t >= 0, lane, rbuf + g * N, abuf + g * N,
                       ta, tr);
    }
    __syncthreads();
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
  sync_all<true>();  // every CTA started and initialized before the first remote store
  scores();
  if (tid < pairs) send_q(0.f, n);
  sh.product_from(0, Wh, (unsigned)LW);  // step 0's W_h h0; attend's barrier ends it
  gather();
  px.wait(0);
  attend(-1);
  read_next(false);
  int64_t next_ck = p.C, seg = 1;  // the next checkpoint: before step next_ck, segment seg
  int64_t write_seg = -1;  // the write of step t - 1, due at step t: its checkpoint (0: none)
  // A step as e23_fwd_tc's, with the tape's work as above and the scores' exchange in two rounds.
  // Why no CTA refills a buffer another still reads: CTA X sends step t + 1's partial scores
  // (part) and w . h (qpart) after the barrier past its product warps' waits for every CTA's
  // h_{t+1} (warp w's for CTA w's), which each sends after its step t attention weights (which
  // read sc and qpart), so after its gather (which read part); X sends the sums of step t + 1
  // (sc) once every CTA's partials of step t + 1 arrived. The state buffers as e23_fwd_tc's.
  for (int64_t t = 0; t < p.nt; t++) {
    const int buf = (int)(t & 1);
    __syncthreads();  // the halves' partial reads in up
    if (fin) {
      const float2 s = sh.sum(n, r);
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
    if (write_seg >= 0) write_step(write_seg);
    if (warp < kRtProductWarps) hx.wait((buf ^ 1) * S::CS + warp, lane == 0);
    sw.product_from(buf ^ 1, Ww, (unsigned)LW);
    __syncthreads();  // W_write's partials in red2, h_t's units in hl
    // w_t and the CTA's part of w_t . h_t for batch row wn = warp - kRtRows (lane: units r,
    // r + 1), on the warps past the finishing ones, after their scores: the finishing warps go
    // on to W_h's product and the softmaxes, which need w . h last (3.28 -> 3.24 us a step).
    const int wn = warp - kRtRows;
    auto w_step = [&]() {
      if (wn < 0 || wn >= bg) return;  // (whole warps)
      float q = 0.f;
      if (gb + wn < B) {
        float2 s = sw.sum(wn, r);
        s.x *= uw, s.y *= uw;
        *reinterpret_cast<float2 *>(wl + wn * R + r) = s;
        *reinterpret_cast<float2 *>(p.ckpt + (gb + wn) * p.ck_len + p.ck_w + t * d + c) = s;  // w_t
        const float2 h2 = *reinterpret_cast<const float2 *>(hl + wn * R + r);
        q = s.x * h2.x + s.y * h2.y;
      }
      send_q(q, wn);
    };
    scores();
    w_step();
    if (t + 1 < p.nt) sh.product_from(buf ^ 1, Wh, (unsigned)LW);
    gather();
    px.wait(0);
    attend(t);
    read_next(true);
    write_seg = t + 1 == next_ck && t + 1 < p.nt ? seg : 0;
    if (t + 1 == next_ck) next_ck += p.C, seg++;
  }
  if (write_seg >= 0) write_step(write_seg);  // the last step's
  if (treal) store_block(p.tapeT + ((gb + tn) * N + s0) * d + r0 + u0, H, d);  // the final tape
}
