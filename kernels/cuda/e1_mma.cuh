// The per-step product of the persistent E1 kernels on tensor cores (16-bit T, clusters; see
// e1_cluster.cuh): the CTA's slice of the matrix, R = 32 MT rows of d, times the state of the
// cluster's batch group, as wmma m32n8k16 products with f32 accumulators. The batch is the N
// dimension: 8 columns, the group's BG <= 8 rows and zeros. How the f32 state enters the product
// (Operand):
// - kHiLo: two 16-bit parts, hi = T(v) and lo = T(v - hi), in two 8-column tiles; the product is
//   A hi + A lo (A is exact in T): ~16 significant bits for bf16, 22 for f16.
// - kPacked (BG <= 4): the same parts in one tile, columns [hi of rows 0..3, lo of rows 0..3], so
//   one mma per (row tile, k slice) forms both products and a batch row's sum adds columns n and
//   n + 4. A buffer is then one 8-row tile, [hi, lo][4][d + 8].
// - kSingle: one f16 part (T = __half), 11 significant bits. For a state in (-1, 1), such as
//   tanh's h, that is an absolute error <= 2^-12 (<= 2^-25 below f16's normal range, 2^-14),
//   under the 2^-9 relative error of the bf16 inputs that enter the same sum; half the bytes of
//   the two parts to exchange, one mma per (row tile, k slice).
//   The matrix is converted to f16 scaled by a power of two (to_f16_scaled), so no entry of a
//   bf16 matrix overflows f16's range; the sum is scaled back. The given initial state is not
//   scaled: entries beyond f16's 65504 would enter the first product as inf.
//
// Warp w takes columns [16 KS w, 16 KS (w + 1)) of every row tile, so d = 16 KS NW; its A
// fragments stay in registers for the whole sequence. The warps' partial products meet in shared
// memory; one thread per (batch row, pair of rows) adds them up, finishes the step and writes the
// pair's parts into the next state buffer of every CTA (4-byte DSMEM stores).
//
// Shared memory: hb [2 steps][hi, lo][8][d + 8] T (kSingle uses [2][1][8]), then the matrix slice
// Ws [R][d] T; once the fragments are loaded, Ws's space holds the partial sums red [NW][8][R + 4]
// f32 (column-major tiles). The paddings keep the B fragment loads and the tile stores free of
// bank conflicts.
#pragma once

#include <mma.h>
#include <type_traits>

#include "cuda/cp_async.cuh"
#include "cuda/e1_cluster.cuh"

namespace eng_kc {
namespace es {
namespace tc {

namespace wmma = nvcuda::wmma;

// The tilings (MT, KS, NW): d = 16 KS NW, R = 32 MT, so cs = d / R CTAs a cluster. The d they
// cover: 256 and 512, 768 (8 CTAs), 1024 (16 CTAs). KS = 4 unless the A fragments would not fit
// the registers (d = 1024: 16 warps of 128 registers). NW >= 4 MT: at most one pair of rows
// per thread for BG <= 8.
#define ENG_E1_TC_TILINGS(X) X(1, 4, 4) X(2, 4, 8) X(3, 4, 12) X(2, 8, 8)

struct Tiling {
  int mt, ks, nw;
};
#define ENG_E1_TC_ENTRY(M_, K_, W_) Tiling{M_, K_, W_},
constexpr Tiling kTilings[] = {ENG_E1_TC_TILINGS(ENG_E1_TC_ENTRY)};
#undef ENG_E1_TC_ENTRY

enum Operand { kHiLo, kPacked, kSingle };

__host__ __device__ constexpr int64_t ldh(int64_t d) { return d + 8; }
__host__ __device__ constexpr int64_t ldr(int64_t R) { return R + 4; }
__host__ __device__ constexpr size_t hb_bytes(int64_t d) { return (size_t)2 * 2 * 8 * ldh(d) * 2; }
// The state buffers' bytes where each of the 2 np planes (buffer, part) is pr rows apart: a B
// fragment reads 8 rows, so a plane's rows past pr are the next plane's first ones (columns of the
// product that nobody reads) and the last plane keeps 8. hb_bytes(d) is pr = 8, np = 2.
__host__ __device__ constexpr size_t hb_span(int64_t d, int np, int pr) {
  return ((size_t)(2 * np - 1) * pr + 8) * ldh(d) * 2;
}

inline size_t smem_bytes(int64_t d, int64_t R, int nw) {
  const size_t ws = (size_t)R * d * 2, red = (size_t)nw * 8 * ldr(R) * sizeof(float);
  return hb_bytes(d) + (ws > red ? ws : red);
}

// Two 16-bit values in one 32-bit word.
template <typename T> struct Pair;
template <> struct Pair<__nv_bfloat16> {
  using type = __nv_bfloat162;
  static __device__ __forceinline__ type pack(float a, float b) {
    return __floats2bfloat162_rn(a, b);
  }
  static __device__ __forceinline__ float2 unpack(type v) { return __bfloat1622float2(v); }
};
template <> struct Pair<__half> {
  using type = __half2;
  static __device__ __forceinline__ type pack(float a, float b) { return __floats2half2_rn(a, b); }
  static __device__ __forceinline__ float2 unpack(type v) { return __half22float2(v); }
};

// The CTA's slice of W into Ws [R][ld] (ld >= d; the columns past d untouched): rows r0 .. r0 + R
// - 1 of W, or of W^T when tr (Ws[jj][i] = W[i][r0 + jj]). With W 16-byte aligned (r0, R and d are multiples of 32, so every octet read is
// too) by 16-byte loads: tr takes rows (i, i + 1) by an octet of columns and writes 8 pairs
// (4-byte stores), consecutive threads consecutive row pairs, so a warp's stores into a row of Ws
// are contiguous (no bank conflicts); element by element otherwise. Ws is 16-byte aligned and ld a
// multiple of 8. A
// thread's loads are in flight together (cp.async, or four tasks' loads before their stores): one
// global round trip after another, staging and loading a slice took ~15 us of the E23 forward's
// prologue at B = 64 N = 64 (now ~5). A __syncthreads must follow.
template <typename T>
__device__ void stage_slice(T *Ws, const T *W, int64_t d, int64_t r0, int64_t R, bool tr,
                            int64_t ld) {
  static_assert(sizeof(T) == 2, "16-bit values");
  if ((reinterpret_cast<uintptr_t>(W) & 15) != 0) {
    for (int64_t k = threadIdx.x; k < R * d; k += blockDim.x) {
      if (tr) Ws[(k % R) * ld + k / R] = W[(k / R) * d + r0 + k % R];
      else Ws[(k / d) * ld + k % d] = W[r0 * d + k];
    }
    return;
  }
  if (!tr) {
    const uint4 *src = reinterpret_cast<const uint4 *>(W + r0 * d);
    const int per = (int)(d / 8), tasks = (int)(R * per);  // 16-byte pieces: a row's, the slice's
    for (int k = (int)threadIdx.x; k < tasks; k += (int)blockDim.x) {
      const int row = k / per;
      cp_async16(Ws + row * ld + 8 * (k - row * per), src + k);
    }
    cp_async_wait();
    return;
  }
  const int tasks = (int)(d / 2 * (R / 8)), pairs = (int)(d / 2), nth = (int)blockDim.x;
  constexpr int KB = 4;  // tasks whose loads go out together
  for (int k0 = (int)threadIdx.x; k0 < tasks; k0 += KB * nth) {
    uint4 a[KB], b[KB];
#pragma unroll
    for (int j = 0; j < KB; j++) {
      const int k = k0 + j * nth, i = 2 * (k % pairs), jj = 8 * (k / pairs);
      if (k < tasks) {
        a[j] = *reinterpret_cast<const uint4 *>(W + (int64_t)i * d + r0 + jj);
        b[j] = *reinterpret_cast<const uint4 *>(W + (int64_t)(i + 1) * d + r0 + jj);
      }
    }
#pragma unroll
    for (int j = 0; j < KB; j++) {
      const int k = k0 + j * nth, i = 2 * (k % pairs), jj = 8 * (k / pairs);
      if (k >= tasks) break;
      const uint32_t ua[4] = {a[j].x, a[j].y, a[j].z, a[j].w}, ub[4] = {b[j].x, b[j].y, b[j].z, b[j].w};
#pragma unroll
      for (int e = 0; e < 4; e++) {  // ua[e] holds W[i][r0 + jj + 2e] (low half) and the next
        *reinterpret_cast<uint32_t *>(Ws + (jj + 2 * e) * ld + i) = __byte_perm(ua[e], ub[e], 0x5410);
        *reinterpret_cast<uint32_t *>(Ws + (jj + 2 * e + 1) * ld + i) =
            __byte_perm(ua[e], ub[e], 0x7632);
      }
    }
  }
}

// The staged slice Ws [n] (16-bit T) rewritten in place as f16 times 2^k, k such that the largest
// magnitude m lies in [2^14, 2^15) (k = 0 when m is 0, inf or NaN): power-of-two scaling keeps every
// value that f16 can hold exactly (bf16's 8 significant bits fit f16's 11) and no entry overflows.
// Returns 2^-k, by which the products are scaled back. Every thread of the CTA calls it after the
// staging's __syncthreads; scratch: 32 floats of shared memory. Ws is 16-byte aligned and n a
// multiple of 8 (a slice's R D). It ends with a __syncthreads (Ws is f16 and scratch free again).
template <typename T> __device__ float to_f16_scaled(T *Ws, int64_t n, float *scratch) {
  const int64_t n8 = n / 8;  // eight values a 16-byte access (a slice: 4 096 of them, not 32 768)
  float m = 0.f;
  for (int64_t q = threadIdx.x; q < n8; q += blockDim.x) {
    const uint4 raw = reinterpret_cast<const uint4 *>(Ws)[q];
    const T *x = reinterpret_cast<const T *>(&raw);
#pragma unroll
    for (int j = 0; j < 8; j++) m = fmaxf(m, fabsf(load(x + j)));
  }
  m = warp_max(m);
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = m;
  __syncthreads();
  m = 0.f;
  for (unsigned w = 0; w < (blockDim.x + 31) / 32; w++) m = fmaxf(m, scratch[w]);
  const bool scaled = m > 0.f && isfinite(m);
  int e = 0;
  if (scaled) frexpf(m, &e);  // m = f 2^e, f in [0.5, 1)
  const int k = scaled ? 15 - e : 0;
  const float up = ldexpf(1.f, k);
  __half *H = reinterpret_cast<__half *>(Ws);
  for (int64_t q = threadIdx.x; q < n8; q += blockDim.x) {
    const uint4 raw = reinterpret_cast<const uint4 *>(Ws)[q];
    const T *x = reinterpret_cast<const T *>(&raw);
    uint4 out;
    __half *h = reinterpret_cast<__half *>(&out);
#pragma unroll
    for (int j = 0; j < 8; j++) h[j] = __float2half_rn(load(x + j) * up);
    reinterpret_cast<uint4 *>(H)[q] = out;
  }
  __syncthreads();
  return ldexpf(1.f, -k);
}

// PR: rows from one plane (buffer, part) of the state buffers to the next; fewer than NR where the
// batch group has at most PR rows (the E23 backward's inverted walk, whose shared memory needs the
// rows no group fills: hb_span).
template <typename T, int MT, int KS, int NW, Operand OP = kHiLo, int PR = (OP == kPacked ? 4 : 8)>
struct Step {
  static constexpr int R = 32 * MT, D = 16 * KS * NW, CS = D / R;  // CS CTAs a cluster
  static constexpr int64_t LD = ldh(D);
  static constexpr int NR = OP == kPacked ? 4 : 8;  // batch rows a part holds
  static constexpr int NP = OP == kSingle ? 1 : 2;   // parts of the state
  static_assert(PR <= NR, "a plane holds at most the part's rows");
  static_assert(OP != kSingle || std::is_same<T, __half>::value, "kSingle's part is f16");
  static_assert(NW >= 4 * MT, "one pair of rows per thread needs 8 R / 2 <= 32 NW");
  using FA = wmma::fragment<wmma::matrix_a, 32, 8, 16, T, wmma::row_major>;
  using FB = wmma::fragment<wmma::matrix_b, 32, 8, 16, T, wmma::col_major>;
  using FC = wmma::fragment<wmma::accumulator, 32, 8, 16, float>;

  T *hb;
  float *red;
  int warp;
  FA a[MT][KS];

  __device__ __forceinline__ explicit Step(unsigned char *smem)
      : hb(reinterpret_cast<T *>(smem)), red(reinterpret_cast<float *>(smem + hb_bytes(D))),
        warp((int)(threadIdx.x >> 5)) {}
  // red elsewhere (after hb_span's bytes)
  __device__ __forceinline__ Step(unsigned char *smem, float *red_at)
      : hb(reinterpret_cast<T *>(smem)), red(red_at), warp((int)(threadIdx.x >> 5)) {}

  // Batch row n of part `part` (0 hi, 1 lo) of state buffer `buf`: B(k, n) of the product.
  __device__ __forceinline__ T *row(int buf, int part, int n) const {
    return hb + ((buf * NP + part) * PR + n) * LD;
  }

  // Bytes one batch row's state sends to a CTA: its parts' D values.
  static constexpr int64_t kRowBytes = (int64_t)NP * D * sizeof(T);

  // Buffer 0 from v0 [rows of the batch, D] at batch rows gb .. gb + bg - 1 (< B; NULL: zero),
  // buffer 1 and every other column zero. Local; a barrier follows. KB elements' loads go out
  // together (not one global round trip after another).
  template <typename V> __device__ void init_state(const V *v0, int64_t gb, int64_t bg, int64_t B) {
    constexpr int KB = 4, total = PR * (int)LD;
    const int nth = (int)blockDim.x;
    for (int k0 = (int)threadIdx.x; k0 < total; k0 += KB * nth) {
      float v[KB];
#pragma unroll
      for (int j = 0; j < KB; j++) {
        const int k = k0 + j * nth, n = k / (int)LD, c = k % (int)LD;
        v[j] = k < total && v0 && n < bg && gb + n < B && c < D ? load(v0 + (gb + n) * D + c) : 0.f;
      }
#pragma unroll
      for (int j = 0; j < KB; j++) {
        const int k = k0 + j * nth;
        if (k >= total) break;
        store(row(0, 0, 0) + k, v[j]);
        store(row(1, 0, 0) + k, 0.f);
        if constexpr (NP == 2) {
          store(row(0, 1, 0) + k, v[j] - load(row(0, 0, 0) + k));
          store(row(1, 1, 0) + k, 0.f);
        }
      }
    }
  }

  // The warp's fragments of the slice Ws [R][D] (staged, then a __syncthreads).
  __device__ __forceinline__ void load_a(const T *Ws) {
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
      for (int s = 0; s < KS; s++)
        wmma::load_matrix_sync(a[m][s], Ws + m * 32 * D + (warp * KS + s) * 16, (unsigned)D);
  }

  // load_a of a slice staged in 16-bit V (then a __syncthreads): under kSingle the slice is first
  // rewritten in place as scaled f16 (to_f16_scaled, with the state buffers as its scratch, so
  // before init_state). Returns the factor that scales the products back (1 but under kSingle).
  template <typename V> __device__ float load_a_staged(V *Ws) {
    if constexpr (OP == kSingle) {
      const float unscale = to_f16_scaled(Ws, (int64_t)R * D, reinterpret_cast<float *>(hb));
      load_a(reinterpret_cast<const T *>(Ws));
      return unscale;
    } else {
      static_assert(std::is_same<V, T>::value, "the slice is staged in T");
      load_a(Ws);
      return 1.f;
    }
  }

  // wmma::load_matrix_sync of a B fragment from the state buffer as a shared-memory load: the
  // buffer's address reaches here as a generic pointer, which made it a generic load with 64-bit
  // address arithmetic on the step's critical path. The .shared form of the same PTX fills the
  // same registers (bf16: 2 .b32, f16: 8 .f16x2, in the fragment's order).
  __device__ __forceinline__ static void load_b(FB &f, const T *p) {
    const unsigned a = smem_addr(p), ld = (unsigned)LD;
    unsigned *r = reinterpret_cast<unsigned *>(&f.x[0]);
    if constexpr (std::is_same<T, __nv_bfloat16>::value) {
      static_assert(sizeof(f.x) == 2 * sizeof(unsigned), "bf16 B of m32n8k16: 2 registers");
      asm volatile("wmma.load.b.sync.aligned.col.m32n8k16.shared.bf16 {%0, %1}, [%2], %3;"
                   : "=r"(r[0]), "=r"(r[1]) : "r"(a), "r"(ld) : "memory");
    } else {
      static_assert(sizeof(f.x) == 8 * sizeof(unsigned), "f16 B of m32n8k16: 8 registers");
      asm volatile("wmma.load.b.sync.aligned.col.m32n8k16.shared.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;"
                   : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]),
                     "=r"(r[7])
                   : "r"(a), "r"(ld) : "memory");
    }
  }

  // load_b's counterpart for an A fragment in shared memory (row-major, ld elements a row): the
  // .shared form, so the address arithmetic stays 32-bit. m32n8k16's A is 8 registers in both
  // 16-bit types (f16: 8 .f16x2, bf16: 8 .b32).
  __device__ __forceinline__ static void load_a_shared(FA &f, const T *p, unsigned ld) {
    static_assert(sizeof(f.x) == 8 * sizeof(unsigned), "A of m32n8k16: 8 registers");
    unsigned *r = reinterpret_cast<unsigned *>(&f.x[0]);
    if constexpr (std::is_same<T, __nv_bfloat16>::value)
      asm volatile("wmma.load.a.sync.aligned.row.m32n8k16.shared.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;"
                   : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]),
                     "=r"(r[7])
                   : "r"(smem_addr(p)), "r"(ld) : "memory");
    else
      asm volatile("wmma.load.a.sync.aligned.row.m32n8k16.shared.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;"
                   : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]),
                     "=r"(r[7])
                   : "r"(smem_addr(p)), "r"(ld) : "memory");
  }

  // The warp's partial product with state buffer `buf` into red, the A fragment of row tile m and
  // k slice s from a_of(f, m, s, k0) (k0: the slice's first column; f: a fragment it may fill and
  // return): one mma a tile and slice with one 8-column tile of B (the f16 rows, or kPacked's hi
  // 4 and lo 4), two under kHiLo (hi, lo).
  template <typename F> __device__ __forceinline__ void product_by(int buf, F &&a_of) {
    FC c[MT];
#pragma unroll
    for (int m = 0; m < MT; m++) wmma::fill_fragment(c[m], 0.f);
    const T *hi = row(buf, 0, 0), *lo = row(buf, 1, 0);
#pragma unroll
    for (int s = 0; s < KS; s++) {
      const int k0 = (warp * KS + s) * 16;
      FB b, bl;
      load_b(b, hi + k0);
      if constexpr (OP == kHiLo) load_b(bl, lo + k0);
#pragma unroll
      for (int m = 0; m < MT; m++) {
        FA scratch;
        const FA &f = a_of(scratch, m, s, k0);
        wmma::mma_sync(c[m], f, b, c[m]);
        if constexpr (OP == kHiLo) wmma::mma_sync(c[m], f, bl, c[m]);
      }
    }
#pragma unroll
    for (int m = 0; m < MT; m++)
      wmma::store_matrix_sync(red + warp * 8 * ldr(R) + m * 32, c[m], (unsigned)ldr(R),
                              wmma::mem_col_major);
  }

  // Every warp: its partial product with state buffer `buf` into red, from the fragments in
  // registers; a __syncthreads must come before sum() reads it.
  __device__ __forceinline__ void product(int buf) {
    product_by(buf, [&](FA &, int m, int s, int) -> const FA & { return a[m][s]; });
  }

  // product() with the A fragments loaded from the slice Wp [R][ldw] (shared memory) every step
  // instead of held in registers: the register-tape kernels (e23_fwd_rt, e23_bwd_rt) spend those
  // registers on the tape. Warps NW and on take no part.
  __device__ __forceinline__ void product_from(int buf, const T *Wp, unsigned ldw) {
    if (warp >= NW) return;
    product_by(buf, [&](FA &f, int m, int, int k0) -> const FA & {
      load_a_shared(f, Wp + m * 32 * ldw + k0, ldw);
      return f;
    });
  }

  // The product at slice rows (r, r + 1) (r even) for batch row n: the warps' parts added (and
  // under kPacked the hi and lo columns n and n + 4).
  // Four chains of adds (even and odd warps, hi and lo): the sum is on the step's critical path.
  __device__ __forceinline__ float2 sum(int n, int r) const {
    float2 v[4] = {};
#pragma unroll
    for (int w = 0; w < NW; w++) {
      const float2 q = *reinterpret_cast<const float2 *>(red + (w * 8 + n) * ldr(R) + r);
      v[w & 1].x += q.x, v[w & 1].y += q.y;
      if constexpr (OP == kPacked) {
        const float2 l = *reinterpret_cast<const float2 *>(red + (w * 8 + n + 4) * ldr(R) + r);
        v[2 + (w & 1)].x += l.x, v[2 + (w & 1)].y += l.y;
      }
    }
    return make_float2((v[0].x + v[1].x) + (v[2].x + v[3].x), (v[0].y + v[1].y) + (v[2].y + v[3].y));
  }

  // sum() of a state that put_async_scaled sent: warp w's part (its k slice: CTA w's columns)
  // scaled back by CTA w's factor f[w fs] (f: the batch row's factors), then the whole by u.
  __device__ __forceinline__ float2 sum_scaled(int n, int r, const float *f, int fs,
                                               float u) const {
    static_assert(OP == kSingle && NW == CS, "one f16 part; warp w's k slice is CTA w's");
    float2 v[2] = {};
#pragma unroll
    for (int w = 0; w < NW; w++) {
      const float2 q = *reinterpret_cast<const float2 *>(red + (w * 8 + n) * ldr(R) + r);
      const float s = f[w * fs];
      v[w & 1].x += q.x * s, v[w & 1].y += q.y * s;
    }
    return make_float2((v[0].x + v[1].x) * u, (v[0].y + v[1].y) * u);
  }

  // (v0, v1), the new state at columns (c, c + 1) (c even) of batch row n, as its parts into state
  // buffer `buf` of every CTA of the cluster by st_async (e1_cluster.cuh): each CTA's copy of the
  // 4 bytes a part completes on that CTA's mbarrier at local shared address `bar`.
  __device__ __forceinline__ void put_async(int buf, int n, int64_t c, float v0, float v1,
                                            uint32_t bar) const {
    using P = Pair<T>;
    const typename P::type hi = P::pack(v0, v1);
    uint32_t ul = 0;
    if constexpr (NP == 2) {
      const float2 f = P::unpack(hi);
      const typename P::type lo = P::pack(v0 - f.x, v1 - f.y);
      ul = *reinterpret_cast<const uint32_t *>(&lo);
    }
    const uint32_t uh = *reinterpret_cast<const uint32_t *>(&hi);
    // A CTA's shared::cluster window is linear: lo lies as far from hi there as here.
    const uint32_t ah = smem_addr(row(buf, 0, n) + c), dl = (uint32_t)(PR * LD * sizeof(T));
#pragma unroll
    for (int q = 0; q < CS; q++) {
      const uint32_t rh = mapa(ah, q), rb = mapa(bar, q);
      st_async(rh, uh, rb);
      if constexpr (NP == 2) st_async(rh + dl, ul, rb);
    }
  }

  // put_async of a state of any magnitude as f16 (kSingle) times a power of two per CTA and batch
  // row, by a whole warp that holds row n's columns in this CTA (this lane (v0, v1)): 2^k such that
  // the warp's largest magnitude lies in [2^14, 2^15) (k = 0 for zeros, inf or NaN), and 2^-k into
  // every CTA's `slot` (this CTA's and the row's factor, at the same local place in every CTA) by
  // lanes 0 .. CS - 1, counted on the same mbarrier (CS floats more a row). 2^-12 relative, and
  // half the bytes of kHiLo's pair (the E23 backward's exchanges are paced by the bytes leaving
  // each SM); sum_scaled scales each part back.
  __device__ __forceinline__ void put_async_scaled(int buf, int n, int64_t c, float v0, float v1,
                                                   uint32_t bar, float *slot, int lane) const {
    static_assert(OP == kSingle, "one f16 part");
    const float m = fmaxf(fabsf(v0), fabsf(v1));  // >= 0: its bits order as its values
    const uint32_t mb = __reduce_max_sync(0xffffffffu, __float_as_uint(m));
    const int e = (int)(mb >> 23) - 127;  // the largest in [2^e, 2^(e + 1)) (e = 128: inf, NaN)
    const int k = mb == 0u || e == 128 ? 0 : min(14 - e, 126);
    const float up = __int_as_float((127 + k) << 23), down = __int_as_float((127 - k) << 23);
    put_async(buf, n, c, v0 * up, v1 * up, bar);
    if (lane < CS) st_async(mapa(smem_addr(slot), lane), __float_as_uint(down), mapa(bar, lane));
  }
};

}  // namespace tc
}  // namespace es
}  // namespace eng_kc
