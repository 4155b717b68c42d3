// Fill: a memset when every byte of the value is the same (zeros above all), 16-byte stores of the
// repeated value for other dense fills, an offset-computing kernel for strided ones.
#include <string.h>

#include "cuda/common.cuh"
#include "cuda/convert.cuh"
#include "cuda/fill.h"
#include "cuda/strided.cuh"

namespace {

using namespace eng_kc;
using eng_kc::strided::Dims;

// At most 256 so that the grid (capped by blocks_for) stays under 2^28 threads: strided::fits32.
constexpr int THREADS = 256;

// The first nvec 16-byte chunks get `pattern` (the value repeated), the remaining elements `value`.
template <typename W> __global__ void fill_dense(W *dst, int64_t n, int64_t nvec, uint4 pattern, W value) {
  const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t v = first; v < nvec; v += step) reinterpret_cast<uint4 *>(dst)[v] = pattern;
  for (int64_t i = nvec * (int64_t)(16 / sizeof(W)) + first; i < n; i += step) dst[i] = value;
}

template <typename W, typename I> __global__ void fill_strided(W *dst, Dims g, I n, W value) {
  for (I i = strided::first_index<I>(); i < n; i += strided::grid_step<I>())
    dst[strided::dst_offset(g, i)] = value;
}

template <typename W> int launch_fill(void *dst, const Dims &g, const void *value, cudaStream_t stream) {
  const int64_t n = strided::numel(g);
  W v;
  memcpy(&v, value, sizeof v);
  W *d = static_cast<W *>(dst);
  if (strided::dense(g)) {
    const unsigned char *b = static_cast<const unsigned char *>(value);
    bool one_byte = true;
    for (size_t k = 1; k < sizeof(W); k++) one_byte = one_byte && b[k] == b[0];
    if (one_byte) return (int)cudaMemsetAsync(dst, b[0], (size_t)n * sizeof(W), stream);
    uint4 pattern;
    for (size_t k = 0; k < 16 / sizeof(W); k++) memcpy(reinterpret_cast<char *>(&pattern) + k * sizeof(W), &v, sizeof v);
    const int64_t nvec = (uintptr_t)dst % 16 == 0 ? n / (int64_t)(16 / sizeof(W)) : 0;
    fill_dense<W><<<blocks_for(nvec > 0 ? nvec : n, THREADS), THREADS, 0, stream>>>(d, n, nvec, pattern, v);
  } else if (strided::fits32(g)) {
    fill_strided<W, uint32_t><<<blocks_for(n, THREADS), THREADS, 0, stream>>>(d, g, (uint32_t)n, v);
  } else {
    fill_strided<W, int64_t><<<blocks_for(n, THREADS), THREADS, 0, stream>>>(d, g, n, v);
  }
  return (int)cudaGetLastError();
}

}  // namespace

extern "C" int eng_kcuda_fill(void *dst, eng_dtype_t dt, const int64_t *stride, const int64_t *shape,
                              int ndim, const void *value, cudaStream_t stream) {
  for (int d = 0; d < ndim; d++)
    if (shape[d] == 0) return 0;
  const Dims g = strided::coalesce(shape, stride, stride, ndim);
  switch (cvt::dtype_bytes(dt)) {
  case 1: return launch_fill<uint8_t>(dst, g, value, stream);
  case 2: return launch_fill<uint16_t>(dst, g, value, stream);
  case 4: return launch_fill<uint32_t>(dst, g, value, stream);
  default: return launch_fill<uint64_t>(dst, g, value, stream);
  }
}
