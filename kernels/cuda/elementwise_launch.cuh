// The machinery behind the elementwise launchers: picks a kernel for the operands' layout and
// launches it on the stream. An op is a functor over raw element types (it widens and rounds
// itself):
//   struct Op { using Out, In0, In1, In2; static constexpr int kArity;   // 1..3 inputs
//               __device__ Out operator()(const In0 &[, const In1 &[, const In2 &]]) const; };
// Kernels, by the layout of the (merged) iteration space; the output is always contiguous:
//   dense_kernel: 1-D, every input contiguous and on the output's pack grid: packs of VEC
//     elements (16 bytes of the widest operand, at most 8) in and out, after a short head.
//   rows_kernel: [N, D] (or one row [n]) with any input strides in 32-bit range: input element
//     (q, r) at q * row_stride + r * col_stride, one multiply-shift division per pack; loads per
//     element, stores in packs (a pack stays inside a row). Covers rows + bias, [N, 1] columns,
//     broadcast scalars, transposes and misaligned contiguous operands.
//   strided_kernel: up to 8 dims, one element per step, offsets from the linear index; 32-bit
//     with multiply-shift division when every index and offset fits, else 64-bit.
// No kernel branches on the layout per element (such branches, invariant across the unrolled
// body, make the compiler duplicate it many times over). Each thread loads all of its kUnroll
// packs before it stores any, so an output that is also an input (in place) is read first.
// All three launch with PDL (cuda/launch.cuh), so a chain of small ops hides its launch gaps.
#pragma once

#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <type_traits>

#include "cuda/common.cuh"
#include "cuda/elementwise.h"
#include "cuda/launch.cuh"

namespace eng_kc {
namespace ew {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;
constexpr int64_t kTile = (int64_t)kThreads * kUnroll; // packs (or elements) per block

// ---- index division: Div32 (cuda/common.cuh) below 2^31, plain division past it ----
// The 64-bit path divides plainly: it only serves tensors past 2^31 elements or offsets.
struct Div64 {
  uint64_t d;
};

__device__ __forceinline__ uint64_t div_by(const Div64 &v, uint64_t n) { return n / v.d; }

template <typename I> struct DivFor;
template <> struct DivFor<uint32_t> {
  using type = Div32;
  static Div32 make(int64_t d) { return make_div32((uint32_t)d); }
};
template <> struct DivFor<uint64_t> {
  using type = Div64;
  static Div64 make(int64_t d) { return Div64{(uint64_t)d}; }
};

// ---- packs ----
template <typename T, int N> struct alignas(sizeof(T) * N) Pack { T v[N]; };

template <typename Op>
__device__ __forceinline__ typename Op::Out call(const Op &op, const typename Op::In0 &a,
                                                 const typename Op::In1 &b,
                                                 const typename Op::In2 &c) {
  if constexpr (Op::kArity == 1) {
    return op(a);
  } else if constexpr (Op::kArity == 2) {
    return op(a, b);
  } else {
    return op(a, b, c);
  }
}

// Elements per pack: 16 bytes of the widest element the op reads or writes, at most 8 (16 u8
// per pack would take some 200 registers a thread for little gain).
template <typename Op> constexpr int pack_width() {
  size_t w = std::max(sizeof(typename Op::Out), sizeof(typename Op::In0));
  if (Op::kArity > 1) w = std::max(w, sizeof(typename Op::In1));
  if (Op::kArity > 2) w = std::max(w, sizeof(typename Op::In2));
  return std::min(8, (int)(16 / w));
}

// Stores a pack as one plain word of its size: written as an array of elements, the compiler may
// split some 16-byte stores into pieces.
template <size_t N> struct Word;
template <> struct Word<16> { using type = uint4; };
template <> struct Word<8> { using type = uint2; };
template <> struct Word<4> { using type = unsigned int; };
template <> struct Word<2> { using type = unsigned short; };
template <> struct Word<1> { using type = unsigned char; };

template <typename P> __device__ __forceinline__ void store_word(void *dst, const P &x) {
  using W = typename Word<sizeof(P)>::type;
  W w;
  memcpy(&w, &x, sizeof w);
  __stcg(static_cast<W *>(dst), w);
}

template <typename Op, int VEC>
__device__ __forceinline__ void
store_pack(const Op &op, void *out, int64_t i, const Pack<typename Op::In0, VEC> &a,
           const Pack<typename Op::In1, VEC> &b, const Pack<typename Op::In2, VEC> &c) {
  using Out = typename Op::Out;
  Pack<Out, VEC> o;
#pragma unroll
  for (int j = 0; j < VEC; j++) o.v[j] = call(op, a.v[j], b.v[j], c.v[j]);
  store_word(static_cast<Out *>(out) + i, o);
}

// ---- the dense kernel ----
struct DensePlan {
  void *out;
  const void *in[ENG_KCUDA_EW_MAX_IN];
  int64_t n;    // elements
  int64_t head; // elements before the first whole pack
  int64_t nvec; // whole packs from the head on
};

template <typename Op, int VEC>
__global__ void __launch_bounds__(kThreads) dense_kernel(Op op, DensePlan p) {
  pdl_enter();
  using A = typename Op::In0;
  using B = typename Op::In1;
  using C = typename Op::In2;
  Pack<A, VEC> a[kUnroll];
  Pack<B, VEC> b[kUnroll];
  Pack<C, VEC> c[kUnroll];
  const int64_t first = (int64_t)blockIdx.x * kTile + threadIdx.x;
#pragma unroll
  for (int u = 0; u < kUnroll; u++) {
    const int64_t v = first + u * kThreads, i = p.head + v * VEC;
    if (v < p.nvec) {
      a[u] = *reinterpret_cast<const Pack<A, VEC> *>(static_cast<const A *>(p.in[0]) + i);
      if constexpr (Op::kArity > 1)
        b[u] = *reinterpret_cast<const Pack<B, VEC> *>(static_cast<const B *>(p.in[1]) + i);
      if constexpr (Op::kArity > 2)
        c[u] = *reinterpret_cast<const Pack<C, VEC> *>(static_cast<const C *>(p.in[2]) + i);
    }
  }
#pragma unroll
  for (int u = 0; u < kUnroll; u++) {
    const int64_t v = first + u * kThreads;
    if (v < p.nvec) store_pack<Op, VEC>(op, p.out, p.head + v * VEC, a[u], b[u], c[u]);
  }
  // The head and the tail: under 2 * VEC <= 16 elements, one per thread of block 0.
  const int64_t body = p.nvec * VEC, rest = p.n - body;
  if (blockIdx.x == 0 && threadIdx.x < rest) {
    const int64_t i = threadIdx.x < p.head ? (int64_t)threadIdx.x : threadIdx.x + body;
    Pack<A, 1> x;
    Pack<B, 1> y;
    Pack<C, 1> z;
    x.v[0] = static_cast<const A *>(p.in[0])[i];
    if constexpr (Op::kArity > 1) y.v[0] = static_cast<const B *>(p.in[1])[i];
    if constexpr (Op::kArity > 2) z.v[0] = static_cast<const C *>(p.in[2])[i];
    store_pack<Op, 1>(op, p.out, i, x, y, z);
  }
}

// ---- the rows kernel ----
struct RowsPlan {
  void *out;
  const void *in[ENG_KCUDA_EW_MAX_IN];
  uint32_t rs[ENG_KCUDA_EW_MAX_IN]; // input strides along the rows
  uint32_t cs[ENG_KCUDA_EW_MAX_IN]; // and along a row
  Div32 cols;                       // D, the row length
  int64_t n;                        // elements, below 2^31
  int64_t head;                     // elements before the first whole pack
  int64_t nvec;                     // whole packs from the head on
};

// Elements i .. i+VEC-1 (one row) of input k.
template <typename T, int VEC>
__device__ __forceinline__ Pack<T, VEC> load_row(const RowsPlan &p, int k, uint32_t i) {
  const uint32_t q = div_by(p.cols, i), r = i - q * p.cols.d;
  const T *base = static_cast<const T *>(p.in[k]) + q * p.rs[k];
  Pack<T, VEC> x;
#pragma unroll
  for (int j = 0; j < VEC; j++) x.v[j] = base[(r + j) * p.cs[k]];
  return x;
}

template <typename Op, int VEC>
__global__ void __launch_bounds__(kThreads) rows_kernel(Op op, RowsPlan p) {
  pdl_enter();
  using A = typename Op::In0;
  using B = typename Op::In1;
  using C = typename Op::In2;
  Pack<A, VEC> a[kUnroll];
  Pack<B, VEC> b[kUnroll];
  Pack<C, VEC> c[kUnroll];
  const int64_t first = (int64_t)blockIdx.x * kTile + threadIdx.x;
#pragma unroll
  for (int u = 0; u < kUnroll; u++) {
    const int64_t v = first + u * kThreads;
    const uint32_t i = (uint32_t)(p.head + v * VEC);
    if (v < p.nvec) {
      a[u] = load_row<A, VEC>(p, 0, i);
      if constexpr (Op::kArity > 1) b[u] = load_row<B, VEC>(p, 1, i);
      if constexpr (Op::kArity > 2) c[u] = load_row<C, VEC>(p, 2, i);
    }
  }
#pragma unroll
  for (int u = 0; u < kUnroll; u++) {
    const int64_t v = first + u * kThreads;
    if (v < p.nvec) store_pack<Op, VEC>(op, p.out, p.head + v * VEC, a[u], b[u], c[u]);
  }
  // The head and the tail: under 2 * VEC <= 16 elements, one per thread of block 0.
  const int64_t body = p.nvec * VEC, rest = p.n - body;
  if (blockIdx.x == 0 && threadIdx.x < rest) {
    const uint32_t i = threadIdx.x < p.head ? threadIdx.x : (uint32_t)(threadIdx.x + body);
    Pack<A, 1> x = load_row<A, 1>(p, 0, i);
    Pack<B, 1> y;
    Pack<C, 1> z;
    if constexpr (Op::kArity > 1) y = load_row<B, 1>(p, 1, i);
    if constexpr (Op::kArity > 2) z = load_row<C, 1>(p, 2, i);
    store_pack<Op, 1>(op, p.out, i, x, y, z);
  }
}

// ---- the strided kernel ----
template <typename I> struct StridedPlan {
  void *out;
  const void *in[ENG_KCUDA_EW_MAX_IN];
  int ndim;
  I n;
  typename DivFor<I>::type size[ENG_MAX_DIMS];
  I stride[ENG_KCUDA_EW_MAX_IN][ENG_MAX_DIMS];
};

template <typename Op, typename I>
__global__ void __launch_bounds__(kThreads) strided_kernel(Op op, StridedPlan<I> p) {
  pdl_enter();
  using A = typename Op::In0;
  using B = typename Op::In1;
  using C = typename Op::In2;
  Pack<A, 1> a[kUnroll];
  Pack<B, 1> b[kUnroll];
  Pack<C, 1> c[kUnroll];
  const I first = (I)blockIdx.x * (I)kTile + threadIdx.x;
#pragma unroll
  for (int u = 0; u < kUnroll; u++) {
    const I i = first + (I)(u * kThreads);
    if (i < p.n) {
      I off[ENG_KCUDA_EW_MAX_IN] = {0, 0, 0};
      I r = i;
      for (int d = p.ndim - 1; d > 0; d--) {
        const I q = div_by(p.size[d], r);
        const I k = r - q * (I)p.size[d].d;
#pragma unroll
        for (int x = 0; x < Op::kArity; x++) off[x] += k * p.stride[x][d];
        r = q;
      }
#pragma unroll
      for (int x = 0; x < Op::kArity; x++) off[x] += r * p.stride[x][0];
      a[u].v[0] = static_cast<const A *>(p.in[0])[off[0]];
      if constexpr (Op::kArity > 1) b[u].v[0] = static_cast<const B *>(p.in[1])[off[1]];
      if constexpr (Op::kArity > 2) c[u].v[0] = static_cast<const C *>(p.in[2])[off[2]];
    }
  }
#pragma unroll
  for (int u = 0; u < kUnroll; u++) {
    const I i = first + (I)(u * kThreads);
    if (i < p.n) store_pack<Op, 1>(op, p.out, (int64_t)i, a[u], b[u], c[u]);
  }
}

// ---- host side: choosing and launching ----

// Blocks for `units` packs or elements, kTile per block; 0 when past the grid limit (2^31 - 1
// blocks, some 2^41 elements: no tensor gets there).
inline unsigned blocks_for(int64_t units) {
  const int64_t b = std::max<int64_t>((units + kTile - 1) / kTile, 1);
  return b > INT32_MAX ? 0u : (unsigned)b;
}

// ptr's element index modulo vec; -1 when ptr is not aligned to its element size.
inline int64_t phase(const void *ptr, size_t size, int vec) {
  const uintptr_t a = (uintptr_t)ptr;
  if (a % size) return -1;
  return (int64_t)((a / size) % (uintptr_t)vec);
}

// Whether every linear index and every input offset fits 32-bit arithmetic.
inline bool fits32(const eng_kcuda_ew_geom_t &g, int arity) {
  if (g.n > INT32_MAX) return false;
  for (int k = 0; k < arity; k++) {
    int64_t last = 0;
    for (int d = 0; d < g.ndim; d++) last += (g.shape[d] - 1) * g.stride[k][d];
    if (last > INT32_MAX) return false;
  }
  return true;
}

// dense_kernel when the layout is 1-D, every input contiguous, and all pointers share the
// output's phase on the pack grid; returns false to let another kernel run.
template <typename Op, int VEC>
bool try_dense(const Op &op, const eng_kcuda_ew_geom_t &g, void *out, const void *const *in,
               cudaStream_t stream, int *rc) {
  if (g.ndim != 1) return false;
  const size_t size[ENG_KCUDA_EW_MAX_IN] = {sizeof(typename Op::In0), sizeof(typename Op::In1),
                                            sizeof(typename Op::In2)};
  const int64_t ph = phase(out, sizeof(typename Op::Out), VEC);
  if (ph < 0) return false;
  for (int k = 0; k < Op::kArity; k++)
    if (g.stride[k][0] != 1 || phase(in[k], size[k], VEC) != ph) return false;
  DensePlan p{};
  p.out = out;
  for (int k = 0; k < Op::kArity; k++) p.in[k] = in[k];
  p.n = g.n;
  p.head = std::min<int64_t>((VEC - ph) % VEC, g.n);
  p.nvec = (g.n - p.head) / VEC;
  const unsigned blocks = blocks_for(p.nvec);
  if (!blocks) {
    *rc = (int)cudaErrorInvalidConfiguration;
    return true;
  }
  *rc = (int)launch_pdl(dense_kernel<Op, VEC>, blocks, kThreads, 0, stream, op, p);
  return true;
}

// rows_kernel when the layout has at most 2 dims in 32-bit range and the output's packs can
// stay inside rows (one row, or rows of whole packs with the output on the pack grid).
template <typename Op, int VEC>
bool try_rows(const Op &op, const eng_kcuda_ew_geom_t &g, void *out, const void *const *in,
              cudaStream_t stream, int *rc) {
  if (g.ndim > 2 || !fits32(g, Op::kArity)) return false;
  const int64_t ph = phase(out, sizeof(typename Op::Out), VEC);
  const int64_t cols = g.shape[g.ndim - 1];
  if (ph < 0 || (g.ndim == 2 && (ph != 0 || cols % VEC != 0))) return false;
  RowsPlan p{};
  p.out = out;
  for (int k = 0; k < Op::kArity; k++) {
    p.in[k] = in[k];
    p.rs[k] = g.ndim == 2 ? (uint32_t)g.stride[k][0] : 0u;
    p.cs[k] = (uint32_t)g.stride[k][g.ndim - 1];
  }
  p.cols = make_div32((uint32_t)cols);
  p.n = g.n;
  p.head = std::min<int64_t>((VEC - ph) % VEC, g.n);
  p.nvec = (g.n - p.head) / VEC;
  *rc = (int)launch_pdl(rows_kernel<Op, VEC>, blocks_for(p.nvec), kThreads, 0, stream, op, p);
  return true;
}

template <typename Op, typename I>
int launch_strided(const Op &op, const eng_kcuda_ew_geom_t &g, void *out, const void *const *in,
                   cudaStream_t stream) {
  StridedPlan<I> p{};
  p.out = out;
  p.ndim = g.ndim;
  p.n = (I)g.n;
  for (int d = 0; d < g.ndim; d++) p.size[d] = DivFor<I>::make(g.shape[d]);
  for (int k = 0; k < Op::kArity; k++) {
    p.in[k] = in[k];
    for (int d = 0; d < g.ndim; d++) p.stride[k][d] = (I)g.stride[k][d];
  }
  const unsigned blocks = blocks_for(g.n);
  if (!blocks) return (int)cudaErrorInvalidConfiguration;
  return (int)launch_pdl(strided_kernel<Op, I>, blocks, kThreads, 0, stream, op, p);
}

// Runs op over the geometry: out contiguous, in[0 .. kArity-1] as g describes them.
template <typename Op>
int launch(const Op &op, const eng_kcuda_ew_geom_t *g, void *out, const void *const *in,
           cudaStream_t stream) {
  if (g->n <= 0) return (int)cudaSuccess;
  constexpr int kVec = pack_width<Op>();
  int rc = 0;
  if (try_dense<Op, kVec>(op, *g, out, in, stream, &rc)) return rc;
  if (try_rows<Op, kVec>(op, *g, out, in, stream, &rc)) return rc;
  if (fits32(*g, Op::kArity)) return launch_strided<Op, uint32_t>(op, *g, out, in, stream);
  return launch_strided<Op, uint64_t>(op, *g, out, in, stream);
}

} // namespace ew
} // namespace eng_kc
