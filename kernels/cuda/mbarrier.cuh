// Shared-memory addresses and CTA-scope mbarriers (sm_80 and later): the E-series kernels'
// hand-offs between warps (e88_fwd.cu) and the base of the cluster exchanges (e1_cluster.cuh).
// Addresses are 32-bit shared::cta ones (smem_addr).
#pragma once

#include <cstdint>

namespace eng_kc {

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

// Initializes the mbarrier at `bar` for `count` arrivals a phase (a barrier of the CTA, or
// fence_mbar_init for the cluster, before its first use elsewhere).
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

// One arrival, releasing this thread's earlier writes at CTA scope.
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("{ .reg .b64 st; mbarrier.arrive.shared.b64 st, [%0]; }" ::"r"(bar) : "memory");
}

// Waits for the completion of the phase with parity `parity`, acquiring at CTA scope. On sm_90
// try_wait suspends the thread until then (or a time limit) instead of spinning: a spinning warp
// takes issue slots from the other warps of its scheduler.
__device__ __forceinline__ void mbar_wait_cta(uint32_t bar, uint32_t parity) {
  uint32_t done;
  do {
#if __CUDA_ARCH__ >= 900
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
#else
    asm volatile("{ .reg .pred p; mbarrier.test_wait.parity.shared.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
    if (!done) __nanosleep(256);
#endif
  } while (!done);
}

}  // namespace eng_kc
