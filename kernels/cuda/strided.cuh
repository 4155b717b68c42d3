// Strided addressing for the data-movement kernels (copy, fill): the dims of one or two operands
// that share a shape, reduced to the fewest dims, and per-element offsets in 32-bit arithmetic
// when everything fits (64-bit division is several times slower on the GPU).
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include "eng_base.h"

namespace eng_kc {
namespace strided {

// Two operands (dst, src) walked over one shape; strides in elements, src strides may be 0.
struct Dims {
  int ndim;
  int64_t shape[ENG_MAX_DIMS];
  int64_t dst[ENG_MAX_DIMS];
  int64_t src[ENG_MAX_DIMS];
};

// Drops size-1 dims and merges a dim into the one outside it when both operands step through the
// pair as one dim. A tensor of one element comes out as one dim of size 1.
inline Dims coalesce(const int64_t *shape, const int64_t *dst_stride, const int64_t *src_stride,
                     int ndim) {
  Dims g{};
  for (int k = 0; k < ndim; k++) {
    if (shape[k] == 1) continue;
    int m = g.ndim - 1;
    if (m >= 0 && g.dst[m] == dst_stride[k] * shape[k] && g.src[m] == src_stride[k] * shape[k]) {
      g.shape[m] *= shape[k];
      g.dst[m] = dst_stride[k];
      g.src[m] = src_stride[k];
    } else {
      g.shape[g.ndim] = shape[k];
      g.dst[g.ndim] = dst_stride[k];
      g.src[g.ndim] = src_stride[k];
      g.ndim++;
    }
  }
  if (g.ndim == 0) g = Dims{1, {1}, {1}, {1}};
  return g;
}

inline int64_t numel(const Dims &g) {
  int64_t n = 1;
  for (int d = 0; d < g.ndim; d++) n *= g.shape[d];
  return n;
}

inline bool dense(const Dims &g) { return g.ndim == 1 && g.dst[0] == 1 && g.src[0] == 1; }

// Whether element indices and both operands' offsets stay below 2^31, so that a grid-stride loop
// in uint32_t (at most 2^28 threads) cannot wrap.
inline bool fits32(const Dims &g) {
  int64_t n = numel(g), dspan = 0, sspan = 0;
  for (int d = 0; d < g.ndim; d++) {
    dspan += (g.shape[d] - 1) * g.dst[d];
    sspan += (g.shape[d] - 1) * g.src[d];
  }
  return n < (1ll << 31) && dspan < (1ll << 31) && sspan < (1ll << 31);
}

// Offsets of linear (row-major) element i in dst and src. i < numel, so the outermost dim needs
// no remainder.
template <typename I>
__device__ __forceinline__ void offsets(const Dims &g, I i, I &od, I &os) {
  I d_off = 0, s_off = 0;
  for (int d = g.ndim - 1; d > 0; d--) {
    I s = (I)g.shape[d], q = i / s, r = i - q * s;
    d_off += r * (I)g.dst[d];
    s_off += r * (I)g.src[d];
    i = q;
  }
  od = d_off + i * (I)g.dst[0];
  os = s_off + i * (I)g.src[0];
}

template <typename I> __device__ __forceinline__ I dst_offset(const Dims &g, I i) {
  I off = 0;
  for (int d = g.ndim - 1; d > 0; d--) {
    I s = (I)g.shape[d], q = i / s;
    off += (i - q * s) * (I)g.dst[d];
    i = q;
  }
  return off + i * (I)g.dst[0];
}

// The first element index of this thread and the grid-stride step, in I.
template <typename I> __device__ __forceinline__ I first_index() {
  return (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x;
}
template <typename I> __device__ __forceinline__ I grid_step() { return (I)gridDim.x * (I)blockDim.x; }

}  // namespace strided
}  // namespace eng_kc
