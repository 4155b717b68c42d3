// The E23 backward with the tape and its gradient in registers, e23_bwd_rt (included by cuda/e23.cu
// after e23_bwd_tc, whose dw and dpre exchanges, softmax gradients and inverted walk it shares):
// B = 64 N = 64's plan, the shape of e23_fwd_rt (d = 512 on clusters of 8 CTAs of R = 64 units,
// N = 64 slots, 5 batch rows a cluster). There e23_bwd_tc keeps the tape and dH in shared memory
// (160 KB a CTA) and its four slot loops over them, on the 5 warps that hold the rows' pairs, took
// ~16 000 of the step's ~22 600 cycles (docs/PERF.md, session 24). Here every thread holds a block
// of every batch row's tape H and of dH as floats (160 registers): the sums over units (da, dr)
// are reduce-scatters by shuffles, those over slots (dw, the two reads back) too within a warp and
// then through shared memory. Both weight slices stay in shared memory (as e23_fwd_rt's, scaled
// f16: exact for bf16 weights) and every product loads its A fragments from there
// (tc::Step::product_from). dw and dpre go to the products as f16 scaled per CTA and batch row
// (put_scaled). B = 64 N = 64: 12.0 -> 8.6 us a step (docs/PERF.md, session 28); the sums over
// units as a reduce-scatter and an all-gather (as e23_fwd_rt's scores): 8.56 (session 29); dw and
// dpre in half the bytes, the bound by one REDUX: 8.26 (session 30); each product before the
// softmax gradient it does not need, dw's sums and sends before da's loop, the per-row
// coefficients loaded ahead of their loops: 7.97 -> 7.22 (session 32); the slot loops' vectors
// placed free of bank conflicts (vperm) and the step back in three instructions an element:
// 7.22 -> 6.67 (session 34); the trace's and h's addresses found once: 6.67 -> 6.54-6.62
// (session 35); dH's rank-3 update on tensor cores (the lanes laid out as mma's accumulator):
// 6.57 -> 6.39; the carry's slot sums deferred into the next step's second loop: 6.14; the
// trace by cp.async a step ahead, no barrier after the first loop, dH in the accumulators' order:
// 6.01-6.04 (session 36). Outside the steps (session 37): the replay's loads of several rows in
// flight together and the segments' checkpoints prefetched into L2 (the kernel 2 950 -> 2 940 us a
// call), and db summed here a batch row at a time (db_rows), not from dxw afterwards.
//
// The walk is e23_bwd_tc's inverted walk (kInverted): each segment starts from its end tape (the
// next checkpoint, or the last segment's checkpoint replayed through its steps), steps the tape
// back a step at a time, H_t = (H_{t+1} - a_t w_t) / (1 - a_t), and replays the step's tape from
// the segment's checkpoint where the bound on the errors' growth passes 2^kInvBits.
//
// Thread tid = 32 warp + 4 ug + sg holds every batch row g < 5 of the group at slots 8 warp + 2 sg
// + j (j < 2) and units 8 ug + u (u < 8) of the CTA's R: 80 floats of H and 80 of dH, as an
// mma m16n8's accumulators lie (lane = 4 row + column pair; mma_bf16_16816). 256 threads
// (8 warps, 2 a scheduler: up to 255 registers; at 320 threads, 3 warps on some scheduler leave
// 168, and the 128 floats a thread of e23_fwd_rt's layout would hold spilled). The pair threads
// (the first bg R / 2) finish units (r, r + 1) of batch row n as e23_bwd_tc's do. The threads
// carry the group's entries of a step's trace (a_t, r_t: row k / 64, slot k % 64), of w_t and of
// h_{t-1} (row k / 64, unit k % 64), k = tid and tid + 256, from global memory a step ahead (the
// trace by cp.async).

constexpr int kBrThreads = 256, kBrEntries = kRtRows * kRtN, kBrWarps = kBrThreads / 32;
using BrStep = tc::Step<__half, 2, 4, 8, tc::kSingle, kInvRows>;  // R = 64 rows of d = 512
static_assert(kRtN == kRtR && kBrEntries <= 2 * kBrThreads, "two entries of the trace a thread");
static_assert(kBrWarps == BrStep::CS, "warp w's slot group summed by CTA w");
static_assert(BrStep::D / kBrWarps == BrStep::R, "product warp w's k slice: CTA w's units");

// Shared memory: BrStep's state buffers (planes kInvRows rows apart), red, the transposed weight
// slices [R][d + 8] as scaled f16 (rows padded: the fragment loads free of bank conflicts), the
// partial sums of the CTA's slot group gp1 (da) and gp2 (dr) [cs][bg][8], their sums part1 and
// part2 [bg][N], the step's a, r, 1 / (1 - a) [2][bg][N] (by step parity: the next step's arrive
// during this one) and the softmax gradients dsa, dsr [bg][N], w_t [2][bg][R] and dpre [bg][R] at
// the CTA's units (placed by vperm), db's row sums [bg][R] (the pairs': p.db_rows at the end), the
// update's terms ax (below; h_t and h_{t-1} are read from there), the warps' partial sums over
// slots up [8][bg][R], the warps' largest 1 / (1 - a) mx, the factors that scale the state
// buffers' parts back sf [2][cs][bg] (put_scaled), and six mbarriers. 32-byte aligned pieces (wmma
// pointers).
//
// dH's update takes its rank-3 part, scale dsa_i h_t + r_i dpre + scale dsr_i h_{t-1}, from one
// tensor-core product a row and 16 units (mma m16n8k16, bf16 in, f32 accumulating onto dH): M the
// units 8 ug + 2 m + (row >= 8) of tile m, N the warp's 8 slots, K four terms of 4 columns, term
// sg (the lane's, as A's and B's fragments lay their columns) its vector x (h_t, dpre, h_{t-1},
// zero) by its coefficient c (scale dsa, r, scale dsr, zero) as x_hi c_hi + x_lo c_hi + x_hi c_lo
// (bf16 halves: ~2^-17 relative, f32's range). The accumulator then lies as dH's registers do:
// lane (ug, sg) holds units 8 ug .. 8 ug + 7 (tile m: 2 m, 2 m + 1) of slots 2 sg, 2 sg + 1.
// ax holds every term's x as words (x_hi low, x_lo high) [bg][4][kAxLd], units placed by vperm:
// term rows 288 bytes apart, so the 8 lanes of a quarter-warp (2 ug, 4 sg) load 8 distinct bank
// groups. Term slots: 0 and 2 h by step parity (bf16: x_lo = 0), 1 dpre, 3 zero.
constexpr int kAxLd = 72;
__device__ __forceinline__ uint32_t bf16_hilo(float x) {
  const __nv_bfloat16 hi = __float2bfloat16_rn(x);
  const __nv_bfloat162 w = __halves2bfloat162(hi, __float2bfloat16_rn(x - __bfloat162float(hi)));
  return *reinterpret_cast<const uint32_t *>(&w);
}
// x as the sum of a bf16_hilo word's halves
__device__ __forceinline__ float hilo_value(uint32_t w) {
  return __uint_as_float(w << 16) + __uint_as_float(w & 0xffff0000u);
}
// Two values rounded to bf16, as a word: `low` in its low half, `high` in its high half.
__device__ __forceinline__ uint32_t bf16_pair(float low, float high) {
  const __nv_bfloat162 w = __floats2bfloat162_rn(low, high);
  return *reinterpret_cast<const uint32_t *>(&w);
}
__device__ __forceinline__ void mma_bf16_16816(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                               uint32_t a3, uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

struct BrLay {
  size_t red, wh, ww, gp1, gp2, part1, part2, as, rs, ia, dsa, dsr, wl, dpl, db, ax, up, mx, sf;
  size_t bars;
  size_t total;
};
__host__ __device__ inline BrLay br_layout(int64_t d, int cs) {
  BrLay l{};
  Carve cv{(tc::hb_span(d, 1, kInvRows) + 31) & ~(size_t)31};
  auto take = [&](size_t bytes) { return cv.take((bytes + 31) & ~(size_t)31); };
  const size_t f = sizeof(float), row = (size_t)kBrEntries * f;  // [bg][N] = [bg][R]
  l.red = take((size_t)8 * 8 * tc::ldr(kRtR) * f);
  l.wh = take((size_t)kRtR * (d + 8) * 2);
  l.ww = take((size_t)kRtR * (d + 8) * 2);
  l.gp1 = take(cs * kRtRows * 8 * f);
  l.gp2 = take(cs * kRtRows * 8 * f);
  l.part1 = take(row);
  l.part2 = take(row);
  l.as = take(2 * row), l.rs = take(2 * row), l.ia = take(2 * row), l.dsa = take(row);
  l.dsr = take(row), l.wl = take(2 * row), l.dpl = take(row), l.db = take(row);
  l.up = take(kBrWarps * row);
  l.ax = take((size_t)kRtRows * 4 * kAxLd * 4);
  l.mx = take(kBrWarps * f);
  l.sf = take(2 * cs * kRtRows * f);
  l.bars = take(6 * 8);
  l.total = cv.at;
  return l;
}

// Where unit u of a [bg][R] vector that the slot loops read (w_t, dpre: vload; ax's words)
// lies in its row: the units 8 ug .. 8 ug + 7 of lane group ug as two 4-unit halves 32 floats
// apart. A quarter-warp's lanes (ug 2q and 2q + 1, every sg) then read ax's 4 term rows (288
// bytes apart) in 8 distinct 16-byte bank groups; with the units in order, sg and ug's offsets
// collided. (It was placed so when lane = 8 sg + ug, for the 8 groups' loads: 8 wavefronts a load
// -> 4, docs/PERF.md, session 34.) Units r, r + 1 (r even) stay adjacent, so the pairs' float2
// accesses keep their form.
static_assert(kRtR == 64, "vperm places 8 groups of 8 units");
__device__ __forceinline__ int vperm(int u) { return ((u & 4) << 3) + 4 * (u >> 3) + (u & 3); }
// Entry k (row k / R, unit k % R) of a [bg][R] vector, as vperm places it.
__device__ __forceinline__ int vat(int k) { return (k & ~(kRtR - 1)) | vperm(k & (kRtR - 1)); }
__device__ __forceinline__ void load8v(float (&v)[8], const float *row, int ug) {
  *reinterpret_cast<float4 *>(v) = *reinterpret_cast<const float4 *>(row + 4 * ug);
  *reinterpret_cast<float4 *>(v + 4) = *reinterpret_cast<const float4 *>(row + 32 + 4 * ug);
}

// The warp's share of sum_j c_j X[j][u] over its slots (the thread's 2, then the warp's 4 slot
// groups, lanes 1 and 2 apart, by a reduce-scatter) into up at units uo, uo + 1 (uo: the lane's
// pair of its 8 units).
__device__ __forceinline__ void slot_sums(const float (&X)[2][8], float c0, float c1, float *up,
                                          int sg) {
  float v[8];
#pragma unroll
  for (int u = 0; u < 8; u++) v[u] = c0 * X[0][u] + c1 * X[1][u];
  fold<4>(v, sg & 2, 2);
  fold<2>(v, sg & 1, 1);
  *reinterpret_cast<float2 *>(up + 4 * (sg >> 1) + 2 * (sg & 1)) = make_float2(v[0], v[1]);
}
// The partial sums over the CTA's units of every row's 2 slots (v[2 g + j]; the thread's 8 units
// summed) reduce-scattered over the 8 unit groups (lanes 4, 8, 16 apart) and sent to the CTA that
// sums the warp's slot group, CTA `to` (row g slot j at gp[8 g + j]; counted on bar): unit group
// ug sends row ug / 2's slot ug % 2, groups 0 and 1 row 4's. The warp's lanes all store to that
// one CTA.
template <int CS>
__device__ __forceinline__ void unit_sums_send(float (&v)[2 * kRtRows], float *gp, uint32_t bar,
                                               int ug, int to) {
  static_assert(kRtRows == 5, "rows 0-3 scattered over the 8 lanes, row 4 summed");
  float x[8] = {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]}, y[2] = {v[8], v[9]};
  fold<4>(x, ug & 4, 16);
  fold<2>(x, ug & 2, 8);
  fold<1>(x, ug & 1, 4);
  fold<1>(y, ug & 1, 4);
  y[0] += __shfl_xor_sync(0xffffffffu, y[0], 8);
  y[0] += __shfl_xor_sync(0xffffffffu, y[0], 16);
  put_some_async<CS, CS>(gp + (ug >> 1) * 8 + (ug & 1), x[0], bar, to);
  if (ug < 2) put_some_async<CS, CS>(gp + 4 * 8 + ug, y[0], bar, to);
}

template <typename T>
__global__ void __launch_bounds__(kBrThreads, 1) e23_bwd_rt(P23<T> p) {
  using S = BrStep;
  constexpr int R = kRtR, N = kRtN, CS = S::CS, bg = kRtRows, SL = bg * R;
  constexpr int64_t d = S::D, LW = d + 8;
  extern __shared__ __align__(128) unsigned char br_smem[];
  int rank, cs, group;
  cluster_pos<true>(&rank, &cs, &group);
  if (cs != CS || p.d != d || p.N != N || p.bg != bg || blockDim.x != kBrThreads) __trap();
  const int C = (int)p.C;
  const int64_t gb = (int64_t)group * bg, r0 = (int64_t)rank * R, B = p.B, nt = p.nt;
  const int64_t K = (nt + C - 1) / C;
  const BrLay l = br_layout(d, CS);
  const int tid = (int)threadIdx.x, warp = tid >> 5, lane = tid & 31, sg = lane & 3, ug = lane >> 2;
  const int s0 = 8 * warp + 2 * sg, u0 = 8 * ug;  // the thread's slots and units
  auto ckrow = [&](int64_t g) { return p.ck_in + (gb + g) * p.ck_len; };
  // The thread's block of checkpoint kseg and its entries of the segment's first `steps` steps of
  // the trace into L2 (no registers held): the segment's start then loads them from L2, not HBM,
  // and so do its replays (B = 64 N = 64, with the replay's rows together: kernel -10..-20 us a
  // call, docs/PERF.md session 37).
  auto prefetch_segment = [&](int64_t kseg, int steps) {
#pragma unroll
    for (int g = 0; g < bg; g++)
      if (gb + g < B) {
        const float *row = ckrow(g);
#pragma unroll
        for (int j = 0; j < 2; j++) prefetch_l2(row + (kseg * N + s0 + j) * d + r0 + u0);
        for (int s = 0; s < steps; s++) {
          const int64_t t = kseg * C + s;
          prefetch_l2(row + p.ck_w + t * d + r0 + u0);
          prefetch_l2(row + p.ck_a + t * N + s0);
        }
      }
  };
  auto sm = [&](size_t at) { return reinterpret_cast<float *>(br_smem + at); };
  float *gp1 = sm(l.gp1), *gp2 = sm(l.gp2), *part1 = sm(l.part1), *part2 = sm(l.part2);
  float *asb = sm(l.as), *rsb = sm(l.rs), *iab = sm(l.ia), *wlb = sm(l.wl);  // [2] by step parity
  float *dsa = sm(l.dsa), *dsr = sm(l.dsr), *dpl = sm(l.dpl), *dbs = sm(l.db);
  float *up = sm(l.up), *mx = sm(l.mx);
  uint32_t *ax = reinterpret_cast<uint32_t *>(br_smem + l.ax);
  float *sf = sm(l.sf);
  __half *Wh = reinterpret_cast<__half *>(br_smem + l.wh);
  __half *Ww = reinterpret_cast<__half *>(br_smem + l.ww);
  // prologue: W_h^T's and W_write^T's rows of the CTA's units as scaled f16 (the state buffers
  // are the conversion's scratch, so before init_state), the state buffers and sf zero
  S sh(br_smem, sm(l.red)), sw(br_smem, sm(l.red));
  float *scratch = reinterpret_cast<float *>(br_smem);
  // the walk's first replay, while W is staged (nt >= 1: the op checks T)
  prefetch_segment(K - 1, (int)(nt - (K - 1) * C));
  const float uh = rt_stage(Wh, p.Wh, d, r0, scratch, true);  // W_h^T's products scaled back by uh
  const float uw = rt_stage(Ww, p.Ww, d, r0, scratch, true);  // W_write^T's by uw
  sh.init_state((const T *)nullptr, gb, bg, B);
  for (int k = (int)threadIdx.x; k < 2 * CS * bg; k += kBrThreads) sf[k] = 0.f;
  for (int k = (int)threadIdx.x; k < kBrEntries; k += kBrThreads)
    dsr[k] = 0.f, dbs[k] = 0.f;  // dsr_{T}: none; db's sums start
  for (int k = (int)threadIdx.x; k < bg * kAxLd; k += kBrThreads)  // ax's zero term
    ax[((k / kAxLd) * 4 + 3) * kAxLd + k % kAxLd] = 0u;
  // sx: dw / dpre into state buffer 0 / 1 (the group's real rows as scaled f16, and each CTA's
  // factors into sf: put_scaled); gx: the partial da / dr of the CTA's slot group, every CTA's
  // bg x 8, into gp1 / gp2; dx: their sums, every slot group's, into part1 / part2. The sums over
  // units are a reduce-scatter, then an all-gather: warp w's slots 8 w .. 8 w + 7 are CTA w's
  // group, and the warps without pairs add the CTAs' partials of the CTA's group and send the sums
  // to every CTA (1 store a value instead of cs; the bytes set an exchange's time:
  // scripts/bench/dsmem_send_patterns.cu).
  AsyncFills<2> sx, gx, dx;
  const int64_t sx_row = d * (int64_t)sizeof(__half) + CS * (int64_t)sizeof(float);  // + sf's
  sx.init(br_smem + l.bars, (uint32_t)(min((int64_t)bg, B - gb) * sx_row));
  dx.init(br_smem + l.bars + 16, (uint32_t)(SL * (int)sizeof(float)));
  gx.init(br_smem + l.bars + 32, (uint32_t)(cs * bg * 8 * (int)sizeof(float)));
  // the pair threads: units (r, r + 1) of batch row n
  const int n = tid / (R / 2), r = 2 * (tid % (R / 2));
  const int pv = vat(n * R + r);  // the pair's place in the vperm-placed vectors (w_t, dpre)
  const bool act = tid < bg * (R / 2), fin = act && gb + n < B;
  const int64_t c = r0 + r, base = (gb + n) * nt * d + c;
  const float scale = 1.f / sqrtf((float)d);
  // The thread's entries k = ent(q) = tid + 256 q < kBrEntries of a step's trace and state: a_t,
  // r_t (row k / 64, slot k % 64), w_t and h_t (row k / 64, unit k % 64); zeros past the group's
  // real rows.
  auto ent = [&](int q) { return tid + kBrThreads * q; };
  auto real = [&](int q) { return ent(q) < kBrEntries && gb + ent(q) / 64 < B; };
  // The entries' places, fixed through the walk and so found once, not in 64-bit arithmetic at
  // every step's head, which is on the walk's chain (B = 64 N = 64: 6.66-6.68 -> 6.60-6.64 us a
  // step, session 35): their trace row and their column of hs (null where not real).
  const float *tq[2];
  const T *hq[2];
#pragma unroll
  for (int q = 0; q < 2; q++) {
    tq[q] = real(q) ? ckrow(ent(q) / 64) + ent(q) % 64 : nullptr;
    hq[q] = real(q) ? p.hs_in + (gb + ent(q) / 64) * nt * d + r0 + ent(q) % 64 : nullptr;
  }
  auto h_raw = [&](int q, int64_t t) {  // h_t as stored (t = -1: h0 or zero)
    const int64_t g = gb + ent(q) / 64, u = r0 + ent(q) % 64;
    return !hq[q] ? T(0.f) : t >= 0 ? hq[q][t * d] : p.h0 ? p.h0[g * d + u] : T(0.f);
  };
  // The lane's 8 units of row g of a vperm-placed [bg][R] vector.
  auto vload = [&](float (&v)[8], const float *x, int g) { load8v(v, x + g * R, ug); };
  // Row g's words of h_t in ax (term slot t's parity), and the entries' h_t stored there.
  auto h_words = [&](int64_t t, int g) { return ax + (g * 4 + 2 * (int)(t & 1)) * kAxLd; };
  auto h_store = [&](int64_t t, const T (&h)[2]) {
#pragma unroll
    for (int q = 0; q < 2; q++)
      if (ent(q) < kBrEntries) h_words(t, ent(q) >> 6)[vperm(ent(q) & 63)] = bf16_hilo(load(&h[q]));
  };
  // Step t's trace by cp.async into the buffers of t's parity, during step t + 1 (no registers
  // hold it in flight, and the head finds it there: B = 64 N = 64 -0.07 us a step, session 36).
  // The entries past the group's rows stay zero.
#pragma unroll
  for (int q = 0; q < 2; q++)
    if (ent(q) < kBrEntries && !real(q))
      for (int o = 0; o < 2 * kBrEntries; o += kBrEntries)
        asb[o + ent(q)] = 0.f, rsb[o + ent(q)] = 0.f, wlb[o + vat(ent(q))] = 0.f;
  auto trace_async = [&](int64_t t) {
    const int o = (int)(t & 1) * kBrEntries;
#pragma unroll
    for (int q = 0; q < 2; q++)
      if (tq[q]) {
        const int k = ent(q);
        cp_async4(asb + o + k, tq[q] + p.ck_a + t * N, true);
        cp_async4(rsb + o + k, tq[q] + p.ck_r + t * N, true);
        cp_async4(wlb + o + vat(k), tq[q] + p.ck_w + t * d + r0, true);
      }
    cp_async_commit();
  };
  // dH as the update's accumulators lie (mma_bf16_16816): dHq[g][m] = slots (0, 1) of unit 2 m,
  // then of unit 2 m + 1, so that its products take them in place (in [2][8] order ptxas moved
  // ~54 values a step in and out of the fragments; B = 64 N = 64 ~-0.03 us a step, session 36);
  // dh(g, j, u) is slot j's unit u.
  float H[bg][2][8], dHq[bg][4][4];
  auto dh = [&](int g, int j, int u) -> float & { return dHq[g][u >> 1][(u & 1) * 2 + j]; };
  auto dh_block = [&](float (&X)[2][8], int g) {
#pragma unroll
    for (int j = 0; j < 2; j++)
#pragma unroll
      for (int u = 0; u < 8; u++) X[j][u] = dh(g, j, u);
  };
#pragma unroll
  for (int g = 0; g < bg; g++) {
    float X[2][8];
    load_block(X, p.dtapeT + ((gb + g) * N + s0) * d + r0 + u0, d, gb + g < B && p.dtapeT);
#pragma unroll
    for (int j = 0; j < 2; j++)
#pragma unroll
      for (int u = 0; u < 8; u++) dh(g, j, u) = X[j][u];
  }
  // The tape after `steps` writes of segment kseg: its checkpoint replayed with the forward's
  // expression (tape_write) from the trace. A step's loads of rows 0-2, then of rows 3-4, are in
  // flight together (a row at a time took a latency a row and step: 80 of them for the last
  // segment's replay at C = 16; all five rows' 50 values at once spill).
  auto replay = [&](int64_t kseg, int steps) {
#pragma unroll
    for (int g = 0; g < bg; g++)
      load_block(H[g], ckrow(g) + (kseg * N + s0) * d + r0 + u0, d, gb + g < B);
    auto rows = [&](auto g0, auto g1) {
      constexpr int a0 = decltype(g0)::value, a1 = decltype(g1)::value;
      for (int s = 0; s < steps; s++) {
        const int64_t t = kseg * C + s;
        float w[a1 - a0][8], a[a1 - a0][2];
#pragma unroll
        for (int g = a0; g < a1; g++) {
          const bool in = gb + g < B;
          const float *row = ckrow(g);
#pragma unroll
          for (int u = 0; u < 8; u++) w[g - a0][u] = in ? row[p.ck_w + t * d + r0 + u0 + u] : 0.f;
#pragma unroll
          for (int j = 0; j < 2; j++) a[g - a0][j] = in ? row[p.ck_a + t * N + s0 + j] : 0.f;
        }
#pragma unroll
        for (int g = a0; g < a1; g++)
#pragma unroll
          for (int j = 0; j < 2; j++)
#pragma unroll
            for (int u = 0; u < 8; u++)
              H[g][j][u] = tape_write(H[g][j][u], a[g - a0][j], w[g - a0][u]);
      }
    };
    rows(std::integral_constant<int, 0>{}, std::integral_constant<int, 3>{});
    rows(std::integral_constant<int, 3>{}, std::integral_constant<int, bg>{});
  };
  // carry: dL/dh_t from the steps after t plus dhs_t (dh_T alone after the last step)
  float2 carry = make_float2(0.f, 0.f);
  if (fin && p.dhT) carry = make_float2(load(p.dhT + (gb + n) * d + c), load(p.dhT + (gb + n) * d + c + 1));
  if (fin && nt > 0)
    carry.x += load(p.dhs + base + (nt - 1) * d), carry.y += load(p.dhs + base + (nt - 1) * d + 1);
  // the last step's trace and h_t, then the walk
  if (nt > 0) {
    trace_async(nt - 1);
    const T h[2] = {h_raw(0, nt - 1), h_raw(1, nt - 1)};
    h_store(nt - 1, h);
  }
  __syncthreads();
  sync_all<true>();  // every CTA's mbarriers initialized before the first remote fill
  // The pair's sum over the 8 warps' partial sums in up.
  auto warps_sum = [&]() {
    float2 v[2] = {};
#pragma unroll
    for (int w = 0; w < kBrWarps; w++) {
      const float2 x = *reinterpret_cast<const float2 *>(up + w * SL + n * R + r);
      v[w & 1].x += x.x, v[w & 1].y += x.y;
    }
    return make_float2(v[0].x + v[1].x, v[0].y + v[1].y);
  };
  // dw / dpre of the pair into state buffer b as scaled f16 (tc::Step::put_async_scaled), the
  // factors in sf [b][CS][bg]; the products scaled back by them (sum_scaled) and by the slice's u.
  auto put_scaled = [&](S &st, int b, float2 v) {
    st.put_async_scaled(b, n, c, v.x, v.y, sx.of(b), sf + (b * CS + rank) * bg + n, lane);
  };
  auto scaled_sum = [&](const S &st, int b, float u) {
    return st.sum_scaled(n, r, sf + b * CS * bg + n, bg, u);
  };
  float *upw = up + warp * SL + u0;  // the warp's partial sums, at the lane's units
  // Exchange b's sums of the CTA's slot group (the threads past the pairs', one a row and slot):
  // the CTAs' partials in gp added in rank order (as softmax_back adds them), the sums into every
  // CTA's part.
  constexpr int kGather = bg * (R / 2);  // the first thread past the pairs
  auto gather = [&](int b, const float *gp, float *part) {
    const int k = tid - kGather;
    if (k < 0 || k >= bg * 8) return;
    gx.wait(b, k == 0);
    float v = 0.f;
#pragma unroll
    for (int q = 0; q < CS; q++) v += gp[q * bg * 8 + k];
    put_all_async<CS>(part + (k >> 3) * N + 8 * rank + (k & 7), v, dx.of(b));
  };
  // The product of state buffer b with the slice Wp, then `mid`, then back through the softmax of
  // exchange b (probabilities w, gradients into out), then a barrier. The product first: its
  // state (one all-gather) arrives before the softmax's sums (a reduce-scatter, then an
  // all-gather), and the product is the longer path (~860 cycles), so it runs while they are in
  // flight; `mid` is work that only has to precede the barrier (docs/PERF.md, session 32).
  auto through = [&](int b, const float *part, const float *w, float *out, S &st,
                     const __half *Wp, auto &&mid) {
    sx.wait(b);
    st.product_from(b, Wp, (unsigned)LW);
    mid();
    dx.wait(b);
    if (warp < bg) softmax_back<1>(part, bg, warp, N, w + warp * N, lane, out + warp * N);
    __syncthreads();
  };
  auto pair2 = [&](const float *x, int g) { return *reinterpret_cast<const float2 *>(x + g * N + s0); };
  // The exchanges as e23_bwd_tc's walk (why no CTA refills a buffer another still reads is argued
  // there): dw into state buffer 0 before the step's first loop and da into part1 after it, dpre
  // into buffer 1 and dr into part2 around its third. dw leaves earlier than there, but still
  // after CTA X's wait for the previous step's dr sums, so after every CTA Y sent its dr
  // partials, which follow Y's reads of buffer 0 and of its factors (W_write's product and dpre's
  // sum) in that step. da and dr go through gp1 and gp2 first: CTA X
  // sends the next step's partials into CTA Y's gp after its own wait for every CTA's sums of this
  // step's (dx), which Y sent after reading gp; and the next step's sums into Y's part after every
  // CTA's next partials arrived, each sent after that CTA's barrier past its softmax gradient,
  // which read part.
  float grown = 0.f;
  for (int64_t kseg = K - 1; kseg >= 0; kseg--) {
    const int64_t t0 = kseg * C;
    const int L = (int)min((int64_t)C, nt - t0);
    replay(kseg + 1 < K ? kseg + 1 : kseg, kseg + 1 < K ? 0 : L);
    if (kseg + 1 < K) prefetch_segment(kseg, 0);  // the next segment's start, this one's replays
    grown = 0.f;
    for (int s = L - 1; s >= 0; s--) {
      const int64_t t = t0 + s;
      const int po = (int)(t & 1) * kBrEntries;  // the step's trace buffers
      const float *as = asb + po, *rs = rsb + po, *wl = wlb + po;
      float *ia = iab + po;
      // the bound on the errors' growth, from the step's trace
      float most = 1.f;
      cp_async_wait();
      T hraw[2];  // h_{t-1}: stored after the third loop, its latency hidden
#pragma unroll
      for (int q = 0; q < 2; q++) {
        const int k = ent(q);
        hraw[q] = h_raw(q, t - 1);
        if (k < kBrEntries) {
          const float iq = 1.f / (1.f - as[k]);
          ia[k] = iq;
          most = fmaxf(most, iq);
        }
      }
      const bool exact = inv_bound_passed<kBrWarps>(most, mx, grown, warp, lane);
      if (exact) replay(kseg, s), grown = 0.f;
      // dw = sum_i a_i dH[i] over slots into up first (it needs only dH): the pairs add the warps'
      // partials behind a named barrier and send dw while every warp runs the first loop, so
      // W_write's product finds it there after that loop. The slot sums' per-row coefficients
      // (here and in the second loop) are loaded ahead of the rows' chains: each
      // row's chain of FMAs and shuffles runs alone (the registers leave no room to interleave
      // two), so a load at its head is latency on the step's path. The first loop loads its a_i
      // again rather than keep these 10 registers live through it.
      {
        float2 a[bg];
#pragma unroll
        for (int g = 0; g < bg; g++) a[g] = pair2(as, g);
#pragma unroll
        for (int g = 0; g < bg; g++) {
          float X[2][8];
          dh_block(X, g);
          slot_sums(X, a[g].x, a[g].y, upw + g * R, sg);
        }
      }
      if (act) {  // the pairs' warps wait for every warp's partials, the others only arrive
        bar_sync<1, kBrThreads>();
        if (fin) {
          const float2 dw = warps_sum();
          put_scaled(sw, 0, dw);
          store(p.dw + base + t * d, dw.x), store(p.dw + base + t * d + 1, dw.y);
        }
      } else {
        bar_arrive<1, kBrThreads>();
      }
      // First loop: H_t from H_{t+1} (unless replayed: `back`, compiled in so that no branch
      // splits the rows); the partial da_i = dH[i] . (w - H_t[i]) over the CTA's units to every
      // CTA's part1.
      auto first_loop = [&](auto back) {
        float v[2 * bg];
#pragma unroll
        for (int g = 0; g < bg; g++) {
          float wv[8];
          vload(wv, wl, g);
          // Stepping back, w - H_t[i] = (w - H_{t+1}[i]) / (1 - a_i): e = w - H_{t+1}[i] gives
          // both da_i and H_t[i] = w - e / (1 - a_i), three instructions an element (the step
          // back first took four: B = 64 N = 64 6.74-6.79 -> 6.65-6.67 us a step, session 34).
          const float2 q = decltype(back)::value ? pair2(ia, g) : make_float2(1.f, 1.f);
#pragma unroll
          for (int j = 0; j < 2; j++) {
            const float qj = j ? q.y : q.x;
            float x = 0.f;
#pragma unroll
            for (int u = 0; u < 8; u++) {
              const float e = wv[u] - H[g][j][u];
              x += dh(g, j, u) * e;
              if constexpr (decltype(back)::value) H[g][j][u] = fmaf(-e, qj, wv[u]);
            }
            v[2 * g + j] = x * qj;  // q = 1 where replayed: exact
          }
        }
        unit_sums_send<CS>(v, gp1 + rank * bg * 8 + 2 * sg, gx.of(0), ug, warp);
      };
      if (exact) first_loop(std::false_type{});
      else first_loop(std::true_type{});
      // No barrier here: the named one's phases stay apart (the head's barrier lies between), and
      // what the step writes next (red, dsa, the trace buffers of step t - 1's parity) was last
      // read before the head's (B = 64 N = 64: -0.05 us a step, session 36).
      gather(0, gp1, part1);
      // the next step's trace; sigma = a_t . dsr_{t+1} of the pair warp's row (warp n < bg is row
      // n's) for the carry's deferred term (second loop), while the warp waits for da's sums
      float sig = 0.f;
      through(0, part1, as, dsa, sw, Ww, [&] {
        if (t >= 1) trace_async(t - 1);
        if (warp < bg)
          sig = warp_sum(as[warp * N + lane] * dsr[warp * N + lane] +
                         as[warp * N + lane + 32] * dsr[warp * N + lane + 32]);
      });  // a = softmax(scale H h_t), w = W_write h_t
      // Second loop: sum_i dsa_i H[i] over slots, for dpre, and with it the carry's term of the
      // step after, scale sum_i dsr_{t+1,i} H_{t+1}[i], deferred to here as
      // scale (sum_i (1 - a_i) dsr_{t+1,i} H[i] + sigma w_t) (H_{t+1} = (1 - a) H + a w^T): the
      // fourth loop then sums nothing over slots (B = 64 N = 64: 6.39 -> 6.14 us a step,
      // session 36)
      {
        float2 cv[bg];
#pragma unroll
        for (int g = 0; g < bg; g++) {
          const float2 sa = pair2(dsa, g), q = pair2(dsr, g), av = pair2(as, g);
          cv[g] = make_float2(sa.x + (1.f - av.x) * q.x, sa.y + (1.f - av.y) * q.y);
        }
#pragma unroll
        for (int g = 0; g < bg; g++) slot_sums(H[g], cv[g].x, cv[g].y, upw + g * R, sg);
      }
      __syncthreads();
      T graw[2] = {};  // dhs_{t-1}: converted at the carry, so the load's latency hides
      float2 dpre = make_float2(0.f, 0.f);
      if (act) {
        const float2 tot = scaled_sum(sw, 0, uw), wv = *reinterpret_cast<const float2 *>(wl + pv);
        float2 acc = warps_sum();
        acc.x += sig * wv.x, acc.y += sig * wv.y;
        const uint2 hw = *reinterpret_cast<const uint2 *>(h_words(t, n) + vperm(r));
        const float2 hv = make_float2(hilo_value(hw.x), hilo_value(hw.y));
        dpre = make_float2((carry.x + tot.x + scale * acc.x) * (1.f - hv.x * hv.x),
                           (carry.y + tot.y + scale * acc.y) * (1.f - hv.y * hv.y));
        *reinterpret_cast<float2 *>(dpl + pv) = dpre;
        float2 &dbp = *reinterpret_cast<float2 *>(dbs + n * R + r);  // db's row sums, in f32
        dbp.x += dpre.x, dbp.y += dpre.y;
        *reinterpret_cast<uint2 *>(ax + (n * 4 + 1) * kAxLd + vperm(r)) =
            make_uint2(bf16_hilo(dpre.x), bf16_hilo(dpre.y));
      }
      __syncthreads();
      // dpre's sends after the barrier: the third loop needs only dpl, W_h's product (after it)
      // the sends
      if (fin) {
        put_scaled(sh, 1, dpre);
        store(p.dxw + base + t * d, dpre.x), store(p.dxw + base + t * d + 1, dpre.y);
        if (t >= 1) graw[0] = p.dhs[base + (t - 1) * d], graw[1] = p.dhs[base + (t - 1) * d + 1];
      }
      // Third loop: the partial dr_i = H[i] . dpre over the CTA's units to every CTA's part2
      {
        float v[2 * bg];
#pragma unroll
        for (int g = 0; g < bg; g++) {
          float dp[8];
          vload(dp, dpl, g);
#pragma unroll
          for (int j = 0; j < 2; j++) {
            float x = 0.f;
#pragma unroll
            for (int u = 0; u < 8; u++) x += H[g][j][u] * dp[u];
            v[2 * g + j] = x;
          }
        }
        unit_sums_send<CS>(v, gp2 + rank * bg * 8 + 2 * sg, gx.of(1), ug, warp);
      }
      gather(1, gp2, part2);
      h_store(t - 1, hraw);
      through(1, part2, rs, dsr, sh, Wh, [] {});  // r = softmax(scale H h_{t-1}), W_h
      // W_h^T dpre for the carry read before the fourth loop: the pairs' loads and FMAs fill the
      // loop's latency (B = 64 N = 64: -0.05 us a step, session 32)
      float2 hdp = make_float2(0.f, 0.f);
      if (act) hdp = scaled_sum(sh, 1, uh);
      // Fourth loop: dH through the step, dH_t[i] = (1 - a_i) dH[i] + scale dsa_i h_t + r_i dpre +
      // scale dsr_i h_{t-1}, the rank-3 part on tensor cores (mma_bf16_16816: 4 a row, not 48 FP
      // instructions; B = 64 N = 64: 6.57 -> 6.39 us a step, session 36). The lane's term: its
      // words' row in ax and its slot's coefficient.
      const uint32_t *xa = sg == 0 ? h_words(t, 0) : sg == 2 ? h_words(t - 1, 0) : ax + sg * kAxLd;
      const float *cb = (sg == 1 ? rs : sg == 2 ? dsr : dsa) + 8 * warp + ug;
      const float cm = sg == 1 ? 1.f : sg == 3 ? 0.f : scale;
#pragma unroll
      for (int g = 0; g < bg; g++) {
        const float2 av = pair2(as, g);
        const float cf = cm * cb[g * N];
        const uint32_t b0 = bf16_pair(cf, cf);                                 // c_hi, c_hi
        const uint32_t b1 = bf16_pair(cf - __uint_as_float(b0 << 16), 0.f);  // c_lo, 0
        float xw[8];
        load8v(xw, reinterpret_cast<const float *>(xa + g * 4 * kAxLd), ug);
        const float o0 = 1.f - av.x, o1 = 1.f - av.y;
#pragma unroll
        for (int m = 0; m < 4; m++) {
          float(&c4)[4] = dHq[g][m];
          c4[0] *= o0, c4[1] *= o1, c4[2] *= o0, c4[3] *= o1;
          const uint32_t x0 = __float_as_uint(xw[2 * m]), x1 = __float_as_uint(xw[2 * m + 1]);
          mma_bf16_16816(c4, x0, x1, x0, x1, b0, b1);
        }
      }
      // the carry without its slot sums (deferred to the next step's second loop): no barrier
      if (act) carry = make_float2(hdp.x + load(&graw[0]), hdp.y + load(&graw[1]));
    }
  }
  if (nt > 0) {  // step 0's deferred term: scale sum_i dsr_{0,i} H_0[i]
#pragma unroll
    for (int g = 0; g < bg; g++) {
      const float2 q = pair2(dsr, g);
      slot_sums(H[g], q.x, q.y, upw + g * R, sg);
    }
    __syncthreads();
    if (act) {
      const float2 back = warps_sum();
      carry.x += scale * back.x, carry.y += scale * back.y;
    }
  }
#pragma unroll
  for (int g = 0; g < bg; g++)
    if (gb + g < B) {
      float X[2][8];
      dh_block(X, g);
      store_block(p.dtape0 + ((gb + g) * N + s0) * d + r0 + u0, X, d);
    }
  if (fin) {
    store(p.dh0 + (gb + n) * d + c, carry.x), store(p.dh0 + (gb + n) * d + c + 1, carry.y);
    *reinterpret_cast<float2 *>(p.db_rows + (gb + n) * d + c) =
        *reinterpret_cast<const float2 *>(dbs + n * R + r);
  }
}
