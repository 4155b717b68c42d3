// The E23 backward's sequential part on tensor cores (bf16, the tilings of E23_TC_TILINGS),
// included by cuda/e23.cu after the forward. The CTA owns units [r0, r0 + R) as in e23_fwd_tc;
// thread q finishes the column pair (c, c + 1), c = r0 + 2 (q % (R / 2)), of batch row
// n = q / (R / 2), and the sums over the CTA's R columns are reduce-scatters over those threads.
//
// Two tc::Steps keep the fragments of the CTA's rows of W_write^T and W_h^T in registers; they
// share tc::Step's state buffers: buffer 0 carries dw (the write's gradient) and buffer 1 dpre,
// each as hi and lo parts, written into every CTA. Each segment of C steps is replayed from its
// checkpoint with the forward's trace (cpu/e23.h): a_t, r_t and w_t are read from ckpt and
// H_{t+1} = (1 - a_t) H_t + a_t w_t^T into the segment store (a thread a column and four slots),
// with nothing to exchange. Where a segment's C tapes do not fit on chip but CS < C of them do,
// the segment is walked in parts of at most CS steps from its end, each replayed from the
// checkpoint (the steps before the part in registers). Where no part of kMinPart steps fits, the
// walk may keep no segment store at all and step one tape back instead (kInverted below). The walk
// back exchanges twice a step: dw and the partial da = dH . (w - H), then dpre and the partial
// dr = H . dpre.
//
// Arrays indexed by slot i, batch row g and unit jj are laid out [i][g][R] (f32): the pair thread
// reads float2 at (g = n, jj = c - r0), the replay a column of four slots. The tape gradient
// dH [N][bg][R], the segment's w_t ws [C][bg][R] and its tapes seg [CS][N][bg][R] live in shared
// memory when they fit, else in the CTA's global scratch (L2; then CS = C).
//
// A step's exchanges are st_async fills counted on the receiver's mbarriers (cuda/async_fill.cuh:
// no cluster barrier, whose release costs a GPU-scope membar a step on Hopper); why no CTA
// refills a buffer that another still reads is argued at the walk. One cluster barrier publishes
// the mbarriers' initialization before any remote store; every fill is waited for before the next.

// Where the walk's tapes come from (the kernel's MODE):
// - kSegGlobal: each segment replayed into the CTA's global scratch (L2); the column sums run
//   after the slot loops;
// - kSegOnChip: replayed into shared memory, in parts of CS steps where C do not fit; the column
//   sums fused into the slot loops;
// - kInverted: no segment store. The walk keeps one tape in shared memory, the segment's end (the
//   next checkpoint, or for the last segment the forward's write replayed from its checkpoint), and
//   steps it back in the first slot loop of each step: H_s = (H_{s+1} - a_s w_s) / (1 - a_s).
//   Errors grow by 1 / (1 - a) a step: where the product since the last exact tape of the step's
//   largest 1 / (1 - a) (over the group's rows and slots) would pass 2^kInvBits, the step's tape
//   is replayed from the segment's checkpoint instead (exact; s steps of the write) and the
//   product starts again. The column sums fused. Its state buffers' planes are kInvRows rows apart
//   where unpacked (tc::hb_span): dH and the tape then fit beside everything else at 5 batch rows
//   of 64 units and N = 64 (B = 64 N = 64 on clusters of 8).
enum TbMode { kSegGlobal, kSegOnChip, kInverted };
constexpr int kInvRows = 5;
constexpr float kInvBits = 3.f;
// The rows between the state buffers' planes (tc::Step's PR): the group's rows where packed, else
// kInvRows for the inverted walk and a whole part otherwise. The group may have at most these.
__host__ __device__ constexpr int tb_plane_rows(bool pack, bool inv) {
  return pack ? 4 : inv ? kInvRows : 8;
}

// Shared memory after tc::Step's state buffers: red [NW][8][R + 4] f32, the partial sums
// part1/part2 [cs][bg][N], a and r [C][bg][N] (kInverted: [bg][N], the step's, 1 / (1 - a) in ia
// and the warps' largest of it in mx [NW]), the softmax gradients dsa/dsr [bg][N], dpre of the
// CTA's units [bg][R] and the slot split's partial sums xp [threads] float2 (kInverted: only with
// the split), then dH, ws and seg when on chip (kInverted: seg holds the one tape, ws is not
// kept), and the fills' four mbarriers. The transposed slices are staged over everything from red
// on before their fragments are loaded (the mbarriers are initialized after). inv_pr: 0, else
// kInverted's plane rows (tb_plane_rows).
struct TbLay {
  size_t red, part1, part2, as, rs, ia, mx, dsa, dsr, dpl, xp, dh, ws, seg, bars, total;
};
__host__ __device__ inline TbLay tb_layout(int64_t d, int64_t N, int64_t R, int64_t bg, int cs,
                                           int nw, int64_t C, int64_t CS, bool dh_on,
                                           bool w_on, bool seg_on, int inv_pr,
                                           bool split) {
  TbLay l{};
  size_t at = inv_pr ? (tc::hb_span(d, 2, inv_pr) + 31) & ~(size_t)31 : tc::hb_bytes(d);
  auto take = [&](size_t bytes) {  // 32-byte aligned: wmma pointers
    size_t o = at;
    at += (bytes + 31) & ~(size_t)31;
    return o;
  };
  const size_t f = sizeof(float), slot = (size_t)bg * R * f;
  l.red = take((size_t)nw * 8 * tc::ldr(R) * f);
  l.part1 = take((size_t)cs * bg * N * f);
  l.part2 = take((size_t)cs * bg * N * f);
  const int64_t steps = inv_pr ? 1 : C;  // of a and r
  l.as = take((size_t)steps * bg * N * f);
  l.rs = take((size_t)steps * bg * N * f);
  l.ia = inv_pr ? take((size_t)bg * N * f) : 0;
  l.mx = inv_pr ? take((size_t)nw * f) : 0;
  l.dsa = take((size_t)bg * N * f);
  l.dsr = take((size_t)bg * N * f);
  const bool pair_bufs = !inv_pr || split;  // dpl and xp
  l.dpl = pair_bufs ? take(slot) : 0;
  l.xp = pair_bufs ? take((size_t)nw * 32 * 2 * f) : 0;
  l.dh = dh_on ? take((size_t)N * slot) : 0;
  l.ws = w_on && !inv_pr ? take((size_t)C * slot) : 0;
  l.seg = seg_on ? take((size_t)(inv_pr ? 1 : CS) * N * slot) : 0;
  l.bars = take(4 * 8);
  const size_t staged = l.red + (size_t)R * d * 2;
  l.total = at > staged ? at : staged;
  return l;
}

// Global scratch per CTA (floats): dH, w_t and the segment's tapes where they are not on chip.
__host__ __device__ inline int64_t tb_scratch(int64_t N, int64_t R, int64_t bg, int64_t C,
                                              bool dh_on, bool w_on, bool seg_on) {
  return ((dh_on ? 0 : N) + (w_on ? 0 : C) + (seg_on ? 0 : C * N)) * bg * R;
}

// Batch row g's gradient through p = softmax(scores) by one warp: out = p (v - p . v), v summed
// from the CS CTAs' partials part[(q * bg + g) * N + i]. Slot i on lane i % 32, register i / 32
// (K of them, N <= 32 K), reduced over the lanes that hold values: the walk waits on this chain.
// The partials CTA by CTA for all K slots at once, every load in flight together (slot by slot,
// each chain waited for each CTA's load in turn); the sums' order is the same.
template <int K, int CS>
__device__ void softmax_back_lanes(const float *part, int bg, int g, int N, const float *p,
                                   int lane, float *out) {
  float v[K] = {}, pk[K], dot = 0.f;
  const float *at = part + g * N + lane;
#pragma unroll
  for (int q = 0; q < CS; q++, at += bg * N)
#pragma unroll
    for (int k = 0; k < K; k++)
      if (lane + 32 * k < N) v[k] += at[32 * k];
#pragma unroll
  for (int k = 0; k < K; k++) {
    pk[k] = lane + 32 * k < N ? p[lane + 32 * k] : 0.f;
    dot += pk[k] * v[k];
  }
  dot = warp_sum(dot, lanes_width<K>(N));
#pragma unroll
  for (int k = 0; k < K; k++)
    if (lane + 32 * k < N) out[lane + 32 * k] = pk[k] * (v[k] - dot);
}
template <int CS>
__device__ __forceinline__ void softmax_back(const float *part, int bg, int g, int N,
                                             const float *p, int lane, float *out) {
  if (N <= 32) softmax_back_lanes<1, CS>(part, bg, g, N, p, lane, out);
  else if (N <= 64) softmax_back_lanes<2, CS>(part, bg, g, N, p, lane, out);
  else if (N <= 96) softmax_back_lanes<3, CS>(part, bg, g, N, p, lane, out);
  else {
    float dot = 0.f;
    for (int i = lane; i < N; i += 32) {
      const float v = partial_sum(part + g * N + i, bg * N, CS);
      out[i] = v;
      dot += p[i] * v;
    }
    dot = warp_sum(dot);
    for (int i = lane; i < N; i += 32) out[i] = p[i] * (out[i] - dot);
  }
}

// The inverted walk's bound: `most` (the thread's largest 1 / (1 - a) of the step, >= 1) made the
// CTA's through mx [NW] (a barrier; alike in every thread after it), its log2 added to `grown`;
// returns whether the bound passed 2^kInvBits (also where a = 1: inf), so the step's tape must be
// replayed exactly. The warp's maximum is one REDUX, not 5 shuffle levels: it sits before the
// step's first barrier (e23_bwd_rt B = 64 N = 64: 8.37 -> 8.27 us a step, docs/PERF.md session 30).
// The log2 is MUFU.LG2 (__log2f, ~2^-22 off), not log2f's ~25 dependent instructions after the
// barrier: the bound needs no more (session 32).
template <int NW>
__device__ __forceinline__ bool inv_bound_passed(float most, float *mx, float &grown, int warp,
                                                 int lane) {
  most = warp_max_redux(most);
  if (lane == 0) mx[warp] = most;
  __syncthreads();
#pragma unroll
  for (int w = 0; w < NW; w++) most = fmaxf(most, mx[w]);
  grown += __log2f(most);
  return !(grown <= kInvBits);
}

// dH[i]'s value v through the step, (1 - a_i) v + scale (da_i hc + dr_i hp) + r_i dp: its
// slot's a_i in ai, scale da_i in si, r_i in ri and scale dr_i in qi (h_t hc, h_{t-1} hp, dpre dp).
__device__ __forceinline__ float2 dh_through(float2 v, float ai, float si, float ri, float qi,
                                             float2 hc, float2 hp, float2 dp) {
  const float2 u = make_float2((1.f - ai) * v.x + si * hc.x + ri * dp.x,
                               (1.f - ai) * v.y + si * hc.y + ri * dp.y);
  return make_float2(u.x + qi * hp.x, u.y + qi * hp.y);
}
// The pair thread's last slot loop of a step: returns sum_i dr_i H[i] at the pair and takes every
// dH[i] through the step (dh_through; the softmax gradients da and dr). dH's update ran in a loop
// of its own between the exchanges before; there, dr's loop now reads only the tape (B = 64
// N = 64, cycles a step: that loop 7 100 -> 3 600, this one 4 300 -> 4 800).
__device__ __forceinline__ float2 read_back(int N, int SL, const float *__restrict__ H,
                                            float *__restrict__ dH, const float *__restrict__ dr,
                                            const float *__restrict__ da,
                                            const float *__restrict__ a,
                                            const float *__restrict__ r, float scale, float2 hc,
                                            float2 hp, float2 dp) {
  float2 acc = make_float2(0.f, 0.f);
  // Eight slots at a time, their loads before their stores: a slot at a time, each slot's loads
  // waited behind the stores before them (6 900 cycles, not 4 800). The slots' four scalars as
  // float4s where aligned (B = 64 N = 64: N and the slot ranges are multiples of 4).
  const bool vec = (((uintptr_t)dr | (uintptr_t)da | (uintptr_t)a | (uintptr_t)r) & 15) == 0;
  int i = 0;
  for (; i + 8 <= N; i += 8) {
    float di[8], dai[8], ai[8], ri[8];
    float2 x[8], v[8];
    if (vec) {
#pragma unroll
      for (int q = 0; q < 8; q += 4) {
        *reinterpret_cast<float4 *>(di + q) = *reinterpret_cast<const float4 *>(dr + i + q);
        *reinterpret_cast<float4 *>(dai + q) = *reinterpret_cast<const float4 *>(da + i + q);
        *reinterpret_cast<float4 *>(ai + q) = *reinterpret_cast<const float4 *>(a + i + q);
        *reinterpret_cast<float4 *>(ri + q) = *reinterpret_cast<const float4 *>(r + i + q);
      }
    } else {
#pragma unroll
      for (int j = 0; j < 8; j++)
        di[j] = dr[i + j], dai[j] = da[i + j], ai[j] = a[i + j], ri[j] = r[i + j];
    }
#pragma unroll
    for (int j = 0; j < 8; j++)
      x[j] = *reinterpret_cast<const float2 *>(H + (i + j) * SL),
      v[j] = *reinterpret_cast<const float2 *>(dH + (i + j) * SL);
#pragma unroll
    for (int j = 0; j < 8; j++) {
      acc.x += di[j] * x[j].x, acc.y += di[j] * x[j].y;
      v[j] = dh_through(v[j], ai[j], scale * dai[j], ri[j], scale * di[j], hc, hp, dp);
    }
#pragma unroll
    for (int j = 0; j < 8; j++) *reinterpret_cast<float2 *>(dH + (i + j) * SL) = v[j];
  }
  for (; i < N; i++) {
    const float di = dr[i];
    const float2 x = *reinterpret_cast<const float2 *>(H + i * SL);
    acc.x += di * x.x, acc.y += di * x.y;
    float2 *y = reinterpret_cast<float2 *>(dH + i * SL);
    *y = dh_through(*y, a[i], scale * da[i], r[i], scale * di, hc, hp, dp);
  }
  return acc;
}

// dst(k, src(k)) for k = tid, tid + nth, ... < n: four loads in flight before their stores (one
// at a time, each waited for its global load before the next began).
template <typename F, typename G>
__device__ __forceinline__ void gather_in(int n, int tid, int nth, F src, G dst) {
  for (int k0 = tid; k0 < n; k0 += 4 * nth) {
    float v[4];
#pragma unroll
    for (int j = 0; j < 4; j++) v[j] = k0 + j * nth < n ? src(k0 + j * nth) : 0.f;
#pragma unroll
    for (int j = 0; j < 4; j++)
      if (k0 + j * nth < n) dst(k0 + j * nth, v[j]);
  }
}

// The replay of slots [i, i + n), n <= 4, at one column of the segment store: x_{s+1} = (1 - a_s)
// x_s + a_s w_s (the forward's expression) from the checkpoint's v, x_s for s in [s0, s1) stored.
// The column's w_s is one load for its slots, and a_s of the slots are neighbours in as (a step
// as_ on). x[j SL] is slot i + j of step s0, a step `step` floats on; w (a step SL on) and x are
// disjoint, and __restrict__ lets the loads of later steps run ahead of the stores. (A thread an
// element spent ~24 instructions an element and step.)
__device__ __forceinline__ void replay_slots(int s0, int s1, int n, const float (&v0)[4],
                                             const float *__restrict__ a, int as_,
                                             const float *__restrict__ w, float *__restrict__ x,
                                             int SL, int step) {
  float v[4];
  int ai[4];  // a slot past n follows the last real one and is never stored
#pragma unroll
  for (int j = 0; j < 4; j++) {
    v[j] = v0[j], ai[j] = min(j, n - 1);
    if (s0 == 0 && j < n) x[j * SL] = v[j];
  }
#pragma unroll 2
  for (int s = 0; s + 1 < s1; s++) {
    const float ws = w[s * SL];
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const float aj = a[s * as_ + ai[j]];
      v[j] = tape_write(v[j], aj, ws);
      if (s + 1 >= s0 && j < n) x[(s + 1 - s0) * step + j * SL] = v[j];
    }
  }
}

// Hides p's value from the compiler: the DSMEM addresses derived from it (8 CTAs x hi/lo a
// put) are then formed where used instead of being hoisted out of the step loop into registers.
// The compiler no longer knows p for shared either: loads through it are generic.
template <typename X> __device__ __forceinline__ void opaque(X *&p) { asm volatile("" : "+l"(p)); }

// MODE: TbMode. FUSED: the column sums fused into the pair loops (slot_loop below); INV: the
// inverted walk.
template <typename T, int MT, int KS, int NW, bool SPLIT, bool PACK, int MODE>
__global__ void __launch_bounds__(NW * 32, 1) e23_bwd_tc(P23<T> p) {
  constexpr bool FUSED = MODE != kSegGlobal, INV = MODE == kInverted;
  constexpr tc::Operand OP = PACK ? tc::kPacked : tc::kHiLo;
  constexpr int PR = tb_plane_rows(PACK, INV);
  using S = tc::Step<T, MT, KS, NW, OP, PR>;
  using P = tc::Pair<T>;
  constexpr int R = S::R;
  constexpr int64_t d = S::D;
  extern __shared__ __align__(128) unsigned char tc_smem[];
  int rank, cs, group;
  cluster_pos<true>(&rank, &cs, &group);
  // the plan picks the tiling, PACK and MODE
  if (cs != S::CS || p.d != d || p.bg > PR || (bool)p.tb_inv != INV ||
      (bool)p.tb_seg != FUSED || (FUSED && !p.tb_dh) || (MODE == kSegOnChip && !p.tb_w))
    __trap();
  // per-CTA sizes and indices in int (a CTA's arrays are far below 2^31 elements)
  const int N = (int)p.N, bg = (int)p.bg, C = (int)p.C, SL = bg * R;  // SL: floats a slot
  const int64_t gb = (int64_t)group * bg, r0 = (int64_t)rank * R, B = p.B, nt = p.nt;
  const int64_t K = (nt + C - 1) / C;
  const int CS = p.tb_cs;  // steps the segment store holds
  const TbLay l = tb_layout(d, N, R, bg, cs, NW, C, CS, p.tb_dh, p.tb_w, p.tb_seg,
                            INV ? PR : 0, SPLIT);
  auto sm = [&](size_t at) { return reinterpret_cast<float *>(tc_smem + at); };
  float *part1 = sm(l.part1), *part2 = sm(l.part2), *as = sm(l.as), *rs = sm(l.rs);
  float *dsa = sm(l.dsa), *dsr = sm(l.dsr), *dpl = sm(l.dpl), *ia = sm(l.ia), *mx = sm(l.mx);
  float2 *xp = reinterpret_cast<float2 *>(tc_smem + l.xp);
  // A plan with the segment store on chip has dH and w_t there too (tb_plan23's order), and
  // FUSED then takes all three as shared-memory pointers: chosen at run time between shared and
  // global they are generic, every access in the replay and the walk an LD.E / ST.E with 64-bit
  // address arithmetic (FUSED's backward was 7-11% slower so). The others keep the run-time
  // choice: B = 64 N = 64 ran 4% slower with the segment store typed global.
  float *dH, *ws, *seg;
  if constexpr (FUSED) {
    dH = sm(l.dh), ws = INV ? nullptr : sm(l.ws), seg = sm(l.seg);
  } else {
    float *glob = p.scratch + blockIdx.x * p.per_cta;
    dH = p.tb_dh ? sm(l.dh) : glob;
    glob += p.tb_dh ? 0 : N * SL;
    ws = p.tb_w ? sm(l.ws) : glob;
    glob += p.tb_w ? 0 : C * SL;
    seg = p.tb_seg ? sm(l.seg) : glob;
  }
  // prologue: the fragments of W_h^T's and W_write^T's rows, staged in turn over red onwards
  S sh(tc_smem, sm(l.red)), sw(tc_smem, sm(l.red));
  T *Ws = reinterpret_cast<T *>(tc_smem + l.red);
  tc::stage_slice(Ws, p.Wh, d, r0, R, true, d);
  sh.init_state((const T *)nullptr, gb, bg, B);  // every row zero; rows >= bg stay so
  __syncthreads();
  sh.load_a(Ws);
  __syncthreads();
  tc::stage_slice(Ws, p.Ww, d, r0, R, true, d);
  __syncthreads();
  sw.load_a(Ws);
  __syncthreads();  // the staging area (and the mbarriers' space) is reused below
  // The fills: sx dw / dpre into state buffer 0 / 1, hi and lo of the group's real rows (the rows
  // past B stay zero); dx the partial da / dr, every CTA's bg x N, into part1 / part2.
  AsyncFills<2> sx, dx;
  sx.init(tc_smem + l.bars, (uint32_t)(2 * min((int64_t)bg, B - gb) * d * (int64_t)sizeof(T)));
  dx.init(tc_smem + l.bars + 16, (uint32_t)(cs * bg * N * (int)sizeof(float)));
  {  // dH from dtapeT, zeros past B or without it: KB loads of a thread in flight together
    constexpr int KB = 4;
    const int nth = (int)blockDim.x;
    for (int k0 = (int)threadIdx.x; k0 < N * SL; k0 += KB * nth) {
      float v[KB];
#pragma unroll
      for (int j = 0; j < KB; j++) {
        const int k = k0 + j * nth, i = k / SL, g = (k / R) % bg;
        const int64_t bi = gb + g;
        v[j] = k < N * SL && p.dtapeT && bi < B ? load(p.dtapeT + (bi * N + i) * d + r0 + k % R) : 0.f;
      }
#pragma unroll
      for (int j = 0; j < KB; j++)
        if (k0 + j * nth < N * SL) dH[k0 + j * nth] = v[j];
    }
  }
  const int tid = (int)threadIdx.x, nth = (int)blockDim.x, warp = tid >> 5, lane = tid & 31;
  // The slot split (slot_split, cuda/e23.cu): the loops over the N slots at a column pair (dw,
  // dpre's sum, dH's update, the read-back) would leave all but bg R / 2 threads waiting at the
  // next barrier. Thread (sp, pq) takes pair pq and slots [i0, i1), and its partial sums meet in
  // xp. Split threads own their slots of dH at their pair in every loop, so only the column sums
  // read dH across threads.
  const SplitPlace sl(SPLIT, bg, R, NW * 32, N, tid);
  const int n = sl.n, r = sl.r, sp = sl.sp, i0 = sl.i0, i1 = sl.i1;
  const bool sact = sp < sl.SP && n < bg;  // a split thread of a row of the group
  const bool act = sact && sp == 0, fin = act && gb + n < B;  // act: zeros past B
  const int64_t c = r0 + r, base = (gb + n) * nt * d + c;
  const int me = n * R + r;
  const float scale = 1.f / sqrtf((float)d);
  auto pair_at = [&](float *slot) { return reinterpret_cast<float2 *>(slot + me); };
  // the pair's h_t (t = -1: h0 or zero) as stored, into v (zeros where there is none)
  auto hfetch = [&](int64_t t, T *v) {
    const T *src = t >= 0 ? p.hs_in + base + t * d : p.h0 ? p.h0 + (gb + n) * d + c : nullptr;
    if (sact && gb + n < B && src) v[0] = src[0], v[1] = src[1];
  };
  auto hval = [&](const T *v) { return make_float2(load(v), load(v + 1)); };
  auto dhs_at = [&](int64_t t) {
    return fin ? make_float2(load(p.dhs + base + t * d), load(p.dhs + base + t * d + 1))
               : make_float2(0.f, 0.f);
  };
  // The split threads' partial sums v added up at sp == 0 (every thread calls it: a barrier).
  // One xp serves a step's three gathers: between one's reads and the next one's writes there is
  // always a barrier (the product's, the dpre broadcast's or the step's last).
  auto gather = [&](float2 v) {
    if (sl.SP == 1) return v;
    if (sact && sp > 0) sl.put(xp, v);
    __syncthreads();
    return act ? sl.add_others(xp, v) : v;
  };
  // The pair threads' loops over their slots [i0, i1) at the pair: term(i, x, h) gets dH[i] and
  // H[i] there and returns the pair's share of a sum over the units for slot i (dw's loop: da;
  // dr's loop: dr). FUSED (the tapes on chip): those sums are reduce-scatters (scatter_halves,
  // cuda/common.cuh) over the R / 2 pair threads of a (part sp, batch row n), one warp or half of
  // one, 8 slots at a time, and the W / 8 lanes that hold a slot's sum send it to every CTA's part
  // (counted on `bar`): the tape and dH are read once a loop, and no barrier or one-lane sends to
  // all CTAs wait on the sums. Every thread of a warp with split threads runs the same chunks (the
  // shuffles need whole warps); threads past the split add zeros (ie = i0). A chunk's loads are
  // issued before its terms (after term's stores into dH they would wait for each other).
  // Otherwise (the tapes in L2: B = 64, N = 64) the loop only runs term and column_sums forms the
  // sums after it: fused, that case ran 23% slower (37 against 30 us a step; not analysed: the
  // tasks' float4 loads over the whole CTA may hide L2's latency better than five warps' chunks).
  constexpr int W = R / 2, W8 = W / 8;
  const int ie = sact ? i1 : i0, span = (N + sl.SP - 1) / sl.SP;  // span: most slots a part holds
  const bool wact = warp * 32 < sl.SP * sl.pairs;                 // a warp with split threads
  // FUSED: step(i, h) gives the tape value of slot i that the terms take (kInverted's first loop
  // steps it back), stored back after the terms where `store`. A chunk whose 8 slots every lane
  // of the warp holds runs without a predicate a slot (dw's loop: 265 -> 193 instructions a
  // chunk; B64 N64 17.0 -> 14.3 us a step, B4 N8 3.8 -> 3.5).
  // with_dh: whether the terms read dH (dr's loop reads only the tape).
  auto slot_loop = [&](float *Hs, float *part, uint32_t bar, auto term, auto step, bool store,
                       auto with_dh) {
    constexpr bool XD = decltype(with_dh)::value;
    if constexpr (!FUSED) {  // column_sums forms the sums: term runs for its own work alone
      if (XD && sact)
#pragma unroll 2
        for (int i = i0; i < i1; i++) term(i, *pair_at(dH + i * SL), make_float2(0.f, 0.f));
      return;
    }
    if (!wact) return;
    // A chunk's parts: its loads into x and h, its terms (and the stepped-back tape's stores),
    // its sums' scatter and sends.
    using Slots = float2[8];
    auto fetch = [&](int cb, auto whole, Slots &x, Slots &h) {
      constexpr bool F = decltype(whole)::value;
#pragma unroll
      for (int j = 0; j < 8; j++)
        if (F || cb + j < ie)
          x[j] = XD ? *pair_at(dH + (cb + j) * SL) : make_float2(0.f, 0.f),
          h[j] = *pair_at(Hs + (cb + j) * SL);
    };
    auto terms = [&](int cb, auto whole, Slots &x, Slots &h, float (&v)[8]) {
      constexpr bool F = decltype(whole)::value;
#pragma unroll
      for (int j = 0; j < 8; j++)
        if (F || cb + j < ie) h[j] = step(cb + j, h[j]), v[j] = term(cb + j, x[j], h[j]);
        else v[j] = 0.f;
      if (store)
#pragma unroll
        for (int j = 0; j < 8; j++)
          if (F || cb + j < ie) *pair_at(Hs + (cb + j) * SL) = h[j];
    };
    auto send = [&](int cb, float (&v)[8]) {
      scatter_halves<8, W / 2>(v, lane);  // lane: slot (lane % W) / W8's sum, alike in W8 lanes
      const int i = cb + (lane % W) / W8;
      if (i < ie) put_some_async<S::CS, W8>(part + (rank * bg + n) * N + i, v[0], bar, lane % W8);
    };
    auto chunk = [&](int cb, auto whole) {
      float2 x[8], h[8];
      float v[8];
      fetch(cb, whole, x, h);
      terms(cb, whole, x, h, v);
      send(cb, v);
    };
    int cb = i0;
    // Without dH, the whole chunks (a prefix) pipelined: the next one's loads go out before this
    // one's scatter and sends, which the compiler cannot move them above (the sends are asm
    // volatile). B = 64 N = 64: dr's loop 3 580 -> 3 260 cycles; dw's, pipelined too, went from
    // 6 320 to 6 900 (its spills grew).
    if (!XD && __all_sync(0xffffffffu, cb + 8 <= ie)) {
      float2 x[8], h[8];
      fetch(cb, std::true_type{}, x, h);
      for (;;) {
        float v[8];
        terms(cb, std::true_type{}, x, h, v);
        const bool more = __all_sync(0xffffffffu, cb + 16 <= ie);
        if (more) fetch(cb + 8, std::true_type{}, x, h);
        send(cb, v);
        cb += 8;
        if (!more) break;
      }
    }
    for (; cb < i0 + span; cb += 8) {
      if (__all_sync(0xffffffffu, cb + 8 <= ie)) chunk(cb, std::true_type{});
      else chunk(cb, std::false_type{});
    }
  };
  // Not FUSED: this CTA's sums over its R columns into every CTA's part, a task per (batch
  // row g, slot i) with term(g, i, q) its float4 piece q: qs lanes a task (the most that the CTA
  // holds for the tasks left, up to R / 4: where the tasks outnumber the threads, the last round's
  // few tasks take several lanes each), reduced by shuffles. Tasks run from the CTA's last thread
  // down, away from the pair threads' work before them; every thread runs the same rounds, so
  // the shuffles see whole warps. The rounds of qa lanes a task cover tasks [0, ta), a last one
  // of qb lanes the rest.
  auto lanes_for = [&](int count) {  // lanes a task for `count` tasks
    int q = 1;
    while (2 * q <= R / 4 && count * 2 * q <= nth) q *= 2;
    return q;
  };
  auto f4 = [](const float *p) { return reinterpret_cast<const float4 *>(p); };
  auto column_sums = [&](float *part, uint32_t bar, auto term) {
    const int tasks = bg * N, qa = lanes_for(tasks), ta = tasks - tasks % (nth / qa),
              qb = lanes_for(tasks - ta);
    for (int t0 = 0; t0 < tasks;) {
      const int qs = t0 < ta ? qa : qb;
      const int k = nth - 1 - tid, task = t0 + k / qs, lq = k % qs;
      const bool on = task < tasks;
      float sum = 0.f;
      if (on)
#pragma unroll 2
        for (int q = lq; q < R / 4; q += qs) sum += term(task / N, task % N, q);
      sum = warp_sum(sum, qs);
      if (on && lq == 0) put_all_async<S::CS>(part + (rank * bg + task / N) * N + task % N, sum, bar);
      t0 += nth / qs;
    }
  };
  // carry: dL/dh_t from the steps after t plus dhs_t (dh_T alone after the last step)
  float2 carry = make_float2(0.f, 0.f), hcur = carry;  // hcur: the pair's h_t
  if (fin && p.dhT) carry = make_float2(load(p.dhT + (gb + n) * d + c), load(p.dhT + (gb + n) * d + c + 1));
  if (nt > 0) {
    const float2 g = dhs_at(nt - 1);
    T v[2] = {};
    hfetch(nt - 1, v);
    hcur = hval(v), carry.x += g.x, carry.y += g.y;
  }
  auto ck = [&](int64_t bi, int64_t at) { return bi < B ? p.ck_in[bi * p.ck_len + at] : 0.f; };
  // kInverted: the step's trace. a_t and r_t of the group's rows (zeros past B) are loaded into
  // registers during step t + 1's read-back (which still reads a_{t+1} and r_{t+1}; the last
  // step's before the walk), a thread's first two entries (ta, tr; B = 64 N = 64 has 320 on 256
  // threads), and stored into as and rs at step t's start; w_t at the pair, wcur, is loaded a step
  // ahead into wnext. The tape lives in seg; each split thread owns its slots at its pair
  // there in every loop, so stepping it back or replaying it needs no barrier.
  const bool real = sact && gb + n < B;  // a split thread of a row below B
  float2 wcur = make_float2(0.f, 0.f), wnext = wcur;
  bool exact = false;  // kInverted: this step's tape replayed from the checkpoint
  float grown = 0.f;   // kInverted: log2 of the bound on the errors' growth since an exact tape
  auto w_at = [&](int64_t t) {
    const float *q = p.ck_in + (gb + n) * p.ck_len + p.ck_w + t * d + c;
    return real ? make_float2(q[0], q[1]) : make_float2(0.f, 0.f);
  };
  float ta0 = 0.f, ta1 = 0.f, tr0 = 0.f, tr1 = 0.f;
  auto trace_at = [&](int64_t t, int k, int64_t off) {  // entry k of a_t (off ck_a) or r_t (ck_r)
    const int q = div_by(p.div_n, k);
    const int64_t bi = gb + q;
    return k < bg * N && bi < B ? p.ck_in[bi * p.ck_len + off + t * N + (k - q * N)] : 0.f;
  };
  auto trace_load = [&](int64_t t) {
    ta0 = trace_at(t, tid, p.ck_a), tr0 = trace_at(t, tid, p.ck_r);
    ta1 = trace_at(t, tid + nth, p.ck_a), tr1 = trace_at(t, tid + nth, p.ck_r);
  };
  // The pair's tape at its slots after `steps` writes of segment kseg, replayed from the segment's
  // checkpoint with the forward's expression, into seg (steps = 0: the checkpoint itself).
  auto replay_pair = [&](int64_t kseg, int steps) {
    if (!sact) return;
    const int64_t t0 = kseg * C, row = gb + n;
    for (int cb = i0; cb < i1; cb += 8) {
      float2 x[8];
#pragma unroll
      for (int j = 0; j < 8; j++) {
        const int64_t at = (kseg * N + cb + j) * d + c;
        if (cb + j < i1) x[j] = make_float2(ck(row, at), ck(row, at + 1));
      }
      for (int s = 0; s < steps; s++) {
        const float2 w = w_at(t0 + s);
#pragma unroll
        for (int j = 0; j < 8; j++)
          if (cb + j < i1) {
            const float aj = ck(row, p.ck_a + (t0 + s) * N + cb + j);
            x[j] = make_float2(tape_write(x[j].x, aj, w.x), tape_write(x[j].y, aj, w.y));
          }
      }
#pragma unroll
      for (int j = 0; j < 8; j++)
        if (cb + j < i1) *pair_at(seg + (cb + j) * SL) = x[j];
    }
  };
  if (INV && nt > 0) trace_load(nt - 1), wnext = w_at(nt - 1);
  sync_all<true>();  // every CTA's mbarriers initialized before the first remote fill
  for (int64_t kseg = K - 1; kseg >= 0; kseg--) {
    const int64_t t0 = kseg * C;
    const int L = (int)min((int64_t)C, nt - t0);
    // ---- the segment's trace (rows past B: zeros), then its parts: replay, walk back ----
    // kSegOnChip: by cp.async into shared memory, every copy of a thread in flight at once
    // (gather_in's four a round took 7 round trips a segment at B = 64 N = 8). kSegGlobal keeps
    // gather_in (ws may be in global scratch). kInverted: the segment's end tape.
    if constexpr (INV) {
      replay_pair(kseg + 1 < K ? kseg + 1 : kseg, kseg + 1 < K ? 0 : L);
      grown = 0.f;
    } else if constexpr (FUSED) {
      auto copy = [&](float *dst, int64_t bi, int64_t at) {
        cp_async4(dst, p.ck_in + (bi < B ? bi * p.ck_len + at : 0), bi < B);
      };
      for (int k = tid; k < L * bg * N; k += nth) {  // a_t and r_t, [s][g][i]
        const int64_t bi = gb + (k / N) % bg, at = (t0 + k / (bg * N)) * N + k % N;
        copy(as + k, bi, p.ck_a + at), copy(rs + k, bi, p.ck_r + at);
      }
      for (int k = tid; k < L * SL; k += nth)  // w_t, [s][g][jj]
        copy(ws + k, gb + (k / R) % bg, p.ck_w + (t0 + k / SL) * d + r0 + k % R);
      cp_async_wait();
    } else {
      gather_in(L * bg * N, tid, nth, [&](int k) {  // a_t, [s][g][i]
        return ck(gb + (k / N) % bg, p.ck_a + (t0 + k / (bg * N)) * N + k % N);
      }, [&](int k, float v) { as[k] = v; });
      gather_in(L * bg * N, tid, nth, [&](int k) {  // r_t
        return ck(gb + (k / N) % bg, p.ck_r + (t0 + k / (bg * N)) * N + k % N);
      }, [&](int k, float v) { rs[k] = v; });
      gather_in(L * SL, tid, nth, [&](int k) {  // w_t, [s][g][jj]
        return ck(gb + (k / R) % bg, p.ck_w + (t0 + k / SL) * d + r0 + k % R);
      }, [&](int k, float v) { ws[k] = v; });
    }
    if constexpr (!INV) __syncthreads();
    // The segment in parts of at most CS steps (one part when CS = C), the last part first:
    // H_{t+1} = (1 - a_t) H_t + a_t w_t^T from the checkpoint, H_s for s in [s0, s1) stored, a
    // thread a column m = g R + jj and four slots from i; the next task's checkpoint values load
    // before this one's chain. The barrier after the trace's loads, or the one ending the walk's
    // step s1, comes before; the one after lets the walk read the part.
    const int parts = (L + CS - 1) / CS, PL = (L + parts - 1) / parts;  // PL: steps a part
    int s0 = INV ? 0 : L;  // the first step of the part on chip
    auto replay = [&](int s1) {
      s0 = s1 - 1 - (s1 - 1) % PL;
      const int tasks = (N + 3) / 4 * SL;
      float nv[4];
      auto fetch_ck = [&](int k) {
        const int m = k % SL, i = 4 * (k / SL);
#pragma unroll
        for (int j = 0; j < 4; j++)
          nv[j] = i + j < N ? ck(gb + m / R, (kseg * N + i + j) * d + r0 + m % R) : 0.f;
      };
      if (tid < tasks) fetch_ck(tid);
      for (int k = tid; k < tasks; k += nth) {
        const int m = k % SL, i = 4 * (k / SL);
        const float v[4] = {nv[0], nv[1], nv[2], nv[3]};
        if (k + nth < tasks) fetch_ck(k + nth);
        replay_slots(s0, s1, min(4, N - i), v, as + (m / R) * N + i, bg * N, ws + m,
                     seg + i * SL + m, SL, N * SL);
      }
      __syncthreads();
    };
    // ---- the walk back ----
    // A step fills state buffer 0 (dw, sx) and part1 (da, dx), then buffer 1 (dpre) and part2
    // (dr); one copy of each: CTA Q fills buffer 0 and part1 at step t after its wait for step
    // t + 1's dpre, which CTA P sends only after a __syncthreads that follows its step t + 1
    // product over buffer 0 and softmax over part1; Q fills buffer 1 and part2 after its waits
    // for step t's dw and da, which P sends only after its step t + 1 softmax over part2 and
    // product over buffer 1 (the barrier ending the step between). This holds across segments
    // and parts (the replay exchanges nothing); the first step follows the cluster barrier
    // before the segments. Every CTA sends some of each fill to every CTA, itself included, so
    // no phase completes before its last reader waited.
    for (int s = L - 1; s >= 0; s--) {
      if (s < s0) replay(s + 1);
      const int64_t t = t0 + s;
      if constexpr (INV) {  // the step's trace in place: its 1 / (1 - a), or its exact tape
        wcur = wnext;
        float most = 1.f;
        for (int k = tid, j = 0; k < bg * N; k += nth, j++) {
          const float av = j == 0 ? ta0 : j == 1 ? ta1 : trace_at(t, k, p.ck_a);
          as[k] = av, rs[k] = j == 0 ? tr0 : j == 1 ? tr1 : trace_at(t, k, p.ck_r);
          ia[k] = 1.f / (1.f - av);
          most = fmaxf(most, ia[k]);
        }
        exact = inv_bound_passed<NW>(most, mx, grown, warp, lane);
        if (exact) replay_pair(kseg, s), grown = 0.f;
      }
      T hraw[2] = {};  // h_{t-1}, needed last: converted there, so the load's latency hides
      hfetch(t - 1, hraw);
      opaque(sw.hb), opaque(part1), opaque(part2);
      sh.hb = sw.hb;
      float *Hs = INV ? seg : seg + (s - s0) * N * SL;
      float *wt = INV ? nullptr : ws + s * SL;
      const int sa = INV ? 0 : s;  // the step's rows in as and rs
      const float *a = as + (sa * bg + n) * N, *rr = rs + (sa * bg + n) * N, *ir = ia + n * N;
      // dw = sum_i a_i dH[i] to every CTA; the partial da_i = dH[i] . (w - H[i]); kInverted
      // first steps the tape back: H_t from H_{t+1}
      float2 dw = make_float2(0.f, 0.f);
      const float2 wp = INV ? wcur : FUSED && sact ? *pair_at(wt) : dw;  // da's term (FUSED)
      const bool stepback = INV && !exact;  // H_t = (H_{t+1} - a_t w_t) / (1 - a_t)
      slot_loop(Hs, part1, dx.of(0), [&](int i, float2 x, float2 h) {
        dw.x += a[i] * x.x, dw.y += a[i] * x.y;
        return x.x * (wp.x - h.x) + x.y * (wp.y - h.y);
      }, [&](int i, float2 h) {
        if (!stepback) return h;
        const float ai = a[i], qi = ir[i];
        return make_float2((h.x - ai * wp.x) * qi, (h.y - ai * wp.y) * qi);
      }, stepback, std::true_type{});
      dw = gather(dw);
      if (fin) sw.put_async(0, n, c, dw.x, dw.y, sx.of(0));
      if (!FUSED)
        column_sums(part1, dx.of(0), [&](int g, int i, int q) {
          const float4 xa = f4(dH + i * SL + g * R)[q], ha = f4(Hs + i * SL + g * R)[q],
                       wa = f4(wt + g * R)[q];
          return xa.x * (wa.x - ha.x) + xa.y * (wa.y - ha.y) + xa.z * (wa.z - ha.z) +
                 xa.w * (wa.w - ha.w);
        });
      if (fin) store(p.dw + base + t * d, dw.x), store(p.dw + base + t * d + 1, dw.y);
      // Back through the softmax of exchange b (probabilities w of step s, gradients into out)
      // and the product of state buffer b (st: W_write^T for 0, W_h^T for 1), then a barrier.
      auto through = [&](int b, const float *part, const float *w, float *out, S &st) {
        dx.wait(b);
        for (int g = warp; g < bg; g += NW)
          softmax_back<S::CS>(part, bg, g, N, w + (sa * bg + g) * N, lane, out + g * N);
        sx.wait(b);
        st.product(b);
        __syncthreads();
      };
      // through a = softmax(scale H h_t) and w = W_write h_t: dh, dpre; dH's write share
      // (the softmax reads its partials through unhidden pointers: through part1 and part2, which
      // opaque() hides, every load was a generic LD.E with 64-bit address arithmetic)
      through(0, sm(l.part1), as, dsa, sw);
      float2 dpre = make_float2(0.f, 0.f), acc = dpre;
      if (sact)
#pragma unroll 8
        for (int i = i0; i < i1; i++) {
          const float di = dsa[n * N + i];
          const float2 x = *pair_at(Hs + i * SL);
          acc.x += di * x.x, acc.y += di * x.y;
        }
      acc = gather(acc);
      if (act) {
        const float2 tot = sw.sum(n, r);
        dpre.x = (carry.x + tot.x + scale * acc.x) * (1.f - hcur.x * hcur.x);
        dpre.y = (carry.y + tot.y + scale * acc.y) * (1.f - hcur.y * hcur.y);
        if (fin) sh.put_async(1, n, c, dpre.x, dpre.y, sx.of(1));
        if (SPLIT || !FUSED) *pair_at(dpl) = dpre;  // read by the split's threads, column_sums
      }
      if (sl.SP > 1) {  // dpre to the pair's other split threads
        __syncthreads();
        if (sact) dpre = *pair_at(dpl);
      }
      // the partial dr_i = H[i] . dpre (dH's update waits for the read-back)
      slot_loop(Hs, part2, dx.of(1), [&](int, float2, float2 h) {
        return h.x * dpre.x + h.y * dpre.y;
      }, [](int, float2 h) { return h; }, false, std::false_type{});
      if (!FUSED) {
        __syncthreads();
        column_sums(part2, dx.of(1), [&](int g, int i, int q) {
          const float4 ha = f4(Hs + i * SL + g * R)[q], xa = f4(dpl + g * R)[q];
          return ha.x * xa.x + ha.y * xa.y + ha.z * xa.z + ha.w * xa.w;
        });
      }
      // dhs_{t-1}, in flight over the waits. FUSED loads it as stored and converts it at the carry
      // (converted here, the thread waited for it here: ~600 cycles a step); the others convert
      // it here (B = 64 N = 64 ran 7% slower with the raw load, in two builds; not analysed).
      T graw[2] = {};
      float2 gnext = make_float2(0.f, 0.f);
      if (fin) {
        store(p.dxw + base + t * d, dpre.x), store(p.dxw + base + t * d + 1, dpre.y);
        if (t >= 1) {
          const T *g = p.dhs + base + (t - 1) * d;
          if constexpr (FUSED) graw[0] = g[0], graw[1] = g[1];
          else gnext = dhs_at(t - 1);
        }
      }
      // through r = softmax(scale H h_{t-1}) and W_h: the carry into h_{t-1}; dH's read share
      through(1, sm(l.part2), rs, dsr, sh);
      if (INV && t >= 1) trace_load(t - 1), wnext = w_at(t - 1);
      float2 back = make_float2(0.f, 0.f);
      const float2 hprv = hval(hraw);
      if (sact)
        back = read_back(i1 - i0, SL, Hs + me + i0 * SL, dH + me + i0 * SL, dsr + n * N + i0,
                         dsa + n * N + i0, a + i0, rr + i0, scale, hcur, hprv, dpre);
      back = gather(back);
      if (act) {
        const float2 tot = sh.sum(n, r);
        if constexpr (FUSED) gnext = hval(graw);
        carry = make_float2(tot.x + scale * back.x + gnext.x, tot.y + scale * back.y + gnext.y);
      }
      hcur = hprv;
      __syncthreads();
    }
  }
  for (int k = tid; k < N * SL; k += nth) {
    const int i = k / SL, g = (k / R) % bg;
    const int64_t bi = gb + g;
    if (bi < B) store(p.dtape0 + (bi * N + i) * d + r0 + k % R, dH[k]);
  }
  if (fin) store(p.dh0 + (gb + n) * d + c, carry.x), store(p.dh0 + (gb + n) * d + c + 1, carry.y);
}
