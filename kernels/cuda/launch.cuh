// Launches with programmatic dependent launch (PDL, sm_90+). A kernel launched through
// launch_pdl may start while the kernel before it in the stream is still running: its blocks get
// resident and wait in pdl_enter() until that kernel has finished and its writes are visible.
// What this hides is the launch latency between two dependent kernels (in a graph, ~0.92 ->
// ~0.74 µs per tiny node on an H100: scripts/bench/launch_floor.cu). Rules:
//  - a kernel launched through launch_pdl calls pdl_enter() before it touches global memory;
//  - pdl_enter() also lets the *next* PDL launch start early, which is safe because that kernel
//    waits in its own pdl_enter() for this one to complete.
// Launched any other way (or before sm_90), pdl_enter() costs nothing and waits for nothing.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace eng_kc {

__device__ __forceinline__ void pdl_enter() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Whether the current device takes PDL (compute capability 9.0 or later), asked once per device.
inline bool pdl_supported() {
  constexpr int kMaxDevices = 64;
  static signed char known[kMaxDevices]; // 0 unknown, 1 yes, -1 no
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices) return false;
  signed char k = __atomic_load_n(&known[dev], __ATOMIC_RELAXED);
  if (!k) {
    int major = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    k = major >= 9 ? 1 : -1;
    __atomic_store_n(&known[dev], k, __ATOMIC_RELAXED);
  }
  return k > 0;
}

// kernel<<<grid, block, smem, stream>>>(args...) with the PDL attribute where the device has it.
template <typename... KArgs, typename... Args>
cudaError_t launch_pdl(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem,
                       cudaStream_t stream, Args &&...args) {
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = pdl_supported() ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

} // namespace eng_kc
