// The E23 backward's sequential part on tensor cores (bf16, the tilings of E23_TC_TILINGS),
// included by cuda/e23.cu after the forward. The CTA owns units [r0, r0 + R) as in e23_fwd_tc;
// thread q finishes the column pair (c, c + 1), c = r0 + 2 (q % (R / 2)), of batch row
// n = q / (R / 2); a thread per (batch row, slot) forms the sums over the CTA's R columns.
//
// Two tc::Steps keep the fragments of the CTA's rows of W_write^T and W_h^T in registers; they
// share tc::Step's state buffers: buffer 0 carries dw (the write's gradient) and buffer 1 dpre,
// each as hi and lo parts, written into every CTA. Each segment of C steps is replayed from its
// checkpoint with h_t taken from hs: w_t = W_write h_t (a product with the W_write slice read from
// shared memory, or L2, per step; h_t is exact in bf16, so no lo part), the scores H_t h_t and
// w . h_t summed over the cluster, a_t and r_{t+1} from them as in the forward, and H_{t+1} =
// (1 - a) H_t + a w^T into the segment store. The walk back then exchanges twice a step: dw and
// the partial da = dH . (w - H), then dpre and the partial dr = H . dpre.
//
// Arrays indexed by slot i, batch row g and unit jj are laid out [i][g][R] (f32): the pair thread
// reads float2 at (g = n, jj = c - r0), the slot thread float4 runs along jj. The tape gradient
// dH [N][bg][R] and the segment store seg [C][N + 1][bg][R] (slot N: w_t) live in shared memory
// when they fit, else in the CTA's global scratch (L2); the W_write slice, else read from W_write.
//
// A step's exchanges are st_async fills counted on the receiver's mbarriers (cuda/async_fill.cuh:
// no cluster barrier, whose release costs a GPU-scope membar a step on Hopper); why no CTA
// refills a buffer that another still reads is argued at the fills. Cluster barriers only open
// each segment's replay (the first one also publishes the mbarriers' initialization, before any
// remote store), its initial scores and its walk; every fill is waited for before the next one.

// Shared memory after tc::Step's state buffers: red [NW][8][R + 4] f32, the W_write slice
// [R][d + 8] bf16 (when ws), the partial sums part1/part2 [cs][bg][N + 1], a [C][bg][N], r
// [C + 1][bg][N], the softmax gradients dsa/dsr [bg][N], h, w and dpre of the CTA's units
// [bg][R], then dH and seg when on chip, and the fills' six mbarriers. The transposed slices are
// staged at wsl (or, without ws, over everything from red on) before their fragments are loaded
// (the mbarriers are initialized after).
struct TbLay {
  size_t red, wsl, part1, part2, as, rs, dsa, dsr, hl, wl, dpl, dh, seg, bars, total;
};
__host__ __device__ inline TbLay tb_layout(int64_t d, int64_t N, int64_t R, int64_t bg, int cs,
                                           int nw, int64_t C, bool ws, bool dh_on, bool seg_on) {
  TbLay l{};
  size_t at = tc::hb_bytes(d);
  auto take = [&](size_t bytes) {  // 32-byte aligned: wmma pointers
    size_t o = at;
    at += (bytes + 31) & ~(size_t)31;
    return o;
  };
  const size_t f = sizeof(float), slot = (size_t)bg * R * f;
  l.red = take((size_t)nw * 8 * tc::ldr(R) * f);
  l.wsl = ws ? take((size_t)R * tc::ldh(d) * 2) : l.red;  // rows padded: conflict-free A loads
  l.part1 = take((size_t)cs * bg * (N + 1) * f);
  l.part2 = take((size_t)cs * bg * (N + 1) * f);
  l.as = take((size_t)C * bg * N * f);
  l.rs = take((size_t)(C + 1) * bg * N * f);
  l.dsa = take((size_t)bg * N * f);
  l.dsr = take((size_t)bg * N * f);
  l.hl = take(slot);
  l.wl = take(slot);
  l.dpl = take(slot);
  l.dh = dh_on ? take((size_t)N * slot) : 0;
  l.seg = seg_on ? take((size_t)C * (N + 1) * slot) : 0;
  l.bars = take(6 * 8);
  const size_t staged = l.red + (size_t)R * d * 2;
  l.total = at > staged ? at : staged;
  return l;
}

// Global scratch per CTA (floats): dH and the segment store where they are not on chip.
__host__ __device__ inline int64_t tb_scratch(int64_t N, int64_t R, int64_t bg, int64_t C,
                                              bool dh_on, bool seg_on) {
  return (dh_on ? 0 : N * bg * R) + (seg_on ? 0 : C * (N + 1) * bg * R);
}

// Batch row g's gradient through p = softmax(scores) by one warp: out = p (v - p . v), v summed
// from the cs CTAs' partials part[(q * bg + g) * N + i].
__device__ inline void softmax_back(const float *part, int bg, int g, int64_t N, int cs,
                                    const float *p, int lane, float *out) {
  float dot = 0.f;
  for (int64_t i = lane; i < N; i += 32) {
    float v = 0.f;
    for (int q = 0; q < cs; q++) v += part[(q * bg + g) * N + i];
    out[i] = v;
    dot += p[i] * v;
  }
  dot = warp_sum(dot);
  for (int64_t i = lane; i < N; i += 32) out[i] = p[i] * (out[i] - dot);
}

// The pair thread's parts of the slot loops that store while they load; __restrict__ lets the
// loads of later slots (from L2 where the segment store is off chip) run ahead of the stores.
// H_{t+1}[i] = (1 - a_i) H_t[i] + a_i w at the pair (H, Hn: the pair's column in slot 0).
__device__ __forceinline__ void write_tape(int N, int SL, const float *__restrict__ H,
                                           float *__restrict__ Hn, const float *__restrict__ a,
                                           float2 w) {
#pragma unroll 8
  for (int i = 0; i < N; i++) {
    const float ai = a[i];
    const float2 x = *reinterpret_cast<const float2 *>(H + i * SL);
    *reinterpret_cast<float2 *>(Hn + i * SL) =
        make_float2((1.f - ai) * x.x + ai * w.x, (1.f - ai) * x.y + ai * w.y);
  }
}
// Returns sum_i ds_i H[i] at the pair and adds scale ds_i hp to dH[i].
__device__ __forceinline__ float2 read_back(int N, int SL, const float *__restrict__ H,
                                            float *__restrict__ dH, const float *__restrict__ ds,
                                            float scale, float2 hp) {
  float2 acc = make_float2(0.f, 0.f);
#pragma unroll 8
  for (int i = 0; i < N; i++) {
    const float di = ds[i], si = scale * di;
    const float2 x = *reinterpret_cast<const float2 *>(H + i * SL);
    acc.x += di * x.x, acc.y += di * x.y;
    float2 *y = reinterpret_cast<float2 *>(dH + i * SL);
    const float2 v = *y;
    *y = make_float2(v.x + si * hp.x, v.y + si * hp.y);
  }
  return acc;
}

// Hides p's value from the compiler: the DSMEM addresses derived from it (8 CTAs x hi/lo a
// put) are then formed where used instead of being hoisted out of the step loop into registers.
template <typename X> __device__ __forceinline__ void opaque(X *&p) { asm volatile("" : "+l"(p)); }

// The replay's w = W_write h_t: tc::Step::product with the A fragments loaded from `wa` each time
// (the slice [R][D]: in shared memory with rows tc::ldh(D) apart when SMEM, else W_write's rows in
// global memory) and the state's hi part only (h_t is exact in T).
template <bool SMEM, typename T, int MT, int KS, int NW>
__device__ __forceinline__ void replay_product(const tc::Step<T, MT, KS, NW> &st, const T *wa,
                                               int buf) {
  using S = tc::Step<T, MT, KS, NW>;
  constexpr unsigned lda = (unsigned)(SMEM ? tc::ldh(S::D) : S::D);
  typename S::FC acc[MT];
#pragma unroll
  for (int m = 0; m < MT; m++) nvcuda::wmma::fill_fragment(acc[m], 0.f);
  const T *hi = st.row(buf, 0, 0);
#pragma unroll 1
  for (int s = 0; s < KS; s++) {
    const int k0 = (st.warp * KS + s) * 16;
    typename S::FB bh;
    S::load_b(bh, hi + k0);
#pragma unroll
    for (int m = 0; m < MT; m++) {
      typename S::FA a;
      if constexpr (SMEM) S::load_a_shared(a, wa + m * 32 * lda + k0, lda);
      else nvcuda::wmma::load_matrix_sync(a, wa + m * 32 * lda + k0, lda);
      nvcuda::wmma::mma_sync(acc[m], a, bh, acc[m]);
    }
  }
#pragma unroll
  for (int m = 0; m < MT; m++)
    nvcuda::wmma::store_matrix_sync(st.red + st.warp * 8 * tc::ldr(S::R) + m * 32, acc[m],
                            (unsigned)tc::ldr(S::R), nvcuda::wmma::mem_col_major);
}

template <typename T, int MT, int KS, int NW>
__global__ void __launch_bounds__(NW * 32, 1) e23_bwd_tc(P23<T> p) {
  using S = tc::Step<T, MT, KS, NW>;
  using P = tc::Pair<T>;
  constexpr int R = S::R;
  constexpr int64_t d = S::D, VR = d / 8;  // 16-byte pieces of a state row
  extern __shared__ __align__(128) unsigned char tc_smem[];
  int rank, cs, group;
  cluster_pos<true>(&rank, &cs, &group);
  if (cs != S::CS || p.d != d) __trap();  // the plan picks the tiling of d
  // per-CTA sizes and indices in int (a CTA's arrays are far below 2^31 elements)
  const int N = (int)p.N, bg = (int)p.bg, C = (int)p.C, SL = bg * R;  // SL: floats a slot
  const int64_t gb = (int64_t)group * bg, r0 = (int64_t)rank * R, B = p.B, nt = p.nt;
  const int64_t K = (nt + C - 1) / C;
  const TbLay l = tb_layout(d, N, R, bg, cs, NW, C, p.tb_ws, p.tb_dh, p.tb_seg);
  auto sm = [&](size_t at) { return reinterpret_cast<float *>(tc_smem + at); };
  float *part1 = sm(l.part1), *part2 = sm(l.part2), *as = sm(l.as), *rs = sm(l.rs);
  float *dsa = sm(l.dsa), *dsr = sm(l.dsr), *hl = sm(l.hl), *wl = sm(l.wl), *dpl = sm(l.dpl);
  float *glob = p.scratch + blockIdx.x * p.per_cta;
  float *dH = p.tb_dh ? sm(l.dh) : glob;
  float *seg = p.tb_seg ? sm(l.seg) : glob + (p.tb_dh ? 0 : N * SL);
  // prologue: the fragments of W_h^T's and W_write^T's rows, then W_write's rows for the replay
  S sh(tc_smem), sw(tc_smem);
  T *Ws = reinterpret_cast<T *>(tc_smem + l.wsl);
  tc::stage_slice(Ws, p.Wh, d, r0, R, true);
  sh.init_state((const T *)nullptr, gb, bg, B);  // every row zero; rows >= bg stay so
  __syncthreads();
  sh.load_a(Ws);
  __syncthreads();
  tc::stage_slice(Ws, p.Ww, d, r0, R, true);
  __syncthreads();
  sw.load_a(Ws);
  __syncthreads();
  const T *wa = p.Ww + r0 * d;  // the replay's A: W_write's rows, on chip or in L2
  if (p.tb_ws) {
    tc::stage_slice(Ws, p.Ww, d, r0, R, false, tc::ldh(d));
    wa = Ws;
  }
  __syncthreads();  // without ws the staging area (and the mbarriers' space) is reused below
  // The fills: rx the replay's partial scores, every CTA's bg x (N + 1), into part1 / part2 by
  // step parity; sx dw / dpre into state buffer 0 / 1, hi and lo of the group's real rows (the
  // rows past B stay zero); dx the walk's partial da / dr, every CTA's bg x N, into part1 / part2.
  AsyncFills<2> rx, sx, dx;
  rx.init(tc_smem + l.bars, (uint32_t)(cs * bg * (N + 1) * (int)sizeof(float)));
  sx.init(tc_smem + l.bars + 16, (uint32_t)(2 * min((int64_t)bg, B - gb) * d * (int64_t)sizeof(T)));
  dx.init(tc_smem + l.bars + 32, (uint32_t)(cs * bg * N * (int)sizeof(float)));
  for (int k = (int)threadIdx.x; k < N * SL; k += (int)blockDim.x) {
    const int i = k / SL, g = (k / R) % bg;
    const int64_t bi = gb + g;
    dH[k] = p.dtapeT && bi < B ? load(p.dtapeT + (bi * N + i) * d + r0 + k % R) : 0.f;
  }
  const int tid = (int)threadIdx.x, nth = (int)blockDim.x, warp = tid >> 5, lane = tid & 31;
  const int n = tid / (R / 2), r = 2 * (tid % (R / 2));
  const bool act = n < bg, fin = act && gb + n < B;  // act: a row of the group (zeros past B)
  const int64_t c = r0 + r, base = (gb + n) * nt * d + c;
  const int me = n * R + r;
  const float scale = 1.f / sqrtf((float)d);
  auto pair_at = [&](float *slot) { return reinterpret_cast<float2 *>(slot + me); };
  // the pair's h_t (t = -1: h0 or zero)
  auto hval = [&](int64_t t) {
    float2 v = make_float2(0.f, 0.f);
    const T *src = t >= 0 ? p.hs_in + base + t * d : p.h0 ? p.h0 + (gb + n) * d + c : nullptr;
    if (fin && src) v = make_float2(load(src), load(src + 1));
    return v;
  };
  auto dhs_at = [&](int64_t t) {
    return fin ? make_float2(load(p.dhs + base + t * d), load(p.dhs + base + t * d + 1))
               : make_float2(0.f, 0.f);
  };
  // h_t of the group's rows (every unit) into state buffer buf's hi part: asynchronous copies,
  // complete after rows_wait() and a barrier. Rows past B stay zero (never written).
  auto fetch_rows = [&](int64_t t, int buf) {
    for (int k = tid; k < bg * (int)VR; k += nth) {
      const int g = k / (int)VR;
      if (gb + g >= B) continue;
      const unsigned dst = (unsigned)__cvta_generic_to_shared(sw.row(buf, 0, g) + (k % VR) * 8);
      const T *src = p.hs_in + ((gb + g) * nt + t) * d + (k % VR) * 8;
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  auto rows_wait = [] { asm volatile("cp.async.wait_all;" ::: "memory"); };
  // this CTA's partial scores H_t h (slots < N) and w . h (slot N, step only) into every CTA: a
  // step's counted by rx's mbarrier `bar`, the initial ones plain stores before a cluster barrier
  auto scores = [&](float *part, const float *Hs, bool step, uint32_t bar) {
    const int slots = N + 1;
    for (int k = tid; k < bg * slots; k += nth) {
      const int g = k / slots, i = k % slots;
      if (i == N && !step) continue;
      const float s = dot16<R>((i < N ? Hs + i * SL : wl) + g * R, hl + g * R);
      float *at = part + (rank * bg + g) * slots + i;
      if (step)
        put_all_async<S::CS>(at, s, bar);
      else
        put_all<true>(at, s, cs);
    }
  };
  // carry: dL/dh_t from the steps after t plus dhs_t (dh_T alone after the last step)
  float2 carry = make_float2(0.f, 0.f), hcur = carry;  // hcur: the pair's h_t
  if (fin && p.dhT) carry = make_float2(load(p.dhT + (gb + n) * d + c), load(p.dhT + (gb + n) * d + c + 1));
  if (nt > 0) {
    const float2 g = dhs_at(nt - 1);
    hcur = hval(nt - 1), carry.x += g.x, carry.y += g.y;
  }
  for (int64_t kseg = K - 1; kseg >= 0; kseg--) {
    const int64_t t0 = kseg * C;
    const int L = (int)min((int64_t)C, nt - t0);
    // ---- replay: the segment's tapes, w, a and r ----
    for (int k = tid; k < N * SL; k += nth) {
      const int i = k / SL, g = (k / R) % bg;
      const int64_t bi = gb + g;
      seg[k] = bi < B ? p.ck_in[((bi * K + kseg) * N + i) * d + r0 + k % R] : 0.f;
    }
    for (int k = tid; k < SL; k += nth) {
      const int64_t bi = gb + k / R, j = r0 + k % R;
      const T *src = t0 > 0 ? p.hs_in + (bi * nt + t0 - 1) * d + j : p.h0 ? p.h0 + bi * d + j : nullptr;
      hl[k] = bi < B && src ? load(src) : 0.f;
    }
    fetch_rows(t0, 0);
    rows_wait();
    sync_all<true>();  // every CTA started, done with the previous walk's part buffers
    scores(part2, seg, false, 0u);
    sync_all<true>();
    for (int g = warp; g < bg; g += NW)
      attend_row<float>(part2, (int)bg, g, N, cs, scale, false, lane, rs + g * N, (float *)nullptr);
    __syncthreads();
    // Step s's scores fill part1 / part2 (s even / odd): CTA Q fills that buffer at step s after
    // its wait for step s - 1's fill, which CTA P sends only after its softmax of step s - 2 (of
    // the initial scores when s = 1; s = 0 follows the cluster barriers above) last read the
    // buffer. One buffer would not do: Q's step s + 1 fill could land while P still reads step
    // s's. The fills' phases run on across segments: every CTA waits for each fill once.
    for (int s = 0; s < L; s++) {
      const int buf = (int)(s & 1);
      float *Hs = seg + s * (N + 1) * SL, *part = buf ? part2 : part1;
      const bool more = s + 1 < L;
      if (more) fetch_rows(t0 + s + 1, buf ^ 1);  // in flight during this step
      if (p.tb_ws) replay_product<true>(sw, wa, buf);
      else replay_product<false>(sw, wa, buf);
      __syncthreads();
      if (act) {
        const float2 w = sw.sum(n, r);
        const float2 h = P::unpack(*reinterpret_cast<const typename P::type *>(sw.row(buf, 0, n) + c));
        *pair_at(hl) = h;
        *pair_at(wl) = w;
        *pair_at(Hs + N * SL) = w;
      }
      __syncthreads();
      scores(part, Hs, true, rx.of(buf));
      rx.wait(buf);
      for (int g = warp; g < bg; g += NW)
        attend_row<float>(part, (int)bg, g, N, cs, scale, true, lane, rs + ((s + 1) * bg + g) * N,
                          as + (s * bg + g) * N);
      rows_wait();
      __syncthreads();
      if (act && more) {  // H_{t+1} = (1 - a) H_t + a w^T, this thread's columns
        write_tape(N, SL, Hs + me, Hs + (N + 1) * SL + me, as + (s * bg + n) * N, *pair_at(wl));
      }
    }
    sync_all<true>();  // every CTA done with the replay's part buffers (and seg, a, r written)
    // ---- the walk back ----
    // A step fills state buffer 0 (dw, sx) and part1 (da, dx), then buffer 1 (dpre) and part2
    // (dr); one copy of each: CTA Q fills buffer 0 and part1 at step t after its wait for step
    // t + 1's dpre, which CTA P sends only after a __syncthreads that follows its step t + 1
    // product over buffer 0 and softmax over part1; Q fills buffer 1 and part2 after its waits
    // for step t's dw and da, which P sends only after its step t + 1 softmax over part2 and
    // product over buffer 1 (the barrier ending the step between); a walk's first step follows
    // the cluster barrier above. Every CTA sends some of each fill to every CTA, itself included,
    // so no phase completes before its last reader waited.
    for (int s = L - 1; s >= 0; s--) {
      const int64_t t = t0 + s;
      const float2 hprv = hval(t - 1);  // h_{t-1}, needed last
      opaque(sw.hb), opaque(part1), opaque(part2);
      sh.hb = sw.hb;
      float *Hs = seg + s * (N + 1) * SL;
      const float *a = as + (s * bg + n) * N, *rr = rs + (s * bg + n) * N;
      // dw = sum_i a_i dH[i] to every CTA; the partial da_i = dH[i] . (w - H[i])
      float2 dw = make_float2(0.f, 0.f);
      if (fin) {
#pragma unroll 2
        for (int i = 0; i < N; i++) {
          const float2 x = *pair_at(dH + i * SL);
          dw.x += a[i] * x.x, dw.y += a[i] * x.y;
        }
        sw.put_async(0, n, c, dw.x, dw.y, sx.of(0));
      }
      for (int k = tid; k < bg * N; k += nth) {
        const int g = k / N, i = k % N;
        const float4 *x = reinterpret_cast<const float4 *>(dH + i * SL + g * R);
        const float4 *h = reinterpret_cast<const float4 *>(Hs + i * SL + g * R);
        const float4 *w = reinterpret_cast<const float4 *>(Hs + N * SL + g * R);
        float sum = 0.f;
#pragma unroll 2
        for (int q = 0; q < R / 4; q++) {
          const float4 xa = x[q], ha = h[q], wa4 = w[q];
          sum += xa.x * (wa4.x - ha.x) + xa.y * (wa4.y - ha.y) + xa.z * (wa4.z - ha.z) +
                 xa.w * (wa4.w - ha.w);
        }
        put_all_async<S::CS>(part1 + (rank * bg + g) * N + i, sum, dx.of(0));
      }
      if (fin) store(p.dw + base + t * d, dw.x), store(p.dw + base + t * d + 1, dw.y);
      // through a = softmax(scale H h_t) and w = W_write h_t: dh, dpre; dH's write share
      dx.wait(0);
      for (int g = warp; g < bg; g += NW)
        softmax_back(part1, (int)bg, g, N, cs, as + (s * bg + g) * N, lane, dsa + g * N);
      sx.wait(0);
      sw.product(0);
      __syncthreads();
      float2 dpre = make_float2(0.f, 0.f);
      if (act) {
        const float2 tot = sw.sum(n, r);
        float2 acc = make_float2(0.f, 0.f);
#pragma unroll 8
        for (int i = 0; i < N; i++) {
          const float di = dsa[n * N + i];
          const float2 x = *pair_at(Hs + i * SL);
          acc.x += di * x.x, acc.y += di * x.y;
        }
        dpre.x = (carry.x + tot.x + scale * acc.x) * (1.f - hcur.x * hcur.x);
        dpre.y = (carry.y + tot.y + scale * acc.y) * (1.f - hcur.y * hcur.y);
        if (fin) sh.put_async(1, n, c, dpre.x, dpre.y, sx.of(1));
        *pair_at(dpl) = dpre;
#pragma unroll 2
        for (int i = 0; i < N; i++) {
          const float ai = a[i], si = scale * dsa[n * N + i], ri = rr[i];
          float2 *x = pair_at(dH + i * SL);
          const float2 v = *x;
          *x = make_float2((1.f - ai) * v.x + si * hcur.x + ri * dpre.x,
                           (1.f - ai) * v.y + si * hcur.y + ri * dpre.y);
        }
      }
      __syncthreads();
      // the partial dr_i = H[i] . dpre
      for (int k = tid; k < bg * N; k += nth) {
        const int g = k / N, i = k % N;
        const float4 *h = reinterpret_cast<const float4 *>(Hs + i * SL + g * R);
        const float4 *x = reinterpret_cast<const float4 *>(dpl + g * R);
        float sum = 0.f;
#pragma unroll 4
        for (int q = 0; q < R / 4; q++) {
          const float4 ha = h[q], xa = x[q];
          sum += ha.x * xa.x + ha.y * xa.y + ha.z * xa.z + ha.w * xa.w;
        }
        put_all_async<S::CS>(part2 + (rank * bg + g) * N + i, sum, dx.of(1));
      }
      float2 gnext = make_float2(0.f, 0.f);  // dhs_{t-1}, in flight over the waits
      if (fin) {
        store(p.dxw + base + t * d, dpre.x), store(p.dxw + base + t * d + 1, dpre.y);
        if (t >= 1) gnext = dhs_at(t - 1);
      }
      // through r = softmax(scale H h_{t-1}) and W_h: the carry into h_{t-1}; dH's read share
      dx.wait(1);
      for (int g = warp; g < bg; g += NW)
        softmax_back(part2, (int)bg, g, N, cs, rs + (s * bg + g) * N, lane, dsr + g * N);
      sx.wait(1);
      sh.product(1);
      __syncthreads();
      if (act) {
        const float2 tot = sh.sum(n, r);
        const float2 acc = read_back(N, SL, Hs + me, dH + me, dsr + n * N, scale, hprv);
        carry = make_float2(tot.x + scale * acc.x + gnext.x, tot.y + scale * acc.y + gnext.y);
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
