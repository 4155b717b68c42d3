// Microbenchmark: one CTA's per-step tape work of the E23 tensor-core forward at B = 64 N = 64
// (bg = 5 batch rows, N = 64 slots, R = 64 units a CTA), without the cluster exchanges, softmax
// and products: (1) the scores H h, (2) the write H <- (1 - a) H + a w^T and the read u = sum_i
// r_i H[i], (3) the finishing threads' sum of the read. Two designs:
//   smem: the tape in shared memory [5][64][68], 256 threads: scores a lane a (row, slot) over
//         64 units (two rounds), the write by quads of units x 3 slot parts, up4 sums (as now);
//   reg:  the tape in registers, 320 threads (64 a row), thread = 8 slots x 8 units; the scores
//         reduce-scattered over the 8 unit groups (7 shuffles), the read over 4 slot groups in
//         the warp (6 shuffles) and the row's two warps through shared memory.
// a and r are a cheap function of the step's scores (a dependency like the softmax's), w = h/2,
// h = tanh(0.5 u + 0.3 h). Checked against a CPU reference of the same math. Prints each design's
// time a step, and CTA 0's cycles a phase (thread 0's clock64, barriers included).
// The basis of the register-resident E23 forward that docs/PERF.md (session 27) plans.
// Build and run on the GPU machine (from the repository root): nvcc -O3 -arch=sm_90 -std=c++17
//   -Ikernels -Iengine/include -o /tmp/e23_tape_registers scripts/bench/e23_tape_registers.cu
//   && /tmp/e23_tape_registers
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda/common.cuh"
#include "microbench.cuh"

constexpr int BG = 5, N = 64, R = 64, LT = R + 4, T = 512;

__device__ __forceinline__ float fa(float x) { return 0.05f * fabsf(x) / (1.f + fabsf(x)); }
__device__ __forceinline__ float fr(float x) { return 0.02f / (1.f + x * x); }

// Thread 0's clock64 over the step loop and over each of its 4 phases (summed over the steps):
// cyc[CTA] the loop, cyc[grid + 4 CTA + k] phase k.
struct PhaseClock {
  long long start, at, ph[4] = {};
  __device__ PhaseClock() { start = at = clock64(); }
  __device__ void mark(int k) {
    if (threadIdx.x != 0) return;
    const long long c = clock64();
    ph[k] += c - at;
    at = c;
  }
  __device__ void store(long long *cyc) const {
    if (threadIdx.x != 0) return;
    cyc[blockIdx.x] = clock64() - start;
    for (int k = 0; k < 4; k++) cyc[gridDim.x + 4 * blockIdx.x + k] = ph[k];
  }
};


// ---- registers ----
__global__ void __launch_bounds__(320, 1)
    reg_kernel(const float *tape0, const float *h0, float *hout, long long *cyc) {
  __shared__ __align__(16) float hl[BG][R], part[BG][N], up[2][BG][R], abuf[BG][N], rbuf[BG][N];
  const int tid = threadIdx.x, row = tid / 64, t64 = tid % 64, wh = t64 / 32, lane = t64 % 32,
            sgl = lane / 8, ug = lane % 8, s0 = 32 * wh + 8 * sgl, u0 = 8 * ug;
  const float *tp = tape0 + (size_t)blockIdx.x * BG * N * R;
  float H[8][8];
#pragma unroll
  for (int j = 0; j < 8; j++)
#pragma unroll
    for (int u = 0; u < 8; u++) H[j][u] = tp[(row * N + s0 + j) * R + u0 + u];
  hl[row][t64] = h0[(size_t)blockIdx.x * BG * R + row * R + t64];
  __syncthreads();
  PhaseClock clk;
  for (int t = 0; t < T; t++) {
    float h[8], v[8];
    *reinterpret_cast<float4 *>(h) = *reinterpret_cast<const float4 *>(&hl[row][u0]);
    *reinterpret_cast<float4 *>(h + 4) = *reinterpret_cast<const float4 *>(&hl[row][u0 + 4]);
    eng_kc::block_dots(H, h, v);
    // reduce-scatter over the 8 unit groups: lane ug ends with slot s0 + ug
    eng_kc::fold<4>(v, ug & 4, 4);
    eng_kc::fold<2>(v, ug & 2, 2);
    eng_kc::fold<1>(v, ug & 1, 1);
    part[row][s0 + ug] = v[0];
    __syncthreads();
    clk.mark(0);
    abuf[row][t64] = fa(part[row][t64]),
    rbuf[row][t64] = fr(part[row][t64]);  // the softmax's stand-in
    __syncthreads();
    clk.mark(1);
    float a[8], r[8], w[8];
    *reinterpret_cast<float4 *>(a) = *reinterpret_cast<const float4 *>(&abuf[row][s0]);
    *reinterpret_cast<float4 *>(a + 4) = *reinterpret_cast<const float4 *>(&abuf[row][s0 + 4]);
    *reinterpret_cast<float4 *>(r) = *reinterpret_cast<const float4 *>(&rbuf[row][s0]);
    *reinterpret_cast<float4 *>(r + 4) = *reinterpret_cast<const float4 *>(&rbuf[row][s0 + 4]);
#pragma unroll
    for (int u = 0; u < 8; u++) w[u] = 0.5f * h[u], v[u] = 0.f;
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
      for (int u = 0; u < 8; u++) {
        H[j][u] = (1.f - a[j]) * H[j][u] + a[j] * w[u];
        v[u] += r[j] * H[j][u];
      }
    // reduce-scatter over the 4 slot groups of the warp: lane ends with units
    // u0 + 4 b1 + 2 b0 + {0, 1} (b1 b0: sgl's bits)
    eng_kc::fold<4>(v, sgl & 2, 16);
    eng_kc::fold<2>(v, sgl & 1, 8);
    const int uo = u0 + 4 * ((sgl >> 1) & 1) + 2 * (sgl & 1);
    *reinterpret_cast<float2 *>(&up[wh][row][uo]) = make_float2(v[0], v[1]);
    __syncthreads();
    clk.mark(2);
    const float uu = up[0][row][t64] + up[1][row][t64];
    hl[row][t64] = tanhf(0.5f * uu + 0.3f * hl[row][t64]);
    __syncthreads();
    clk.mark(3);
  }
  clk.store(cyc);
  hout[(size_t)blockIdx.x * BG * R + row * R + t64] = hl[row][t64];
}

// ---- shared memory (the current design's loops) ----
__global__ void __launch_bounds__(256, 1)
    smem_kernel(const float *tape0, const float *h0, float *hout, long long *cyc) {
  extern __shared__ __align__(16) float sm[];
  float *tape = sm, *hl = tape + BG * N * LT, *part = hl + BG * R,
        *up4 = part + BG * N;  // up4 [3][BG*R]
  float *abuf = up4 + 3 * BG * R, *rbuf = abuf + BG * N;
  const int tid = threadIdx.x;
  const float *tp = tape0 + (size_t)blockIdx.x * BG * N * R;
  for (int k = tid; k < BG * N * R; k += 256) tape[(k / R) * LT + k % R] = tp[k];
  for (int k = tid; k < BG * R; k += 256) hl[k] = h0[(size_t)blockIdx.x * BG * R + k];
  // quads: 80 quads x 3 parts = 240 threads
  const int QP = 3, SL = BG * R, qp = tid / (SL / 4), qn = tid % (SL / 4) / (R / 4),
            qu = 4 * (tid % (R / 4)), qi0 = qp * N / QP, qi1 = (qp + 1) * N / QP;
  const bool qact = qp < QP;
  __syncthreads();
  PhaseClock clk;
  for (int t = 0; t < T; t++) {
    // scores: a lane a (row, slot)
    for (int k = tid; k < BG * N; k += 256) {
      const int g = k / N;
      const float4 *x = reinterpret_cast<const float4 *>(tape + k * LT),
                   *y = reinterpret_cast<const float4 *>(hl + g * R);
      float s = 0.f;
#pragma unroll 4
      for (int q = 0; q < R / 4; q++) {
        const float4 a = x[q], b = y[q];
        s += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
      }
      part[k] = s;
    }
    __syncthreads();
    clk.mark(0);
    for (int k = tid; k < BG * N; k += 256)
      abuf[k] = fa(part[k]), rbuf[k] = fr(part[k]);  // the softmax's stand-in
    __syncthreads();
    clk.mark(1);
    if (qact) {
      const float4 hv = *reinterpret_cast<const float4 *>(hl + qn * R + qu);
      const float w[4] = {0.5f * hv.x, 0.5f * hv.y, 0.5f * hv.z, 0.5f * hv.w};
      float u[4] = {0.f, 0.f, 0.f, 0.f};
      for (int i = qi0; i < qi1; i++) {
        const float ai = abuf[qn * N + i], ri = rbuf[qn * N + i];
        float4 *hp = reinterpret_cast<float4 *>(tape + (qn * N + i) * LT + qu);
        float4 x = *hp;
        x.x = (1.f - ai) * x.x + ai * w[0];
        x.y = (1.f - ai) * x.y + ai * w[1];
        x.z = (1.f - ai) * x.z + ai * w[2];
        x.w = (1.f - ai) * x.w + ai * w[3];
        *hp = x;
        u[0] += ri * x.x, u[1] += ri * x.y, u[2] += ri * x.z, u[3] += ri * x.w;
      }
      *reinterpret_cast<float4 *>(up4 + qp * SL + qn * R + qu) =
          make_float4(u[0], u[1], u[2], u[3]);
    }
    __syncthreads();
    clk.mark(2);
    for (int k = tid; k < BG * R; k += 256) {
      const float uu = up4[k] + up4[SL + k] + up4[2 * SL + k];
      hl[k] = tanhf(0.5f * uu + 0.3f * hl[k]);
    }
    __syncthreads();
    clk.mark(3);
  }
  clk.store(cyc);
  for (int k = tid; k < BG * R; k += 256) hout[(size_t)blockIdx.x * BG * R + k] = hl[k];
}

static float cfa(float x) { return 0.05f * fabsf(x) / (1.f + fabsf(x)); }
static float cfr(float x) { return 0.02f / (1.f + x * x); }
static void cpu_ref(const float *tape0, const float *h0, float *hout) {
  std::vector<double> H(tape0, tape0 + BG * N * R), h(h0, h0 + BG * R);
  for (int t = 0; t < T; t++)
    for (int g = 0; g < BG; g++) {
      double p[N], u[R] = {};
      for (int i = 0; i < N; i++) {
        double s = 0;
        for (int c = 0; c < R; c++) s += H[(g * N + i) * R + c] * h[g * R + c];
        p[i] = s;
      }
      for (int i = 0; i < N; i++) {
        const double a = cfa((float)p[i]), r = cfr((float)p[i]);
        for (int c = 0; c < R; c++) {
          double &x = H[(g * N + i) * R + c];
          x = (1 - a) * x + a * 0.5 * h[g * R + c];
          u[c] += r * x;
        }
      }
      for (int c = 0; c < R; c++) h[g * R + c] = tanh(0.5 * u[c] + 0.3 * h[g * R + c]);
    }
  for (int k = 0; k < BG * R; k++) hout[k] = (float)h[k];
}

int main() {
  const int ctas = 104;
  std::vector<float> tape(ctas * BG * N * R), h0(ctas * BG * R);
  srand(1);
  for (auto &x : tape) x = (rand() / (float)RAND_MAX - 0.5f) * 2.f;
  for (auto &x : h0) x = (rand() / (float)RAND_MAX - 0.5f);
  float *dt, *dh, *dout;
  long long *dc;
  CK(cudaMalloc(&dt, tape.size() * 4));
  CK(cudaMalloc(&dh, h0.size() * 4));
  CK(cudaMalloc(&dout, h0.size() * 4));
  CK(cudaMalloc(&dc, ctas * 8 * 5));
  CK(cudaMemcpy(dt, tape.data(), tape.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dh, h0.data(), h0.size() * 4, cudaMemcpyHostToDevice));
  std::vector<float> ref(BG * R), out(h0.size());
  cpu_ref(tape.data(), h0.data(), ref.data());
  const size_t smem = (BG * N * LT + BG * R + 3 * BG * N + 3 * BG * R) * 4;
  CK(cudaFuncSetAttribute(smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  for (int v = 0; v < 2; v++)
    for (int rep = 0; rep < 3; rep++) {
      const float ms = time_ms([&] {
        if (v == 0)
          reg_kernel<<<ctas, 320>>>(dt, dh, dout, dc);
        else
          smem_kernel<<<ctas, 256, smem>>>(dt, dh, dout, dc);
      });
      std::vector<long long> c(ctas * 5);
      CK(cudaMemcpy(c.data(), dc, ctas * 8 * 5, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost));
      double err = 0;
      for (int k = 0; k < BG * R; k++) err = fmax(err, fabs(out[k] - ref[k]));
      if (!(err < 1e-5)) {
        printf("results differ from the CPU reference by %.3e\n", err);
        return 1;
      }
      long long mx = 0;
      for (int k = 0; k < ctas; k++) mx = c[k] > mx ? c[k] : mx;
      printf(
          "%s: %.1f us a call, %.3f us a step, %lld cycles a step (slowest CTA, clock64), max |h - "
          "ref| %.2e;"
          " CTA 0's phases (scores, stand-in softmax, write+read, finish): %lld %lld %lld %lld\n",
          v == 0 ? "reg " : "smem", ms * 1e3, ms * 1e3 / T, mx / T, err, c[ctas] / T,
          c[ctas + 1] / T, c[ctas + 2] / T, c[ctas + 3] / T);
    }
  return 0;
}
