// E88 forward and backward: the C entry points. The recurrence is a chain of T dependent steps
// per (b, h), but its columns are independent chains, in the forward (column j of S needs only
// k^, q^, decay, v_j, g_j) and in the backward's walk (column j of dS needs only its own column;
// the sums over columns, dq^, dk^ and ddecay, are outputs that nothing in the chain waits for).
// So a lane holds rows of one column (e88_common.cuh, Lay) and no block barrier sits inside the
// chain. e88_fwd.cu: a producer warp stages each chunk's inputs while the compute warps run the
// previous one, and writes y, and delta and o of every step into the ckpt row (cpu/e88.h).
// e88_bwd.cu: the inputs of ~16 steps (whole checkpoint intervals) are staged at a time; each
// interval is replayed from its checkpoint with the saved delta (S <- tanh(decay S + k^ delta^T):
// no sum over rows, so the replay is elementwise), its states kept in shared memory (as f16 when
// they are tanh outputs of 16-bit values), then walked back with dS in registers; dg takes the
// saved o; the row sums are reduce-scatters by shuffles.
#include "cuda/e88_common.cuh"

namespace {

using namespace eng_e88;

bool n_supported(int64_t n) { return n == 16 || n == 32 || n == 64; }

Params params_of(const eng_e88_shape_t *s) {
  Params p = {};
  p.B = (int)s->B, p.T = (int)s->T, p.H = (int)s->H, p.V = (int)s->v, p.C = (int)s->ckpt_every;
  p.nck = (int)eng_e88_n_ckpt(s->T, s->ckpt_every), p.cklen = eng_e88_ckpt_len(s);
  p.l2 = s->l2 != 0, p.lin = s->linear_state != 0;
  return p;
}

}  // namespace

extern "C" int eng_kcuda_e88_supported(const eng_e88_shape_t *s, int backward, const char **why) {
  const char *no = NULL;
  if (!n_supported(s->n)) no = "n_state must be 16, 32 or 64";
  else if (s->v % (256 / s->n) != 0) no = "head_v_dim must be a multiple of 256/n_state";
  else if (s->n * s->v > kMaxStateSize) no = "n_state * head_v_dim must be at most 4096";
  else if (s->B * s->H > 0x3fffffff || s->T > 0x7fffffff) no = "B*H must be below 2^30 and T below 2^31";
  else if (backward && s->ckpt_every > kBwdMaxSeg) no = "ckpt_every must be at most 64";
  if (why) *why = no;
  return no == NULL;
}

extern "C" int eng_kcuda_e88_forward(eng_dtype_t dt, const eng_e88_shape_t *s, const void *q,
                                     const void *k, const void *v, const void *decay,
                                     const void *g, const float *S0, void *y, float *S_T,
                                     float *ckpt, cudaStream_t stream) {
  if (!eng_kcuda_e88_supported(s, 0, NULL)) return (int)cudaErrorInvalidValue;
  if (s->B * s->H == 0) return 0;
  Params p = params_of(s);
  p.q = q, p.k = k, p.v = v, p.decay = decay, p.g = g, p.S0 = S0, p.y = y, p.S_T = S_T,
  p.ckpt = ckpt, p.gate = g != NULL;
  return launch_forward(dt, (int)s->n, p, stream);
}

extern "C" int eng_kcuda_e88_backward_chunk(eng_dtype_t dt, const eng_e88_shape_t *s, int gate,
                                            int *steps) {
  *steps = 0;
  if (!eng_kcuda_e88_supported(s, 1, NULL)) return (int)cudaErrorInvalidValue;
  if (s->B * s->H == 0) return 0;
  Params p = params_of(s);
  p.gate = gate != 0;
  return launch_backward(dt, (int)s->n, p, 0, steps);
}

extern "C" int eng_kcuda_e88_backward(eng_dtype_t dt, const eng_e88_shape_t *s, const void *q,
                                      const void *k, const void *v, const void *decay,
                                      const void *g, const float *ckpt, const void *dy,
                                      const float *dS_T, void *dq, void *dk, void *dv,
                                      void *ddecay, void *dg, float *dS0, cudaStream_t stream) {
  if (!eng_kcuda_e88_supported(s, 1, NULL)) return (int)cudaErrorInvalidValue;
  if (s->B * s->H == 0) return 0;
  Params p = params_of(s);
  p.q = q, p.k = k, p.v = v, p.decay = decay, p.g = g, p.dy = dy, p.ckpt_in = ckpt,
  p.dS_T = dS_T, p.dq = dq, p.dk = dk, p.dv = dv, p.ddecay = ddecay, p.dg = dg, p.dS0 = dS0,
  p.gate = g != NULL;
  return launch_backward(dt, (int)s->n, p, stream);
}
