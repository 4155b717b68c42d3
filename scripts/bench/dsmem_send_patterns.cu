// Microbenchmark: one exchange a step of the E23 forward's partial scores at B = 64 N = 64 (each
// CTA of a cluster of 8 sends its 5 x 65 floats into every CTA's buffer by st.async, counted on
// the receiver's mbarrier; every CTA waits for the whole fill before its next step), in three send
// patterns of the same bytes, and a tiny exchange for the base latency:
//   one CTA a store: a lane a value, the warp's lanes at consecutive addresses of one CTA, 8
//                    stores a value (put_all_async; e23_fwd_rt's pattern until session 29);
//   4 CTAs a store:  4 lanes a value (session 27's reverted v1), lane q to CTAs q and q + 4, a
//                    warp's 8 values 5 apart (put_some_async<8, 4>);
//   16-byte stores:  a lane 4 consecutive values (st.async .v4), 16 lanes a row;
//   5 floats a CTA:  one value a row (the exchange's latency without its bytes).
// Session 29 (H200): 1 280, 5 940, 1 000 and 290 cycles a step: the bytes set this exchange's time,
// which e23_fwd_rt now sends as a reduce-scatter and an all-gather.
// 13 clusters of 8 CTAs of 256 threads, as the kernel's grid. Checks every buffer's last fill.
// Build and run on the GPU machine (from the repository root):
//   nvcc -O3 -arch=sm_90 -std=c++17 -Ikernels -Iengine/include -o /tmp/dsmem_send_patterns
//   scripts/bench/dsmem_send_patterns.cu && /tmp/dsmem_send_patterns
#include <vector>

#include "cuda/async_fill.cuh"
#include "microbench.cuh"

using namespace eng_kc;
using namespace eng_kc::es;
constexpr int CS = 8, TASKS = 5 * 65, T = 512;
constexpr int LD = 68, SPAN = 5 * LD;  // a row of 65 values 68 apart: each row 16-byte aligned

__device__ float value(int rank, int k, int t) { return (float)(rank * 1000 + k) + 0.25f * t; }
__host__ __device__ int place(int k) { return k / 65 * LD + k % 65; }

__device__ __forceinline__ void st_async4(uint32_t remote, float4 v, uint32_t remote_bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];"
               ::"r"(remote), "r"(__float_as_uint(v.x)), "r"(__float_as_uint(v.y)),
                 "r"(__float_as_uint(v.z)), "r"(__float_as_uint(v.w)), "r"(remote_bar)
               : "memory");
}

enum Pattern { kOneCta, kFourCtas, kVec4, kTiny };
__host__ __device__ constexpr int tasks(int P) { return P == kTiny ? 5 : TASKS; }

template <int P>
__global__ void __cluster_dims__(CS, 1, 1) __launch_bounds__(256, 1) exchange(float *out, long long *cyc) {
  __shared__ __align__(16) float part[CS * SPAN];
  __shared__ __align__(8) unsigned long long bars[1];
  int rank, cs, group;
  cluster_pos<true>(&rank, &cs, &group);
  AsyncFills<1> px;
  px.init(bars, (uint32_t)(CS * tasks(P) * sizeof(float)));
  sync_all<true>();
  const int tid = threadIdx.x, lane = tid % 32, grp = tid / 32 * 8 + lane % 8, q = lane / 8;
  const int k0 = grp * TASKS / 64, k1 = (grp + 1) * TASKS / 64;  // kFourCtas: the group's values
  float *mine = part + rank * SPAN;
  const long long c0 = clock64();
  for (int t = 0; t < T; t++) {
    if (P == kFourCtas) {
      for (int k = k0; k < k1; k++)
        put_some_async<CS, 4>(mine + place(k), value(rank, k, t), px.of(0), q);
    } else if (P == kOneCta) {
      for (int k = tid; k < TASKS; k += 256)
        put_all_async<CS>(mine + place(k), value(rank, k, t), px.of(0));
    } else if (P == kVec4) {
      if (tid < 5 * 16) {  // a row's 64 slots from 16 lanes, 4 each
        const int k = tid / 16 * 65 + tid % 16 * 4;
        const float4 v = make_float4(value(rank, k, t), value(rank, k + 1, t),
                                     value(rank, k + 2, t), value(rank, k + 3, t));
        const uint32_t a = smem_addr(mine + place(k));
#pragma unroll
        for (int c = 0; c < CS; c++) st_async4(mapa(a, c), v, mapa(px.of(0), c));
      } else if (tid >= 96 && tid < 101) {  // slot 64 of each row
        const int k = (tid - 96) * 65 + 64;
        put_all_async<CS>(mine + place(k), value(rank, k, t), px.of(0));
      }
    } else {
      if (tid < 5) put_all_async<CS>(mine + place(tid), value(rank, tid, t), px.of(0));
    }
    px.wait(0);
  }
  if (tid == 0) cyc[blockIdx.x] = clock64() - c0;
  for (int k = tid; k < CS * SPAN; k += 256) out[blockIdx.x * CS * SPAN + k] = part[k];
  sync_all<true>();  // no CTA exits while another may still address it
}

int main() {
  const int ctas = 13 * CS;
  float *dout;
  long long *dc;
  CK(cudaMalloc(&dout, ctas * CS * SPAN * 4));
  CK(cudaMalloc(&dc, ctas * 8));
  std::vector<float> out(ctas * CS * SPAN);
  std::vector<long long> c(ctas);
  const char *name[4] = {"one CTA a store ", "4 CTAs a store  ", "16-byte stores  ", "5 floats a CTA  "};
  for (int v = 0; v < 4; v++)
    for (int rep = 0; rep < 3; rep++) {
      const float ms = time_ms([&] {
        if (v == kOneCta) exchange<kOneCta><<<ctas, 256>>>(dout, dc);
        if (v == kFourCtas) exchange<kFourCtas><<<ctas, 256>>>(dout, dc);
        if (v == kVec4) exchange<kVec4><<<ctas, 256>>>(dout, dc);
        if (v == kTiny) exchange<kTiny><<<ctas, 256>>>(dout, dc);
      });
      CK(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(c.data(), dc, ctas * 8, cudaMemcpyDeviceToHost));
      for (int b = 0; b < ctas; b++)
        for (int r = 0; r < CS; r++)
          for (int k = 0; k < (v == kTiny ? 5 : TASKS); k++) {
            const float got = out[(b * CS + r) * SPAN + place(k)];
            if (got != (float)(r * 1000 + k) + 0.25f * (T - 1)) {
              printf("%s CTA %d: rank %d's value %d is %g\n", name[v], b, r, k, got);
              return 1;
            }
          }
      long long mx = 0;
      for (long long x : c) mx = x > mx ? x : mx;
      printf("%s: %.3f us a step, %lld cycles a step (slowest CTA)\n", name[v], ms * 1e3 / T, mx / T);
    }
  return 0;
}
