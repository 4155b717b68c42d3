// Scatter-adds by atomicAdd: one thread per source position, offsets by division over the
// iteration shape (in 32-bit arithmetic when everything fits).
#include "cuda/common.cuh"
#include "cuda/scatter.h"

namespace {

constexpr int THREADS = 256;

// The iteration shape and the three operands' strides over it; acc[dim] holds the pick stride.
struct Dims {
  int ndim, dim;
  int64_t shape[ENG_MAX_DIMS], acc[ENG_MAX_DIMS], src[ENG_MAX_DIMS], idx[ENG_MAX_DIMS];
};

__device__ __forceinline__ void atomic_add(float *p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(double *p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(int32_t *p, int32_t v) { atomicAdd((int *)p, (int)v); }
// Two's complement: an unsigned 64-bit add is the signed one.
__device__ __forceinline__ void atomic_add(int64_t *p, int64_t v) {
  atomicAdd((unsigned long long *)p, (unsigned long long)v);
}

// Source elements in the accumulator's type: 16-bit floats widen exactly, the rest are as is.
template <typename A, typename S> __device__ __forceinline__ A load_as(const S *p) { return (A)*p; }
template <> __device__ __forceinline__ float load_as<float, __half>(const __half *p) {
  return __half2float(*p);
}
template <> __device__ __forceinline__ float load_as<float, __nv_bfloat16>(const __nv_bfloat16 *p) {
  return __bfloat162float(*p);
}

template <typename A, typename S, typename I>
__global__ void scatter_add(A *acc, const S *src, const int64_t *idx, Dims g, I n, int64_t limit) {
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
    I r = i, ao = 0, so = 0, io = 0;
    for (int d = g.ndim - 1; d >= 0; d--) {
      I s = (I)g.shape[d], q = r / s, c = r - q * s;
      r = q;
      so += c * (I)g.src[d];
      io += c * (I)g.idx[d];
      if (d != g.dim) ao += c * (I)g.acc[d];
    }
    const int64_t v = idx[io];
    if (v < 0 || v >= limit) continue;
    atomic_add(acc + (int64_t)ao + v * g.acc[g.dim], load_as<A>(src + so));
  }
}

// Whether positions and every operand's offsets stay below 2^31 (the pick stride times limit
// included).
bool fits32(const Dims &g, int64_t n, int64_t limit) {
  int64_t a = (limit - 1) * g.acc[g.dim], s = 0, x = 0;
  for (int d = 0; d < g.ndim; d++) {
    s += (g.shape[d] - 1) * g.src[d];
    x += (g.shape[d] - 1) * g.idx[d];
    if (d != g.dim) a += (g.shape[d] - 1) * g.acc[d];
  }
  const int64_t lim = 1ll << 31;
  return n < lim && a < lim && s < lim && x < lim;
}

template <typename A, typename S>
int launch(void *acc, const void *src, const int64_t *idx, const Dims &g, int64_t limit,
           cudaStream_t stream) {
  int64_t n = 1;
  for (int d = 0; d < g.ndim; d++) n *= g.shape[d];
  if (n == 0 || limit == 0) return 0;
  const unsigned blocks = eng_kc::blocks_for(n, THREADS);
  if (fits32(g, n, limit))
    scatter_add<A, S, uint32_t><<<blocks, THREADS, 0, stream>>>((A *)acc, (const S *)src, idx, g,
                                                                 (uint32_t)n, limit);
  else
    scatter_add<A, S, int64_t><<<blocks, THREADS, 0, stream>>>((A *)acc, (const S *)src, idx, g, n,
                                                                limit);
  return (int)cudaGetLastError();
}

}  // namespace

extern "C" int eng_kcuda_scatter_add(void *acc, eng_dtype_t acc_dt, const int64_t *acc_stride,
                                     int64_t pick_stride, const void *src, eng_dtype_t src_dt,
                                     const int64_t *src_stride, const int64_t *idx,
                                     const int64_t *idx_stride, int ndim, const int64_t *shape,
                                     int dim, int64_t limit, cudaStream_t stream) {
  if (ndim < 1 || ndim > ENG_MAX_DIMS || dim < 0 || dim >= ndim) return (int)cudaErrorInvalidValue;
  Dims g{};
  g.ndim = ndim;
  g.dim = dim;
  for (int d = 0; d < ndim; d++) {
    g.shape[d] = shape[d];
    g.acc[d] = d == dim ? pick_stride : acc_stride[d];
    g.src[d] = src_stride[d];
    g.idx[d] = idx_stride[d];
  }
  if (acc_dt == ENG_F32 && src_dt == ENG_F32) return launch<float, float>(acc, src, idx, g, limit, stream);
  if (acc_dt == ENG_F32 && src_dt == ENG_BF16)
    return launch<float, __nv_bfloat16>(acc, src, idx, g, limit, stream);
  if (acc_dt == ENG_F32 && src_dt == ENG_F16) return launch<float, __half>(acc, src, idx, g, limit, stream);
  if (acc_dt == ENG_F64 && src_dt == ENG_F64) return launch<double, double>(acc, src, idx, g, limit, stream);
  if (acc_dt == ENG_I32 && src_dt == ENG_I32) return launch<int32_t, int32_t>(acc, src, idx, g, limit, stream);
  if (acc_dt == ENG_I64 && src_dt == ENG_I64) return launch<int64_t, int64_t>(acc, src, idx, g, limit, stream);
  return (int)cudaErrorInvalidValue;
}
