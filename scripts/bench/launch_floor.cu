// Where the host time of one tiny op goes, and what a graph of tiny kernels costs per node: the
// raw CUDA launch floors (runtime and driver API, empty and with an op-sized parameter block)
// against the pieces of the engine's path, timed from C without Lua; then 100 dependent tiny
// kernels in one graph, plain and with programmatic dependent launch (PDL) edges.
// Build: nvcc -O2 -arch=sm_90 -Iengine/include scripts/bench/launch_floor.cu -Lbuild-gpu -lengine
//        -lcuda -Xlinker -rpath,$PWD/build-gpu -o build-gpu/launch_floor
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include <cuda.h>
#include <cuda_runtime.h>

#include "eng_cuda.h"
#include "eng_ops.h"

struct Big {
  char bytes[256]; // about what an elementwise launch passes (the geometry plus pointers)
};

__global__ void empty_kernel() {}
__global__ void big_kernel(Big) {}

// One dependent tiny step: x[0] += 1 (a chain, so the GPU cannot overlap the nodes' work).
__global__ void step_kernel(float *x) {
  if (threadIdx.x == 0) x[0] += 1.f;
}

// The same step written for PDL: let the next kernel launch at once, wait for the previous one's
// memory before touching it.
__global__ void step_kernel_pdl(float *x) {
  asm volatile("griddepcontrol.launch_dependents;");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (threadIdx.x == 0) x[0] += 1.f;
}

static double now_us() {
  using namespace std::chrono;
  return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

// Host µs per call: batches of `batch` calls, a device sync between batches (not timed); the
// median over 40 batches.
#define TIME(label, batch, ...)                                                                    \
  do {                                                                                             \
    for (int i_ = 0; i_ < 2000; i_++) { __VA_ARGS__; }                                             \
    cudaDeviceSynchronize();                                                                       \
    std::vector<double> v_;                                                                        \
    for (int r_ = 0; r_ < 40; r_++) {                                                              \
      double t_ = now_us();                                                                        \
      for (int i_ = 0; i_ < (batch); i_++) { __VA_ARGS__; }                                        \
      v_.push_back((now_us() - t_) / (batch));                                                     \
      cudaDeviceSynchronize();                                                                     \
    }                                                                                              \
    std::sort(v_.begin(), v_.end());                                                               \
    printf("%-52s batch %5d: %6.2f us (min %.2f)\n", label, (batch), v_[20], v_[0]);              \
  } while (0)

// GPU µs per node of a graph of 100 dependent step kernels, launched with or without PDL.
static void graph_case(const char *label, bool pdl, cudaStream_t s, float *x) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  for (int i = 0; i < 100; i++) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(1);
    cfg.blockDim = dim3(32);
    cfg.stream = s;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = pdl ? 1 : 0;
    if (pdl) cudaLaunchKernelEx(&cfg, step_kernel_pdl, x);
    else cudaLaunchKernelEx(&cfg, step_kernel, x);
  }
  cudaError_t err = cudaStreamEndCapture(s, &g);
  if (!err) err = cudaGraphInstantiate(&ge, g, 0);
  if (err) {
    printf("%s: %s\n", label, cudaGetErrorString(err));
    return;
  }
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaMemsetAsync(x, 0, 4, s);
  for (int i = 0; i < 5; i++) cudaGraphLaunch(ge, s);
  std::vector<double> v;
  for (int r = 0; r < 20; r++) {
    cudaGraphLaunch(ge, s);
    cudaEventRecord(a, s);
    for (int i = 0; i < 10; i++) cudaGraphLaunch(ge, s);
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    v.push_back(ms * 1000 / 1000); // 10 replays of 100 nodes
  }
  float host = 0;
  cudaMemcpy(&host, x, 4, cudaMemcpyDeviceToHost);
  std::sort(v.begin(), v.end());
  printf("%-52s %6.3f us/node (min %.3f), x = %.0f (expect %d)\n", label, v[10], v[0], host,
         100 * (5 + 20 * 11));
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
}

int main() {
  cudaStream_t s = (cudaStream_t)eng_cuda_current_stream(0);
  CUfunction fe, fb;
  cudaGetFuncBySymbol((cudaFunction_t *)&fe, (const void *)empty_kernel);
  cudaGetFuncBySymbol((cudaFunction_t *)&fb, (const void *)big_kernel);
  Big big = {};
  void *big_args[] = {&big};
  for (int batch : {100, 500, 20000}) {
    TIME("runtime <<<>>>, empty kernel", batch, empty_kernel<<<1, 32, 0, s>>>());
    TIME("driver cuLaunchKernel, empty kernel", batch,
         cuLaunchKernel(fe, 1, 1, 1, 32, 1, 1, 0, (CUstream)s, nullptr, nullptr));
  }
  TIME("runtime <<<>>>, 256-byte parameter", 500, big_kernel<<<1, 32, 0, s>>>(big));
  TIME("driver cuLaunchKernel, 256-byte parameter", 500,
       cuLaunchKernel(fb, 1, 1, 1, 32, 1, 1, 0, (CUstream)s, big_args, nullptr));
  cudaLaunchAttribute pdl;
  pdl.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  pdl.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(1);
  cfg.blockDim = dim3(32);
  cfg.stream = s;
  cfg.attrs = &pdl;
  cfg.numAttrs = 1;
  TIME("cudaLaunchKernelEx with PDL, 256-byte parameter", 500, cudaLaunchKernelEx(&cfg, big_kernel, big));
  CUlaunchAttribute dpdl;
  dpdl.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  dpdl.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig dcfg = {};
  dcfg.gridDimX = dcfg.gridDimY = dcfg.gridDimZ = 1;
  dcfg.blockDimX = 32;
  dcfg.blockDimY = dcfg.blockDimZ = 1;
  dcfg.hStream = (CUstream)s;
  dcfg.attrs = &dpdl;
  dcfg.numAttrs = 1;
  TIME("cuLaunchKernelEx with PDL, 256-byte parameter", 500, cuLaunchKernelEx(&dcfg, fb, big_args, nullptr));
  TIME("cudaGetLastError", 500, (void)cudaGetLastError());
  void *p = nullptr;
  TIME("eng_cuda_malloc + eng_cuda_free (512 B)", 500,
       { eng_cuda_malloc(0, 2, s, &p); eng_cuda_free(0, p); });
  int64_t shape[2] = {1, 1};
  eng_device_t gpu = {ENG_DEV_CUDA, 0};
  eng_tensor_t *x = nullptr, *y = nullptr, *z = nullptr;
  eng_tensor_ones(shape, 2, ENG_BF16, gpu, &x);
  eng_tensor_ones(shape, 2, ENG_BF16, gpu, &y);
  TIME("eng_tensor_empty + release on cuda", 500,
       { eng_tensor_empty(shape, 2, ENG_BF16, gpu, &z); eng_tensor_release(z); });
  TIME("eng_op_binary add [1,1] bf16 (C, no Lua)", 500,
       { eng_op_binary(ENG_BINARY_ADD, x, y, &z); eng_tensor_release(z); });
  eng_cuda_nvtx_enable(0);
  TIME("the same, NVTX off", 500, { eng_op_binary(ENG_BINARY_ADD, x, y, &z); eng_tensor_release(z); });
  eng_cuda_nvtx_enable(1);
  eng_tensor_t *xc = nullptr, *yc = nullptr;
  eng_tensor_ones(shape, 2, ENG_BF16, ENG_CPU_DEVICE, &xc);
  eng_tensor_ones(shape, 2, ENG_BF16, ENG_CPU_DEVICE, &yc);
  TIME("eng_op_binary add on cpu tensors", 500,
       { eng_op_binary(ENG_BINARY_ADD, xc, yc, &z); eng_tensor_release(z); });

  float *buf = nullptr;
  cudaMalloc(&buf, 4);
  graph_case("graph of 100 dependent tiny kernels, plain", false, s, buf);
  graph_case("graph of 100 dependent tiny kernels, PDL", true, s, buf);
  return 0;
}
