// Gathers by an index tensor, moving elements as raw words of their size (every dtype works), and
// the bounds check run before them. Offsets go through the coalesced dims of strided.cuh, in
// 32-bit arithmetic when everything fits.
#include "cuda/common.cuh"
#include "cuda/index.h"
#include "cuda/strided.cuh"

namespace {

using eng_kc::strided::Dims;
namespace sd = eng_kc::strided;

// At most 256 so that the grid (capped by blocks_for) stays under 2^28 threads: strided::fits32.
constexpr int THREADS = 256;

// The word an out-of-range index leaves in the output: a quiet NaN of the float dtypes, else 0.
uint64_t missing_bits(eng_dtype_t dt) {
  switch (dt) {
  case ENG_F64: return 0x7ff8000000000000ull;
  case ENG_F32: return 0x7fc00000u;
  case ENG_F16: return 0x7e00u;
  case ENG_BF16: return 0x7fc0u;
  default: return 0;
  }
}

// g.dst: the source's strides, g.src: the index's strides, both over the output's dims.
template <typename W, typename J, typename I>
__global__ void take(W *out, const W *x, const J *idx, Dims g, I n, int64_t pick, int64_t limit,
                     W missing) {
  for (I i = sd::first_index<I>(); i < n; i += sd::grid_step<I>()) {
    I xo, io;
    sd::offsets(g, i, xo, io);
    const int64_t v = (int64_t)idx[io];
    out[i] = (v >= 0 && v < limit) ? x[(int64_t)xo + v * pick] : missing;
  }
}

template <typename W, typename J>
int launch_take(void *out, const void *x, const void *idx, const Dims &g, int64_t pick,
                int64_t limit, uint64_t missing, cudaStream_t stream) {
  const int64_t n = sd::numel(g);
  const unsigned blocks = eng_kc::blocks_for(n, THREADS);
  if (sd::fits32(g))
    take<W, J, uint32_t><<<blocks, THREADS, 0, stream>>>((W *)out, (const W *)x, (const J *)idx, g,
                                                          (uint32_t)n, pick, limit, (W)missing);
  else
    take<W, J, int64_t><<<blocks, THREADS, 0, stream>>>((W *)out, (const W *)x, (const J *)idx, g,
                                                         n, pick, limit, (W)missing);
  return (int)cudaGetLastError();
}

template <typename W>
int take_by_index(void *out, const void *x, const void *idx, eng_dtype_t idx_dtype, const Dims &g,
                  int64_t pick, int64_t limit, uint64_t missing, cudaStream_t stream) {
  switch (idx_dtype) {
  case ENG_I32: return launch_take<W, int32_t>(out, x, idx, g, pick, limit, missing, stream);
  case ENG_I64: return launch_take<W, int64_t>(out, x, idx, g, pick, limit, missing, stream);
  case ENG_U8: return launch_take<W, uint8_t>(out, x, idx, g, pick, limit, missing, stream);
  default: return (int)cudaErrorInvalidValue;
  }
}

// g.dst (= g.src): the index's own strides.
template <typename J, typename I>
__global__ void first_bad(const J *idx, Dims g, I n, int64_t limit, unsigned long long *first) {
  for (I i = sd::first_index<I>(); i < n; i += sd::grid_step<I>()) {
    const int64_t v = (int64_t)idx[sd::dst_offset(g, i)];
    if (v < 0 || v >= limit) atomicMin(first, (unsigned long long)i);
  }
}

template <typename J>
int launch_first_bad(const void *idx, const Dims &g, int64_t limit, unsigned long long *first,
                     cudaStream_t stream) {
  const int64_t n = sd::numel(g);
  const unsigned blocks = eng_kc::blocks_for(n, THREADS);
  if (sd::fits32(g))
    first_bad<J, uint32_t><<<blocks, THREADS, 0, stream>>>((const J *)idx, g, (uint32_t)n, limit,
                                                            first);
  else
    first_bad<J, int64_t><<<blocks, THREADS, 0, stream>>>((const J *)idx, g, n, limit, first);
  return (int)cudaGetLastError();
}

}  // namespace

extern "C" int eng_kcuda_take(void *out, const void *x, eng_dtype_t dtype, int ndim,
                              const int64_t *shape, const int64_t *x_stride, const void *idx,
                              eng_dtype_t idx_dtype, const int64_t *idx_stride, int64_t pick_stride,
                              int64_t limit, cudaStream_t stream) {
  for (int d = 0; d < ndim; d++)
    if (shape[d] == 0) return 0;
  const Dims g = sd::coalesce(shape, x_stride, idx_stride, ndim);
  const uint64_t missing = missing_bits(dtype);
  switch (eng_dtype_size(dtype)) {
  case 1: return take_by_index<uint8_t>(out, x, idx, idx_dtype, g, pick_stride, limit, missing, stream);
  case 2: return take_by_index<uint16_t>(out, x, idx, idx_dtype, g, pick_stride, limit, missing, stream);
  case 4: return take_by_index<uint32_t>(out, x, idx, idx_dtype, g, pick_stride, limit, missing, stream);
  case 8: return take_by_index<uint64_t>(out, x, idx, idx_dtype, g, pick_stride, limit, missing, stream);
  default: return (int)cudaErrorInvalidValue;
  }
}

extern "C" int eng_kcuda_first_out_of_range(const void *idx, eng_dtype_t idx_dtype, int ndim,
                                            const int64_t *shape, const int64_t *stride,
                                            int64_t limit, unsigned long long *first,
                                            cudaStream_t stream) {
  cudaError_t err = cudaMemsetAsync(first, 0xff, sizeof *first, stream);  // UINT64_MAX: none yet
  if (err != cudaSuccess) return (int)err;
  for (int d = 0; d < ndim; d++)
    if (shape[d] == 0) return 0;
  const Dims g = sd::coalesce(shape, stride, stride, ndim);
  switch (idx_dtype) {
  case ENG_I32: return launch_first_bad<int32_t>(idx, g, limit, first, stream);
  case ENG_I64: return launch_first_bad<int64_t>(idx, g, limit, first, stream);
  case ENG_U8: return launch_first_bad<uint8_t>(idx, g, limit, first, stream);
  default: return (int)cudaErrorInvalidValue;
  }
}
