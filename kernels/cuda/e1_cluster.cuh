// The machinery of the persistent E-series kernels (e1.cu, e23.cu): a cluster of CTAs shares the
// rows of a weight matrix, each CTA holding its slice in shared memory; a state vector lives in
// every CTA's shared memory and each CTA writes its slice of the new state into all of them
// (distributed shared memory), then the cluster meets at a barrier. Without clusters (CL =
// false) one CTA does every row, reading the matrix from global memory.
#pragma once

#include <cooperative_groups.h>

#include "cuda/cluster_groups.h"
#include "cuda/common.cuh"
#include "cuda/mbarrier.cuh"

namespace eng_kc {
namespace es {

namespace cg = cooperative_groups;

constexpr int kThreads = 256;

// Clusters exist from sm_90 on. Builds for older GPUs still compile the cluster variants, as traps:
// the launchers only pick them where cudaOccupancyMaxActiveClusters says clusters can run.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define ENG_ES_NO_CLUSTERS 1
#endif

// ---- barriers and state exchange ----
template <bool CL> __device__ __forceinline__ void sync_all() {
  if constexpr (CL) {
#ifdef ENG_ES_NO_CLUSTERS
    __trap();
#else
    cg::this_cluster().sync();
#endif
  } else {
    __syncthreads();
  }
}

// Writes v at `local` (a shared-memory address) in every CTA of the cluster.
template <bool CL, typename A> __device__ __forceinline__ void put_all(A *local, A v, int cs) {
  if constexpr (CL) {
#ifdef ENG_ES_NO_CLUSTERS
    (void)local, (void)v, (void)cs;
    __trap();
#else
    cg::cluster_group cl = cg::this_cluster();
    for (int q = 0; q < cs; q++) *cl.map_shared_rank(local, q) = v;
#endif
  } else {
    *local = v;
  }
}

// ---- asynchronous exchange: DSMEM stores that complete on the receiver's mbarrier (sm_90) ----
// Addresses are 32-bit: shared::cta ones from smem_addr (mbarrier.cuh), shared::cluster ones
// from mapa.

// The address of local shared address `a` in CTA `rank` of the cluster.
__device__ __forceinline__ uint32_t mapa(uint32_t a, int rank) {
#ifdef ENG_ES_NO_CLUSTERS
  (void)rank;
  __trap();
  return a;
#else
  uint32_t r;
  asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
  return r;
#endif
}

// fence_mbar_init makes mbar_init's (mbarrier.cuh) initializations visible to the cluster (a
// cluster barrier must follow before remote use).
__device__ __forceinline__ void fence_mbar_init() {
#ifdef ENG_ES_NO_CLUSTERS
  __trap();
#else
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

// Arrives on the mbarrier at `bar` and makes its current phase also wait for `bytes` bytes of
// transactions (st_async's complete_tx).
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
#ifdef ENG_ES_NO_CLUSTERS
  (void)bar, (void)bytes;
  __trap();
#else
  asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;"
               ::"r"(bar), "r"(bytes)
               : "memory");
#endif
}

// Waits until the phase of parity `parity` of the mbarrier at `bar` has completed. The st_async
// stores that complete it land in this CTA's shared memory, which the L1 cache does not hold, and
// the waiters read only those (no other CTA's global-memory writes): a CTA-scope acquire orders
// their reads after the wait. The cluster-scope form costs an L1 invalidation (CCTL.IVALL) after
// every wait: 20% of the E23 backward's stall samples.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
#ifdef ENG_ES_NO_CLUSTERS
  (void)bar, (void)parity;
  __trap();
#else
  uint32_t done = 0;
  while (!done)
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
#endif
}

// Stores v at shared::cluster address `remote`; its 4 bytes complete on the mbarrier at
// shared::cluster address `remote_bar` (in the same CTA as `remote`). No fence, no wait.
__device__ __forceinline__ void st_async(uint32_t remote, uint32_t v, uint32_t remote_bar) {
#ifdef ENG_ES_NO_CLUSTERS
  (void)remote, (void)v, (void)remote_bar;
  __trap();
#else
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];"
               ::"r"(remote), "r"(v), "r"(remote_bar)
               : "memory");
#endif
}

// The CTA's rank in its cluster, the cluster size, and which cluster (batch group) it is in.
template <bool CL> __device__ __forceinline__ void cluster_pos(int *rank, int *cs, int *group) {
  if constexpr (CL) {
#ifdef ENG_ES_NO_CLUSTERS
    *rank = 0, *cs = 1, *group = 0;
    __trap();
#else
    cg::cluster_group cl = cg::this_cluster();
    *rank = (int)cl.block_rank();
    *cs = (int)cl.num_blocks();
    *group = (int)(blockIdx.x / cl.num_blocks());
#endif
  } else {
    *rank = 0;
    *cs = 1;
    *group = (int)blockIdx.x;
  }
}

// ---- dot products of one matrix row with BG state vectors ----
// acc[g] += sum_c row[c * cs] * v[g * d + c], this lane's share (columns lane, lane + 32, ...).
template <typename T, int BG>
__device__ __forceinline__ void dots_scalar(const T *row, int64_t cs, const acc_t<T> *v, int64_t d,
                                            int lane, acc_t<T> *acc) {
  for (int64_t c = lane; c < d; c += 32) {
    const acc_t<T> w = load(row + c * cs);
#pragma unroll
    for (int g = 0; g < BG; g++) acc[g] += w * v[g * d + c];
  }
}

// 16 bytes of T as floats.
__device__ __forceinline__ void unpack(uint4 raw, float *w, const float *) {
  w[0] = __uint_as_float(raw.x), w[1] = __uint_as_float(raw.y);
  w[2] = __uint_as_float(raw.z), w[3] = __uint_as_float(raw.w);
}
__device__ __forceinline__ void unpack(uint4 raw, float *w, const __nv_bfloat16 *) {
  const uint32_t u[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int k = 0; k < 4; k++) {
    const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&u[k]));
    w[2 * k] = f.x, w[2 * k + 1] = f.y;
  }
}
__device__ __forceinline__ void unpack(uint4 raw, float *w, const __half *) {
  const uint32_t u[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int k = 0; k < 4; k++) {
    const float2 f = __half22float2(*reinterpret_cast<const __half2 *>(&u[k]));
    w[2 * k] = f.x, w[2 * k + 1] = f.y;
  }
}

// The same with 16-byte loads: a contiguous, 16-byte aligned row (f32/f16/bf16) and d a multiple
// of VEC = 16 / sizeof(T); lane covers columns [lane * VEC, lane * VEC + VEC) + k * 32 * VEC.
template <typename T, int BG>
__device__ __forceinline__ void dots_vec(const T *row, const float *v, int64_t d, int lane,
                                         float *acc) {
  constexpr int VEC = 16 / sizeof(T);
  for (int64_t c = (int64_t)lane * VEC; c < d; c += 32 * VEC) {
    float w[VEC];
    unpack(*reinterpret_cast<const uint4 *>(row + c), w, row);
#pragma unroll
    for (int g = 0; g < BG; g++) {
      const float4 *vg = reinterpret_cast<const float4 *>(v + g * d + c);
#pragma unroll
      for (int q = 0; q < VEC / 4; q++) {
        const float4 x = vg[q];
        acc[g] += w[4 * q] * x.x + w[4 * q + 1] * x.y + w[4 * q + 2] * x.z + w[4 * q + 3] * x.w;
      }
    }
  }
}

// Warp-sums acc[0..BG) (every lane gets every total) and returns lane g's total for lane g < BG.
template <typename A, int BG> __device__ __forceinline__ A reduce_pick(A *acc, int lane) {
  A mine = 0;
#pragma unroll
  for (int g = 0; g < BG; g++) {
    acc[g] = warp_sum(acc[g]);
    if (lane == g) mine = acc[g];
  }
  return mine;
}

template <typename A> __device__ __forceinline__ A sigmoid(A v) { return (A)1 / ((A)1 + exp(-v)); }

// ---- host: how to launch ----
struct Plan {
  bool cl;     // a cluster holds the matrices on chip
  int cs;      // CTAs per cluster (1 without)
  int bg;      // batch rows per cluster (or CTA)
  int64_t R;   // matrix rows per CTA
  size_t smem; // dynamic shared memory per CTA
  bool vec;    // 16-byte loads of the on-chip rows
};

struct DeviceInfo {
  int sms = 0, smem_optin = 0, smem_sm = 0;  // smem_sm: shared memory an SM holds
};

inline cudaError_t device_info(DeviceInfo *info) {
  int dev;
  cudaError_t e = cudaGetDevice(&dev);
  if (!e) e = cudaDeviceGetAttribute(&info->sms, cudaDevAttrMultiProcessorCount, dev);
  if (!e) e = cudaDeviceGetAttribute(&info->smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  if (!e)
    e = cudaDeviceGetAttribute(&info->smem_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev);
  if (!e) {
    int major = 0;
    e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    if (!e && major < 9) info->smem_optin = 0;  // no clusters before Hopper: plans fall back
  }
  return e;
}

// A cluster launch's configuration for plan pl (cs CTAs a cluster); attr is its one attribute.
inline cudaLaunchConfig_t cluster_config(const Plan &pl, unsigned grid, unsigned threads,
                                         cudaStream_t stream, cudaLaunchAttribute *attr) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = pl.smem;
  cfg.stream = stream;
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = (unsigned)pl.cs;
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

// The kernel attributes plan pl needs: its dynamic shared memory, and clusters past 8 CTAs
// (non-portable: opted into per kernel).
template <typename K> inline cudaError_t allow_plan(K kernel, const Plan &pl) {
  cudaError_t e =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)pl.smem);
  if (!e && pl.cl && pl.cs > 8)
    e = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  return e;
}

// Launches kernel<<<grid, threads, smem, stream>>>(p) with clusters of cs CTAs (cs > 1).
template <typename K, typename P>
inline cudaError_t launch(K kernel, const Plan &pl, unsigned grid, cudaStream_t stream, const P &p,
                          unsigned threads = kThreads) {
  cudaError_t e = allow_plan(kernel, pl);
  if (e) return e;
  if (!pl.cl) {
    kernel<<<grid, threads, pl.smem, stream>>>(p);
    return cudaGetLastError();
  }
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = cluster_config(pl, grid, threads, stream, &attr);
  return cudaLaunchKernelEx(&cfg, kernel, p);
}

// How many clusters of this plan (pl.cs CTAs of `threads` threads and pl.smem bytes) can be
// resident at once (cudaOccupancyMaxActiveClusters); 0 where none can or the query fails. The
// plans ask on every launch (pick_group), so the answers are kept per thread and device.
template <typename K>
inline int resident_clusters(K kernel, const Plan &pl, unsigned threads = kThreads) {
  struct Known {
    const void *kernel;
    size_t smem;
    unsigned threads;
    int cs, dev, n;
  };
  static thread_local Known known[16];
  static thread_local int next = 0;
  int dev = 0;
  if (!kernel || cudaGetDevice(&dev)) {
    cudaGetLastError();
    return 0;
  }
  const void *key = reinterpret_cast<const void *>(kernel);
  for (const Known &k : known)
    if (k.kernel == key && k.smem == pl.smem && k.threads == threads && k.cs == pl.cs &&
        k.dev == dev)
      return k.n;
  int n = 0;
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = cluster_config(pl, (unsigned)pl.cs, threads, 0, &attr);
  if (allow_plan(kernel, pl) || cudaOccupancyMaxActiveClusters(&n, kernel, &cfg)) {
    cudaGetLastError();
    n = 0;
  }
  known[next] = Known{key, pl.smem, threads, pl.cs, dev, n};
  next = (next + 1) % 16;
  return n;
}

// eng_pick_group (cuda/cluster_groups.h) with resident(g) any callable.
template <typename F>
inline int pick_group(int64_t B, int cs, int sms, int most, bool pow2, F resident) {
  auto ask = [](void *ctx, int g) { return (*static_cast<F *>(ctx))(g); };
  return eng_pick_group(B, cs, sms, most, pow2 ? 1 : 0, ask, &resident);
}

}  // namespace es
}  // namespace eng_kc
