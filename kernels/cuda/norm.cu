// Softmax, layer norm and RMS norm. A row that fits is loaded once into registers by a warp
// (short rows) or a small block, reduced (max, then the sum of exponentials; or the moments), and
// written from the registers: one read and one write of the row, which is what running at memory
// bandwidth needs. Each thread issues all its 16-byte loads before the first reduction, and the
// blocks are kept small (4 vectors a thread) so that many rows are in flight on each SM while
// others sit in their one-barrier reductions. Longer rows are streamed: max, sum, write for
// softmax; moments, then write for the norms. Softmax along a dim that is not the last runs one
// thread per column of [outer, n, inner], coalesced across the columns.
#include <type_traits>

#include "cuda/norm.h"
#include "cuda/rows.cuh"

namespace {

using namespace eng_kc;
using namespace eng_kc::rows;

constexpr int kWarpBlock = 128;  // threads per block when warps own rows: 4 rows per block
constexpr int kStreamBlock = 1024;
constexpr int kColBlock = 256;
constexpr unsigned kMaxBlocks = 1u << 20;  // grid-stride loops cover the rest

// ---- a row held in registers: thread t of a group of G holds N elements ----
// With 16-byte vectors, element q = j * VEC + e of a thread is row element (j * G + t) * VEC + e
// (the row is aligned and its length a multiple of VEC); otherwise it is q * G + t. Elements past
// the end of the row are neither loaded nor used. Such rows are short (at most 4096 vectors), so
// indices within them are ints: fewer registers than 64-bit ones.
template <typename T> __device__ __forceinline__ int reg_index(int q, bool vec, int t, int G) {
  constexpr int VEC = vec_of<T>();
  return vec ? ((q / VEC) * G + t) * VEC + q % VEC : q * G + t;
}

template <typename T, int N>
__device__ __forceinline__ void load_regs(const T *__restrict__ row, int n, bool vec, int t,
                                          int G, acc_t<T> (&v)[N]) {
  constexpr int VEC = vec_of<T>();
  if (vec) {
    // Every load is issued before any is used, so they are all in flight at once.
    int4 raw[N / VEC];
#pragma unroll
    for (int j = 0; j < N / VEC; j++) {
      const int k = (j * G + t) * VEC;
      raw[j] = k < n ? *reinterpret_cast<const int4 *>(row + k) : make_int4(0, 0, 0, 0);
    }
#pragma unroll
    for (int j = 0; j < N / VEC; j++) {
      alignas(16) T buf[VEC];
      *reinterpret_cast<int4 *>(buf) = raw[j];
#pragma unroll
      for (int e = 0; e < VEC; e++) v[j * VEC + e] = load(&buf[e]);
    }
  } else {
#pragma unroll
    for (int q = 0; q < N; q++) {
      const int k = q * G + t;
      if (k < n) v[q] = load(row + k);
    }
  }
}

// row[k] = f(v[q]) * w[k] + b[k] for this thread's elements (w, b optional: NULL skips them),
// rounded once into T. With `vec`, w and b must be aligned like the row.
template <typename T, int N, typename F>
__device__ __forceinline__ void store_regs(T *row, const T *__restrict__ w, const T *__restrict__ b,
                                           int n, bool vec, int t, int G,
                                           const acc_t<T> (&v)[N], F f) {
  using A = acc_t<T>;
  constexpr int VEC = vec_of<T>();
  if (vec) {
#pragma unroll
    for (int j = 0; j < N / VEC; j++) {
      const int k = (j * G + t) * VEC;
      if (k < n) {
        alignas(16) T wb[VEC], bb[VEC], ob[VEC];
        if (w) *reinterpret_cast<int4 *>(wb) = *reinterpret_cast<const int4 *>(w + k);
        if (b) *reinterpret_cast<int4 *>(bb) = *reinterpret_cast<const int4 *>(b + k);
#pragma unroll
        for (int e = 0; e < VEC; e++) {
          A o = f(v[j * VEC + e]);
          if (w) o *= load(&wb[e]);
          if (b) o += load(&bb[e]);
          store(&ob[e], o);
        }
        *reinterpret_cast<int4 *>(row + k) = *reinterpret_cast<const int4 *>(ob);
      }
    }
  } else {
#pragma unroll
    for (int q = 0; q < N; q++) {
      const int k = q * G + t;
      if (k < n) {
        A o = f(v[q]);
        if (w) o *= load(w + k);
        if (b) o += load(b + k);
        store(row + k, o);
      }
    }
  }
}

// ---- softmax ----

// exp in the softmax loops. In f32 (the accumulator of every half type): 2^(x log2 e) through the
// hardware exp2 (2 ulp). Softmax arguments are <= 0 after the max shift, and the rounding of
// x log2 e costs |x| * 6e-8 relative, so the terms that matter are within ~1e-6 of expf; it takes
// a third of expf's instructions, and softmax of 64 MiB of bf16 was ALU-bound on expf (71% of the
// copy rate on an H200). f64 keeps exp.
__device__ __forceinline__ float softmax_exp(float x) { return exp2f(x * 1.4426950408889634f); }
__device__ __forceinline__ double softmax_exp(double x) { return exp(x); }

template <typename T, int N, bool WARP, bool VECTOR>
__global__ void __launch_bounds__(WARP ? kWarpBlock : 1024)
    softmax_regs(const T *__restrict__ x, T *y, int64_t rows, int n, bool log_out) {
  constexpr bool vec = VECTOR;
  using A = acc_t<T>;
  __shared__ A slots[2][32];  // the max, then the sum (group_reduce)
  const Group<WARP> g;
  const int t = g.rank(), G = g.size();
  for (int64_t r = g.first(); r < rows; r += g.step()) {
    A v[N] = {};
    load_regs<T, N>(x + r * n, n, vec, t, G, v);
    A mx = -(A)INFINITY;
#pragma unroll
    for (int q = 0; q < N; q++)
      if (reg_index<T>(q, vec, t, G) < n) mx = nanmax(mx, v[q]);
    mx = group_reduce<WARP>(mx, slots[0], [](A a, A b) { return nanmax(a, b); });
    A s = 0;
#pragma unroll
    for (int q = 0; q < N; q++) {
      if (reg_index<T>(q, vec, t, G) < n) {
        const A e = softmax_exp(v[q] - mx);
        s += e;
        if (!log_out) v[q] = e;
      }
    }
    s = group_reduce<WARP>(s, slots[1], [](A a, A b) { return a + b; });
    if (log_out) {
      const A shift = mx + log(s);
      store_regs<T, N>(y + r * n, nullptr, nullptr, n, vec, t, G, v, [=](A a) { return a - shift; });
    } else {
      const A inv = A(1) / s;
      store_regs<T, N>(y + r * n, nullptr, nullptr, n, vec, t, G, v, [=](A a) { return a * inv; });
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kStreamBlock)
    softmax_stream(const T *__restrict__ x, T *y, int64_t rows, int64_t n, bool vec, bool log_out) {
  using A = acc_t<T>;
  __shared__ A scratch[32];
  const int t = threadIdx.x, G = blockDim.x;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * n;
    A mx = -(A)INFINITY;
    for_row(xr, n, vec, t, G, [&](int64_t, A a) { mx = nanmax(mx, a); });
    mx = block_max(mx, scratch);
    A s = 0;
    for_row(xr, n, vec, t, G, [&](int64_t, A a) { s += softmax_exp(a - mx); });
    s = block_sum(s, scratch);
    if (log_out) {
      const A shift = mx + log(s);
      map_row(xr, y + r * n, n, vec, t, G, [=](int64_t, A a) { return a - shift; });
    } else {
      const A inv = A(1) / s;
      map_row(xr, y + r * n, n, vec, t, G, [=](int64_t, A a) { return softmax_exp(a - mx) * inv; });
    }
  }
}

// One thread per column (o, i) of [outer, n, inner]: max, sum, write, each a walk down n. The
// sum is sequential, so it is kept in double (as the CPU reference keeps it).
template <typename T>
__global__ void __launch_bounds__(kColBlock)
    softmax_cols(const T *__restrict__ x, T *y, int64_t outer, int64_t n, int64_t inner,
                 bool log_out) {
  using A = acc_t<T>;
  const int64_t cols = outer * inner, step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += step) {
    const int64_t base = (c / inner) * n * inner + c % inner;
    const T *xc = x + base;
    T *yc = y + base;
    A mx = -(A)INFINITY;
    double s = 0;
    for (int64_t k = 0; k < n; k++) mx = nanmax(mx, load(xc + k * inner));
    for (int64_t k = 0; k < n; k++) s += (double)exp(load(xc + k * inner) - mx);
    if (log_out) {
      const double shift = (double)mx + log(s);
      for (int64_t k = 0; k < n; k++) store(yc + k * inner, (A)((double)load(xc + k * inner) - shift));
    } else {
      const A inv = (A)(1.0 / s);
      for (int64_t k = 0; k < n; k++) store(yc + k * inner, exp(load(xc + k * inner) - mx) * inv);
    }
  }
}

// ---- layer norm (LAYER) and RMS norm: y = (x - shift) * scale * w + b ----
// shift is the row mean for layer norm and 0 for RMS norm; scale = 1 / sqrt(mean((x - shift)^2)
// + eps), the two-pass variance of the CPU reference.

template <typename T, int N, bool WARP, bool VECTOR, bool LAYER>
__global__ void __launch_bounds__(WARP ? kWarpBlock : 1024)
    norm_regs(const T *__restrict__ x, const T *__restrict__ w, const T *__restrict__ b, T *y,
              int64_t rows, int d, acc_t<T> eps) {
  constexpr bool vec = VECTOR;
  using A = acc_t<T>;
  __shared__ A slots[2][32];  // used in turn by the reductions (group_reduce)
  int turn = 0;
  const auto sum = [](A a, A b) { return a + b; };
  const Group<WARP> g;
  const int t = g.rank(), G = g.size();
  for (int64_t r = g.first(); r < rows; r += g.step()) {
    A v[N] = {};
    load_regs<T, N>(x + r * d, d, vec, t, G, v);
    A shift = 0;
    if constexpr (LAYER) {
      A s = 0;
#pragma unroll
      for (int q = 0; q < N; q++)
        if (reg_index<T>(q, vec, t, G) < d) s += v[q];
      shift = group_reduce<WARP>(s, slots[turn++ & 1], sum) / (A)d;
    }
    A sq = 0;
#pragma unroll
    for (int q = 0; q < N; q++) {
      if (reg_index<T>(q, vec, t, G) < d) {
        const A c = v[q] - shift;
        sq += c * c;
      }
    }
    sq = group_reduce<WARP>(sq, slots[turn++ & 1], sum);
    const A scale = A(1) / sqrt(sq / (A)d + eps);
    store_regs<T, N>(y + r * d, w, b, d, vec, t, G, v, [=](A a) { return (a - shift) * scale; });
  }
}

template <typename T, bool LAYER>
__global__ void __launch_bounds__(kStreamBlock)
    norm_stream(const T *__restrict__ x, const T *__restrict__ w, const T *__restrict__ b, T *y,
                int64_t rows, int64_t d, acc_t<T> eps, bool vec) {
  using A = acc_t<T>;
  __shared__ A scratch[32];
  const int t = threadIdx.x, G = blockDim.x;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * d;
    A shift = 0;
    if constexpr (LAYER) {
      A s = 0;
      for_row(xr, d, vec, t, G, [&](int64_t, A a) { s += a; });
      shift = block_sum(s, scratch) / (A)d;
    }
    A sq = 0;
    for_row(xr, d, vec, t, G, [&](int64_t, A a) { sq += (a - shift) * (a - shift); });
    sq = block_sum(sq, scratch);
    const A scale = A(1) / sqrt(sq / (A)d + eps);
    map_row(xr, y + r * d, d, vec, t, G, [=](int64_t k, A a) {
      A o = (a - shift) * scale;
      if (w) o *= load(w + k);
      if (b) o += load(b + k);
      return o;
    });
  }
}

// ---- launch planning: registers for rows up to 4096 vectors, streaming beyond ----

enum RowKind { kWarpRegs1, kWarpRegs4, kBlockRegs1, kBlockRegs4, kStream };
struct RowPlan {
  RowKind kind;
  unsigned blocks, threads;
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A warp holds 1 or 4 vectors a lane (rows up to 128 vectors); a block of up to 1024 threads holds
// 4 vectors a thread, with just enough warps for the row: small blocks (128 threads for 4096
// bf16) keep many rows in flight on an SM. Rows without 16-byte vectors hold one vector's worth a
// thread up to 1024 vectors, as 4 vectors' worth of scalar loads would spill registers.
template <typename T> RowPlan plan_rows(int64_t rows, int64_t n, bool vec) {
  constexpr int64_t VEC = vec_of<T>();
  const unsigned row_blocks = (unsigned)(rows < (int64_t)kMaxBlocks ? rows : kMaxBlocks);
  auto warps_for = [](int64_t per_thread, int64_t n) {
    return (unsigned)(ceil_div(ceil_div(n, per_thread), 32) * 32);
  };
  const unsigned warp_blocks = blocks_for(rows, kWarpBlock / 32, kMaxBlocks);
  if (n <= 32 * VEC) return {kWarpRegs1, warp_blocks, kWarpBlock};
  if (n <= 32 * 4 * VEC) return {kWarpRegs4, warp_blocks, kWarpBlock};
  if (!vec && n <= 1024 * VEC) return {kBlockRegs1, row_blocks, warps_for(VEC, n)};
  if (n <= 1024 * 4 * VEC) return {kBlockRegs4, row_blocks, warps_for(4 * VEC, n)};
  return {kStream, row_blocks, kStreamBlock};
}

// Runs regs(N, WARP, VECTOR) (integral constants naming the register kernel that fits the plan)
// or, for rows too long for registers, stream().
template <typename T, typename Regs, typename Stream>
void dispatch_rows(const RowPlan &p, bool vec, Regs regs, Stream stream) {
  constexpr int VEC = vec_of<T>();
  auto with_vec = [&](auto n, auto warp) {
    if (vec) regs(n, warp, std::true_type{});
    else regs(n, warp, std::false_type{});
  };
  switch (p.kind) {
  case kWarpRegs1: with_vec(std::integral_constant<int, VEC>{}, std::true_type{}); break;
  case kWarpRegs4: with_vec(std::integral_constant<int, 4 * VEC>{}, std::true_type{}); break;
  case kBlockRegs1:  // scalar rows only
    regs(std::integral_constant<int, VEC>{}, std::false_type{}, std::false_type{});
    break;
  case kBlockRegs4: with_vec(std::integral_constant<int, 4 * VEC>{}, std::false_type{}); break;
  case kStream: stream(); break;
  }
}

template <typename T>
cudaError_t softmax_typed(bool log_out, const T *x, T *y, int64_t outer, int64_t n, int64_t inner,
                          cudaStream_t s) {
  if (inner > 1) {
    softmax_cols<T><<<blocks_for(outer * inner, kColBlock, kMaxBlocks), kColBlock, 0, s>>>(
        x, y, outer, n, inner, log_out);
    return cudaGetLastError();
  }
  const bool vec = vec_rows<T>(x, n) && vec_rows<T>(y, n);
  const RowPlan p = plan_rows<T>(outer, n, vec);
  dispatch_rows<T>(
      p, vec,
      [&](auto N, auto warp, auto vector) {
        constexpr int kN = decltype(N)::value;
        constexpr bool kWarp = decltype(warp)::value, kVec = decltype(vector)::value;
        softmax_regs<T, kN, kWarp, kVec><<<p.blocks, p.threads, 0, s>>>(x, y, outer, (int)n,
                                                                         log_out);
      },
      [&] { softmax_stream<T><<<p.blocks, p.threads, 0, s>>>(x, y, outer, n, vec, log_out); });
  return cudaGetLastError();
}

template <typename T, bool LAYER>
cudaError_t norm_typed(const T *x, const T *w, const T *b, T *y, int64_t rows, int64_t d,
                       double eps, cudaStream_t s) {
  const bool vec = vec_rows<T>(x, d) && vec_rows<T>(y, d) && vec_rows<T>(w, d) && vec_rows<T>(b, d);
  const RowPlan p = plan_rows<T>(rows, d, vec);
  const acc_t<T> e = (acc_t<T>)eps;
  dispatch_rows<T>(
      p, vec,
      [&](auto N, auto warp, auto vector) {
        constexpr int kN = decltype(N)::value;
        constexpr bool kWarp = decltype(warp)::value, kVec = decltype(vector)::value;
        norm_regs<T, kN, kWarp, kVec, LAYER><<<p.blocks, p.threads, 0, s>>>(x, w, b, y, rows,
                                                                            (int)d, e);
      },
      [&] { norm_stream<T, LAYER><<<p.blocks, p.threads, 0, s>>>(x, w, b, y, rows, d, e, vec); });
  return cudaGetLastError();
}

}  // namespace

extern "C" int eng_kcuda_softmax(eng_dtype_t dt, int log_out, const void *x, void *y, int64_t outer,
                                 int64_t n, int64_t inner, cudaStream_t stream) {
  if (outer == 0 || n == 0 || inner == 0) return cudaSuccess;
  cudaError_t e = cudaSuccess;
  ENG_KC_FLOAT_TYPES(dt, e = softmax_typed<T>(log_out != 0, static_cast<const T *>(x),
                                              static_cast<T *>(y), outer, n, inner, stream));
  return (int)e;
}

extern "C" int eng_kcuda_layer_norm(eng_dtype_t dt, const void *x, const void *w, const void *b,
                                    void *y, int64_t rows, int64_t d, double eps,
                                    cudaStream_t stream) {
  if (rows == 0 || d == 0) return cudaSuccess;
  cudaError_t e = cudaSuccess;
  ENG_KC_FLOAT_TYPES(dt, e = norm_typed<T, true>(static_cast<const T *>(x), static_cast<const T *>(w),
                                                 static_cast<const T *>(b), static_cast<T *>(y),
                                                 rows, d, eps, stream));
  return (int)e;
}

extern "C" int eng_kcuda_rms_norm(eng_dtype_t dt, const void *x, const void *w, void *y,
                                  int64_t rows, int64_t d, double eps, cudaStream_t stream) {
  if (rows == 0 || d == 0) return cudaSuccess;
  cudaError_t e = cudaSuccess;
  ENG_KC_FLOAT_TYPES(dt, e = norm_typed<T, false>(static_cast<const T *>(x), static_cast<const T *>(w),
                                                  nullptr, static_cast<T *>(y), rows, d, eps,
                                                  stream));
  return (int)e;
}
