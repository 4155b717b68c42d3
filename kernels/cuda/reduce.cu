// Reductions (sum mean max min var std) and argmax over the middle dim of [outer, n, inner].
// One generic fold drives them all: an Op says how an element enters the fold and how two
// partial states combine, an Out says what is written for each output. Rows (inner == 1) fold
// with a warp or a block per row, with 16-byte loads when the rows are aligned; columns
// (inner > 1) fold with one thread per column walking n, coalesced across the columns. When the
// outputs are too few to fill the GPU, n is split in chunks: a first pass writes one partial
// state per (output, chunk) into the workspace, a second pass folds each output's chunks.
#include <math.h>

#include <type_traits>

#include "cuda/common.cuh"
#include "cuda/reduce.h"

namespace {

using namespace eng_kc;

// ---- accumulators ----
// Like the CPU reference, f32 folds in double (the cost is hidden behind memory); f16/bf16 fold in
// f32; integers in int64.
template <typename T> struct racc {
  using type = std::conditional_t<std::is_integral_v<T>, int64_t, double>;
};
template <> struct racc<__half> { using type = float; };
template <> struct racc<__nv_bfloat16> { using type = float; };
template <typename T> using racc_t = typename racc<T>::type;

// The value argmax compares: exact for every dtype.
template <typename T> struct argval {
  using type = std::conditional_t<std::is_integral_v<T>, int64_t,
                                  std::conditional_t<std::is_same_v<T, double>, double, float>>;
};
template <typename T> using argval_t = typename argval<T>::type;

__device__ __forceinline__ float widen(__half v) { return __half2float(v); }
__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T widen(T v) { return v; }
template <typename A, typename T> __device__ __forceinline__ A to_acc(T v) {
  return static_cast<A>(widen(v));
}

template <typename A> __device__ __forceinline__ bool is_nan(A v) {
  if constexpr (std::is_floating_point_v<A>) return v != v;
  else return false;
}

// ---- ops: init, per-output context, element, combine; Partial folds the partial states ----
template <typename In, typename A> struct SumOp {
  using State = A;
  using Ctx = A;
  using Partial = SumOp<A, A>;
  __device__ A init() const { return A(0); }
  __device__ Ctx ctx(int64_t) const { return A(0); }
  __device__ A elem(In v, int64_t, Ctx) const { return to_acc<A>(v); }
  __device__ A combine(A a, A b) const {
    if constexpr (std::is_integral_v<A>) return (A)((uint64_t)a + (uint64_t)b);  // wraps, as on CPU
    else return a + b;
  }
};

// (x - mean)^2, the mean of each output read once per output.
template <typename In, typename A> struct SqDevOp {
  using State = A;
  using Ctx = A;
  using Partial = SumOp<A, A>;
  const A *mean;
  __device__ A init() const { return A(0); }
  __device__ Ctx ctx(int64_t col) const { return mean[col]; }
  __device__ A elem(In v, int64_t, Ctx m) const {
    A d = to_acc<A>(v) - m;
    return d * d;
  }
  __device__ A combine(A a, A b) const { return a + b; }
};

// NaN-propagating max/min: once a state is NaN no comparison replaces it.
template <typename In, typename A, bool IS_MAX> struct ExtremeOp {
  using State = A;
  using Ctx = int;
  using Partial = ExtremeOp<A, A, IS_MAX>;
  __device__ A init() const {
    if constexpr (std::is_floating_point_v<A>) return IS_MAX ? -(A)INFINITY : (A)INFINITY;
    else return IS_MAX ? INT64_MIN : INT64_MAX;
  }
  __device__ Ctx ctx(int64_t) const { return 0; }
  __device__ A elem(In v, int64_t, Ctx) const { return to_acc<A>(v); }
  __device__ A combine(A a, A b) const {
    bool take = IS_MAX ? b > a : b < a;
    return (is_nan(b) || take) ? b : a;
  }
};

template <typename V> struct ArgState {
  V v;
  int64_t i;
};

// Argmax order: NaN above everything, then by value, ties to the smaller index. A total preorder,
// so the fold may combine in any order. The init state (lowest value, index INT64_MAX) loses to
// every element.
template <typename V> __device__ __forceinline__ ArgState<V> arg_better(ArgState<V> a, ArgState<V> b) {
  bool an = is_nan(a.v), bn = is_nan(b.v);
  if (an != bn) return an ? a : b;
  if (!an && a.v != b.v) return a.v > b.v ? a : b;
  return a.i <= b.i ? a : b;
}

static_assert(sizeof(ArgState<float>) == 16 && sizeof(ArgState<int64_t>) == 16,
              "argmax partials are sized as ArgState<double>");

template <typename V> struct ArgPartialOp;

template <typename In, typename V> struct ArgOp {
  using State = ArgState<V>;
  using Ctx = int;
  using Partial = ArgPartialOp<V>;
  __device__ State init() const {
    if constexpr (std::is_floating_point_v<V>) return {-(V)INFINITY, INT64_MAX};
    else return {INT64_MIN, INT64_MAX};
  }
  __device__ Ctx ctx(int64_t) const { return 0; }
  __device__ State elem(In v, int64_t k, Ctx) const { return {to_acc<V>(v), k}; }
  __device__ State combine(State a, State b) const { return arg_better(a, b); }
};

template <typename V> struct ArgPartialOp {
  using State = ArgState<V>;
  using Ctx = int;
  using Partial = ArgPartialOp<V>;
  __device__ State init() const { return ArgOp<V, V>{}.init(); }
  __device__ Ctx ctx(int64_t) const { return 0; }
  __device__ State elem(State s, int64_t, Ctx) const { return s; }
  __device__ State combine(State a, State b) const { return arg_better(a, b); }
};

// ---- outputs ----
template <typename S> struct StateOut {
  S *p;
  __device__ void operator()(int64_t i, S s) const { p[i] = s; }
};

enum Finish { kRaw, kDivide, kDivideSqrt };

// The finished value (acc, acc / div or sqrt(acc / div)), rounded once into O.
template <typename O, typename A> struct ValueOut {
  O *p;
  int finish;
  A div;
  __device__ void operator()(int64_t i, A a) const {
    if constexpr (std::is_floating_point_v<A>) {
      if (finish != kRaw) a = a / div;
      if (finish == kDivideSqrt) a = sqrt(a);
    }
    store(p + i, a);
  }
};

struct IndexOut {
  int64_t *p;
  template <typename V> __device__ void operator()(int64_t i, ArgState<V> s) const { p[i] = s.i; }
};

// ---- warp and block folds of any state ----
template <typename A> __device__ __forceinline__ A shfl_xor(A v, int o) {
  return __shfl_xor_sync(0xffffffffu, v, o);
}
template <typename V> __device__ __forceinline__ ArgState<V> shfl_xor(ArgState<V> s, int o) {
  return {__shfl_xor_sync(0xffffffffu, s.v, o), __shfl_xor_sync(0xffffffffu, s.i, o)};
}

template <typename Op, typename S> __device__ __forceinline__ S warp_fold(const Op &op, S s) {
  for (int o = 16; o > 0; o >>= 1) s = op.combine(s, shfl_xor(s, o));
  return s;
}

// The fold of the whole block, valid in thread 0; blockDim.x is a multiple of 32.
template <typename Op, typename S> __device__ S block_fold(const Op &op, S s, S *scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  s = warp_fold(op, s);
  __syncthreads();  // the previous fold has finished reading scratch
  if (lane == 0) scratch[warp] = s;
  __syncthreads();
  if (warp == 0) {
    s = lane < nw ? scratch[lane] : op.init();
    s = warp_fold(op, s);
  }
  return s;
}

// ---- kernels ----
template <typename In> constexpr int vec_of() { return sizeof(In) < 16 ? 16 / (int)sizeof(In) : 1; }

// Thread t of nt folds its share of virtual row v: chunk v % splits of row v / splits, elements
// t, t + nt, ... (in 16-byte vectors of elements when `vec`: the chunk start is then aligned).
template <typename In, typename Op>
__device__ typename Op::State fold_span(const Op &op, const In *__restrict__ x, int64_t v, int64_t n,
                                        int64_t chunk, int64_t splits, bool vec, int t, int nt) {
  const int64_t r = v / splits, start = (v % splits) * chunk;
  const int64_t len = n - start < chunk ? n - start : chunk;
  const In *p = x + r * n + start;
  const typename Op::Ctx c = op.ctx(r);
  typename Op::State s = op.init();
  int64_t k0 = 0;
  constexpr int VEC = vec_of<In>();
  if constexpr (VEC > 1) {
    if (vec) {
      const int64_t nv = len / VEC;
      for (int64_t j = t; j < nv; j += nt) {
        alignas(16) In buf[VEC];
        *reinterpret_cast<int4 *>(buf) = *reinterpret_cast<const int4 *>(p + j * VEC);
#pragma unroll
        for (int e = 0; e < VEC; e++) s = op.combine(s, op.elem(buf[e], start + j * VEC + e, c));
      }
      k0 = nv * VEC;
    }
  }
  for (int64_t k = k0 + t; k < len; k += nt) s = op.combine(s, op.elem(p[k], start + k, c));
  return s;
}

constexpr int kWarpThreads = 256;  // 8 rows per block
constexpr int kBlockThreads = 512;
constexpr int kColThreads = 256;
constexpr unsigned kMaxBlocks = 1u << 20;  // grid-stride loops cover the rest

template <typename In, typename Op, typename Out>
__global__ void __launch_bounds__(kWarpThreads)
    fold_rows_warp(const In *__restrict__ x, int64_t vrows, int64_t n, int64_t chunk,
                   int64_t splits, bool vec, Op op, Out out) {
  const int lane = threadIdx.x & 31, per_block = blockDim.x >> 5;
  const int64_t step = (int64_t)gridDim.x * per_block;
  for (int64_t v = (int64_t)blockIdx.x * per_block + (threadIdx.x >> 5); v < vrows; v += step) {
    typename Op::State s = fold_span(op, x, v, n, chunk, splits, vec, lane, 32);
    s = warp_fold(op, s);
    if (lane == 0) out(v, s);
  }
}

template <typename In, typename Op, typename Out>
__global__ void __launch_bounds__(kBlockThreads)
    fold_rows_block(const In *__restrict__ x, int64_t vrows, int64_t n, int64_t chunk,
                    int64_t splits, bool vec, Op op, Out out) {
  __shared__ typename Op::State scratch[32];
  for (int64_t v = blockIdx.x; v < vrows; v += gridDim.x) {  // uniform across the block
    typename Op::State s = fold_span(op, x, v, n, chunk, splits, vec, threadIdx.x, blockDim.x);
    s = block_fold(op, s, scratch);
    if (threadIdx.x == 0) out(v, s);
  }
}

// Thread t folds V adjacent columns, V (t % vcols) .. V (t % vcols) + V - 1 (vcols = cols / V),
// over chunk t / vcols; column col's result goes to col * splits + chunk. V > 1 (16 bytes of
// columns a load) where every row of x is 16-byte aligned: a thread a column with 2-byte loads
// moved ~1.6 TB/s (a bf16 [32768, 512] sum: 21 -> 16 us, docs/PERF.md session 37). Each column is
// folded in the same order whatever V.
template <int V, typename In, typename Op, typename Out>
__global__ void __launch_bounds__(kColThreads)
    fold_cols(const In *__restrict__ x, int64_t outer, int64_t n, int64_t inner, int64_t chunk,
              int64_t splits, Op op, Out out) {
  const int64_t vcols = outer * inner / V, total = vcols * splits;
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += step) {
    const int64_t col = (t % vcols) * V, part = t / vcols;
    const int64_t start = part * chunk, end = n - start < chunk ? n : start + chunk;
    const In *p = x + (col / inner) * n * inner + col % inner;
    typename Op::Ctx c[V];
    typename Op::State s[V];
#pragma unroll
    for (int e = 0; e < V; e++) c[e] = op.ctx(col + e), s[e] = op.init();
#pragma unroll(V == 1 ? 4 : 8)
    for (int64_t k = start; k < end; k++) {
      alignas(16) In buf[V];
      if constexpr (V == 1) buf[0] = p[k * inner];
      else *reinterpret_cast<int4 *>(buf) = *reinterpret_cast<const int4 *>(p + k * inner);
#pragma unroll
      for (int e = 0; e < V; e++) s[e] = op.combine(s[e], op.elem(buf[e], k, c[e]));
    }
#pragma unroll
    for (int e = 0; e < V; e++) out((col + e) * splits + part, s[e]);
  }
}

// ---- planning: how n is split (the same plan sizes the workspace and runs the passes) ----
struct Split {
  int64_t chunk, splits;
};

constexpr int64_t kWantThreads = 1 << 18;  // about what an H100/H200 keeps resident
constexpr int64_t kRowSplitMin = 16384;    // shorter rows are never split
constexpr int64_t kRowChunkMin = 8192;
constexpr int64_t kColChunkMin = 32;
constexpr int64_t kColSplitMax = 4096;
constexpr int64_t kWarpRowMax = 2048;  // longer rows (or chunks) get a block each

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// Rows: split when there are fewer rows than blocks wanted; chunks stay multiples of 16 elements
// so that 16-byte loads stay aligned in every chunk.
Split plan_rows(int64_t rows, int64_t n) {
  const int64_t want = kWantThreads / kBlockThreads;
  if (n <= kRowSplitMin || rows >= want) return {n, 1};
  int64_t s = min64(ceil_div(want, rows), ceil_div(n, kRowChunkMin));
  int64_t chunk = ceil_div(ceil_div(n, s), 16) * 16;
  return {chunk, ceil_div(n, chunk)};
}

Split plan_cols(int64_t cols, int64_t n) {
  if (cols >= kWantThreads / 2 || n < 2 * kColChunkMin) return {n, 1};
  int64_t s = min64(min64(ceil_div(kWantThreads, cols), n / kColChunkMin), kColSplitMax);
  int64_t chunk = ceil_div(n, s);
  return {chunk, ceil_div(n, chunk)};
}

// Columns whose rows take 16-byte loads (inner a multiple of 8) are planned as 8 a thread, the
// vector of 16-bit dtypes (fold_cols): wider dtypes' vectors hold fewer (more splits than
// they need), and the plan stays a function of the sizes alone, as the workspace's size is.
Split plan(int64_t outer, int64_t n, int64_t inner) {
  if (inner == 1) return plan_rows(outer, n);
  return plan_cols(inner % 8 == 0 ? outer * inner / 8 : outer * inner, n);
}

size_t partial_bytes(int64_t outer, int64_t n, int64_t inner, size_t state_bytes) {
  Split sp = plan(outer, n, inner);
  return sp.splits > 1 ? (size_t)(outer * inner * sp.splits) * state_bytes : 0;
}

// The per-output means of var/std lead the workspace, padded to keep what follows aligned.
size_t mean_bytes(int64_t cols, size_t acc_bytes) { return ((size_t)cols * acc_bytes + 255) / 256 * 256; }

template <typename In, typename Op, typename Out>
cudaError_t rows_pass(const In *x, int64_t vrows, int64_t n, Split sp, const Op &op, const Out &out,
                      cudaStream_t stream) {
  constexpr int VEC = vec_of<In>();
  const bool vec = VEC > 1 && (uintptr_t)x % 16 == 0 && n % VEC == 0 && sp.chunk % VEC == 0;
  if (sp.chunk <= kWarpRowMax) {
    unsigned blocks = blocks_for(vrows, kWarpThreads / 32, kMaxBlocks);
    fold_rows_warp<<<blocks, kWarpThreads, 0, stream>>>(x, vrows, n, sp.chunk, sp.splits, vec, op, out);
  } else {
    unsigned blocks = (unsigned)min64(vrows, kMaxBlocks);
    fold_rows_block<<<blocks, kBlockThreads, 0, stream>>>(x, vrows, n, sp.chunk, sp.splits, vec, op, out);
  }
  return cudaGetLastError();
}

template <typename In, typename Op, typename Out>
cudaError_t cols_pass(const In *x, int64_t outer, int64_t n, int64_t inner, Split sp, const Op &op,
                      const Out &out, cudaStream_t stream) {
  constexpr int VEC = vec_of<In>();
  if (VEC > 1 && inner % VEC == 0 && (uintptr_t)x % 16 == 0) {
    unsigned blocks = blocks_for(outer * inner / VEC * sp.splits, kColThreads, kMaxBlocks);
    fold_cols<VEC><<<blocks, kColThreads, 0, stream>>>(x, outer, n, inner, sp.chunk, sp.splits, op, out);
  } else {
    unsigned blocks = blocks_for(outer * inner * sp.splits, kColThreads, kMaxBlocks);
    fold_cols<1><<<blocks, kColThreads, 0, stream>>>(x, outer, n, inner, sp.chunk, sp.splits, op, out);
  }
  return cudaGetLastError();
}

// out(o * inner + i, fold over x[o, :, i]) for every output; outer * inner > 0.
template <typename In, typename Op, typename Out>
cudaError_t fold(const In *x, int64_t outer, int64_t n, int64_t inner, const Op &op, const Out &out,
                 void *workspace, cudaStream_t stream) {
  using S = typename Op::State;
  const Split sp = plan(outer, n, inner);
  const int64_t cols = outer * inner;
  if (sp.splits == 1)
    return inner == 1 ? rows_pass(x, outer, n, sp, op, out, stream)
                      : cols_pass(x, outer, n, inner, sp, op, out, stream);
  S *partial = static_cast<S *>(workspace);  // [cols, splits]
  cudaError_t e = inner == 1 ? rows_pass(x, outer * sp.splits, n, sp, op, StateOut<S>{partial}, stream)
                             : cols_pass(x, outer, n, inner, sp, op, StateOut<S>{partial}, stream);
  if (e != cudaSuccess) return e;
  return rows_pass(partial, cols, sp.splits, Split{sp.splits, 1}, typename Op::Partial{}, out, stream);
}

template <typename T>
cudaError_t reduce_typed(eng_reduce_op_t op, const T *x, void *y, int64_t outer, int64_t n,
                         int64_t inner, double correction, void *workspace, cudaStream_t stream) {
  using A = racc_t<T>;
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
    case ENG_REDUCE_SUM:
      return fold(x, outer, n, inner, SumOp<T, A>{}, ValueOut<int64_t, A>{(int64_t *)y, kRaw, 1},
                  workspace, stream);
    case ENG_REDUCE_MAX:
      return fold(x, outer, n, inner, ExtremeOp<T, A, true>{}, ValueOut<T, A>{(T *)y, kRaw, 1},
                  workspace, stream);
    case ENG_REDUCE_MIN:
      return fold(x, outer, n, inner, ExtremeOp<T, A, false>{}, ValueOut<T, A>{(T *)y, kRaw, 1},
                  workspace, stream);
    default: return cudaErrorInvalidValue;
    }
  } else {
    T *out = static_cast<T *>(y);
    switch (op) {
    case ENG_REDUCE_SUM:
      return fold(x, outer, n, inner, SumOp<T, A>{}, ValueOut<T, A>{out, kRaw, 1}, workspace, stream);
    case ENG_REDUCE_MEAN:  // n = 0 gives 0 / 0 = NaN
      return fold(x, outer, n, inner, SumOp<T, A>{}, ValueOut<T, A>{out, kDivide, (A)n}, workspace,
                  stream);
    case ENG_REDUCE_MAX:
      return fold(x, outer, n, inner, ExtremeOp<T, A, true>{}, ValueOut<T, A>{out, kRaw, 1},
                  workspace, stream);
    case ENG_REDUCE_MIN:
      return fold(x, outer, n, inner, ExtremeOp<T, A, false>{}, ValueOut<T, A>{out, kRaw, 1},
                  workspace, stream);
    case ENG_REDUCE_VAR:
    case ENG_REDUCE_STD: {
      A *mean = static_cast<A *>(workspace);
      void *rest = static_cast<char *>(workspace) + mean_bytes(outer * inner, sizeof(A));
      cudaError_t e = fold(x, outer, n, inner, SumOp<T, A>{}, ValueOut<A, A>{mean, kDivide, (A)n},
                           rest, stream);
      if (e != cudaSuccess) return e;
      const double dof = (double)n - correction;
      const int finish = op == ENG_REDUCE_STD ? kDivideSqrt : kDivide;
      return fold(x, outer, n, inner, SqDevOp<T, A>{mean},
                  ValueOut<T, A>{out, finish, (A)(dof > 0 ? dof : 0)}, rest, stream);
    }
    default: return cudaErrorInvalidValue;
    }
  }
}

size_t acc_bytes(eng_dtype_t dt) { return dt == ENG_F16 || dt == ENG_BF16 ? 4 : 8; }

}  // namespace

extern "C" size_t eng_kcuda_reduce_workspace(eng_reduce_op_t op, eng_dtype_t dt, int64_t outer,
                                             int64_t n, int64_t inner) {
  if (outer * inner == 0) return 0;
  size_t ws = partial_bytes(outer, n, inner, acc_bytes(dt));
  if (op == ENG_REDUCE_VAR || op == ENG_REDUCE_STD) ws += mean_bytes(outer * inner, acc_bytes(dt));
  return ws;
}

extern "C" int eng_kcuda_reduce(eng_reduce_op_t op, eng_dtype_t dt, const void *x, void *y,
                                int64_t outer, int64_t n, int64_t inner, double correction,
                                void *workspace, cudaStream_t stream) {
  if (outer * inner == 0) return cudaSuccess;
  cudaError_t e = cudaSuccess;
  ENG_KC_ALL_TYPES(dt, e = reduce_typed<T>(op, static_cast<const T *>(x), y, outer, n, inner,
                                           correction, workspace, stream));
  return (int)e;
}

extern "C" size_t eng_kcuda_argmax_workspace(int64_t outer, int64_t n, int64_t inner) {
  if (outer * inner == 0) return 0;
  return partial_bytes(outer, n, inner, sizeof(ArgState<double>));
}

extern "C" int eng_kcuda_argmax(eng_dtype_t dt, const void *x, int64_t *y, int64_t outer, int64_t n,
                                int64_t inner, void *workspace, cudaStream_t stream) {
  if (outer * inner == 0) return cudaSuccess;
  cudaError_t e = cudaSuccess;
  ENG_KC_ALL_TYPES(dt, e = fold(static_cast<const T *>(x), outer, n, inner,
                                ArgOp<T, argval_t<T>>{}, IndexOut{y}, workspace, stream));
  return (int)e;
}
