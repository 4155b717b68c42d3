// Multi-tensor apply: the host splits a list into launches of up to ENG_KCUDA_MT_MAX tensors;
// a launch's table (pointers, sizes, dtypes, and each tensor's first chunk) is a kernel
// parameter; block b finds its tensor by binary search over the chunk starts. The dtype switch
// is per block, so a list may mix dtypes without divergence.
#include "cuda/common.cuh"
#include "cuda/optim.h"

namespace {

constexpr int THREADS = 256;
constexpr int64_t CHUNK = ENG_K_SUMSQ_CHUNK;
constexpr int MAX = ENG_KCUDA_MT_MAX;

template <int D> struct Table {
  int count;
  int64_t start[MAX + 1];  // start[k]: tensor k's first chunk in this launch; start[count]: all
  int64_t n[MAX];
  void *ptr[D][MAX];
  uint8_t dt[MAX], gdt[MAX];
};

// The tensor of block b: the last k with start[k] <= b.
template <int D> __device__ __forceinline__ int tensor_of(const Table<D> &t, int64_t b) {
  int lo = 0, hi = t.count - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) >> 1;
    if (t.start[mid] <= b) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

template <typename A, typename S> __device__ __forceinline__ A ld(const S *p) { return (A)*p; }
template <> __device__ __forceinline__ float ld<float, __half>(const __half *p) { return __half2float(*p); }
template <> __device__ __forceinline__ float ld<float, __nv_bfloat16>(const __nv_bfloat16 *p) {
  return __bfloat162float(*p);
}
template <> __device__ __forceinline__ double ld<double, __half>(const __half *p) { return __half2float(*p); }
template <> __device__ __forceinline__ double ld<double, __nv_bfloat16>(const __nv_bfloat16 *p) {
  return __bfloat162float(*p);
}

// ---- AdamW ----

template <typename A> struct Coef { A b1, b2, omb1, omb2, decay, step, bc2, eps; };
struct Coefs {
  Coef<float> f;
  Coef<double> d;
};

template <typename A> Coef<A> coef_of(const eng_k_adamw_t &h) {
  return Coef<A>{(A)h.beta1, (A)h.beta2, (A)h.omb1, (A)h.omb2, (A)h.decay, (A)h.step_size,
                 (A)h.bc2_sqrt, (A)h.eps};
}

template <typename A, typename P, typename G>
__device__ void adamw_chunk(void *pp, const void *gp, void *mp, void *vp, int64_t lo, int64_t hi,
                            const Coef<A> &c) {
  P *p = (P *)pp;
  const G *g = (const G *)gp;
  A *m = (A *)mp, *v = (A *)vp;
  for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
    const A gi = ld<A>(g + i);
    const A mi = c.b1 * m[i] + c.omb1 * gi;
    const A vi = c.b2 * v[i] + c.omb2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const A pi = ld<A>(p + i) * c.decay;
    eng_kc::store(p + i, pi - c.step * mi / (sqrt(vi) / c.bc2 + c.eps));
  }
}

__global__ void adamw_kernel(Table<4> t, Coefs c) {
  const int k = tensor_of(t, blockIdx.x);
  const int64_t lo = (blockIdx.x - t.start[k]) * CHUNK, hi = min(lo + CHUNK, t.n[k]);
  void *p = t.ptr[0][k], *m = t.ptr[2][k], *v = t.ptr[3][k];
  const void *g = t.ptr[1][k];
  const int pd = t.dt[k], gd = t.gdt[k];
  if (pd == ENG_F32 && gd == ENG_F32) adamw_chunk<float, float, float>(p, g, m, v, lo, hi, c.f);
  else if (pd == ENG_BF16 && gd == ENG_BF16)
    adamw_chunk<float, __nv_bfloat16, __nv_bfloat16>(p, g, m, v, lo, hi, c.f);
  else if (pd == ENG_BF16 && gd == ENG_F32)
    adamw_chunk<float, __nv_bfloat16, float>(p, g, m, v, lo, hi, c.f);
  else if (pd == ENG_F16 && gd == ENG_F16) adamw_chunk<float, __half, __half>(p, g, m, v, lo, hi, c.f);
  else if (pd == ENG_F16 && gd == ENG_F32) adamw_chunk<float, __half, float>(p, g, m, v, lo, hi, c.f);
  else if (pd == ENG_F64 && gd == ENG_F64) adamw_chunk<double, double, double>(p, g, m, v, lo, hi, c.d);
  else if (pd == ENG_F64 && gd == ENG_F32) adamw_chunk<double, double, float>(p, g, m, v, lo, hi, c.d);
}

bool adamw_pair(eng_dtype_t p, eng_dtype_t g) {
  if (p == ENG_F64) return g == ENG_F64 || g == ENG_F32;
  if (p == ENG_F32) return g == ENG_F32;
  if (p == ENG_BF16 || p == ENG_F16) return g == p || g == ENG_F32;
  return false;
}

// ---- sums of squares ----

template <typename T> __device__ double chunk_sumsq(const void *xp, int64_t lo, int64_t hi) {
  const T *x = (const T *)xp;
  double s = 0;
  for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
    const double v = ld<double>(x + i);
    s += v * v;
  }
  return s;
}

__global__ void sumsq_kernel(Table<1> t, double *partials) {
  __shared__ double scratch[32];
  const int k = tensor_of(t, blockIdx.x);
  const int64_t lo = (blockIdx.x - t.start[k]) * CHUNK, hi = min(lo + CHUNK, t.n[k]);
  double s = 0;
  switch (t.dt[k]) {
  case ENG_F64: s = chunk_sumsq<double>(t.ptr[0][k], lo, hi); break;
  case ENG_F32: s = chunk_sumsq<float>(t.ptr[0][k], lo, hi); break;
  case ENG_F16: s = chunk_sumsq<__half>(t.ptr[0][k], lo, hi); break;
  case ENG_BF16: s = chunk_sumsq<__nv_bfloat16>(t.ptr[0][k], lo, hi); break;
  default: break;
  }
  s = eng_kc::block_sum(s, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

// One block: thread j adds partials j, j + blockDim.x, ... in order, then a fixed tree.
__global__ void sum_partials(const double *partials, int64_t n, void *out, int out_dt) {
  __shared__ double scratch[32];
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += partials[i];
  s = eng_kc::block_sum(s, scratch);
  if (threadIdx.x == 0) {
    if (out_dt == ENG_F64) *(double *)out = s;
    else *(float *)out = (float)s;
  }
}

// ---- scaling ----

template <typename A, typename T> __device__ void chunk_scale(void *xp, int64_t lo, int64_t hi, A s) {
  T *x = (T *)xp;
  for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) eng_kc::store(x + i, ld<A>(x + i) * s);
}

__device__ double load_scalar(const void *p, int dt) {
  switch (dt) {
  case ENG_F64: return *(const double *)p;
  case ENG_F32: return *(const float *)p;
  case ENG_F16: return __half2float(*(const __half *)p);
  default: return __bfloat162float(*(const __nv_bfloat16 *)p);
  }
}

__global__ void scale_kernel(Table<1> t, const void *scale, int scale_dt) {
  const int k = tensor_of(t, blockIdx.x);
  const int64_t lo = (blockIdx.x - t.start[k]) * CHUNK, hi = min(lo + CHUNK, t.n[k]);
  const double s = load_scalar(scale, scale_dt);
  switch (t.dt[k]) {
  case ENG_F64: chunk_scale<double, double>(t.ptr[0][k], lo, hi, s); break;
  case ENG_F32: chunk_scale<float, float>(t.ptr[0][k], lo, hi, (float)s); break;
  case ENG_F16: chunk_scale<float, __half>(t.ptr[0][k], lo, hi, (float)s); break;
  case ENG_BF16: chunk_scale<float, __nv_bfloat16>(t.ptr[0][k], lo, hi, (float)s); break;
  default: break;
  }
}

bool is_float(eng_dtype_t dt) { return dt == ENG_F64 || dt == ENG_F32 || dt == ENG_F16 || dt == ENG_BF16; }

// Fills t with the non-empty tensors of ts from *next on, up to MAX of them; returns the chunks
// (blocks) of the launch and leaves *next after the last tensor taken.
template <int D> int64_t fill_table(Table<D> &t, const eng_kcuda_mt_tensor_t *ts, int n, int *next) {
  t.count = 0;
  int64_t chunks = 0;
  for (; *next < n && t.count < MAX; (*next)++) {
    const eng_kcuda_mt_tensor_t &x = ts[*next];
    if (x.n == 0) continue;
    const int k = t.count++;
    t.start[k] = chunks;
    t.n[k] = x.n;
    for (int d = 0; d < D; d++) t.ptr[d][k] = x.ptr[d];
    t.dt[k] = (uint8_t)x.dt;
    t.gdt[k] = (uint8_t)x.gdt;
    chunks += (x.n + CHUNK - 1) / CHUNK;
  }
  t.start[t.count] = chunks;
  return chunks;
}

}  // namespace

extern "C" int eng_kcuda_adamw(const eng_kcuda_mt_tensor_t *ts, int n, const eng_k_adamw_t *h,
                               cudaStream_t stream) {
  for (int i = 0; i < n; i++)
    if (!adamw_pair(ts[i].dt, ts[i].gdt)) return (int)cudaErrorInvalidValue;
  const Coefs c{coef_of<float>(*h), coef_of<double>(*h)};
  Table<4> t;  // host staging: the launch copies it as its parameter
  for (int next = 0; next < n;) {
    const int64_t blocks = fill_table(t, ts, n, &next);
    if (blocks == 0) continue;
    adamw_kernel<<<(unsigned)blocks, THREADS, 0, stream>>>(t, c);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return (int)err;
  }
  return 0;
}

extern "C" int64_t eng_kcuda_sum_squares_partials(const eng_kcuda_mt_tensor_t *ts, int n) {
  int64_t chunks = 0;
  for (int i = 0; i < n; i++) chunks += (ts[i].n + CHUNK - 1) / CHUNK;
  return chunks;
}

extern "C" int eng_kcuda_sum_squares(const eng_kcuda_mt_tensor_t *ts, int n, double *partials,
                                     void *out, eng_dtype_t out_dt, cudaStream_t stream) {
  for (int i = 0; i < n; i++)
    if (!is_float(ts[i].dt)) return (int)cudaErrorInvalidValue;
  if (out_dt != ENG_F32 && out_dt != ENG_F64) return (int)cudaErrorInvalidValue;
  Table<1> t;
  int64_t done = 0;
  for (int next = 0; next < n;) {
    const int64_t blocks = fill_table(t, ts, n, &next);
    if (blocks == 0) continue;
    sumsq_kernel<<<(unsigned)blocks, THREADS, 0, stream>>>(t, partials + done);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return (int)err;
    done += blocks;
  }
  sum_partials<<<1, 1024, 0, stream>>>(partials, done, out, (int)out_dt);
  return (int)cudaGetLastError();
}

extern "C" int eng_kcuda_scale(const eng_kcuda_mt_tensor_t *ts, int n, const void *scale,
                               eng_dtype_t scale_dt, cudaStream_t stream) {
  for (int i = 0; i < n; i++)
    if (!is_float(ts[i].dt)) return (int)cudaErrorInvalidValue;
  if (!is_float(scale_dt)) return (int)cudaErrorInvalidValue;
  Table<1> t;
  for (int next = 0; next < n;) {
    const int64_t blocks = fill_table(t, ts, n, &next);
    if (blocks == 0) continue;
    scale_kernel<<<(unsigned)blocks, THREADS, 0, stream>>>(t, scale, (int)scale_dt);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return (int)err;
  }
  return 0;
}
