// Strided copy with dtype conversion: a memcpy for dense same-dtype copies, 8 elements per thread
// with vector loads for dense conversions, and an offset-computing kernel for everything strided.
#include "cuda/common.cuh"
#include "cuda/convert.cuh"
#include "cuda/copy.h"
#include "cuda/strided.cuh"

namespace {

using namespace eng_kc;
using namespace eng_kc::cvt;
using eng_kc::strided::Dims;

// At most 256 so that the grid (capped by blocks_for) stays under 2^28 threads: strided::fits32.
constexpr int THREADS = 256;

// Eight elements, loaded or stored as one or more 16-byte (or smaller) vectors.
template <typename T> struct alignas(8 * sizeof(T) < 16 ? 8 * sizeof(T) : 16) Pack8 {
  T v[8];
};

template <typename T> bool pack_aligned(const void *p) {
  return (uintptr_t)p % alignof(Pack8<T>) == 0;
}

// Dense conversion: packs of 8 for the first nvec * 8 elements, then one by one.
template <int D, int S>
__global__ void convert_dense(st_t<D> *dst, const st_t<S> *src, int64_t n, int64_t nvec) {
  const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t v = first; v < nvec; v += step) {
    const Pack8<st_t<S>> in = reinterpret_cast<const Pack8<st_t<S>> *>(src)[v];
    Pack8<st_t<D>> out;
#pragma unroll
    for (int k = 0; k < 8; k++) out.v[k] = convert<D, S>::run(in.v[k]);
    reinterpret_cast<Pack8<st_t<D>> *>(dst)[v] = out;
  }
  for (int64_t i = nvec * 8 + first; i < n; i += step) dst[i] = convert<D, S>::run(src[i]);
}

template <int D, int S, typename I>
__global__ void convert_strided(st_t<D> *dst, const st_t<S> *src, Dims g, I n) {
  for (I i = strided::first_index<I>(); i < n; i += strided::grid_step<I>()) {
    I od, os;
    strided::offsets(g, i, od, os);
    dst[od] = convert<D, S>::run(src[os]);
  }
}

// Same dtype, strided: moves the bits (W is an unsigned word of the element's size).
template <typename W, typename I> __global__ void move_strided(W *dst, const W *src, Dims g, I n) {
  for (I i = strided::first_index<I>(); i < n; i += strided::grid_step<I>()) {
    I od, os;
    strided::offsets(g, i, od, os);
    dst[od] = src[os];
  }
}

template <int D, int S> int launch_convert(void *dst, const void *src, const Dims &g, cudaStream_t stream) {
  if constexpr (D == S) {
    return (int)cudaErrorInvalidValue; // same-dtype copies move bits (launch_move)
  } else {
    const int64_t n = strided::numel(g);
    st_t<D> *d = static_cast<st_t<D> *>(dst);
    const st_t<S> *s = static_cast<const st_t<S> *>(src);
    if (strided::dense(g)) {
      const int64_t nvec = pack_aligned<st_t<D>>(dst) && pack_aligned<st_t<S>>(src) ? n / 8 : 0;
      convert_dense<D, S><<<blocks_for(nvec > 0 ? nvec : n, THREADS), THREADS, 0, stream>>>(d, s, n, nvec);
    } else if (strided::fits32(g)) {
      convert_strided<D, S, uint32_t><<<blocks_for(n, THREADS), THREADS, 0, stream>>>(d, s, g, (uint32_t)n);
    } else {
      convert_strided<D, S, int64_t><<<blocks_for(n, THREADS), THREADS, 0, stream>>>(d, s, g, n);
    }
    return (int)cudaGetLastError();
  }
}

template <typename W> int launch_move(void *dst, const void *src, const Dims &g, cudaStream_t stream) {
  const int64_t n = strided::numel(g);
  W *d = static_cast<W *>(dst);
  const W *s = static_cast<const W *>(src);
  if (strided::fits32(g))
    move_strided<W, uint32_t><<<blocks_for(n, THREADS), THREADS, 0, stream>>>(d, s, g, (uint32_t)n);
  else
    move_strided<W, int64_t><<<blocks_for(n, THREADS), THREADS, 0, stream>>>(d, s, g, n);
  return (int)cudaGetLastError();
}

}  // namespace

extern "C" int eng_kcuda_copy(void *dst, eng_dtype_t dst_dt, const int64_t *dst_stride, const void *src,
                              eng_dtype_t src_dt, const int64_t *src_stride, const int64_t *shape,
                              int ndim, cudaStream_t stream) {
  for (int d = 0; d < ndim; d++)
    if (shape[d] == 0) return 0;
  const Dims g = strided::coalesce(shape, dst_stride, src_stride, ndim);
  if (dst_dt == src_dt) {
    const size_t size = dtype_bytes(dst_dt);
    if (strided::dense(g))
      return (int)cudaMemcpyAsync(dst, src, (size_t)g.shape[0] * size, cudaMemcpyDeviceToDevice, stream);
    switch (size) {
    case 1: return launch_move<uint8_t>(dst, src, g, stream);
    case 2: return launch_move<uint16_t>(dst, src, g, stream);
    case 4: return launch_move<uint32_t>(dst, src, g, stream);
    default: return launch_move<uint64_t>(dst, src, g, stream);
    }
  }
  int err = (int)cudaErrorInvalidValue;
  ENG_KC_DTYPE_CASES(D, dst_dt, ENG_KC_DTYPE_CASES(S, src_dt, err = launch_convert<D, S>(dst, src, g, stream)));
  return err;
}
