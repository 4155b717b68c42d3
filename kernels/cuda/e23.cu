// E23 forward and the sequential part of its backward as persistent kernels (see cuda/e23.h and
// cuda/e1_cluster.cuh). Each CTA owns units [c0, c1) of d: those rows of the weights and those
// columns of its batch group's tapes. Warps take one unit (or one slot) at a time; lane g of a
// warp finishes batch row g. For 16-bit values and d = 256 or 512 the forward runs e23_fwd_tc
// instead: both per-step products on tensor cores (see "the forward on tensor cores"), and at
// B = 64 N = 64's plan e23_fwd_rt, the tape in registers (cuda/e23_fwd_rt.cuh); for bf16 at those
// widths the backward runs e23_bwd_tc (cuda/e23_bwd_tc.cuh), and at B = 64 N = 64's plan
// e23_bwd_rt, the tape and its gradient in registers (cuda/e23_bwd_rt.cuh).
#include <algorithm>
#include <type_traits>

#include "cuda/approx_math.cuh"
#include "cuda/async_fill.cuh"
#include "cuda/cp_async.cuh"
#include "cuda/e1_cluster.cuh"
#include "cuda/e1_mma.cuh"
#include "cuda/e23.h"
#include "cpu/e23.h"

namespace {

using namespace eng_kc;
using namespace eng_kc::es;

template <typename T> struct P23 {
  int64_t B, nt, N, d, C, R, bg;  // bg: batch rows per cluster of the tensor-core forward
  const T *xw, *Wh, *Ww, *b, *h0, *tape0;
  T *hs, *hT, *tapeT;
  acc_t<T> *ckpt;
  int64_t ck_len, ck_a, ck_r, ck_w;  // ckpt's row length and its trace's offsets (cpu/e23.h)
  // backward
  const T *hs_in;
  const acc_t<T> *ck_in;
  const T *dhs, *dhT, *dtapeT;
  T *dxw, *dw, *dh0, *dtape0;
  float *db_rows;  // e23_bwd_rt: [B][d], each batch row's sum of dxw over the steps
  acc_t<T> *scratch;  // per CTA: scratch + blockIdx.x * per_cta
  int64_t per_cta;
  int tape_smem;  // forward: the tape lives in shared memory
  int tb_dh, tb_w, tb_seg;  // e23_bwd_tc: dH, the segment's w_t and its tapes on chip
  int tb_inv;               // e23_bwd_tc: the inverted walk (kInverted; tb_seg: its tape)
  int tb_cs;                // e23_bwd_tc: the steps of tapes the segment store holds
  // N and N + 1 as dividers (cuda/common.cuh) for the trace's and the scores' indices: the
  // divisions they replaced were on the step's chain (B = 64 N = 64 forward 8 590 -> 7 960 cycles)
  Div32 div_n, div_n1;
};

// xw + b of a step is prefetched one step ahead (loaded into registers before a step's work,
// parked in shared memory [2][BG][R] after it) when a CTA's BG x R of them come to at most kPF per
// thread: no global-memory latency on the chain.
constexpr int kPF = 4;
__host__ __device__ inline bool stages(int bg, int64_t R) {
  return (int64_t)bg * R <= (int64_t)kPF * kThreads;
}

// ---- shared-memory layout (bytes, 16-aligned pieces), the same on host and device ----
struct Lay {
  size_t w1, w2, hbuf, part1, part2, rbuf, abuf, wloc, tape, dwbuf, dpbuf, carry, dhv, dpl, dsa,
      dsr, xs, total;
};

__host__ __device__ inline size_t up16(size_t n) { return (n + 15) & ~(size_t)15; }

// Consecutive 16-byte aligned regions of shared memory from byte `at` on: take(bytes) gives the
// next one's offset.
struct Carve {
  size_t at;
  __host__ __device__ size_t take(size_t bytes) {
    const size_t o = at;
    at += up16(bytes);
    return o;
  }
};

__host__ __device__ inline Lay layout(int64_t d, int64_t N, int64_t R, int bg, int cs, bool cl,
                                      bool bwd, bool tape_smem, size_t tsz, size_t asz) {
  Lay l{};
  Carve cv{0};
  auto take = [&](size_t bytes) { return cv.take(bytes); };
  l.w1 = take(cl ? (size_t)R * d * tsz : 0);
  l.w2 = take(cl ? (size_t)R * d * tsz : 0);
  l.hbuf = take(2 * (size_t)bg * d * asz);
  l.part1 = take((size_t)cs * bg * (N + 1) * asz);
  l.part2 = take(bwd ? (size_t)cs * bg * (N + 1) * asz : 0);
  l.rbuf = take((size_t)bg * N * asz);
  l.abuf = take((size_t)bg * N * asz);
  l.wloc = take((size_t)bg * R * asz);
  l.tape = take(!bwd && tape_smem ? (size_t)bg * N * R * asz : 0);
  l.dwbuf = take(bwd ? (size_t)bg * d * asz : 0);
  l.dpbuf = take(bwd ? (size_t)bg * d * asz : 0);
  l.carry = take(bwd ? (size_t)bg * R * asz : 0);
  l.dhv = take(bwd ? (size_t)bg * R * asz : 0);
  l.dpl = take(bwd ? (size_t)bg * R * asz : 0);
  l.dsa = take(bwd ? (size_t)bg * N * asz : 0);
  l.dsr = take(bwd ? (size_t)bg * N * asz : 0);
  l.xs = take(stages(bg, R) ? 2 * (size_t)bg * R * asz : 0);
  l.total = cv.at;
  return l;
}

// Global scratch per CTA (in state elements): forward, the tape when not on chip; backward, the
// segment's tapes, the working tape, dH, h and w per step, r and a per step.
__host__ __device__ inline int64_t scratch_elems(int64_t N, int64_t R, int64_t C, int bg, bool bwd,
                                                 bool tape_smem) {
  if (!bwd) return tape_smem ? 0 : (int64_t)bg * N * R;
  return (int64_t)bg * (C * N * R + 2 * N * R + (2 * C + 1) * R + 2 * C * N);
}

// Everything a CTA knows about its place and its buffers.
template <typename T, int BG, bool CL> struct Ctx {
  using A = acc_t<T>;
  int64_t B, nt, N, d, R, c0, c1, w;  // w = c1 - c0 units owned
  int rank, cs, group, warp, lane, nwarps;
  bool vs, vg;  // 16-byte loads of weight rows: on chip, and in global memory
  A scale;
  A *hbuf, *part1, *part2, *rbuf, *abuf, *wloc;
  A *tape;  // tape(g, i, jj) = tape[(g * N + i) * R + jj]
  A *xs;    // prefetched xw + b, [2][BG][R], when st
  bool st;
  __device__ A &tp(int g, int64_t i, int64_t jj) const { return tape[(g * N + i) * R + jj]; }
  __device__ int64_t batch(int g) const { return (int64_t)group * BG + g; }
};

template <typename T, int BG, bool CL>
__device__ Ctx<T, BG, CL> make_ctx(const P23<T> &p, unsigned char *smem, const Lay &l) {
  using A = acc_t<T>;
  Ctx<T, BG, CL> c;
  cluster_pos<CL>(&c.rank, &c.cs, &c.group);
  c.B = p.B, c.nt = p.nt, c.N = p.N, c.d = p.d, c.R = p.R;
  c.c0 = min(p.d, (int64_t)c.rank * p.R);
  c.c1 = min(p.d, c.c0 + p.R);
  c.w = c.c1 - c.c0;
  c.warp = threadIdx.x >> 5, c.lane = threadIdx.x & 31, c.nwarps = blockDim.x >> 5;
  c.scale = (A)1 / sqrt((A)p.d);
  constexpr int64_t VEC = 16 / sizeof(T);
  c.vs = sizeof(T) <= 4 && p.d % VEC == 0;
  c.vg = c.vs && reinterpret_cast<uintptr_t>(p.Wh) % 16 == 0 && reinterpret_cast<uintptr_t>(p.Ww) % 16 == 0;
  c.hbuf = reinterpret_cast<A *>(smem + l.hbuf);
  c.part1 = reinterpret_cast<A *>(smem + l.part1);
  c.part2 = reinterpret_cast<A *>(smem + l.part2);
  c.rbuf = reinterpret_cast<A *>(smem + l.rbuf);
  c.abuf = reinterpret_cast<A *>(smem + l.abuf);
  c.wloc = reinterpret_cast<A *>(smem + l.wloc);
  c.xs = reinterpret_cast<A *>(smem + l.xs);
  c.st = stages(BG, p.R);
  return c;
}

// Rows c0..c1 of W (transposed: columns) into shared memory, row jj at + jj * d.
template <typename T>
__device__ void stage(T *dst, const T *W, int64_t d, int64_t c0, int64_t w, bool tr) {
  for (int64_t k = threadIdx.x; k < w * d; k += blockDim.x) {
    if (tr) {
      const int64_t i = k / w, jj = k % w;
      dst[jj * d + i] = W[i * d + c0 + jj];
    } else {
      dst[k] = W[c0 * d + k];
    }
  }
}

// acc[g] += row . v[g]: 16-byte loads where the row is contiguous and aligned (`vec`).
template <typename T, int BG>
__device__ __forceinline__ void dots(bool vec, const T *row, int64_t cs, const acc_t<T> *v,
                                     int64_t d, int lane, acc_t<T> *acc) {
  if constexpr (sizeof(T) <= 4) {
    if (vec && cs == 1) {
      dots_vec<T, BG>(row, v, d, lane, acc);
      return;
    }
  }
  dots_scalar<T, BG>(row, cs, v, d, lane, acc);
}

// xw + b of step t for the CTA's units into registers, and from there into buffer t & 1.
template <typename T, int BG, bool CL>
__device__ __forceinline__ void fetch_x(const Ctx<T, BG, CL> &c, const T *xw, const T *bias,
                                        int64_t t, acc_t<T> (&rx)[kPF]) {
#pragma unroll
  for (int m = 0; m < kPF; m++) {
    const int64_t k = threadIdx.x + (int64_t)m * blockDim.x, bi = c.batch((int)(k / (c.w ? c.w : 1)));
    if (k >= BG * c.w || bi >= c.B) continue;
    const int64_t j = c.c0 + k % c.w;
    rx[m] = load(xw + (bi * c.nt + t) * c.d + j) + load(bias + j);
  }
}
template <typename T, int BG, bool CL>
__device__ __forceinline__ void park_x(const Ctx<T, BG, CL> &c, int64_t t, const acc_t<T> (&rx)[kPF]) {
#pragma unroll
  for (int m = 0; m < kPF; m++) {
    const int64_t k = threadIdx.x + (int64_t)m * blockDim.x;
    if (k >= BG * c.w || c.batch((int)(k / c.w)) >= c.B) continue;
    c.xs[((t & 1) * BG + k / c.w) * c.R + k % c.w] = rx[m];
  }
}

// ---- the forward step's phases ----

// h_t for the owned units: W_h h_{t-1} + xw + H^T r + b, then tanh; h_t goes to every CTA's hn.
template <typename T, int BG, bool CL>
__device__ void phase_h(const Ctx<T, BG, CL> &c, const T *Wrows, bool vec, int64_t t, const T *xw,
                        const T *bias, const acc_t<T> *hc, acc_t<T> *hn, T *hs_out, T *hT_out,
                        acc_t<T> *hown) {
  using A = acc_t<T>;
  const int64_t bme = c.batch(c.lane);
  const bool fin = c.lane < BG && bme < c.B;
  for (int64_t jj = c.warp; jj < c.w; jj += c.nwarps) {
    const int64_t j = c.c0 + jj, at = (bme * c.nt + t) * c.d + j;
    A xv = 0;
    if (fin) xv = c.st ? c.xs[((t & 1) * BG + c.lane) * c.R + jj] : load(xw + at) + load(bias + j);
    A acc[BG] = {};
    dots<T, BG>(vec, Wrows + jj * c.d, 1, hc, c.d, c.lane, acc);
#pragma unroll
    for (int g = 0; g < BG; g++)
      for (int64_t i = c.lane; i < c.N; i += 32) acc[g] += c.rbuf[g * c.N + i] * c.tp(g, i, jj);
    const A pre = reduce_pick<A, BG>(acc, c.lane) + xv;
    if (c.lane < BG) {
      const A h = tanh(pre);
      if (hown) hown[c.lane * c.R + jj] = h;
      if (fin && hs_out) store(hs_out + at, h);
      if (fin && hT_out) store(hT_out + bme * c.d + j, h);
      put_all<CL>(hn + c.lane * c.d + j, h, c.cs);
    }
  }
}

// w = W_write h_t for the owned units (when with_w), then this CTA's partial sums over its units
// of H h (slots 0..N-1) and w . h (slot N) into every CTA's part1; ends at a cluster barrier.
template <typename T, int BG, bool CL>
__device__ void phase_scores(const Ctx<T, BG, CL> &c, const T *Wrows, bool vec, const acc_t<T> *hn,
                             bool with_w, acc_t<T> *wown) {
  using A = acc_t<T>;
  if (with_w) {
    for (int64_t jj = c.warp; jj < c.w; jj += c.nwarps) {
      A acc[BG] = {};
      dots<T, BG>(vec, Wrows + jj * c.d, 1, hn, c.d, c.lane, acc);
      const A w = reduce_pick<A, BG>(acc, c.lane);
      if (c.lane < BG) {
        c.wloc[c.lane * c.R + jj] = w;
        if (wown) wown[c.lane * c.R + jj] = w;
      }
    }
    __syncthreads();
  }
  const int64_t tasks = BG * (c.N + 1);
  for (int64_t k = c.warp; k < tasks; k += c.nwarps) {
    const int g = (int)(k / (c.N + 1));
    const int64_t i = k % (c.N + 1);
    A sum = 0;
    if (i < c.N || with_w)
      for (int64_t jj = c.lane; jj < c.w; jj += 32)
        sum += (i < c.N ? c.tp(g, i, jj) : c.wloc[g * c.R + jj]) * hn[g * c.d + c.c0 + jj];
    sum = warp_sum(sum);
    if (c.lane == 0) put_all<CL>(c.part1 + (c.rank * BG + g) * (c.N + 1) + i, sum, c.cs);
  }
  sync_all<CL>();
}

// sum_q x[q * stride], q < cs: a slot's score or gradient from the CTAs' partials (loaded together).
template <typename A> __device__ __forceinline__ A partial_sum(const A *x, int stride, int cs) {
  A v = 0;
#pragma unroll 4
  for (int q = 0; q < cs; q++) v += x[q * stride];
  return v;
}

// Batch row g's attention weights from the cs CTAs' partial scores part[(q * bg + g) * (N + 1) + i]
// (slot N: w . h), by one warp: initial (r = softmax(scale H h0)) or a step (a = softmax(scale
// H h_t), and the next read weights r = softmax(scale H_new h_t)). The warp's chain is on the
// step's critical path: the partials load together and slot N is scored in the same pass as the
// others.
template <typename A>
__device__ void attend_row(const A *part, int bg, int g, int64_t N, int cs, A scale, bool step,
                           int lane, A *r, A *a) {
  A mx = -INFINITY, sum = 0, q = 0;
  for (int64_t i = lane; i < (step ? N + 1 : N); i += 32) {
    const A s = partial_sum(part + g * (N + 1) + i, bg * (int)(N + 1), cs) * scale;
    if (i == N) {
      q = s;
    } else {
      r[i] = s;
      mx = max(mx, s);
    }
  }
  mx = warp_max(mx);
  for (int64_t i = lane; i < N; i += 32) sum += exp(r[i] - mx);
  sum = warp_sum(sum);
  if (!step) {
    for (int64_t i = lane; i < N; i += 32) r[i] = exp(r[i] - mx) / sum;
  } else {
    q = __shfl_sync(0xffffffffu, q, (int)(N % 32));
    A mx2 = -INFINITY, sum2 = 0;
    for (int64_t i = lane; i < N; i += 32) {
      const A ai = exp(r[i] - mx) / sum;
      a[i] = ai;
      r[i] = ((A)1 - ai) * r[i] + ai * q;
      mx2 = max(mx2, r[i]);
    }
    mx2 = warp_max(mx2);
    for (int64_t i = lane; i < N; i += 32) sum2 += exp(r[i] - mx2);
    sum2 = warp_sum(sum2);
    for (int64_t i = lane; i < N; i += 32) r[i] = exp(r[i] - mx2) / sum2;
  }
}

// Lane-resident softmax helpers for N < 32 K (slot i on lane i % 32, register i / 32): the
// shuffle reductions span the 2^k >= N lanes that hold values.
template <int K> __device__ __forceinline__ int lanes_width(int N) {
  return K > 1 || N > 16 ? 32 : N > 8 ? 16 : 8;
}

// The warp's maximum of v in one REDUX: the floats as ints that order the same way (negative
// floats' magnitude bits flipped), NaN above everything.
__device__ __forceinline__ float warp_max_redux(float v) {
  int b = __float_as_int(v);
  b = v != v ? 0x7fffffff : b < 0 ? b ^ 0x7fffffff : b;
  b = __reduce_max_sync(0xffffffffu, b);
  return __int_as_float(b < 0 ? b ^ 0x7fffffff : b);
}

// The warp's sum of v in [0, 4] (a lane's few softmax terms, each at most 1) in one REDUX, in
// fixed point with 24 fraction bits: exact to 2^-25 a lane, and a softmax's sum is at least 1.
__device__ __forceinline__ float warp_sum_unit(float v) {
  return (float)__reduce_add_sync(0xffffffffu, __float2uint_rn(v * 16777216.f)) *
         (1.f / 16777216.f);
}

// y = softmax(x) over the N slots held as in lanes_width, x in base 2 (the scores times log2 e),
// in f32 with ex2_ftz and rcp_ftz (cuda/approx_math.cuh; the 16-bit kernels' weights): without
// .ftz each costs a range check and a scaling on the chain, and the terms are at most 1, the sum
// at least 1. The two reductions are REDUX instructions instead of 3-5 shuffle levels each: this
// chain is on the forward step's critical path. K <= 3.
template <int K>
__device__ __forceinline__ void lanes_softmax(const float (&x)[K], float (&y)[K], int N, int lane) {
  static_assert(K <= 3, "warp_sum_unit sums at most 4 a lane");
  float m = -INFINITY, sum = 0.f;
#pragma unroll
  for (int k = 0; k < K; k++)
    if (lane + 32 * k < N) m = (x[k] > m || x[k] != x[k]) ? x[k] : m;
  m = warp_max_redux(m);
#pragma unroll
  for (int k = 0; k < K; k++) {
    y[k] = lane + 32 * k < N ? ex2_ftz(x[k] - m) : 0.f;
    sum += y[k];
  }
  const float inv = rcp_ftz(warp_sum_unit(sum));
#pragma unroll
  for (int k = 0; k < K; k++) y[k] *= inv;
}

// attend_row for N < 32 K (slots 0..N, a step's slot N included, in K registers a lane) in f32
// with lanes_softmax, from CS CTAs' partials (compiled in: all CS K loads in flight at once). The
// tensor-core forward's step waits on this chain.
template <int K, int CS>
__device__ void attend_lanes(const float *part, int bg, int g, int N, float scale, bool step,
                             int lane, float *r, float *a) {
  float sc[K] = {}, p[K];  // the scores in base 2: softmax(scale s) = 2^(log2 e scale s) / sum
  const float scale2 = scale * 1.44269504088896340736f;
  // The CTAs' partials, CTA by CTA for all K slots at once: K independent chains of adds and
  // the loads of several CTAs in flight (slot by slot, the chain waited for each CTA's load in
  // turn: ~20% of the warp's time in the softmax at B4 N64).
  const float *at = part + g * (N + 1) + lane;
  const int stride = bg * (N + 1);
#pragma unroll
  for (int q = 0; q < CS; q++, at += stride)
#pragma unroll
    for (int k = 0; k < K; k++)
      if (lane + 32 * k <= N) sc[k] += at[32 * k];
#pragma unroll
  for (int k = 0; k < K; k++) sc[k] *= scale2;
  lanes_softmax<K>(sc, p, N, lane);
  if (step) {
    float q = 0.f, x[K], rn[K];  // q = w . h, slot N (a shuffle per register: selecting the
#pragma unroll                   // register first made ptxas index sc in local memory)
    for (int k = 0; k < K; k++) {
      const float v = __shfl_sync(0xffffffffu, sc[k], N % 32);
      q = k == N / 32 ? v : q;
    }
#pragma unroll
    for (int k = 0; k < K; k++) x[k] = (1.f - p[k]) * sc[k] + p[k] * q;
    lanes_softmax<K>(x, rn, N, lane);
#pragma unroll
    for (int k = 0; k < K; k++)
      if (lane + 32 * k < N) a[lane + 32 * k] = p[k], r[lane + 32 * k] = rn[k];
  } else {
#pragma unroll
    for (int k = 0; k < K; k++)
      if (lane + 32 * k < N) r[lane + 32 * k] = p[k];
  }
}

// The tensor-core forward's attend_row (CS CTAs a cluster): by lanes where N + 1 slots fit 3
// registers a lane.
template <int CS>
__device__ __forceinline__ void attend_fast(const float *part, int bg, int g, int N, float scale,
                                            bool step, int lane, float *r, float *a) {
  if (N < 32) attend_lanes<1, CS>(part, bg, g, N, scale, step, lane, r, a);
  else if (N < 64) attend_lanes<2, CS>(part, bg, g, N, scale, step, lane, r, a);
  else if (N < 96) attend_lanes<3, CS>(part, bg, g, N, scale, step, lane, r, a);
  else attend_row<float>(part, bg, g, N, CS, scale, step, lane, r, a);
}

// From the partial scores: the attention weights (attend_row), then for a step the write.
template <typename T, int BG, bool CL>
__device__ void phase_attend(const Ctx<T, BG, CL> &c, bool step) {
  using A = acc_t<T>;
  if (c.warp < BG)
    attend_row<A>(c.part1, BG, c.warp, c.N, c.cs, c.scale, step, c.lane, c.rbuf + c.warp * c.N,
                  c.abuf + c.warp * c.N);
  __syncthreads();
  if (step) {
    const int64_t n = BG * c.N * c.w;
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
      const int g = (int)(k / (c.N * c.w));
      const int64_t i = (k / c.w) % c.N, jj = k % c.w;
      const A ai = c.abuf[g * c.N + i];
      A &h = c.tp(g, i, jj);
      h = ((A)1 - ai) * h + ai * c.wloc[g * c.R + jj];
    }
    __syncthreads();
  }
}

// Step t's weights into the trace (cpu/e23.h): a_t and the next read weights r_{t+1} (t = -1:
// r_0 alone) of the bg batch rows from gb, abuf / rbuf [bg][N], task k from `first` on. Rank 0
// of a cluster calls it.
template <typename T>
__device__ void trace_weights(const P23<T> &p, const acc_t<T> *abuf, const acc_t<T> *rbuf,
                              int64_t gb, int64_t bg, int64_t t, int first) {
  for (int k = first; k < bg * p.N; k += blockDim.x) {
    const int q = div_by(p.div_n, k);  // (a 64-bit k / N, on rank 0's step: see P23's div_n)
    const int64_t bi = gb + q, i = k - q * p.N;
    if (bi >= p.B) continue;
    acc_t<T> *row = p.ckpt + bi * p.ck_len;
    if (t >= 0) row[p.ck_a + t * p.N + i] = abuf[k];
    if (t + 1 < p.nt) row[p.ck_r + (t + 1) * p.N + i] = rbuf[k];
  }
}

// The trace after the generic forward's step t (trace_weights), and w_t of the CTA's units.
template <typename T, int BG, bool CL>
__device__ void trace_step(const Ctx<T, BG, CL> &c, const P23<T> &p, int64_t t) {
  if (c.rank == 0) trace_weights(p, c.abuf, c.rbuf, c.batch(0), BG, t, threadIdx.x);
  if (t >= 0)
    for (int64_t k = threadIdx.x; k < BG * c.w; k += blockDim.x) {
      const int g = (int)(k / c.w);
      const int64_t jj = k % c.w, bi = c.batch(g);
      if (bi < c.B) p.ckpt[bi * p.ck_len + p.ck_w + t * c.d + c.c0 + jj] = c.wloc[g * c.R + jj];
    }
}

// hbuf[0] = the state the chain starts from (h0 or hs[t0 - 1], or zero) for every unit.
template <typename T, int BG, bool CL>
__device__ void load_state(const Ctx<T, BG, CL> &c, const T *src, int64_t stride_b) {
  for (int64_t k = threadIdx.x; k < BG * c.d; k += blockDim.x) {
    const int64_t bi = c.batch((int)(k / c.d));
    c.hbuf[k] = src && bi < c.B ? load(src + bi * stride_b + k % c.d) : (acc_t<T>)0;
  }
}

template <typename T, int BG, bool CL>
__global__ void __launch_bounds__(kThreads) e23_fwd(P23<T> p) {
  using A = acc_t<T>;
  extern __shared__ __align__(16) unsigned char smem[];
  int rank, cs, group;
  cluster_pos<CL>(&rank, &cs, &group);
  const Lay l = layout(p.d, p.N, p.R, BG, cs, CL, false, p.tape_smem, sizeof(T), sizeof(A));
  Ctx<T, BG, CL> c = make_ctx<T, BG, CL>(p, smem, l);
  c.tape = p.tape_smem ? reinterpret_cast<A *>(smem + l.tape) : p.scratch + blockIdx.x * p.per_cta;
  const T *Wh = p.Wh + c.c0 * p.d, *Ww = p.Ww + c.c0 * p.d;
  if constexpr (CL) {
    stage(reinterpret_cast<T *>(smem + l.w1), p.Wh, p.d, c.c0, c.w, false);
    stage(reinterpret_cast<T *>(smem + l.w2), p.Ww, p.d, c.c0, c.w, false);
    Wh = reinterpret_cast<const T *>(smem + l.w1);
    Ww = reinterpret_cast<const T *>(smem + l.w2);
  }
  for (int64_t k = threadIdx.x; k < BG * p.N * c.w; k += blockDim.x) {
    const int g = (int)(k / (p.N * c.w));
    const int64_t i = (k / c.w) % p.N, jj = k % c.w, bi = c.batch(g);
    c.tp(g, i, jj) = p.tape0 && bi < p.B ? load(p.tape0 + (bi * p.N + i) * p.d + c.c0 + jj) : (A)0;
  }
  load_state(c, p.h0, p.d);
  A rx[kPF] = {};
  if (c.st) {
    fetch_x(c, p.xw, p.b, 0, rx);
    park_x(c, 0, rx);
  }
  sync_all<CL>();
  const bool vec = CL ? c.vs : c.vg;
  phase_scores(c, Ww, vec, c.hbuf, false, (A *)nullptr);
  phase_attend(c, false);
  trace_step(c, p, -1);
  for (int64_t t = 0; t < p.nt; t++) {
    if (t % p.C == 0)
      for (int64_t k = threadIdx.x; k < BG * p.N * c.w; k += blockDim.x) {
        const int g = (int)(k / (p.N * c.w));
        const int64_t i = (k / c.w) % p.N, jj = k % c.w, bi = c.batch(g);
        if (bi < p.B) p.ckpt[bi * p.ck_len + (t / p.C * p.N + i) * p.d + c.c0 + jj] = c.tp(g, i, jj);
      }
    A *hc = c.hbuf + (t & 1) * BG * p.d, *hn = c.hbuf + ((t + 1) & 1) * BG * p.d;
    const bool ahead = c.st && t + 1 < p.nt;
    if (ahead) fetch_x(c, p.xw, p.b, t + 1, rx);  // in flight during this step
    phase_h(c, Wh, vec, t, p.xw, p.b, hc, hn, p.hs, t == p.nt - 1 ? p.hT : (T *)nullptr, (A *)nullptr);
    sync_all<CL>();
    phase_scores(c, Ww, vec, hn, true, (A *)nullptr);
    phase_attend(c, true);
    trace_step(c, p, t);
    if (ahead) {
      park_x(c, t + 1, rx);
      __syncthreads();
    }
  }
  for (int64_t k = threadIdx.x; k < BG * p.N * c.w; k += blockDim.x) {
    const int g = (int)(k / (p.N * c.w));
    const int64_t i = (k / c.w) % p.N, jj = k % c.w, bi = c.batch(g);
    if (bi < p.B) store(p.tapeT + (bi * p.N + i) * p.d + c.c0 + jj, c.tp(g, i, jj));
  }
}

// ---- the forward on tensor cores ----
// For 16-bit T and the widths of E23_TC_TILINGS, the two per-step products (W_h h_{t-1} and
// w = W_write h_t) run as tc::Step products (cuda/e1_mma.cuh): the warps keep the A fragments of
// both slices in registers for the whole sequence (f16, each slice scaled by its own power of
// two), the state is exchanged as one f16 part (tc::kSingle).
// Thread q finishes slice rows (r, r + 1), r = 2 (q % (R / 2)), of batch row n = q / (R / 2): h,
// then w, then that pair of the tape's columns (the write and the next step's read H^T r), alone
// or with other threads taking some of the slots (the pair split), or the tape's loops run by
// quads of columns instead (the quad split, where the pairs fill more than half the CTA).
// The scores H h and w . h: one thread per (batch row, slot) over the CTA's R units.

// (MT, KS, NW) as in ENG_E1_TC_TILINGS, limited to the ones whose two slices' fragments fit the
// registers next to the step's work: d = 256 on 8 CTAs, d = 512 on 8 CTAs of 64 units or on 16
// CTAs of 32 (non-portable clusters, at most 7 resident). Both directions have all three; their
// plans pick (eng_plan_beats, eng_bwd_plan_beats). Where 16 CTAs hold one batch row a cluster, as
// 8 would, the forward's loops and products are half as long (B4 N64 2.89 -> 2.67 us/step); the
// backward gains only where 16 CTAs hold a segment's tapes on chip in fewer parts (B4 N64 6.4 ->
// 5.8): its fills go to twice the CTAs (B4 N8 3.8 -> 4.1).
#define E23_TC_TILINGS(X) X(1, 4, 4) X(2, 4, 8) X(1, 4, 8)

// Shared memory after tc::Step's state buffers: red [NW][8][R + 4] f32, the partial scores
// part [cs][bg][N + 1], r and a [bg][N], the CTA's h and w [bg][R], the slot split's partial reads
// up (a float4 a thread), the tape [bg][N][R + 4]
// (rows padded so the scores' 16-byte row loads are free of bank conflicts) and three mbarriers.
// The weight slices are staged, one after the other, over everything from red on before the
// fragments are loaded (the mbarriers are initialized after).
struct TcLay {
  size_t red, part, rbuf, abuf, hl, wl, up, tape, bars, total;
};
__host__ __device__ constexpr int64_t tc_ldt(int64_t R) { return R + 4; }
__host__ __device__ inline TcLay tc_layout(int64_t d, int64_t N, int64_t R, int64_t bg, int cs,
                                           int nw) {
  TcLay l{};
  Carve cv{tc::hb_bytes(d)};
  auto take = [&](size_t bytes) { return cv.take(bytes); };
  l.red = take((size_t)nw * 8 * tc::ldr(R) * sizeof(float));
  l.part = take((size_t)cs * bg * (N + 1) * sizeof(float));
  l.rbuf = take((size_t)bg * N * sizeof(float));
  l.abuf = take((size_t)bg * N * sizeof(float));
  l.hl = take((size_t)bg * R * sizeof(float));
  l.wl = take((size_t)bg * R * sizeof(float));
  l.up = take((size_t)nw * 32 * 4 * sizeof(float));
  l.tape = take((size_t)bg * N * tc_ldt(R) * sizeof(float));
  l.bars = take(3 * 8);  // the exchanges' mbarriers: h (2 buffers), the partial scores (1)
  const size_t ws = l.red + (size_t)R * d * 2;
  l.total = cv.at > ws ? cv.at : ws;
  return l;
}

// x . h over R floats, both 16-byte aligned: a partial score over the CTA's units.
template <int R> __device__ __forceinline__ float dot16(const float *x, const float *h) {
  const float4 *a4 = reinterpret_cast<const float4 *>(x), *b4 = reinterpret_cast<const float4 *>(h);
  float s = 0.f;
#pragma unroll 4
  for (int q = 0; q < R / 4; q++) {
    const float4 a = a4[q], b = b4[q];
    s += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
  }
  return s;
}

// The slot split of the tensor-core kernels (e23_fwd_tc, e23_bwd_tc): how many threads share a
// column pair's loops over the N slots. pairs = bg R / 2 threads finish pairs; SP is a power of
// two, SP pairs <= threads, and each split thread keeps at least 8 slots. The kernels are
// compiled for SP = 1 (SPLIT false) apart: with the split's bookkeeping at run time the N = 8
// backward lost up to 10%.
__host__ __device__ inline int slot_split(int64_t bg, int64_t R, int threads, int64_t N) {
  const int64_t pairs = bg * (R / 2);
  int sp = 1;
  while (2 * sp * pairs <= threads && 16 * sp <= N) sp *= 2;
  return sp;
}
// The forward's quad split, where the pair split is off (more than threads / 2 pairs: bg > 4 at
// these tilings): the tape's write and read run on bg R / 4 quads of columns (float4), each
// quad's slots split over QP threads (not a power of two: B = 64 N = 64 takes 80 quads 3 ways,
// 240 of 256 threads, where the pairs left 96 idle and walked all 64 slots), at least 8 slots
// each. 1 where that gives no second part.
__host__ __device__ inline int quad_parts(int64_t bg, int64_t R, int threads, int64_t N) {
  const int64_t quads = bg * (R / 4), qp = std::min((int64_t)threads / quads, N / 8);
  return qp > 1 ? (int)qp : 1;
}
// Which compiled variant of the tensor-core kernels a plan runs: split, whether the slot split
// is on (slot_split > 1); pack, in the backward, whether the batch group's hi and lo parts share
// the mma's 8 columns (tc::kPacked: half the mma's on the chain, for bg <= 4; the forward has one
// f16 part). A backward plan without pack has bg > 4, where the slot split is off at these
// tilings (bg R / 2 pairs fill the CTA). quad: the forward's quad split (quad_parts > 1).
struct TcVariant {
  bool split, pack, quad;
};
inline TcVariant tc_variant(const Plan &pl, const tc::Tiling &tl, int64_t N) {
  const bool split = slot_split(pl.bg, pl.R, 32 * tl.nw, N) > 1;
  return TcVariant{split, pl.bg <= 4, !split && quad_parts(pl.bg, pl.R, 32 * tl.nw, N) > 1};
}

// Thread tid's place in the slot split: pair pq (batch row n, units r and r + 1 of the CTA's R),
// part sp of SP, slots [i0, i1). Parts sp > 0 leave their partial sums in a buffer of
// (SP - 1) pairs float2 that part 0 adds up after a barrier.
struct SplitPlace {
  int SP, pairs, sp, pq, n, r, i0, i1;
  __device__ SplitPlace(bool split, int64_t bg, int R, int threads, int64_t N, int tid)
      : SP(split ? slot_split(bg, R, threads, N) : 1), pairs((int)bg * (R / 2)), sp(tid / pairs),
        pq(tid % pairs), n(pq / (R / 2)), r(2 * (pq % (R / 2))), i0(sp * (int)N / SP),
        i1((sp + 1) * (int)N / SP) {}
  __device__ void put(float2 *buf, float2 v) const { buf[(sp - 1) * pairs + pq] = v; }
  __device__ float2 add_others(const float2 *buf, float2 v) const {
    for (int k = 1; k < SP; k++) {
      const float2 x = buf[(k - 1) * pairs + pq];
      v.x += x.x, v.y += x.y;
    }
    return v;
  }
};

// The forward's tape loops: by the pair threads alone, split over the slots by pairs
// (slot_split), or by quads (quad_parts).
enum TapeSplit { kNoSplit, kPairSplit, kQuadSplit };

// V consecutive floats as one shared-memory access (8 or 16 bytes).
template <int V> struct alignas(4 * V) Floats { float x[V]; };

// The write of one tape entry, H <- (1 - a) H + a w: the tensor-core forward's write and the
// tensor-core backward's replays of it (e23_bwd_tc.cuh) are this one expression, so a replayed
// tape is the forward's. (The generic kernels replay their own step code.)
__device__ __forceinline__ float tape_write(float x, float a, float w) {
  return (1.f - a) * x + a * w;
}

// A thread's part of the tape loops at V units of a batch row (trow: its tape at those units,
// slots LT floats apart), slots [i0, i1): the write H <- (1 - a) H + a w^T (the forward's
// expression: the backward replays it), each slot's new values into ckp (the checkpoint's units,
// i d floats on) unless null, and the part of the next read u = sum_i r_i H[i]. The slots' a_i and
// r_i load as float4s from the first 16-byte boundary on (ab and rb are aligned alike): loaded a
// slot at a time they were a third of the loop's shared-memory wavefronts (B = 64 N = 64: the
// loop 2 330 -> 1 870 cycles).
template <int V>
__device__ __forceinline__ void write_slots(float *trow, int LT, int i0, int i1, const float *ab,
                                            const float *rb, const Floats<V> &w, float *ckp,
                                            int64_t d, Floats<V> &u) {
#pragma unroll
  for (int k = 0; k < V; k++) u.x[k] = 0.f;
  auto slot = [&](int i, float ai, float ri) {
    Floats<V> *hp = reinterpret_cast<Floats<V> *>(trow + i * LT);
    Floats<V> hv = *hp;
#pragma unroll
    for (int k = 0; k < V; k++) hv.x[k] = tape_write(hv.x[k], ai, w.x[k]);
    *hp = hv;
#pragma unroll
    for (int k = 0; k < V; k++) {
      u.x[k] += ri * hv.x[k];
      if (ckp) ckp[i * d + k] = hv.x[k];
    }
  };
  int i = i0;
  for (; i < i1 && ((uintptr_t)(ab + i) & 15); i++) slot(i, ab[i], rb[i]);
  for (; i + 4 <= i1; i += 4) {
    const float4 a4 = *reinterpret_cast<const float4 *>(ab + i);
    const float4 r4 = *reinterpret_cast<const float4 *>(rb + i);
    slot(i, a4.x, r4.x), slot(i + 1, a4.y, r4.y), slot(i + 2, a4.z, r4.z), slot(i + 3, a4.w, r4.w);
  }
  for (; i < i1; i++) slot(i, ab[i], rb[i]);
}
// The read alone (the first step's, from the initial tape).
template <int V>
__device__ __forceinline__ void read_slots(const float *trow, int LT, int i0, int i1,
                                           const float *rb, Floats<V> &u) {
#pragma unroll
  for (int k = 0; k < V; k++) u.x[k] = 0.f;
  for (int i = i0; i < i1; i++) {
    const Floats<V> hv = *reinterpret_cast<const Floats<V> *>(trow + i * LT);
#pragma unroll
    for (int k = 0; k < V; k++) u.x[k] += rb[i] * hv.x[k];
  }
}

// Thread tid's place in the quad split: quad (batch row n, units u .. u + 3 of the CTA's R), part
// qp of QP, slots [i0, i1). Every part leaves its partial read (float4) in a buffer [QP][bg R]
// that the pairs' finishing threads add up after a barrier.
struct QuadPlace {
  int QP, SL, R, qp, n, u, i0, i1;  // SL: floats a part of the buffer
  __device__ QuadPlace(int64_t bg, int R_, int threads, int64_t N, int tid)
      : QP(quad_parts(bg, R_, threads, N)), SL((int)bg * R_), R(R_), qp(tid / (SL / 4)),
        n(tid % (SL / 4) / (R / 4)), u(4 * (tid % (R / 4))), i0(qp * (int)N / QP),
        i1((qp + 1) * (int)N / QP) {}
  __device__ void put(float4 *buf, float4 v) const { buf[(qp * SL + n * R + u) / 4] = v; }
  // The parts' sums at units (r, r + 1) of batch row m (a pair's finishing thread).
  __device__ float2 sum(const float4 *buf, int m, int r) const {
    const float *x = reinterpret_cast<const float *>(buf) + m * R + r;
    float2 v = make_float2(0.f, 0.f);
    for (int k = 0; k < QP; k++, x += SL) {
      const float2 y = *reinterpret_cast<const float2 *>(x);
      v.x += y.x, v.y += y.y;
    }
    return v;
  }
};

// Four consecutive 16-bit values as floats, by one 8-byte load where x is 8-byte aligned (v8).
template <typename T> __device__ __forceinline__ float4 load4(const T *x, bool v8) {
  T e[4];
  if (v8) {
    *reinterpret_cast<uint2 *>(e) = *reinterpret_cast<const uint2 *>(x);
  } else {
#pragma unroll
    for (int k = 0; k < 4; k++) e[k] = x[k];
  }
  return make_float4(load(e), load(e + 1), load(e + 2), load(e + 3));
}

// The tensor-core forward's initial tape (tape0's units [r0, r0 + R) of the group's batch rows, or
// zeros) into shared memory, tape [bg][N][LT], and into the first checkpoint: four units a task, KB
// tasks' loads in flight together (KB = 8 spilled in the B = 64 N = 64 kernel). A unit at a time,
// each load a global round trip behind the one before, this took ~50 us of a B = 64 N = 64 call
// (80 units a thread); now ~13 with init_state before it.
template <typename T, int R>
__device__ void init_tape(const P23<T> &p, float *tape, int LT, int64_t gb, int64_t r0) {
  constexpr int Q = R / 4, KB = 4;
  const int N = (int)p.N, tasks = (int)p.bg * N * Q, nth = (int)blockDim.x;
  const bool t8 = (reinterpret_cast<uintptr_t>(p.tape0) & 7) == 0;
  const bool c16 = p.ck_len % 4 == 0 && (reinterpret_cast<uintptr_t>(p.ckpt) & 15) == 0;
  for (int k0 = (int)threadIdx.x; k0 < tasks; k0 += KB * nth) {
    float4 v[KB];
#pragma unroll
    for (int j = 0; j < KB; j++) {
      const int k = k0 + j * nth, row = k / Q, g = (int)div_by(p.div_n, row);
      const int64_t bi = gb + g, at = (bi * N + row - g * N) * p.d + r0 + 4 * (k % Q);
      v[j] = k < tasks && p.tape0 && bi < p.B ? load4(p.tape0 + at, t8) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int j = 0; j < KB; j++) {
      const int k = k0 + j * nth, row = k / Q, g = (int)div_by(p.div_n, row), u = 4 * (k % Q);
      if (k >= tasks) break;
      *reinterpret_cast<float4 *>(tape + row * LT + u) = v[j];
      const int64_t bi = gb + g;
      if (bi >= p.B) continue;
      float *ck = p.ckpt + bi * p.ck_len + (row - g * N) * p.d + r0 + u;
      if (c16) {
        *reinterpret_cast<float4 *>(ck) = v[j];
      } else {
        ck[0] = v[j].x, ck[1] = v[j].y, ck[2] = v[j].z, ck[3] = v[j].w;
      }
    }
  }
}

// The tensor-core forwards' (e23_fwd_tc, cuda/e23_fwd_rt.cuh's e23_fwd_rt) exchanges at the
// mbarriers `bars`: hx, h_t into state buffer (t + 1) & 1 of every CTA (the group's real rows; NB
// = 2: an mbarrier a buffer; NB = 2 CS: one a buffer and source CTA, each counting that CTA's
// share, e23_fwd_rt), and px at the next mbarrier, a step's scores (px_bytes of them;
// e23_fwd_tc: every CTA's bg x (N + 1) partials); and the CTA's h (h0 at its units, or zeros)
// and w (zeros), hl and wl [bg][R]. A cluster barrier must follow before any CTA sends.
template <typename S, typename T, int NB>
__device__ void init_forward(const P23<T> &p, AsyncFills<NB> &hx, AsyncFills<1> &px,
                             unsigned char *bars, int64_t gb, int64_t r0, float *hl, float *wl,
                             uint32_t px_bytes) {
  constexpr int R = S::R;
  const int64_t bg = p.bg, B = p.B;
  hx.init(bars, (uint32_t)(min(bg, B - gb) * S::kRowBytes * 2 / NB));
  px.init(bars + 8 * NB, px_bytes);
  for (int64_t k = threadIdx.x; k < bg * R; k += blockDim.x) {
    const int64_t bi = gb + k / R;
    hl[k] = p.h0 && bi < B ? load(p.h0 + bi * S::D + r0 + k % R) : 0.f;
    wl[k] = 0.f;
  }
}

template <typename T, int MT, int KS, int NW, int SPLIT>
__global__ void __launch_bounds__(NW * 32, 1) e23_fwd_tc(P23<T> p) {
  using S = tc::Step<__half, MT, KS, NW, tc::kSingle>;
  constexpr int R = S::R;
  constexpr int64_t d = S::D, LT = tc_ldt(R);
  extern __shared__ __align__(128) unsigned char tc_smem[];
  int rank, cs, group;
  cluster_pos<true>(&rank, &cs, &group);
  if (cs != S::CS || p.d != d || p.bg > S::NR) __trap();  // the plan picks the tiling
  const int64_t N = p.N, bg = p.bg, gb = (int64_t)group * bg, r0 = (int64_t)rank * R, B = p.B;
  const TcLay l = tc_layout(d, N, R, bg, cs, NW);
  float *part = reinterpret_cast<float *>(tc_smem + l.part);
  float *rbuf = reinterpret_cast<float *>(tc_smem + l.rbuf);
  float *abuf = reinterpret_cast<float *>(tc_smem + l.abuf);
  float *hl = reinterpret_cast<float *>(tc_smem + l.hl);
  float *wl = reinterpret_cast<float *>(tc_smem + l.wl);
  float2 *up = reinterpret_cast<float2 *>(tc_smem + l.up);
  float4 *up4 = reinterpret_cast<float4 *>(tc_smem + l.up);
  float *tape = reinterpret_cast<float *>(tc_smem + l.tape);
  // prologue: both slices' fragments (staged in turn over red onwards, each as scaled f16), then
  // the state and tape
  S sh(tc_smem), sw(tc_smem);
  T *Ws = reinterpret_cast<T *>(tc_smem + l.red);
  tc::stage_slice(Ws, p.Wh, d, r0, R, false, d);
  __syncthreads();
  const float uh = sh.load_a_staged(Ws);  // W_h's products are scaled back by uh
  __syncthreads();
  tc::stage_slice(Ws, p.Ww, d, r0, R, false, d);
  __syncthreads();
  const float uw = sw.load_a_staged(Ws);  // W_write's by uw
  sh.init_state(p.h0, gb, bg, B);
  __syncthreads();
  AsyncFills<2> hx;  // h_t into state buffer (t + 1) & 1
  AsyncFills<1> px;  // a step's partial scores into part
  init_forward<S>(p, hx, px, tc_smem + l.bars, gb, r0, hl, wl,
                  (uint32_t)(cs * bg * (N + 1) * (int64_t)sizeof(float)));
  init_tape<T, R>(p, tape, (int)LT, gb, r0);
  // The slot split (slot_split): the tape's write and read over the N slots at a column pair
  // would leave all but bg R / 2 threads waiting at the next barrier. Thread (sp, pq) takes pair
  // pq's slots [i0, i1) and leaves its partial read in up, which the pair's finishing thread
  // (sp = 0) adds after the barrier that starts the next step; up is written again only after
  // the next attend's barrier, which the finishing thread reaches after its read.
  // The quad split (quad_parts) runs the same loops by quads, every part leaving its partial read
  // in up4, which the finishing threads add up after the same barrier.
  constexpr bool PS = SPLIT == kPairSplit, QS = SPLIT == kQuadSplit;
  const int tid = (int)threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const SplitPlace sl(PS, bg, R, NW * 32, N, tid);
  const int n = sl.n, r = sl.r, sp = sl.sp, i0 = sl.i0, i1 = sl.i1;
  const bool sact = sp < sl.SP && n < bg && gb + n < B, fin = sact && sp == 0;
  const QuadPlace ql(bg, R, NW * 32, N, tid);
  // The thread's place in the tape loops: V units from tu of batch row tn, slots [ti0, ti1).
  constexpr int V = QS ? 4 : 2;
  const int tn = QS ? ql.n : n, tu = QS ? ql.u : r, ti0 = QS ? ql.i0 : i0, ti1 = QS ? ql.i1 : i1;
  const bool tact = QS ? ql.qp < ql.QP && gb + ql.n < B : sact;
  const int64_t c = r0 + r, base = (gb + n) * p.nt * d + c;
  const float scale = 1.f / sqrtf((float)d);
  float bias[2] = {}, u[2] = {};  // b; step t's read (H^T r) at (c, c + 1)
  T xr[2] = {};  // step t's xw as loaded: converted after the product, so the load overlaps it
  auto fetch = [&](int64_t t) {
#pragma unroll
    for (int k = 0; k < 2; k++) xr[k] = p.xw[base + t * d + k];
  };
  if (fin && p.nt > 0) {
    bias[0] = load(p.b + c), bias[1] = load(p.b + c + 1);
    fetch(0);
  }
  // This CTA's partial scores of every batch row into every CTA's part (slot N only for a step):
  // a step's as st_async stores counted by px, the initial ones before a cluster barrier.
  auto scores = [&](bool step) {
    const int tasks = (int)(bg * (N + 1)), slots = (int)N + 1;
    for (int k = (int)threadIdx.x; k < tasks; k += (int)blockDim.x) {
      const int g = div_by(p.div_n1, k), i = k - g * slots;
      if (i == N && !step) continue;
      const float s = dot16<R>(i < N ? tape + (g * N + i) * LT : wl + g * R, hl + g * R);
      float *at = part + (rank * bg + g) * (N + 1) + i;
      if (step)
        put_all_async<S::CS>(at, s, px.of(0));
      else
        put_all<true>(at, s, cs);
    }
  };
  // The weights of step t into the trace (cpu/e23.h): a_t and the next read weights r_{t+1} (t =
  // -1: r_0 alone), by rank 0's last threads (the first ones finish the step's write and read).
  auto attend = [&](int64_t t) {
    for (int g = warp; g < bg; g += NW)
      attend_fast<S::CS>(part, (int)bg, g, (int)N, scale, t >= 0, lane, rbuf + g * N,
                         abuf + g * N);
    __syncthreads();
    if (rank == 0) trace_weights(p, abuf, rbuf, gb, bg, t, blockDim.x - 1 - threadIdx.x);
  };
  // The thread's part of the read of the step to come, u = sum_i r_i H[i] at its units: a pair's
  // finishing thread (sp = 0) keeps it, the pair split's others leave it in up, the quads in up4.
  auto share = [&](const Floats<V> &v) {
    if constexpr (QS) {
      ql.put(up4, *reinterpret_cast<const float4 *>(v.x));
    } else if (sp == 0) {
      u[0] = v.x[0], u[1] = v.x[1];
    } else {
      sl.put(up, make_float2(v.x[0], v.x[1]));
    }
  };
  sync_all<true>();  // every CTA started and initialized before the first remote store
  scores(false);
  sync_all<true>();
  sh.product(0);  // step 0's W_h h0 (red is free: the fragments are loaded); attend's barrier
  attend(-1);     // ends it
  if (tact) {
    Floats<V> v;
    read_slots<V>(tape + tn * N * LT + tu, (int)LT, ti0, ti1, rbuf + tn * N, v);
    share(v);
  }
  int64_t next_ck = p.C, seg = 1;  // the next checkpoint: before step next_ck, segment seg
  // A step: h_t = tanh(W_h h_{t-1} + xw + b + u) into state buffer (t + 1) & 1 of every CTA; w =
  // W_write h_t (all CTAs' h_t: after hx's wait); the partial scores into every CTA's part, then
  // the next step's W_h h_t while their exchange is under way (after px's wait: the softmax, whose
  // barrier also ends that product). Why no CTA refills a buffer another still reads, without a
  // cluster barrier: CTA Q fills buffer (t + 1) & 1 at step t after its wait for step t - 1's
  // fill, which CTA P sends only after both its step t - 2 products over that buffer; Q fills part
  // at step t after its wait for h_t, which P sends only after its step t - 1 softmax read part.
  // Every fill is waited for, so none targets an exited CTA. red holds W_h h_{t-1} from step t -
  // 1's product until the finishing threads' sums, each before its thread sends h_t: hx's wait
  // tells every thread that they are done before W_write's product overwrites it.
  for (int64_t t = 0; t < p.nt; t++) {
    const int buf = (int)(t & 1);
    if constexpr (PS || QS) __syncthreads();  // the split threads' partial reads in up
    if (fin) {
      const float2 s = sh.sum(n, r);
      const float2 ut = QS ? ql.sum(up4, n, r) : sl.add_others(up, make_float2(u[0], u[1]));
      u[0] = ut.x, u[1] = ut.y;
      const float h[2] = {tanhf(s.x * uh + load(&xr[0]) + bias[0] + u[0]),
                          tanhf(s.y * uh + load(&xr[1]) + bias[1] + u[1])};
      *reinterpret_cast<float2 *>(hl + n * R + r) = make_float2(h[0], h[1]);
      sh.put_async(buf ^ 1, n, c, h[0], h[1], hx.of(buf ^ 1));
      const int64_t at = base + t * d;
#pragma unroll
      for (int k = 0; k < 2; k++) {
        store(p.hs + at + k, h[k]);
        if (t == p.nt - 1) store(p.hT + (gb + n) * d + c + k, h[k]);
      }
      if (t + 1 < p.nt) fetch(t + 1);
    }
    hx.wait(buf ^ 1);
    sw.product(buf ^ 1);
    __syncthreads();
    float w[2] = {};
    if (fin) {
      float2 s = sw.sum(n, r);
      s.x *= uw, s.y *= uw;
      w[0] = s.x, w[1] = s.y;
      *reinterpret_cast<float2 *>(wl + n * R + r) = s;
      *reinterpret_cast<float2 *>(p.ckpt + (gb + n) * p.ck_len + p.ck_w + t * d + c) = s;  // w_t
    }
    __syncthreads();
    scores(true);
    if (t + 1 < p.nt) sh.product(buf ^ 1);
    px.wait(0);
    attend(t);
    if (tact) {  // the write of the thread's slots at its units, then its part of the next read
      Floats<V> wv, v;
      if (QS || sp > 0) {
        wv = *reinterpret_cast<const Floats<V> *>(wl + tn * R + tu);
      } else {
        wv.x[0] = w[0], wv.x[1] = w[1];
      }
      float *trow = tape + tn * N * LT + tu;
      const float *ab = abuf + tn * N, *rb = rbuf + tn * N;
      if (t + 1 == next_ck && t + 1 < p.nt)  // (two copies: the loop without the test of ckp)
        write_slots<V>(trow, (int)LT, ti0, ti1, ab, rb, wv,
                       p.ckpt + (gb + tn) * p.ck_len + seg * N * d + r0 + tu, d, v);
      else
        write_slots<V>(trow, (int)LT, ti0, ti1, ab, rb, wv, nullptr, d, v);
      share(v);
    }
    if (t + 1 == next_ck) next_ck += p.C, seg++;
  }
  if (tact)  // the thread's own slots: no barrier needed
    for (int i = ti0; i < ti1; i++)
#pragma unroll
      for (int k = 0; k < V; k++)
        store(p.tapeT + ((gb + tn) * N + i) * d + r0 + tu + k, tape[(tn * N + i) * LT + tu + k]);
}

#include "cuda/e23_fwd_rt.cuh"
#include "cuda/e23_bwd_tc.cuh"
#include "cuda/e23_bwd_rt.cuh"

// ---- the backward ----

template <typename T, int BG, bool CL>
__global__ void __launch_bounds__(kThreads) e23_bwd(P23<T> p) {
  using A = acc_t<T>;
  extern __shared__ __align__(16) unsigned char smem[];
  int rank, cs, group;
  cluster_pos<CL>(&rank, &cs, &group);
  const Lay l = layout(p.d, p.N, p.R, BG, cs, CL, true, false, sizeof(T), sizeof(A));
  Ctx<T, BG, CL> c = make_ctx<T, BG, CL>(p, smem, l);
  const int64_t N = p.N, d = p.d, R = p.R, C = p.C, NR = N * R;
  // per-CTA scratch: segment tapes [C][BG][N][R], working tape, dH, h [C+1][BG][R], w [C][BG][R],
  // r and a [C][BG][N]
  A *seg = p.scratch + blockIdx.x * p.per_cta;
  A *work = seg + C * BG * NR, *dH = work + BG * NR, *hown = dH + BG * NR;
  A *wown = hown + (C + 1) * BG * R, *rs = wown + C * BG * R, *as = rs + C * BG * N;
  c.tape = work;
  // forward weights for the replay from global memory; their transposes on chip
  const T *Wh = p.Wh + c.c0 * d, *Ww = p.Ww + c.c0 * d;
  const T *WhT = p.Wh + c.c0, *WwT = p.Ww + c.c0;
  int64_t tcs = d;  // column stride of the transposed rows
  if constexpr (CL) {
    stage(reinterpret_cast<T *>(smem + l.w1), p.Wh, d, c.c0, c.w, true);
    stage(reinterpret_cast<T *>(smem + l.w2), p.Ww, d, c.c0, c.w, true);
    WhT = reinterpret_cast<const T *>(smem + l.w1);
    WwT = reinterpret_cast<const T *>(smem + l.w2);
    tcs = 1;
  }
  const int64_t trs = CL ? d : 1;  // row stride of the transposed rows
  A *dwbuf = reinterpret_cast<A *>(smem + l.dwbuf), *dpbuf = reinterpret_cast<A *>(smem + l.dpbuf);
  A *carry = reinterpret_cast<A *>(smem + l.carry), *dhv = reinterpret_cast<A *>(smem + l.dhv);
  A *dpl = reinterpret_cast<A *>(smem + l.dpl), *dsa = reinterpret_cast<A *>(smem + l.dsa);
  A *dsr = reinterpret_cast<A *>(smem + l.dsr);
  auto dHat = [&](int g, int64_t i, int64_t jj) -> A & { return dH[(g * N + i) * R + jj]; };
  for (int64_t k = threadIdx.x; k < BG * N * c.w; k += blockDim.x) {
    const int g = (int)(k / (N * c.w));
    const int64_t i = (k / c.w) % N, jj = k % c.w, bi = c.batch(g);
    dHat(g, i, jj) = p.dtapeT && bi < p.B ? load(p.dtapeT + (bi * N + i) * d + c.c0 + jj) : (A)0;
  }
  for (int64_t k = threadIdx.x; k < BG * c.w; k += blockDim.x) {
    const int g = (int)(k / c.w);
    const int64_t jj = k % c.w, bi = c.batch(g);
    carry[g * R + jj] = p.dhT && bi < p.B ? load(p.dhT + bi * d + c.c0 + jj) : (A)0;
  }
  const int64_t K = (p.nt + C - 1) / C;
  for (int64_t kseg = K - 1; kseg >= 0; kseg--) {
    const int64_t t0 = kseg * C, L = min(C, p.nt - t0);
    // ---- replay the segment from its checkpoint ----
    for (int64_t k = threadIdx.x; k < BG * N * c.w; k += blockDim.x) {
      const int g = (int)(k / (N * c.w));
      const int64_t i = (k / c.w) % N, jj = k % c.w, bi = c.batch(g);
      c.tp(g, i, jj) = bi < p.B ? p.ck_in[bi * p.ck_len + (kseg * N + i) * d + c.c0 + jj] : (A)0;
    }
    if (t0 > 0)
      load_state(c, p.hs_in + (t0 - 1) * d, p.nt * d);
    else
      load_state(c, p.h0, d);
    __syncthreads();
    for (int64_t k = threadIdx.x; k < BG * c.w; k += blockDim.x)
      hown[(k / c.w) * R + k % c.w] = c.hbuf[(k / c.w) * d + c.c0 + k % c.w];
    A rx[kPF] = {};
    if (c.st) {
      fetch_x(c, p.xw, p.b, t0, rx);
      park_x(c, t0, rx);
    }
    sync_all<CL>();
    phase_scores(c, Ww, c.vg, c.hbuf, false, (A *)nullptr);
    phase_attend(c, false);
    for (int64_t s = 0; s < L; s++) {
      const int64_t t = t0 + s;
      for (int64_t k = threadIdx.x; k < BG * NR; k += blockDim.x) seg[s * BG * NR + k] = work[k];
      for (int64_t k = threadIdx.x; k < BG * N; k += blockDim.x) rs[s * BG * N + k] = c.rbuf[k];
      A *hc = c.hbuf + (s & 1) * BG * d, *hn = c.hbuf + ((s + 1) & 1) * BG * d;
      const bool ahead = c.st && s + 1 < L;
      if (ahead) fetch_x(c, p.xw, p.b, t + 1, rx);
      phase_h(c, Wh, c.vg, t, p.xw, p.b, hc, hn, (T *)nullptr, (T *)nullptr, hown + (s + 1) * BG * R);
      sync_all<CL>();
      phase_scores(c, Ww, c.vg, hn, true, wown + s * BG * R);
      phase_attend(c, true);
      for (int64_t k = threadIdx.x; k < BG * N; k += blockDim.x) as[s * BG * N + k] = c.abuf[k];
      if (ahead) {
        park_x(c, t + 1, rx);
        __syncthreads();
      }
    }
    __syncthreads();
    // ---- walk the segment backwards ----
    for (int64_t s = L - 1; s >= 0; s--) {
      const int64_t t = t0 + s;
      const A *Hs = seg + s * BG * NR, *r = rs + s * BG * N, *a = as + s * BG * N;
      const A *w = wown + s * BG * R, *h = hown + (s + 1) * BG * R, *hp = hown + s * BG * R;
      auto Hat = [&](int g, int64_t i, int64_t jj) { return Hs[(g * N + i) * R + jj]; };
      // P1: dh so far; da partials; dw = sum_i a_i dH'[i, :] to every CTA
      for (int64_t k = threadIdx.x; k < BG * c.w; k += blockDim.x) {
        const int g = (int)(k / c.w);
        const int64_t jj = k % c.w, bi = c.batch(g), j = c.c0 + jj;
        const bool ok = bi < p.B;
        dhv[g * R + jj] = (ok ? load(p.dhs + (bi * p.nt + t) * d + j) : (A)0) + carry[g * R + jj];
        A acc = 0;
        for (int64_t i = 0; i < N; i++) acc += a[g * N + i] * dHat(g, i, jj);
        if (ok) store(p.dw + (bi * p.nt + t) * d + j, acc);
        put_all<CL>(dwbuf + g * d + j, acc, c.cs);
      }
      for (int64_t k = c.warp; k < BG * N; k += c.nwarps) {
        const int g = (int)(k / N);
        const int64_t i = k % N;
        A sum = 0;
        for (int64_t jj = c.lane; jj < c.w; jj += 32)
          sum += dHat(g, i, jj) * (w[g * R + jj] - Hat(g, i, jj));
        sum = warp_sum(sum);
        if (c.lane == 0) put_all<CL>(c.part1 + (c.rank * BG + g) * (N + 1) + i, sum, c.cs);
      }
      sync_all<CL>();
      // P2: through a = softmax(scale H h); dpre; the write's and the read's share of dH
      if (c.warp < BG) {
        const int g = c.warp;
        A ada = 0;
        for (int64_t i = c.lane; i < N; i += 32) {
          A da = 0;
          for (int q = 0; q < c.cs; q++) da += c.part1[(q * BG + g) * (N + 1) + i];
          dsa[g * N + i] = da;
          ada += a[g * N + i] * da;
        }
        ada = warp_sum(ada);
        for (int64_t i = c.lane; i < N; i += 32) dsa[g * N + i] = a[g * N + i] * (dsa[g * N + i] - ada);
      }
      __syncthreads();
      {
        const int64_t bme = c.batch(c.lane);
        const bool fin = c.lane < BG && bme < p.B;
        for (int64_t jj = c.warp; jj < c.w; jj += c.nwarps) {
          A acc[BG] = {};
          dots<T, BG>(c.vs, WwT + jj * trs, tcs, dwbuf, d, c.lane, acc);
#pragma unroll
          for (int g = 0; g < BG; g++)
            for (int64_t i = c.lane; i < N; i += 32) acc[g] += c.scale * dsa[g * N + i] * Hat(g, i, jj);
          const A tot = reduce_pick<A, BG>(acc, c.lane);
          if (c.lane < BG) {
            const int g = c.lane;
            const A hv = h[g * R + jj], dpre = (dhv[g * R + jj] + tot) * ((A)1 - hv * hv);
            dpl[g * R + jj] = dpre;
            if (fin) store(p.dxw + (bme * p.nt + t) * d + c.c0 + jj, dpre);
            put_all<CL>(dpbuf + g * d + c.c0 + jj, dpre, c.cs);
          }
        }
      }
      __syncthreads();
      for (int64_t k = threadIdx.x; k < BG * N * c.w; k += blockDim.x) {
        const int g = (int)(k / (N * c.w));
        const int64_t i = (k / c.w) % N, jj = k % c.w;
        A &x = dHat(g, i, jj);
        x = ((A)1 - a[g * N + i]) * x + c.scale * dsa[g * N + i] * h[g * R + jj] +
            r[g * N + i] * dpl[g * R + jj];
      }
      for (int64_t k = c.warp; k < BG * N; k += c.nwarps) {
        const int g = (int)(k / N);
        const int64_t i = k % N;
        A sum = 0;
        for (int64_t jj = c.lane; jj < c.w; jj += 32) sum += Hat(g, i, jj) * dpl[g * R + jj];
        sum = warp_sum(sum);
        if (c.lane == 0) put_all<CL>(c.part2 + (c.rank * BG + g) * (N + 1) + i, sum, c.cs);
      }
      sync_all<CL>();
      // P3: through r = softmax(scale H h_{t-1}); the carry into h_{t-1}
      if (c.warp < BG) {
        const int g = c.warp;
        A rdr = 0;
        for (int64_t i = c.lane; i < N; i += 32) {
          A dr = 0;
          for (int q = 0; q < c.cs; q++) dr += c.part2[(q * BG + g) * (N + 1) + i];
          dsr[g * N + i] = dr;
          rdr += r[g * N + i] * dr;
        }
        rdr = warp_sum(rdr);
        for (int64_t i = c.lane; i < N; i += 32) dsr[g * N + i] = r[g * N + i] * (dsr[g * N + i] - rdr);
      }
      __syncthreads();
      for (int64_t jj = c.warp; jj < c.w; jj += c.nwarps) {
        A acc[BG] = {};
        dots<T, BG>(c.vs, WhT + jj * trs, tcs, dpbuf, d, c.lane, acc);
#pragma unroll
        for (int g = 0; g < BG; g++)
          for (int64_t i = c.lane; i < N; i += 32) acc[g] += c.scale * dsr[g * N + i] * Hat(g, i, jj);
        const A tot = reduce_pick<A, BG>(acc, c.lane);
        if (c.lane < BG) carry[c.lane * R + jj] = tot;
      }
      for (int64_t k = threadIdx.x; k < BG * N * c.w; k += blockDim.x) {
        const int g = (int)(k / (N * c.w));
        const int64_t i = (k / c.w) % N, jj = k % c.w;
        dHat(g, i, jj) += c.scale * dsr[g * N + i] * hp[g * R + jj];
      }
      __syncthreads();
    }
  }
  for (int64_t k = threadIdx.x; k < BG * N * c.w; k += blockDim.x) {
    const int g = (int)(k / (N * c.w));
    const int64_t i = (k / c.w) % N, jj = k % c.w, bi = c.batch(g);
    if (bi < p.B) store(p.dtape0 + (bi * N + i) * d + c.c0 + jj, dHat(g, i, jj));
  }
  for (int64_t k = threadIdx.x; k < BG * c.w; k += blockDim.x) {
    const int g = (int)(k / c.w);
    const int64_t jj = k % c.w, bi = c.batch(g);
    if (bi < p.B) store(p.dh0 + bi * d + c.c0 + jj, carry[g * R + jj]);
  }
}

// ---- planning ----

struct Plan23 {
  Plan pl;
  bool tape_smem;
  int64_t per_cta, ctas;
};

template <typename T, bool BWD> struct Pick {
  using fn = void (*)(P23<T>);
  static fn get(bool cl, int bg) {
    if constexpr (sizeof(T) <= 4) {
      if (cl) switch (bg) {
        case 1: return BWD ? e23_bwd<T, 1, true> : e23_fwd<T, 1, true>;
        case 2: return BWD ? e23_bwd<T, 2, true> : e23_fwd<T, 2, true>;
        case 4: return BWD ? e23_bwd<T, 4, true> : e23_fwd<T, 4, true>;
        default: return BWD ? e23_bwd<T, 8, true> : e23_fwd<T, 8, true>;
        }
    }
    if (bg == 1) return BWD ? e23_bwd<T, 1, false> : e23_fwd<T, 1, false>;
    return BWD ? e23_bwd<T, 4, false> : e23_fwd<T, 4, false>;
  }
};

// The generic kernels' plan, the one launched (the scratch query asks for the same): a cluster
// plan with the batch rows per cluster that pick_group finds for its kernel (the tape in shared
// memory where it fits, forward), else one CTA per batch group with W from global memory.
template <typename T, bool BWD>
cudaError_t final_plan(int64_t B, int64_t N, int64_t d, int64_t C, Plan23 *out) {
  using A = acc_t<T>;
  DeviceInfo info;
  cudaError_t e = device_info(&info);
  if (e) return e;
  const size_t cap = (size_t)info.smem_optin;
  if (sizeof(T) <= 4 && cap > 0) {
    for (int cs : {8, 16}) {
      const int64_t R = (d + cs - 1) / cs;
      auto plan = [&](int g, Plan23 *pl) {
        for (int ts = BWD ? 0 : 1; ts >= 0; ts--) {
          const Lay l = layout(d, N, R, g, cs, true, BWD, ts, sizeof(T), sizeof(A));
          if (l.total > cap) continue;
          *pl = Plan23{Plan{true, cs, g, R, l.total, false}, ts != 0,
                       scratch_elems(N, R, C, g, BWD, ts), (B + g - 1) / g * cs};
          return true;
        }
        return false;
      };
      const int g = pick_group(B, cs, info.sms, 8, true, [&](int g) {
        Plan23 pl;
        return plan(g, &pl) ? resident_clusters(Pick<T, BWD>::get(true, g), pl.pl) : 0;
      });
      if (g > 0 && plan(g, out)) return cudaSuccess;
    }
  }
  const int g = B > info.sms ? 4 : 1;
  const Lay l = layout(d, N, d, g, 1, false, BWD, false, sizeof(T), sizeof(A));
  if (l.total > (cap > 0 ? cap : 48 * 1024)) return cudaErrorInvalidValue;
  *out = Plan23{Plan{false, 1, g, d, l.total, false}, false, scratch_elems(N, d, C, g, BWD, false),
                (B + g - 1) / g};
  return cudaSuccess;
}

template <typename T> struct FwdTc23 {
  using fn = void (*)(P23<T>);
  static fn get(const tc::Tiling &tl, TcVariant v) {
    if constexpr (sizeof(T) == 2) {
#define E23_TC_CASE(M_, K_, W_)                                                             \
  if (tl.mt == M_ && tl.ks == K_ && tl.nw == W_)                                            \
    return v.split  ? e23_fwd_tc<T, M_, K_, W_, kPairSplit>                                \
           : v.quad ? e23_fwd_tc<T, M_, K_, W_, kQuadSplit>                                \
                    : e23_fwd_tc<T, M_, K_, W_, kNoSplit>;
      E23_TC_TILINGS(E23_TC_CASE)
#undef E23_TC_CASE
    }
    (void)tl, (void)v;
    return nullptr;
  }
};

template <typename T> struct BwdTc23 {
  using fn = void (*)(P23<T>);
  // mode: TbMode (cuda/e23_bwd_tc.cuh)
  static fn get(const tc::Tiling &tl, TcVariant v, int mode) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
#define E23_TB_PICK(M_, K_, W_, F_)                                                          \
  (!v.pack   ? (v.split ? nullptr : e23_bwd_tc<T, M_, K_, W_, false, false, F_>)              \
   : v.split ? e23_bwd_tc<T, M_, K_, W_, true, true, F_>                                      \
             : e23_bwd_tc<T, M_, K_, W_, false, true, F_>)
#define E23_TB_CASE(M_, K_, W_)                                                             \
  if (tl.mt == M_ && tl.ks == K_ && tl.nw == W_)                                            \
    return mode == kInverted    ? E23_TB_PICK(M_, K_, W_, kInverted)                        \
           : mode == kSegOnChip ? E23_TB_PICK(M_, K_, W_, kSegOnChip)                       \
                                : E23_TB_PICK(M_, K_, W_, kSegGlobal);
      E23_TC_TILINGS(E23_TB_CASE)
#undef E23_TB_CASE
#undef E23_TB_PICK
    }
    (void)tl, (void)v, (void)mode;
    return nullptr;
  }
};

#define E23_TC_ENTRY(M_, K_, W_) tc::Tiling{M_, K_, W_},
constexpr tc::Tiling kTcTilings23[] = {E23_TC_TILINGS(E23_TC_ENTRY)};
#undef E23_TC_ENTRY

// The tensor-core forward's plan (16-bit T): for each tiling of E23_TC_TILINGS that d matches (cs
// = d / R CTAs a cluster), the batch rows per cluster as pick_group finds for the kernel (any bg
// <= 8: tc::Step's columns hold the group), where the tape fits; the best by eng_plan_beats.
struct TcPlan23 {
  Plan pl;
  tc::Tiling tl;
};
template <typename T>
bool tc_plan23(int64_t B, int64_t N, int64_t d, const DeviceInfo &info, TcPlan23 *out) {
  if (info.smem_optin <= 0) return false;
  bool found = false;
  eng_cluster_plan_t best{};
  for (const tc::Tiling &tl : kTcTilings23) {
    const int64_t R = 32 * tl.mt;
    if (d != (int64_t)16 * tl.ks * tl.nw) continue;
    const int cs = (int)(d / R);
    auto plan = [&](int g) {
      return Plan{true, cs, g, R, tc_layout(d, N, R, g, cs, tl.nw).total, false};
    };
    auto resident = [&](int g) {
      const Plan pl = plan(g);
      if (pl.smem > (size_t)info.smem_optin) return 0;
      return resident_clusters(FwdTc23<T>::get(tl, tc_variant(pl, tl, N)), pl,
                               32u * (unsigned)tl.nw);
    };
    const int bg = pick_group(B, cs, info.sms, 8, false, resident);
    if (bg == 0) continue;
    const eng_cluster_plan_t cand{bg, cs, resident(bg), 0};
    if (found && !eng_plan_beats(B, cand, best)) continue;
    found = true, best = cand, *out = TcPlan23{plan(bg), tl};
  }
  return found;
}

// The tensor-core backward's plan (bf16: the gradients dw and dpre are unbounded, f16's range would
// lose them): for each tiling that d matches, the batch rows per cluster as pick_group finds for
// the kernel; for each, where the on-chip set does not fit: first the segment's tapes on chip for
// fewer steps (down to kMinPart: the segment is then walked in parts, each replayed from the
// checkpoint), then the inverted walk (kInverted: dH and one tape on chip, where the group has at
// most the plane rows of its state buffers), then the tapes in global scratch (L2), then the
// segment's w_t there too (read by every step of the replay's chains and once a step by the
// walk), then dH (read and written several times a step). The best tiling's by
// eng_bwd_plan_beats, the inverted walk counting as one part. The launch and the scratch query
// ask for the same plan.
constexpr int64_t kMinPart = 4;
struct TbPlan23 {
  Plan pl;
  tc::Tiling tl;
  bool dh, w, seg, inv;
  int cs_steps;  // steps the segment store holds (C unless it is on chip in parts)
  int64_t per_cta;
  int mode() const { return inv ? kInverted : seg ? kSegOnChip : kSegGlobal; }
};
template <typename T>
bool tb_plan23(int64_t B, int64_t N, int64_t d, int64_t C, TbPlan23 *out) {
  DeviceInfo info;
  if (device_info(&info) || info.smem_optin <= 0) return false;  // errors: v1 reports them
  // the placements in order: dH, w_t, the segment's tapes on chip; the inverted walk
  struct Place {
    bool dh, w, seg, inv;
  };
  constexpr Place places[] = {{1, 1, 1, 0}, {1, 1, 1, 1}, {1, 1, 0, 0}, {1, 0, 0, 0}, {0, 0, 0, 0}};
  bool found = false;
  eng_cluster_plan_t best{};
  for (const tc::Tiling &tl : kTcTilings23) {
    const int64_t R = 32 * tl.mt;
    if (d != (int64_t)16 * tl.ks * tl.nw) continue;
    const int cs = (int)(d / R);
    auto plan = [&](int g, TbPlan23 *tp) {
      const TcVariant v = tc_variant(Plan{true, cs, g, R, 0, false}, tl, N);
      const int pr = tb_plane_rows(v.pack, true);
      for (const Place &pk : places) {
        if (pk.inv && g > pr) continue;
        // the steps of tapes on chip: a part of at least kMinPart, the whole segment elsewhere
        const int64_t least = pk.seg && !pk.inv ? std::min(C, kMinPart) : C;
        for (int64_t steps = C; steps >= least; steps--) {
          const size_t smem = tb_layout(d, N, R, g, cs, tl.nw, C, steps, pk.dh, pk.w, pk.seg,
                                        pk.inv ? pr : 0, v.split)
                                  .total;
          if (smem <= (size_t)info.smem_optin) {
            *tp = TbPlan23{Plan{true, cs, g, R, smem, false}, tl, pk.dh, pk.w, pk.seg, pk.inv,
                           (int)steps, tb_scratch(N, R, g, C, pk.dh, pk.w, pk.seg)};
            return true;
          }
        }
      }
      return false;
    };
    auto resident = [&](const TbPlan23 &tp) {
      return resident_clusters(BwdTc23<T>::get(tl, tc_variant(tp.pl, tl, N), tp.mode()), tp.pl,
                               32u * (unsigned)tl.nw);
    };
    const int bg = pick_group(B, cs, info.sms, 8, false, [&](int g) {
      TbPlan23 tp;
      return plan(g, &tp) ? resident(tp) : 0;
    });
    TbPlan23 tp;
    if (bg == 0 || !plan(bg, &tp)) continue;
    const int parts = tp.inv   ? 1
                      : tp.seg ? (int)((C + tp.cs_steps - 1) / tp.cs_steps)
                               : ENG_PARTS_OFF_CHIP;
    const eng_cluster_plan_t cand{bg, cs, resident(tp), parts};
    if (found && !eng_bwd_plan_beats(B, cand, best)) continue;
    found = true, best = cand, *out = tp;
  }
  return found;
}

// The register-tape kernels' shape (cuda/e23_fwd_rt.cuh, cuda/e23_bwd_rt.cuh): the tiling of
// R = 64 on clusters of 8 (d = 512), N = 64 and 5 batch rows a cluster (B = 64 N = 64's plans).
inline bool rt_shape(const tc::Tiling &tl, int64_t bg, int64_t N) {
  return tl.mt == 2 && tl.ks == 4 && tl.nw == 8 && N == kRtN && bg == kRtRows;
}

// The register-tape forward's plan where the tensor-core plan tp has that shape, with all its
// clusters resident (more shared memory and threads than e23_fwd_tc's).
template <typename T> bool rt_plan23(const TcPlan23 &tp, int64_t B, int64_t N, Plan *out) {
  if (!rt_shape(tp.tl, tp.pl.bg, N)) return false;
  *out = tp.pl;
  out->smem = rt_layout(tp.pl.R * tp.pl.cs, tp.pl.cs).total;
  return resident_clusters(e23_fwd_rt<T>, *out, kRtThreads) >= (B + tp.pl.bg - 1) / tp.pl.bg;
}

// The register-tape backward's plan where the tensor-core backward's plan tp has that shape and
// walks it inverted, with all its clusters resident (none are where its shared memory is past
// the device's: resident_clusters). Its scratch holds db's row sums, B x d floats (p.db_rows).
template <typename T> bool rb_plan23(const TbPlan23 &tp, int64_t B, int64_t N, Plan *out) {
  if (!rt_shape(tp.tl, tp.pl.bg, N) || !tp.inv) return false;
  *out = tp.pl;
  out->smem = br_layout(tp.pl.R * tp.pl.cs, tp.pl.cs).total;
  return resident_clusters(e23_bwd_rt<T>, *out, kBrThreads) >= (B + tp.pl.bg - 1) / tp.pl.bg;
}

// Launches the kernel of p's plan; the register-tape backward sums db's rows in the scratch
// (p.db_rows) and sets *rows.
template <typename T, bool BWD>
cudaError_t run(P23<T> p, void *scratch, cudaStream_t stream, bool *rows = nullptr) {
  if constexpr (BWD && std::is_same_v<T, __nv_bfloat16>) {
    TbPlan23 tp;
    if (tb_plan23<T>(p.B, p.N, p.d, p.C, &tp)) {
      p.R = tp.pl.R, p.bg = tp.pl.bg, p.per_cta = tp.per_cta;
      p.tb_dh = tp.dh, p.tb_w = tp.w, p.tb_seg = tp.seg, p.tb_inv = tp.inv, p.tb_cs = tp.cs_steps;
      p.scratch = static_cast<acc_t<T> *>(scratch);
      const unsigned grid = (unsigned)((p.B + tp.pl.bg - 1) / tp.pl.bg * tp.pl.cs);
      Plan rp;
      if (rb_plan23<T>(tp, p.B, p.N, &rp)) {
        p.db_rows = static_cast<float *>(scratch);
        if (rows) *rows = true;
        return launch(e23_bwd_rt<T>, rp, grid, stream, p, kBrThreads);
      }
      return launch(BwdTc23<T>::get(tp.tl, tc_variant(tp.pl, tp.tl, p.N), tp.mode()), tp.pl, grid,
                    stream, p, 32u * (unsigned)tp.tl.nw);
    }
  }
  if constexpr (!BWD && sizeof(T) == 2) {  // needs no scratch (eng_kcuda_e23_scratch asks for none)
    DeviceInfo info;
    cudaError_t e = device_info(&info);
    if (e) return e;
    TcPlan23 tp;
    if (tc_plan23<T>(p.B, p.N, p.d, info, &tp)) {
      p.R = tp.pl.R, p.bg = tp.pl.bg;
      const unsigned grid = (unsigned)((p.B + tp.pl.bg - 1) / tp.pl.bg * tp.pl.cs);
      Plan rp;
      if (rt_plan23<T>(tp, p.B, p.N, &rp)) return launch(e23_fwd_rt<T>, rp, grid, stream, p, kRtThreads);
      return launch(FwdTc23<T>::get(tp.tl, tc_variant(tp.pl, tp.tl, p.N)), tp.pl, grid, stream, p,
                    32u * (unsigned)tp.tl.nw);
    }
  }
  Plan23 pl;
  cudaError_t e = final_plan<T, BWD>(p.B, p.N, p.d, p.C, &pl);
  if (e) return e;
  p.R = pl.pl.R;
  p.per_cta = pl.per_cta;
  p.tape_smem = pl.tape_smem;
  p.scratch = static_cast<acc_t<T> *>(scratch);
  return launch(Pick<T, BWD>::get(pl.pl.cl, pl.pl.bg), pl.pl, (unsigned)pl.ctas, stream, p);
}

// db [d] from the register-tape backward's row sums [B][d] (f32, summed in f32, rounded once):
// 128 KB at B = 64 d = 512 instead of a column sum of dxw's 33.5 MB (docs/PERF.md, session 37).
template <typename T> __global__ void fold_db_rows(const float *rows, int64_t B, int64_t d, T *db) {
  const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= d) return;
  float s = 0.f;
  for (int64_t b = 0; b < B; b++) s += rows[b * d + c];
  store(db + c, s);
}

// The trace's layout in ckpt, and the dividers the kernels take.
template <typename T> void set_ckpt_layout(P23<T> *p) {
  p->div_n = make_div32((uint32_t)std::max<int64_t>(p->N, 1));
  p->div_n1 = make_div32((uint32_t)p->N + 1);
  p->ck_len = eng_e23_ckpt_len(p->nt, p->N, p->d, p->C);
  p->ck_a = eng_e23_ckpt_a_at(p->nt, p->N, p->d, p->C);
  p->ck_r = eng_e23_ckpt_r_at(p->nt, p->N, p->d, p->C);
  p->ck_w = eng_e23_ckpt_w_at(p->nt, p->N, p->d, p->C);
}

}  // namespace

// The scratch of the plan run() launches for these sizes (it finds the same plan): none for the
// tensor-core forward, db's row sums for the register-tape backward, the tensor-core backward's
// where that runs, else the generic kernels'.
extern "C" int eng_kcuda_e23_scratch(eng_dtype_t dt, int64_t B, int64_t N, int64_t d, int64_t C,
                                     int backward, size_t *bytes) {
  ENG_KC_FLOAT_TYPES(dt, {
    if constexpr (sizeof(T) == 2) {
      DeviceInfo info;
      TcPlan23 fp;
      if (!backward && !device_info(&info) && tc_plan23<T>(B, N, d, info, &fp)) {
        *bytes = 0;
        return 0;
      }
    }
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      TbPlan23 tp;
      if (backward && tb_plan23<T>(B, N, d, C, &tp)) {
        Plan rp;
        const int64_t floats = rb_plan23<T>(tp, B, N, &rp)
                                   ? B * d  // db's row sums (run: p.db_rows)
                                   : tp.per_cta * ((B + tp.pl.bg - 1) / tp.pl.bg) * tp.pl.cs;
        *bytes = (size_t)floats * sizeof(float);
        return 0;
      }
    }
    Plan23 pl;
    cudaError_t e = backward ? final_plan<T, true>(B, N, d, C, &pl) : final_plan<T, false>(B, N, d, C, &pl);
    if (e) return (int)e;
    *bytes = (size_t)(pl.per_cta * pl.ctas) * sizeof(acc_t<T>);
  })
  return 0;
}

extern "C" int eng_kcuda_e23_forward(eng_dtype_t dt, int64_t B, int64_t T_, int64_t N, int64_t d,
                                     int64_t C, const void *xw, const void *Wh, const void *Ww,
                                     const void *b, const void *h0, const void *tape0, void *hs,
                                     void *hT, void *tapeT, void *ckpt, void *scratch,
                                     cudaStream_t stream) {
  ENG_KC_FLOAT_TYPES(dt, {
    P23<T> p{};
    p.B = B, p.nt = T_, p.N = N, p.d = d, p.C = C;
    p.xw = (const T *)xw, p.Wh = (const T *)Wh, p.Ww = (const T *)Ww, p.b = (const T *)b;
    p.h0 = (const T *)h0, p.tape0 = (const T *)tape0;
    p.hs = (T *)hs, p.hT = (T *)hT, p.tapeT = (T *)tapeT, p.ckpt = (acc_t<T> *)ckpt;
    set_ckpt_layout(&p);
    return (int)run<T, false>(p, scratch, stream);
  })
  return 0;
}

extern "C" int eng_kcuda_e23_backward(eng_dtype_t dt, int64_t B, int64_t T_, int64_t N, int64_t d,
                                      int64_t C, const void *xw, const void *Wh, const void *Ww,
                                      const void *b, const void *h0, const void *hs,
                                      const void *ckpt, const void *dhs, const void *dhT,
                                      const void *dtapeT, void *dxw, void *dw, void *dh0,
                                      void *dtape0, void *db, int *db_done, void *scratch,
                                      cudaStream_t stream) {
  *db_done = 0;
  ENG_KC_FLOAT_TYPES(dt, {
    P23<T> p{};
    p.B = B, p.nt = T_, p.N = N, p.d = d, p.C = C;
    p.xw = (const T *)xw, p.Wh = (const T *)Wh, p.Ww = (const T *)Ww, p.b = (const T *)b;
    p.h0 = (const T *)h0, p.hs_in = (const T *)hs, p.ck_in = (const acc_t<T> *)ckpt;
    p.dhs = (const T *)dhs, p.dhT = (const T *)dhT, p.dtapeT = (const T *)dtapeT;
    p.dxw = (T *)dxw, p.dw = (T *)dw, p.dh0 = (T *)dh0, p.dtape0 = (T *)dtape0;
    set_ckpt_layout(&p);
    bool rows = false;
    cudaError_t e = run<T, true>(p, scratch, stream, &rows);
    if (!e && rows && db) {
      const float *rows_sums = static_cast<const float *>(scratch);
      fold_db_rows<<<(unsigned)((d + 255) / 256), 256, 0, stream>>>(rows_sums, B, d, (T *)db);
      e = cudaGetLastError();
      *db_done = !e;
    }
    return (int)e;
  })
  return 0;
}
