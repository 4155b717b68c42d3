// Microbenchmark: one exchange a step of the E23 forward's partial scores at B = 64 N = 64 (each
// CTA of a cluster of 8 sends its 5 x 65 floats into every CTA's buffer by st.async, counted on
// the receiver's mbarrier; every CTA waits for the whole fill before its next step), in two send
// patterns of the same bytes:
//   one CTA a store: the committed pattern, a lane a value, the warp's lanes at consecutive
//                    addresses of one CTA, 8 stores a value (put_all_async);
//   4 CTAs a store:  4 lanes a value (session 27's reverted v1), lane q to CTAs q and q + 4, a
//                    warp's 8 values 5 apart (put_some_async<8, 4>).
// 13 clusters of 8 CTAs of 256 threads, as the kernel's grid. Checks every buffer's last fill.
// Build and run on the GPU machine (from the repository root):
//   nvcc -O3 -arch=sm_90 -std=c++17 -Ikernels -Iengine/include -o /tmp/dsmem_send_patterns
//   scripts/bench/dsmem_send_patterns.cu && /tmp/dsmem_send_patterns
#include <vector>

#include "cuda/async_fill.cuh"
#include "microbench.cuh"

using namespace eng_kc::es;
constexpr int CS = 8, TASKS = 5 * 65, T = 512;

__device__ float value(int rank, int k, int t) { return (float)(rank * 1000 + k) + 0.25f * t; }

template <bool SCATTERED>
__global__ void __cluster_dims__(CS, 1, 1) __launch_bounds__(256, 1) exchange(float *out, long long *cyc) {
  __shared__ __align__(16) float part[CS * TASKS];
  __shared__ __align__(8) unsigned long long bars[1];
  int rank, cs, group;
  cluster_pos<true>(&rank, &cs, &group);
  AsyncFills<1> px;
  px.init(bars, (uint32_t)(CS * TASKS * sizeof(float)));
  sync_all<true>();
  const int tid = threadIdx.x, lane = tid % 32, grp = tid / 32 * 8 + lane % 8, q = lane / 8;
  const int k0 = grp * TASKS / 64, k1 = (grp + 1) * TASKS / 64;  // SCATTERED: the group's values
  const long long c0 = clock64();
  for (int t = 0; t < T; t++) {
    if (SCATTERED) {
      for (int k = k0; k < k1; k++)
        put_some_async<CS, 4>(part + rank * TASKS + k, value(rank, k, t), px.of(0), q);
    } else {
      for (int k = tid; k < TASKS; k += 256)
        put_all_async<CS>(part + rank * TASKS + k, value(rank, k, t), px.of(0));
    }
    px.wait(0);
  }
  if (tid == 0) cyc[blockIdx.x] = clock64() - c0;
  for (int k = tid; k < CS * TASKS; k += 256) out[blockIdx.x * CS * TASKS + k] = part[k];
  sync_all<true>();  // no CTA exits while another may still address it
}

int main() {
  const int ctas = 13 * CS;
  float *dout;
  long long *dc;
  CK(cudaMalloc(&dout, ctas * CS * TASKS * 4));
  CK(cudaMalloc(&dc, ctas * 8));
  std::vector<float> out(ctas * CS * TASKS);
  std::vector<long long> c(ctas);
  for (int v = 0; v < 2; v++)
    for (int rep = 0; rep < 3; rep++) {
      const float ms = time_ms([&] {
        if (v == 0)
          exchange<false><<<ctas, 256>>>(dout, dc);
        else
          exchange<true><<<ctas, 256>>>(dout, dc);
      });
      CK(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(c.data(), dc, ctas * 8, cudaMemcpyDeviceToHost));
      for (int b = 0; b < ctas; b++)
        for (int r = 0; r < CS; r++)
          for (int k = 0; k < TASKS; k++)
            if (out[(b * CS + r) * TASKS + k] != (float)(r * 1000 + k) + 0.25f * (T - 1)) {
              printf("CTA %d: rank %d's value %d is %g\n", b, r, k, out[(b * CS + r) * TASKS + k]);
              return 1;
            }
      long long mx = 0;
      for (long long x : c) mx = x > mx ? x : mx;
      printf("%s: %.3f us a step, %lld cycles a step (slowest CTA)\n",
             v == 0 ? "one CTA a store " : "4 CTAs a store  ", ms * 1e3 / T, mx / T);
    }
  return 0;
}
