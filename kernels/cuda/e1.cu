// E1 forward and the sequential part of its backward as persistent kernels (see cuda/e1.h and
// cuda/e1_cluster.cuh). Each step a warp takes one row of the matrix at a time and forms its dot
// products with the BG state vectors of its batch group; lane g finishes batch row g. The per-step
// inputs (xw, z; or z, dy, h) are prefetched one step ahead: each thread loads a few into
// registers before a step's dot products and parks them in shared memory after them, so no
// global-memory latency sits on the chain. For 16-bit values and the widths of e1_mma.cuh the
// per-step product runs on tensor cores instead (e1_fwd_tc, e1_bwd_tc).
#include <type_traits>

#include "cuda/async_fill.cuh"
#include "cuda/e1.h"
#include "cuda/e1_cluster.cuh"
#include "cuda/e1_mma.cuh"

namespace {

using namespace eng_kc;
using namespace eng_kc::es;

// bg: batch rows per cluster for the tensor-core kernels (the others take it as BG).
template <typename T> struct Fwd {
  int64_t B, nt, d, R, bg;
  const T *xw, *z, *W, *b, *h0;
  T *y, *hT, *hs;
};

template <typename T> struct Bwd {
  int64_t B, nt, d, R, bg;
  const T *z, *W, *hs, *dy, *dhT;
  T *dxw, *dz, *dh0;
};

// The prefetch: used when a CTA's BG x R inputs of a step come to at most kPF per thread; then
// shared memory holds [2 steps][NA arrays][BG][R] of them (16-byte rounded), between the state
// copies and the weight slice.
constexpr int kPF = 4;
__host__ __device__ inline bool stages(int bg, int64_t R) {
  return (int64_t)bg * R <= (int64_t)kPF * kThreads;
}
__host__ __device__ inline size_t stage_bytes(int bg, int64_t R, int na, size_t asz) {
  return stages(bg, R) ? ((size_t)2 * na * bg * R * asz + 15) & ~(size_t)15 : 0;
}

// The CTA's matrix rows [r0, r1) and where row r starts (row r at rows + (r - r0) * stride_r,
// columns `cs` apart): on chip (copied here, transposed when `tr`) or in global memory.
template <typename T, bool CL>
__device__ const T *stage_rows(unsigned char *smem, size_t at, const T *W, int64_t d, int64_t r0,
                               int64_t r1, bool tr, int64_t *cs) {
  if constexpr (CL) {
    T *Ws = reinterpret_cast<T *>(smem + at);
    const int64_t n = (r1 - r0) * d, w = r1 - r0;
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
      if (tr) {  // Ws[jj][i] = W[i][r0 + jj], read along jj (coalesced)
        const int64_t i = k / (w ? w : 1), jj = k % (w ? w : 1);
        Ws[jj * d + i] = W[i * d + r0 + jj];
      } else {
        Ws[k] = W[r0 * d + k];
      }
    }
    *cs = 1;
    return Ws;
  } else {
    *cs = tr ? d : 1;
    return tr ? W + r0 : W + r0 * d;
  }
}

template <typename T, int BG, bool CL, bool VEC>
__device__ __forceinline__ void row_dots(const T *rows, int64_t stride_r, int64_t cs, int64_t rr,
                                         const acc_t<T> *v, int64_t d, int lane, acc_t<T> *acc) {
  if constexpr (VEC)
    dots_vec<T, BG>(rows + rr * stride_r, v, d, lane, acc);
  else
    dots_scalar<T, BG>(rows + rr * stride_r, cs, v, d, lane, acc);
}

template <typename T, int BG, bool CL, bool VEC>
__global__ void __launch_bounds__(kThreads) e1_fwd(Fwd<T> p) {
  using A = acc_t<T>;
  extern __shared__ __align__(16) unsigned char smem[];
  A *hbuf = reinterpret_cast<A *>(smem);  // [2][BG][d]: h_{t-1} and h_t
  const int64_t d = p.d;
  int rank, cs, group;
  cluster_pos<CL>(&rank, &cs, &group);
  const int64_t r0 = CL ? min(d, rank * p.R) : 0, r1 = CL ? min(d, r0 + p.R) : d;
  const bool st = stages(BG, p.R);
  A *stg = reinterpret_cast<A *>(smem + 2 * BG * d * sizeof(A));  // [2][xw + b, z][BG][R]
  int64_t ccs;
  const T *rows = stage_rows<T, CL>(smem, 2 * BG * d * sizeof(A) + stage_bytes(BG, p.R, 2, sizeof(A)),
                                    p.W, d, r0, r1, false, &ccs);
  const int64_t stride_r = d, w = r1 - r0;
  A rx[kPF] = {}, rz[kPF] = {};
  auto fetch = [&](int64_t t) {
#pragma unroll
    for (int m = 0; m < kPF; m++) {
      const int64_t k = threadIdx.x + (int64_t)m * blockDim.x;
      if (k >= BG * w || (int64_t)group * BG + k / w >= p.B) continue;
      const int64_t r = r0 + k % w, at = (((int64_t)group * BG + k / w) * p.nt + t) * d + r;
      rx[m] = load(p.xw + at) + load(p.b + r);
      rz[m] = load(p.z + at);
    }
  };
  auto park = [&](int64_t buf) {
#pragma unroll
    for (int m = 0; m < kPF; m++) {
      const int64_t k = threadIdx.x + (int64_t)m * blockDim.x;
      if (k >= BG * w || (int64_t)group * BG + k / w >= p.B) continue;
      stg[((buf * 2 + 0) * BG + k / w) * p.R + k % w] = rx[m];
      stg[((buf * 2 + 1) * BG + k / w) * p.R + k % w] = rz[m];
    }
  };
  for (int64_t k = threadIdx.x; k < BG * d; k += blockDim.x) {
    const int64_t bi = (int64_t)group * BG + k / d;
    hbuf[k] = p.h0 && bi < p.B ? load(p.h0 + bi * d + k % d) : (A)0;
  }
  if (st) {
    fetch(0);
    park(0);
  }
  sync_all<CL>();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwarps = blockDim.x >> 5;
  const int64_t bme = (int64_t)group * BG + lane;
  const bool fin = lane < BG && bme < p.B;
  for (int64_t t = 0; t < p.nt; t++) {
    const A *hc = hbuf + (t & 1) * BG * d;
    A *hn = hbuf + ((t + 1) & 1) * BG * d;
    if (st && t + 1 < p.nt) fetch(t + 1);  // in flight during this step
    for (int64_t r = r0 + warp; r < r1; r += nwarps) {
      const int64_t at = (bme * p.nt + t) * d + r;
      A xv = 0, zv = 0;
      if (fin && st) {
        xv = stg[(((t & 1) * 2 + 0) * BG + lane) * p.R + r - r0];
        zv = stg[(((t & 1) * 2 + 1) * BG + lane) * p.R + r - r0];
      } else if (fin) {
        xv = load(p.xw + at) + load(p.b + r);
        zv = load(p.z + at);
      }
      A acc[BG] = {};
      row_dots<T, BG, CL, VEC>(rows, stride_r, ccs, r - r0, hc, d, lane, acc);
      const A pre = reduce_pick<A, BG>(acc, lane) + xv;
      if (fin) {
        const A h = tanh(pre);
        store(p.hs + at, h);
        store(p.y + at, h * zv * sigmoid(zv));
        if (t == p.nt - 1) store(p.hT + bme * d + r, h);
        put_all<CL>(hn + lane * d + r, h, cs);
      }
    }
    if (st && t + 1 < p.nt) park((t + 1) & 1);
    sync_all<CL>();
  }
}

// Reverse time. Rows of the matrix are columns of W (the carry into h_{t} is W^T dpre_{t+1}).
// Step s = 0 .. T: t = T - 1 - s; s = 0 takes dhT as the carry, s = T writes dh0.
template <typename T, int BG, bool CL, bool VEC>
__global__ void __launch_bounds__(kThreads) e1_bwd(Bwd<T> p) {
  using A = acc_t<T>;
  extern __shared__ __align__(16) unsigned char smem[];
  A *gbuf = reinterpret_cast<A *>(smem);  // [2][BG][d]: dpre_{t+1} and dpre_t
  const int64_t d = p.d;
  int rank, cs, group;
  cluster_pos<CL>(&rank, &cs, &group);
  const int64_t r0 = CL ? min(d, rank * p.R) : 0, r1 = CL ? min(d, r0 + p.R) : d;
  const bool st = stages(BG, p.R);
  A *stg = reinterpret_cast<A *>(smem + 2 * BG * d * sizeof(A));  // [2][z, dy, h][BG][R]
  int64_t ccs;
  const T *rows = stage_rows<T, CL>(smem, 2 * BG * d * sizeof(A) + stage_bytes(BG, p.R, 3, sizeof(A)),
                                    p.W, d, r0, r1, true, &ccs);
  const int64_t stride_r = CL ? d : 1, w = r1 - r0;
  A rz[kPF] = {}, rg[kPF] = {}, rh[kPF] = {};
  auto fetch = [&](int64_t t) {
#pragma unroll
    for (int m = 0; m < kPF; m++) {
      const int64_t k = threadIdx.x + (int64_t)m * blockDim.x;
      if (k >= BG * w || (int64_t)group * BG + k / w >= p.B) continue;
      const int64_t at = (((int64_t)group * BG + k / w) * p.nt + t) * d + r0 + k % w;
      rz[m] = load(p.z + at);
      rg[m] = load(p.dy + at);
      rh[m] = load(p.hs + at);
    }
  };
  auto park = [&](int64_t buf) {
#pragma unroll
    for (int m = 0; m < kPF; m++) {
      const int64_t k = threadIdx.x + (int64_t)m * blockDim.x;
      if (k >= BG * w || (int64_t)group * BG + k / w >= p.B) continue;
      stg[((buf * 3 + 0) * BG + k / w) * p.R + k % w] = rz[m];
      stg[((buf * 3 + 1) * BG + k / w) * p.R + k % w] = rg[m];
      stg[((buf * 3 + 2) * BG + k / w) * p.R + k % w] = rh[m];
    }
  };
  for (int64_t k = threadIdx.x; k < 2 * BG * d; k += blockDim.x) gbuf[k] = 0;
  if (st) {
    fetch(p.nt - 1);
    park(0);
  }
  sync_all<CL>();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwarps = blockDim.x >> 5;
  const int64_t bme = (int64_t)group * BG + lane;
  const bool fin = lane < BG && bme < p.B;
  for (int64_t s = 0; s <= p.nt; s++) {
    const int64_t t = p.nt - 1 - s;
    const A *gc = gbuf + (s & 1) * BG * d;
    A *gn = gbuf + ((s + 1) & 1) * BG * d;
    if (st && t >= 1) fetch(t - 1);  // in flight during this step
    for (int64_t r = r0 + warp; r < r1; r += nwarps) {
      const int64_t at = (bme * p.nt + t) * d + r;
      A zv = 0, gy = 0, h = 0, carry0 = 0;
      if (fin && t >= 0 && st) {
        const A *sb = stg + ((s & 1) * 3 * BG + lane) * p.R + r - r0;
        zv = sb[0];
        gy = sb[BG * p.R];
        h = sb[2 * BG * p.R];
      } else if (fin && t >= 0) {
        zv = load(p.z + at);
        gy = load(p.dy + at);
        h = load(p.hs + at);
      }
      if (fin && s == 0 && p.dhT) carry0 = load(p.dhT + bme * d + r);
      A acc[BG] = {};
      if (s > 0) row_dots<T, BG, CL, VEC>(rows, stride_r, ccs, r - r0, gc, d, lane, acc);
      const A carry = reduce_pick<A, BG>(acc, lane) + carry0;
      if (!fin) continue;
      if (t < 0) {
        store(p.dh0 + bme * d + r, carry);
        continue;
      }
      const A sg = sigmoid(zv);
      const A dpre = (gy * zv * sg + carry) * ((A)1 - h * h);
      store(p.dxw + at, dpre);
      store(p.dz + at, gy * h * sg * ((A)1 + zv * ((A)1 - sg)));
      put_all<CL>(gn + lane * d + r, dpre, cs);
    }
    if (st && t >= 1) park((s + 1) & 1);
    sync_all<CL>();
  }
}

// The tensor-core kernels' thread: it finishes slice rows (r, r + 1) of batch row gb + n; c is
// their column in the state, base + t d the element of step t in the [B, T, d] sequences.
struct TcPlace {
  int64_t gb, c, base;
  int n, r;
  bool fin;
  float unscale;  // the product's scale back (tc::to_f16_scaled under kSingle, else 1)
};

// The tensor-core kernels' dynamic shared memory: two mbarriers (TcExchange) in the first kTcBars
// bytes (the rest keeps its 128-byte alignment), then tc::Step's.
constexpr size_t kTcBars = 128;

// The tensor-core kernels' exchange of the state, with no cluster barrier (AsyncFills): at step t
// every CTA st_async's its slice of the new state into state buffer (t + 1) & 1 of every CTA, each
// 4-byte store completing on the receiver's mbarrier of that buffer, armed for the parts x rows x
// D x 2 bytes of one fill, rows the group's real batch rows (rows >= B are never stored). Every
// thread waits on it before the product that reads the buffer; buffer 0 of step 0 is filled
// locally (no wait).
// Why the double buffer is safe: CTA Q writes buffer (t + 1) & 1 of CTA P at its step t, after it
// has received all of step t - 1's fill, which P sends only after the __syncthreads that ends P's
// step t - 1 product, the last read of that buffer. Likewise a completed fill tells P that all its
// threads that sum red have done so (each sends after its sum), so the product may overwrite red.
// The kernels send nothing at their last step: a CTA has received every store meant for it when
// it passes its last wait, and no store targets it after it exits.
using TcExchange = AsyncFills<2>;

// The tensor-core kernels' prologue: checks that the launch matches the compiled tiling, stages
// the CTA's slice of W (rows of W^T when tr; converted to scaled f16 under kSingle), keeps the
// warp's fragments of it in registers, fills state buffer 0 from v0 (NULL: zero) and sets up the
// exchange x. smem: the dynamic shared memory (st's starts kTcBars in). A cluster barrier must
// follow before the first step.
template <typename T, typename S>
__device__ TcPlace tc_prologue(S &st, unsigned char *smem, TcExchange *x, const T *W, bool tr,
                               const T *v0, int64_t d_arg, int64_t bg, int64_t B, int64_t nt) {
  constexpr int R = S::R;
  constexpr int64_t d = S::D;
  int rank, cs, group;
  cluster_pos<true>(&rank, &cs, &group);
  if (cs != S::CS || d_arg != d || bg > S::NR) __trap();  // the plan picks the tiling and operand
  const int64_t r0 = (int64_t)rank * R;
  TcPlace pl;
  pl.gb = (int64_t)group * bg;
  T *Ws = reinterpret_cast<T *>(smem + kTcBars + tc::hb_bytes(d));
  tc::stage_slice(Ws, W, d, r0, R, tr, d);
  __syncthreads();
  pl.unscale = st.load_a_staged(Ws);
  st.init_state(v0, pl.gb, bg, B);  // (the cluster barrier that follows orders these)
  x->init(smem, (uint32_t)(min(bg, B - pl.gb) * S::kRowBytes));
  pl.n = (int)threadIdx.x / (R / 2), pl.r = 2 * ((int)threadIdx.x % (R / 2));
  pl.fin = pl.n < bg && pl.gb + pl.n < B;
  pl.c = r0 + pl.r, pl.base = (pl.gb + pl.n) * nt * d + pl.c;
  return pl;
}

// The forward with the per-step product on tensor cores (tc::Step, the state as one f16 part:
// kSingle) and the exchange of TcExchange. Thread q finishes slice rows (r, r + 1), r = 2 (q %
// (R / 2)), of batch row gb + q / (R / 2): it sends h first, then stores hs and y and loads the
// next step's xw and z, raw: they are converted after the next product, so the loads' latency
// overlaps it.
template <typename T, int MT, int KS, int NW>
__global__ void __launch_bounds__(NW * 32) e1_fwd_tc(Fwd<T> p) {
  using S = tc::Step<__half, MT, KS, NW, tc::kSingle>;
  constexpr int64_t d = S::D;
  extern __shared__ __align__(128) unsigned char tc_smem[];
  S st(tc_smem + kTcBars);
  TcExchange x;
  const TcPlace pl = tc_prologue<T>(st, tc_smem, &x, p.W, false, p.h0, p.d, p.bg, p.B, p.nt);
  const int64_t gb = pl.gb, c = pl.c, base = pl.base;
  const int n = pl.n, r = pl.r;
  const bool fin = pl.fin;
  float bias[2] = {};
  T xr[2] = {}, zr[2] = {};  // step t's xw and z as loaded
  auto fetch = [&](int64_t t) {
#pragma unroll
    for (int k = 0; k < 2; k++) {
      xr[k] = p.xw[base + t * d + k];
      zr[k] = p.z[base + t * d + k];
    }
  };
  if (fin) {
    bias[0] = load(p.b + c), bias[1] = load(p.b + c + 1);
    fetch(0);
  }
  sync_all<true>();  // every CTA's state and mbarriers initialized (red reuses Ws)
  for (int64_t t = 0; t < p.nt; t++) {
    const int buf = (int)(t & 1);
    if (t > 0) x.wait(buf);
    st.product(buf);
    __syncthreads();
    if (!fin) continue;
    const float2 s = st.sum(n, r);
    const float h[2] = {tanhf(s.x * pl.unscale + (load(&xr[0]) + bias[0])),
                        tanhf(s.y * pl.unscale + (load(&xr[1]) + bias[1]))};
    if (t + 1 < p.nt) st.put_async(buf ^ 1, n, c, h[0], h[1], x.of(buf ^ 1));
    const int64_t at = base + t * d;
#pragma unroll
    for (int k = 0; k < 2; k++) {
      const float zv = load(&zr[k]);
      store(p.hs + at + k, h[k]);
      store(p.y + at + k, h[k] * zv * sigmoid(zv));
      if (t == p.nt - 1) store(p.hT + (gb + n) * d + c + k, h[k]);
    }
    if (t + 1 < p.nt) fetch(t + 1);
  }
}

// The backward's sequential part on tensor cores: e1_bwd's steps with the product of tc::Step on
// W^T's slice and dpre's hi and lo parts, exchanged as in e1_fwd_tc (step s sends dpre_t, t =
// T - 1 - s; step T, which writes dh0, sends nothing).
template <typename T, int MT, int KS, int NW, bool PACK>
__global__ void __launch_bounds__(NW * 32) e1_bwd_tc(Bwd<T> p) {
  using S = tc::Step<T, MT, KS, NW, PACK ? tc::kPacked : tc::kHiLo>;
  constexpr int64_t d = S::D;
  extern __shared__ __align__(128) unsigned char tc_smem[];
  S st(tc_smem + kTcBars);
  TcExchange x;
  const TcPlace pl =
      tc_prologue<T>(st, tc_smem, &x, p.W, true, (const T *)nullptr, p.d, p.bg, p.B, p.nt);
  const int64_t gb = pl.gb, c = pl.c, base = pl.base;
  const int n = pl.n, r = pl.r;
  const bool fin = pl.fin;
  float carry[2] = {};                // the carry into h_t
  T zr[2] = {}, gr[2] = {}, hr[2] = {};  // step t's z, dy, h as loaded (converted where used)
  auto fetch = [&](int64_t t) {
#pragma unroll
    for (int k = 0; k < 2; k++) {
      zr[k] = p.z[base + t * d + k];
      gr[k] = p.dy[base + t * d + k];
      hr[k] = p.hs[base + t * d + k];
    }
  };
  if (fin) {
    fetch(p.nt - 1);
    for (int k = 0; k < 2 && p.dhT; k++) carry[k] = load(p.dhT + (gb + n) * d + c + k);
  }
  sync_all<true>();
  for (int64_t s = 0; s <= p.nt; s++) {
    const int64_t t = p.nt - 1 - s;
    const int buf = (int)(s & 1);
    if (s > 0) {  // step 0's carry is dh_T
      x.wait(buf);
      st.product(buf);
      __syncthreads();
    }
    if (!fin) continue;
    if (s > 0) {
      const float2 sm = st.sum(n, r);
      carry[0] = sm.x, carry[1] = sm.y;
    }
    if (t < 0) {
      store(p.dh0 + (gb + n) * d + c, carry[0]);
      store(p.dh0 + (gb + n) * d + c + 1, carry[1]);
      continue;
    }
    float zv[2], gy[2], h[2], sg[2], dpre[2];
#pragma unroll
    for (int k = 0; k < 2; k++) {
      zv[k] = load(&zr[k]), gy[k] = load(&gr[k]), h[k] = load(&hr[k]);
      sg[k] = sigmoid(zv[k]);
      dpre[k] = (gy[k] * zv[k] * sg[k] + carry[k]) * (1.f - h[k] * h[k]);
    }
    st.put_async(buf ^ 1, n, c, dpre[0], dpre[1], x.of(buf ^ 1));
    const int64_t at = base + t * d;
#pragma unroll
    for (int k = 0; k < 2; k++) {
      store(p.dxw + at + k, dpre[k]);
      store(p.dz + at + k, gy[k] * h[k] * sg[k] * (1.f + zv[k] * (1.f - sg[k])));
    }
    if (t >= 1) fetch(t - 1);
  }
}

// ---- planning ----

// A cluster plan when W fits on chip (f32/f16/bf16), else the global-memory plan.
// The global-memory plan: one CTA per batch group doing every row.
template <typename T> Plan fallback_plan(int64_t B, int64_t d, int na, const DeviceInfo &info) {
  using A = acc_t<T>;
  const int bg = B > info.sms ? 4 : 1;
  return Plan{false, 1, bg, d, 2 * (size_t)bg * d * sizeof(A) + stage_bytes(bg, d, na, sizeof(A)),
              false};
}

// na: the per-step input arrays the kernel prefetches (2 forward, 3 backward). resident(plan):
// how many clusters of the plan can be resident at once (resident_clusters of its kernel).
template <typename T, typename F>
cudaError_t plan_for(int64_t B, int64_t d, int na, const DeviceInfo &info, F resident, Plan *pl) {
  using A = acc_t<T>;
  if (sizeof(T) <= 4 && info.smem_optin > 0) {
    for (int cs : {8, 16}) {
      const int64_t R = (d + cs - 1) / cs;
      auto plan = [&](int g) {
        const size_t smem = 2 * (size_t)g * d * sizeof(A) + stage_bytes(g, R, na, sizeof(A)) +
                            (size_t)R * d * sizeof(T);
        return Plan{true, cs, g, R, smem, d % (16 / (int64_t)sizeof(T)) == 0};
      };
      const int bg = pick_group(B, cs, info.sms, 8, true, [&](int g) {
        const Plan p = plan(g);
        return p.smem <= (size_t)info.smem_optin ? resident(p) : 0;
      });
      if (bg > 0) {
        *pl = plan(bg);
        return cudaSuccess;
      }
    }
  }
  *pl = fallback_plan<T>(B, d, na, info);
  if (pl->smem > (size_t)(info.smem_optin > 0 ? info.smem_optin : 48 * 1024))
    return cudaErrorInvalidValue;
  return cudaSuccess;
}

// The tensor-core plan (16-bit T): a cluster of cs = 8 (or 16) CTAs whose R = d / cs rows and d
// match a tiling of e1_mma.cuh, with its shared memory within the opt-in limit (bg is left to
// the caller, which knows the kernels).
struct TcPlan {
  Plan pl;
  tc::Tiling tl;
};
inline bool tc_plan(int64_t d, const DeviceInfo &info, TcPlan *out) {
  if (info.smem_optin <= 0) return false;
  for (int cs : {8, 16}) {
    const int64_t R = d / cs;
    for (const tc::Tiling &tl : tc::kTilings) {
      const size_t smem = kTcBars + tc::smem_bytes(d, R, tl.nw);
      if (R == 32 * tl.mt && d == (int64_t)16 * tl.ks * tl.nw && d % cs == 0 &&
          smem <= (size_t)info.smem_optin) {
        *out = TcPlan{Plan{true, cs, 0, R, smem, false}, tl};
        return true;
      }
    }
  }
  return false;
}

// Runs the tensor-core kernel TK<T> where its plan applies and its clusters can be scheduled, else
// kernel K<T, BG, CL, VEC> for the plan; falls back to the global-memory kernel when the clusters
// cannot be scheduled. The tensor-core kernels take any bg <= 8 (their columns hold the group's
// rows: the forward's one f16 part in one 8-column tile; the backward's hi and lo parts in one
// tile for bg <= 4, kPacked, else two), so the group count can be the resident clusters' (B = 64
// at d = 768 on an H200: 13 clusters of 5 rows, where 16 of 4 would run the 16th alone after the
// others). whole_sm: the tensor-core CTAs ask for more than half an SM's shared memory, so that
// none shares an SM (the forward: measured below).
template <typename T, template <typename, int, bool, bool> class K, template <typename> class TK,
          typename P>
cudaError_t run(P p, int64_t B, int64_t d, int na, bool whole_sm, cudaStream_t stream) {
  DeviceInfo info;
  cudaError_t e = device_info(&info);
  if (e) return e;
  TcPlan tp;
  if (sizeof(T) == 2 && tc_plan(d, info, &tp)) {
    const unsigned threads = 32u * (unsigned)tp.tl.nw;
    auto plan = [&](int g) {
      Plan pl = tp.pl;
      pl.bg = g;
      const size_t half = (size_t)info.smem_sm / 2 + 1024;
      if (whole_sm && pl.smem < half && half <= (size_t)info.smem_optin) pl.smem = half;
      return pl;
    };
    const int bg = pick_group(B, tp.pl.cs, info.sms, 8, false, [&](int g) {
      return resident_clusters(TK<T>::get(tp.tl, g <= 4), plan(g), threads);
    });
    if (bg > 0) {
      p.R = tp.pl.R, p.bg = bg;
      return launch(TK<T>::get(tp.tl, bg <= 4), plan(bg), (unsigned)((B + bg - 1) / bg * tp.pl.cs),
                    stream, p, threads);
    }
  }
  Plan pl;
  if ((e = plan_for<T>(B, d, na, info,
                       [&](const Plan &q) {
                         return resident_clusters(K<T, 1, true, false>::get(q.bg, q.vec), q);
                       },
                       &pl)))
    return e;
  p.R = pl.R;
  if (pl.cl) return launch(K<T, 1, true, false>::get(pl.bg, pl.vec), pl,
                           (unsigned)((B + pl.bg - 1) / pl.bg * pl.cs), stream, p);
  auto kernel = K<T, 1, false, false>::get(pl.bg, false);
  return launch(kernel, pl, (unsigned)((B + pl.bg - 1) / pl.bg), stream, p);
}

// Kernel pickers: the instantiation for a batch group size and load width.
#define ES_PICKER(NAME, KERNEL, PARAMS)                                                         \
  template <typename T, int BG_, bool CL, bool VEC_> struct NAME {                             \
    using fn = void (*)(PARAMS<T>);                                                            \
    static fn get(int bg, bool vec) {                                                          \
      if constexpr (CL && sizeof(T) <= 4) {                                                    \
        if (vec) {                                                                             \
          switch (bg) {                                                                        \
          case 1: return KERNEL<T, 1, true, true>;                                             \
          case 2: return KERNEL<T, 2, true, true>;                                             \
          case 4: return KERNEL<T, 4, true, true>;                                             \
          default: return KERNEL<T, 8, true, true>;                                            \
          }                                                                                    \
        }                                                                                      \
        switch (bg) {                                                                          \
        case 1: return KERNEL<T, 1, true, false>;                                              \
        case 2: return KERNEL<T, 2, true, false>;                                              \
        case 4: return KERNEL<T, 4, true, false>;                                              \
        default: return KERNEL<T, 8, true, false>;                                             \
        }                                                                                      \
      } else if constexpr (!CL) {                                                              \
        (void)vec;                                                                             \
        return bg == 1 ? KERNEL<T, 1, false, false> : KERNEL<T, 4, false, false>;              \
      }                                                                                        \
      return nullptr;                                                                          \
    }                                                                                          \
  };
ES_PICKER(FwdK, e1_fwd, Fwd)
ES_PICKER(BwdK, e1_bwd, Bwd)

// Tensor-core kernel pickers: the instantiation for a tiling and, in the backward, PACK (the
// forward has one operand form), or none. The backward's state, dpre, is not bounded like h:
// f16's range and subnormals would lose it, so it runs for bf16 only.
#define ES_TC_PICKER(NAME, PARAMS, CASE, TYPES)                                                 \
  template <typename T> struct NAME {                                                          \
    using fn = void (*)(PARAMS<T>);                                                            \
    static fn get(const tc::Tiling &tl, bool pack) {                                           \
      if constexpr (TYPES) {                                                                   \
        ENG_E1_TC_TILINGS(CASE)                                                                \
      }                                                                                        \
      (void)tl, (void)pack;                                                                    \
      return nullptr;                                                                          \
    }                                                                                          \
  };
#define ES_TC_FWD(M_, K_, W_) \
  if (tl.mt == M_ && tl.ks == K_ && tl.nw == W_) return e1_fwd_tc<T, M_, K_, W_>;
#define ES_TC_BWD(M_, K_, W_)                    \
  if (tl.mt == M_ && tl.ks == K_ && tl.nw == W_) \
    return pack ? e1_bwd_tc<T, M_, K_, W_, true> : e1_bwd_tc<T, M_, K_, W_, false>;
ES_TC_PICKER(FwdTc, Fwd, ES_TC_FWD, sizeof(T) == 2)
ES_TC_PICKER(BwdTc, Bwd, ES_TC_BWD, (std::is_same_v<T, __nv_bfloat16>))

}  // namespace

extern "C" int eng_kcuda_e1_forward(eng_dtype_t dt, int64_t B, int64_t T_, int64_t d,
                                    const void *xw, const void *z, const void *W, const void *b,
                                    const void *h0, void *y, void *hT, void *hs,
                                    cudaStream_t stream) {
  ENG_KC_FLOAT_TYPES(dt, {
    Fwd<T> p{B, T_, d, d, 1, (const T *)xw, (const T *)z, (const T *)W, (const T *)b,
             (const T *)h0, (T *)y, (T *)hT, (T *)hs};
    // A forward CTA on an SM of its own: B = 64 d = 512 (H200) 1.48 -> 1.34 us a step, where two
    // could share one (half the SM's registers, 97 KB of shared memory each); the
    // backward lost 4% so.
    return (int)run<T, FwdK, FwdTc>(p, B, d, 2, true, stream);
  })
  return 0;
}

extern "C" int eng_kcuda_e1_backward(eng_dtype_t dt, int64_t B, int64_t T_, int64_t d,
                                     const void *z, const void *W, const void *hs, const void *dy,
                                     const void *dhT, void *dxw, void *dz, void *dh0,
                                     cudaStream_t stream) {
  ENG_KC_FLOAT_TYPES(dt, {
    Bwd<T> p{B, T_, d, d, 1, (const T *)z, (const T *)W, (const T *)hs, (const T *)dy,
             (const T *)dhT, (T *)dxw, (T *)dz, (T *)dh0};
    return (int)run<T, BwdK, BwdTc>(p, B, d, 3, false, stream);
  })
  return 0;
}
