// Shared-memory buffers that the CTAs of a cluster fill for each other with st_async stores
// (cuda/e1_cluster.cuh), counted on the receiver's mbarriers instead of a cluster barrier (whose
// release costs a GPU-scope membar on Hopper). One mbarrier a buffer; thread 0 arms it for the
// exact bytes of one fill; every thread that reads the buffer waits for its fill first, and
// thread 0 then re-arms it for the buffer's next fill. A remote fill may start before the re-arm:
// its bytes count against the phase, which cannot complete before thread 0's arrival.
// Whether a CTA may refill a buffer that another CTA still reads follows from the order of each
// kernel's sends and waits: its users say why theirs is safe.
#pragma once

#include "cuda/e1_cluster.cuh"

namespace eng_kc {
namespace es {

template <int NB> struct AsyncFills {
  uint32_t bar;    // mbarrier 0's shared address; mbarrier b is 8 b bytes further
  uint32_t tx;     // bytes of one fill
  uint32_t phase;  // bit b: the parity of mbarrier b's next phase to complete

  __device__ uint32_t of(int b) const { return bar + 8u * (uint32_t)b; }

  // bars: NB * 8 bytes of shared memory, 8-byte aligned. Arms every buffer's first fill; a
  // cluster barrier must follow before any CTA sends.
  __device__ void init(void *bars, uint32_t bytes) {
    bar = smem_addr(bars), tx = bytes, phase = 0;
    if (threadIdx.x == 0) {
      for (int b = 0; b < NB; b++) mbar_init(of(b), 1);
      fence_mbar_init();
      for (int b = 0; b < NB; b++) mbar_arrive_expect_tx(of(b), tx);
    }
  }

  // Waits for buffer b's fill, then thread 0 re-arms its mbarrier for the next one.
  __device__ void wait(int b) { wait(b, threadIdx.x == 0); }
  // The same where the buffer's waiters need not include thread 0: `arm` marks the one thread
  // that re-arms.
  __device__ void wait(int b, bool arm) {
    mbar_wait(of(b), (phase >> b) & 1u);
    phase ^= 1u << b;
    if (arm) mbar_arrive_expect_tx(of(b), tx);
  }
};

// v at local shared address `at` in CTAs q, q + STEP, .. < CS of the cluster, its 4 bytes
// counted on each one's mbarrier at local shared address `bar` (AsyncFills::of): STEP lanes that
// hold the same value send it together.
template <int CS, int STEP>
__device__ __forceinline__ void put_some_async(float *at, float v, uint32_t bar, int q) {
  const uint32_t a = smem_addr(at);
#pragma unroll
  for (int k = 0; k < CS / STEP; k++)
    st_async(mapa(a, q + k * STEP), __float_as_uint(v), mapa(bar, q + k * STEP));
}
// v in every CTA of the cluster (CS CTAs).
template <int CS> __device__ __forceinline__ void put_all_async(float *at, float v, uint32_t bar) {
  put_some_async<CS, 1>(at, v, bar, 0);
}

}  // namespace es
}  // namespace eng_kc
