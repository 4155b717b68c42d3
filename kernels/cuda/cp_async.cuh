// cp.async (sm_80 and later): copies from global into shared memory that hold no registers while
// in flight. cp_async_commit closes a group of them, cp_async_wait waits for all of the thread's.
// And prefetch_l2, global memory into L2.
#pragma once

#include "cuda/mbarrier.cuh"

namespace eng_kc {

// 16 bytes, both addresses 16-byte aligned (cached in L2 only).
__device__ __forceinline__ void cp_async16(void *dst, const void *src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(dst)), "l"(src) : "memory");
}
// 4 bytes, or zeros at dst without a read where !valid (src must still be a global address).
__device__ __forceinline__ void cp_async4(void *dst, const void *src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 4 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_all;" ::: "memory"); }
// A prefetch of p's line into L2: it holds no register either, and a later load waits on L2.
__device__ __forceinline__ void prefetch_l2(const void *p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

}  // namespace eng_kc
