// Microbenchmark: a CTA's per-step product of the E23 tensor-core forward, W_slice [64 x 512]
// times the state [512 x 8 batch columns] (f16 in, f32 out), with the A fragments (a) held in
// registers for the whole sequence, as tc::Step does, (b) loaded from shared memory by ldmatrix
// every step (the cost of moving a weight slice off the registers), or (c) not in registers at
// all: wgmma (sm_90a) reads A and B from shared memory through descriptors, both stored as 8 x 8
// core matrices (16-byte rows, 128 bytes each, no swizzle), each of the 2 warpgroups taking 4
// k-slices of 64 into 4 accumulators (a slice each: the register-tape kernels scale each
// source CTA's part of the state apart). 8 warps split K (4 k-steps of 16 each, all 4 m-tiles),
// partials meet in shared memory, 320 threads finish 64 units x 5 columns and write the CTA's
// units of the next state (the chain). Checked against a CPU reference; prints each variant's
// time a step. With docs/PERF.md's sessions 27 and 32: what a register-resident tape pays for
// the weight slice it moves to shared memory, and what wgmma would take back.
// Build and run on the GPU machine (wgmma needs the sm_90a target): nvcc -O3
//   -gencode arch=compute_90a,code=sm_90a -o /tmp/e23_product_ldmatrix
//   scripts/bench/e23_product_ldmatrix.cu && /tmp/e23_product_ldmatrix
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "microbench.cuh"
constexpr int M = 64, K = 512, LDW = K + 8, NB = 8, BGc = 5, T = 512;

__device__ __forceinline__ unsigned sa(const void *p) {
  return (unsigned)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void ldm4(unsigned (&r)[4], const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(sa(p)));
}
__device__ __forceinline__ void ldm2(unsigned (&r)[2], const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(sa(p)));
}
__device__ __forceinline__ void mma(float (&c)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// wgmma's canonical K-major layout without swizzle (PTX ISA, "matrix descriptor"): 8 x 8 core
// matrices of 16-bit values, a core matrix's 8 rows 16 bytes apart (128 contiguous bytes); the
// descriptor's LBO is the stride between core matrices along K, its SBO the stride between
// 8-row groups along M (or N). A [M][K]: core (m / 8, k / 8) at (m / 8) (K / 8) + k / 8; the state
// [NB][K] (N = 8: one row group): core k / 8 at k / 8. Offsets in 16-bit elements.
__host__ __device__ constexpr int a_core(int m, int k) {
  return ((m / 8) * (K / 8) + k / 8) * 64 + (m % 8) * 8 + k % 8;
}
__host__ __device__ constexpr int b_core(int n, int k) { return (k / 8) * 64 + n * 8 + k % 8; }
// The 128-byte swizzle instead: rows of 64 values (128 bytes) in atoms of 8 rows (1 KB, 1 KB
// aligned), the 16-byte chunk c of row r stored at chunk c ^ (r % 8); the atoms along K apart by
// `rows` rows. A [M][K] and the state [NB][K] alike (rows M or NB).
__host__ __device__ constexpr int sw128(int r, int k, int rows) {
  return (k / 64) * rows * 64 + r * 64 + (((k % 64) / 8) ^ (r % 8)) * 8 + k % 8;
}
__device__ __forceinline__ unsigned long long desc(const void *p, unsigned lbo, unsigned sbo,
                                                   unsigned long long swizzle = 0) {
  using U = unsigned long long;
  return (U)((sa(p) >> 4) & 0x3fff) | (U)((lbo >> 4) & 0x3fff) << 16 |
         (U)((sbo >> 4) & 0x3fff) << 32 | swizzle << 62;  // base offset 0
}
// D (+)= A B for a warpgroup: m64n8k16, f16 in, f32 accumulators (4 a thread: rows 16 w + lane / 4
// and + 8 of the warpgroup's warp w, columns 2 (lane % 4) + {0, 1}, as mma.m16n8's).
__device__ __forceinline__ void wgmma(float (&d)[4], unsigned long long a, unsigned long long b,
                                      int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;"
      "\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "l"(a), "l"(b), "r"(accumulate));
}

// V: 0 A in registers, 1 A by ldmatrix, 2 A and B by wgmma from shared memory (core matrices),
// 3 the same with the 128-byte swizzle.
template <int V>
__global__ void __launch_bounds__(320, 1)
    prod(const __half *W, const __half *X0, float *out, long long *cyc) {
  constexpr bool REG = V == 0;
  static_assert(M * LDW * 2 % 1024 == 0, "Xs on the swizzle's 1 KB atoms as Ws");
  extern __shared__ __align__(1024) unsigned char smem[];
  __half *Ws = reinterpret_cast<__half *>(smem), *Xs = Ws + M * LDW;
  float *red = reinterpret_cast<float *>(Xs + NB * LDW);  // [8 warps][M][NB]
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  auto xat = [&](int n, int k) {  // the state's element (n, k) in Xs
    return V == 3 ? sw128(n, k, NB) : V == 2 ? b_core(n, k) : n * LDW + k;
  };
  auto wat = [&](int m, int k) {  // W's element (m, k) in Ws
    return V == 3 ? sw128(m, k, M) : V == 2 ? a_core(m, k) : m * LDW + k;
  };
  for (int k = tid; k < M * K; k += blockDim.x) Ws[wat(k / K, k % K)] = W[k];
  for (int k = tid; k < NB * K; k += blockDim.x) Xs[xat(k / K, k % K)] = X0[k];
  if (V >= 2) asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // for wgmma's reads
  __syncthreads();
  unsigned afr[4][4][4];    // [m-tile][k-step][4] (REG)
  const int kb = warp * 4;  // the warp's k-steps (warps 0..7)
  if (REG && warp < 8)
#pragma unroll
    for (int mt = 0; mt < 4; mt++)
#pragma unroll
      for (int ks = 0; ks < 4; ks++)
        ldm4(afr[mt][ks], Ws + (mt * 16 + lane % 16) * LDW + (kb + ks) * 16 + (lane / 16) * 8);
  __syncthreads();
  long long c0 = clock64();
  for (int t = 0; t < T; t++) {
    if (V >= 2 && warp < 8) {  // warpgroup g: k-slices 4 g .. 4 g + 3, an accumulator each
      const int g = warp / 4;
      float acc[4][4];
      asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
      for (int q = 0; q < 4; q++)
#pragma unroll
        for (int ks = 0; ks < 4; ks++) {
          const int k0 = ((4 * g + q) * 4 + ks) * 16;
          if (V == 2)
            wgmma(acc[q], desc(Ws + a_core(0, k0), 128, (K / 8) * 128),
                  desc(Xs + b_core(0, k0), 128, 1024), ks);
          else  // the k-step's 32 bytes into its atom's rows (the swizzle applies to the address)
            wgmma(acc[q], desc(Ws + sw128(0, k0, M), 16, 1024, 1),
                  desc(Xs + sw128(0, k0, NB), 16, 1024, 1), ks);
        }
      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
      asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#pragma unroll
      for (int q = 0; q < 4; q++) {
        const int r0 = (warp % 4) * 16 + lane / 4, c = 2 * (lane % 4);
        float *rw = red + (4 * g + q) * M * NB;
        rw[r0 * NB + c] = acc[q][0], rw[r0 * NB + c + 1] = acc[q][1];
        rw[(r0 + 8) * NB + c] = acc[q][2], rw[(r0 + 8) * NB + c + 1] = acc[q][3];
      }
    } else if (V < 2 && warp < 8) {
      float acc[4][4] = {};
#pragma unroll
      for (int ks = 0; ks < 4; ks++) {
        unsigned b[2];
        ldm2(b, Xs + (lane % 8) * LDW + (kb + ks) * 16 + ((lane / 8) % 2) * 8);
#pragma unroll
        for (int mt = 0; mt < 4; mt++) {
          if (REG) {
            mma(acc[mt], afr[mt][ks], b);
          } else {
            unsigned a[4];
            ldm4(a, Ws + (mt * 16 + lane % 16) * LDW + (kb + ks) * 16 + (lane / 16) * 8);
            mma(acc[mt], a, b);
          }
        }
      }
#pragma unroll
      for (int mt = 0; mt < 4; mt++) {
        const int r0 = mt * 16 + lane / 4, c = 2 * (lane % 4);
        float *rw = red + warp * M * NB;
        rw[r0 * NB + c] = acc[mt][0], rw[r0 * NB + c + 1] = acc[mt][1];
        rw[(r0 + 8) * NB + c] = acc[mt][2], rw[(r0 + 8) * NB + c + 1] = acc[mt][3];
      }
    }
    __syncthreads();
    {  // 320 threads: unit m, column n < 5
      const int m = tid % M, n = tid / M;
      float s = 0.f;
#pragma unroll
      for (int w = 0; w < 8; w++) s += red[w * M * NB + m * NB + n];
      Xs[xat(n, m)] = __float2half(tanhf(0.05f * s + 0.5f * __half2float(Xs[xat(n, m)])));
      if (V >= 2) asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    __syncthreads();
  }
  long long c1 = clock64();
  if (tid == 0) cyc[blockIdx.x] = c1 - c0;
  {
    const int m = tid % M, n = tid / M;
    out[blockIdx.x * BGc * M + n * M + m] = __half2float(Xs[xat(n, m)]);
  }
}

int main() {
  const int ctas = 104;
  std::vector<__half> W(M * K), X(NB * K);
  srand(2);
  for (auto &x : W) x = __float2half((rand() / (float)RAND_MAX - 0.5f));
  for (int k = 0; k < NB * K; k++)
    X[k] = __float2half(k / K < BGc ? (rand() / (float)RAND_MAX - 0.5f) : 0.f);
  // CPU reference (f16 state rounding like the kernel)
  std::vector<float> Wf(M * K), Xf(NB * K);
  for (int k = 0; k < M * K; k++) Wf[k] = __half2float(W[k]);
  for (int k = 0; k < NB * K; k++) Xf[k] = __half2float(X[k]);
  for (int t = 0; t < T; t++) {
    std::vector<float> nx(Xf);
    for (int n = 0; n < BGc; n++)
      for (int m = 0; m < M; m++) {
        double s = 0;
        for (int k = 0; k < K; k++) s += (double)Wf[m * K + k] * Xf[n * K + k];
        nx[n * K + m] = __half2float(__float2half(tanhf(0.05f * (float)s + 0.5f * Xf[n * K + m])));
      }
    Xf = nx;
  }
  __half *dW, *dX;
  float *dout;
  long long *dc;
  CK(cudaMalloc(&dW, W.size() * 2));
  CK(cudaMalloc(&dX, X.size() * 2));
  CK(cudaMalloc(&dout, ctas * BGc * M * 4));
  CK(cudaMalloc(&dc, ctas * 8));
  CK(cudaMemcpy(dW, W.data(), W.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dX, X.data(), X.size() * 2, cudaMemcpyHostToDevice));
  const size_t sm = (M * LDW + NB * LDW) * 2 + 8 * M * NB * 4;
  void (*const kernels[])(const __half *, const __half *, float *, long long *) = {
      prod<0>, prod<1>, prod<2>, prod<3>};
  for (auto k : kernels)
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm));
  std::vector<float> out(ctas * BGc * M);
  for (int v = 0; v < 4; v++)
    for (int rep = 0; rep < 3; rep++) {
      const float ms = time_ms([&] { kernels[v]<<<ctas, 320, sm>>>(dW, dX, dout, dc); });
      std::vector<long long> c(ctas);
      CK(cudaMemcpy(c.data(), dc, ctas * 8, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost));
      double err = 0;
      for (int n = 0; n < BGc; n++)
        for (int m = 0; m < M; m++) err = fmax(err, fabs(out[n * M + m] - Xf[n * K + m]));
      if (!(err < 1e-3)) {
        printf("results differ from the CPU reference by %.3e\n", err);
        return 1;
      }
      long long mx = 0;
      for (auto x : c) mx = x > mx ? x : mx;
      printf("%s: %.3f us a step, %lld cycles a step (slowest CTA), max |x - ref| %.2e\n",
             v == 0   ? "A in registers"
             : v == 1 ? "A by ldmatrix "
             : v == 2 ? "A, B by wgmma "
                      : "wgmma, 128B sw",
             ms * 1e3 / T, mx / T, err);
    }
  return 0;
}
