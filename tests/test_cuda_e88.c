/* e88 and e88_backward on CUDA against the CPU reference: the benchmark shape (B=8, T=512, H=83,
 * n=v=32) in f32 and bf16, odd shapes (T=1, T=17, H=1, B=3, n=v=16 and 64, v != n), every option,
 * segments the backward walks in several chunks, segments of several checkpoint intervals, a
 * strided input, T=4096 staying finite, and the sizes the kernels refuse. Every output is preset
 * to NaN, so each element must be written.
 *
 * Tolerances (||gpu - cpu|| / ||cpu||): 16-bit values 1e-2, as everywhere: the kernels use the
 * hardware tanh (relative error 2^-11) there, which the recurrence does not amplify: the step map
 * is a contraction (|decay| < 1, tanh' <= 1, and I - k^k^T has norm 1), so an error made at one
 * step decays instead of compounding. f32 5e-5 instead of 1e-5: each step adds a few ulps of
 * f32 rounding (tanhf, the 32-term sums) against the double reference, and with decay up to 0.99
 * an error survives ~100 steps, so errors of ~6e-8 may add up coherently to ~6e-6; 5e-5 keeps a
 * margin, while a wrong kernel is off by O(1). */
#include "cuda_numeric.h"
#ifdef ENG_HAVE_CUDA /* the chunk query below (CPU-only builds skip these tests) */
#include "cuda/e88.h"
#endif

typedef struct {
  int64_t B, T, H, n, v;
  int gate, s0, l2, lin, C;
  double qk_range; /* q, k in [-r, r); l2 off needs small ones for a stable state */
} cfg_t;

enum { IQ, IK, IV, IDEC, IG, IS0, NIN };
static const char *const GNAME[6] = {"dq", "dk", "dv", "ddecay", "dg", "dS0"};

static double tol_of(eng_dtype_t dt) { return dt == ENG_F32 ? 5e-5 : 1e-2; }

static void describe(const cfg_t *c, eng_dtype_t dt, char *buf, size_t n) {
  snprintf(buf, n, "e88 %s B=%lld T=%lld H=%lld n=%lld v=%lld gate=%d S0=%d l2=%d linear=%d C=%d",
           eng_dtype_name(dt), (long long)c->B, (long long)c->T, (long long)c->H, (long long)c->n,
           (long long)c->v, c->gate, c->s0, c->l2, c->lin, c->C);
}

/* ||got - want|| / ||want|| for got on the GPU (any dtype) and want on the CPU. */
static double rel_err(const eng_tensor_t *got, const eng_tensor_t *want) {
  eng_tensor_t *host = NULL;
  T_OK(eng_tensor_to_device((eng_tensor_t *)got, ENG_CPU_DEVICE, &host));
  double *a = t_values(host), *b = t_values(want), num = 0, den = 0;
  const int64_t n = eng_tensor_numel(want);
  cr_assert_eq(eng_tensor_numel(host), n);
  for (int64_t i = 0; i < n; i++) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  free(a), free(b);
  eng_tensor_release(host);
  return isnan(num) ? INFINITY : den > 0 ? sqrt(num / den) : sqrt(num);
}

static void make_inputs(const cfg_t *c, eng_dtype_t dt, uint64_t seed, pair_t *in) {
  const double r = c->qk_range > 0 ? c->qk_range : 1;
  const double lo[NIN] = {-r, -r, -1, 0.5, -2, -0.5}, hi[NIN] = {r, r, 1, 0.99, 2, 0.5};
  const int64_t qs[4] = {c->B, c->T, c->H, c->n}, vs[4] = {c->B, c->T, c->H, c->v},
                ds[3] = {c->B, c->T, c->H}, ss[4] = {c->B, c->H, c->n, c->v};
  const int64_t *shape[NIN] = {qs, qs, vs, ds, vs, ss};
  for (int w = 0; w < NIN; w++) {
    in[w] = (pair_t){NULL, NULL};
    if ((w == IG && !c->gate) || (w == IS0 && !c->s0)) continue;
    in[w] = pair_rand(shape[w], w == IDEC ? 3 : 4, w == IS0 ? ENG_F32 : dt, seed * 8 + (uint64_t)w,
                      lo[w], hi[w]);
  }
}

static eng_e88_opts_t opts_of(const cfg_t *c) {
  return (eng_e88_opts_t){.l2 = c->l2, .linear_state = c->lin, .ckpt_every = c->C};
}

static void set_attrs(const cfg_t *c, eng_op_attrs_t *a) {
  a->i[0] = c->C;
  a->ni = 1;
  a->flags = (c->l2 ? 0 : ENG_ATTR_E88_NO_L2) | (c->lin ? ENG_ATTR_E88_LINEAR : 0);
}

/* A NaN-poisoned GPU tensor shaped like the CPU tensor t (an empty [0] one for NULL). */
static eng_tensor_t *poisoned_like(const eng_tensor_t *t, eng_dtype_t dt_if_null) {
  static const int64_t none[1] = {0};
  return t ? poisoned(t->shape, t->ndim, t->dtype, GPU0) : poisoned(none, 1, dt_if_null, GPU0);
}

static void expect(const eng_tensor_t *got, const eng_tensor_t *want, double tol, const char *what,
                   const char *out) {
  double err = rel_err(got, want);
  cr_assert(err <= tol, "%s: %s rel err %g > %g", what, out, err, tol);
}

/* Forward and backward of one case on both devices, every output compared. */
static void check_case(const cfg_t *c, eng_dtype_t dt, uint64_t seed) {
  char what[256];
  describe(c, dt, what, sizeof what);
  pair_t in[NIN];
  make_inputs(c, dt, seed, in);
  const eng_e88_opts_t o = opts_of(c);
  const double tol = tol_of(dt);

  /* forward: y, S_T, ckpt */
  eng_tensor_t *y = NULL, *ST = NULL, *ck = NULL;
  T_OK(eng_op_e88(in[IQ].c, in[IK].c, in[IV].c, in[IDEC].c, in[IG].c, in[IS0].c, &o, &y, &ST, &ck));
  eng_tensor_t *gin[9] = {in[IQ].g, in[IK].g, in[IV].g, in[IDEC].g, in[IG].g, in[IS0].g};
  eng_op_call_t f = {.id = ENG_OP_E88, .n_in = 6, .in = gin, .n_out = 3};
  set_attrs(c, &f.attrs);
  f.out[0] = poisoned_like(y, dt), f.out[1] = poisoned_like(ST, dt), f.out[2] = poisoned_like(ck, dt);
  T_OK(eng_op_dispatch(&f));
  expect(f.out[0], y, tol, what, "y");
  expect(f.out[1], ST, tol, what, "S_T");
  expect(f.out[2], ck, tol, what, "ckpt");

  /* backward from the CPU's checkpoints, so that it sees exactly the CPU's inputs */
  const int64_t vs[4] = {c->B, c->T, c->H, c->v}, ss[4] = {c->B, c->H, c->n, c->v};
  pair_t dy = pair_rand(vs, 4, dt, seed + 101, -1, 1), dST = pair_rand(ss, 4, ENG_F32, seed + 102, -1, 1),
         ckp = pair_of(ck);
  ck = NULL;
  eng_e88_grads_t want;
  T_OK(eng_op_e88_backward(in[IQ].c, in[IK].c, in[IV].c, in[IDEC].c, in[IG].c, in[IS0].c, ckp.c,
                           dy.c, dST.c, &o, &want));
  gin[6] = ckp.g, gin[7] = dy.g, gin[8] = dST.g;
  eng_op_call_t b = {.id = ENG_OP_E88_BACKWARD, .n_in = 9, .in = gin, .n_out = 6};
  set_attrs(c, &b.attrs);
  eng_tensor_t *wants[6] = {want.dq, want.dk, want.dv, want.ddecay, want.dg, want.dS0};
  for (int k = 0; k < 6; k++) b.out[k] = poisoned_like(wants[k], k == 5 ? ENG_F32 : dt);
  T_OK(eng_op_dispatch(&b));
  for (int k = 0; k < 6; k++) {
    if (wants[k]) expect(b.out[k], wants[k], tol, what, GNAME[k]);
    eng_tensor_release(b.out[k]);
    eng_tensor_release(wants[k]);
  }
  for (int k = 0; k < 3; k++) eng_tensor_release(f.out[k]);
  eng_tensor_release(y), eng_tensor_release(ST);
  pair_release(dy), pair_release(dST), pair_release(ckp);
  for (int w = 0; w < NIN; w++) pair_release(in[w]);
}

/* C = 0: the default interval (8 at n = 32), as the benchmark runs it; segments_in_several_chunks
 * walks 16-step intervals in several chunks at sizes of this kind. */
static const cfg_t BENCH = {.B = 8, .T = 512, .H = 83, .n = 32, .v = 32, .gate = 1, .s0 = 1,
                            .l2 = 1, .C = 0};

Test(cuda_e88, benchmark_shape_bf16) {
  SKIP_WITHOUT_GPU();
  check_case(&BENCH, ENG_BF16, 1);
}

Test(cuda_e88, benchmark_shape_f32) {
  SKIP_WITHOUT_GPU();
  check_case(&BENCH, ENG_F32, 2);
}

Test(cuda_e88, odd_shapes_and_options) {
  SKIP_WITHOUT_GPU();
  const cfg_t cs[] = {
      {.B = 2, .T = 1, .H = 3, .n = 32, .v = 32, .gate = 1, .s0 = 1, .l2 = 1, .C = 16},
      {.B = 3, .T = 17, .H = 1, .n = 32, .v = 32, .gate = 1, .s0 = 1, .l2 = 1, .C = 16},
      {.B = 3, .T = 17, .H = 5, .n = 16, .v = 16, .gate = 1, .s0 = 0, .l2 = 1, .C = 16},
      {.B = 2, .T = 45, .H = 3, .n = 64, .v = 64, .gate = 1, .s0 = 1, .l2 = 1, .C = 16},
      {.B = 2, .T = 40, .H = 3, .n = 32, .v = 64, .gate = 0, .s0 = 1, .l2 = 1, .C = 16},
      {.B = 2, .T = 33, .H = 2, .n = 16, .v = 48, .gate = 1, .s0 = 1, .l2 = 1, .C = 5},
      {.B = 1, .T = 70, .H = 2, .n = 64, .v = 8, .gate = 1, .s0 = 1, .l2 = 1, .C = 64},
      {.B = 2, .T = 50, .H = 3, .n = 32, .v = 32, .gate = 0, .s0 = 0, .l2 = 1, .lin = 1, .C = 16},
      {.B = 2, .T = 50, .H = 3, .n = 32, .v = 32, .gate = 1, .s0 = 1, .l2 = 0, .C = 16,
       .qk_range = 0.15},
      {.B = 2, .T = 50, .H = 3, .n = 16, .v = 16, .gate = 1, .s0 = 1, .l2 = 0, .lin = 1, .C = 7,
       .qk_range = 0.2},
      /* columns past v in a warp of the backward (n=32: 16 columns a warp; n=64: 8), and v of 8
       * bytes in bf16 (no 16-byte copies) */
      {.B = 2, .T = 37, .H = 2, .n = 32, .v = 8, .gate = 1, .s0 = 1, .l2 = 1, .C = 16},
      {.B = 2, .T = 21, .H = 3, .n = 32, .v = 24, .gate = 1, .s0 = 0, .l2 = 1, .C = 8},
      {.B = 1, .T = 30, .H = 2, .n = 64, .v = 4, .gate = 1, .s0 = 1, .l2 = 1, .C = 16},
      /* no gate at n = v = 32 with a tanh state: in bf16 the backward kernel with v compiled in
       * (the layer's heads; the gated one runs the benchmark shape), with a partial last segment */
      {.B = 3, .T = 37, .H = 2, .n = 32, .v = 32, .gate = 0, .s0 = 1, .l2 = 1, .C = 16},
  };
  static const eng_dtype_t dts[] = {ENG_F32, ENG_BF16, ENG_F16};
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
    for (int d = 0; d < 3; d++) check_case(&cs[i], dts[d], 10 + 3 * i + (uint64_t)d);
}

/* Runs each case in bf16 and f32 (seeds from seed0) after checking the launcher's chunk: the
 * whole checkpoint interval (whole), else shorter than it (several chunks an interval). */
static void check_chunked(const cfg_t *cs, size_t count, int whole, uint64_t seed0) {
  static const eng_dtype_t dts[] = {ENG_BF16, ENG_F32};
  (void)whole; /* read by the chunk query, which CPU-only builds skip */
  for (size_t i = 0; i < count; i++)
    for (int d = 0; d < 2; d++) {
      const cfg_t *c = &cs[i];
#ifdef ENG_HAVE_CUDA
      const eng_e88_shape_t s = {.B = c->B, .T = c->T, .H = c->H, .n = c->n, .v = c->v,
                                 .ckpt_every = c->C, .l2 = c->l2, .linear_state = c->lin};
      int steps = 0;
      cr_assert_eq(eng_kcuda_e88_backward_chunk(dts[d], &s, c->gate, &steps), 0);
      char what[160];
      describe(c, dts[d], what, sizeof what);
      if (whole)
        cr_assert_eq(steps, c->C, "%s: chunks of %d steps, not one an interval", what, steps);
      else
        cr_assert(steps > 0 && steps < c->C, "%s: a chunk of %d steps, not several an interval",
                  what, steps);
#endif
      check_case(c, dts[d], seed0 + 2 * i + (uint64_t)d);
    }
}

/* Intervals walked in several chunks: many blocks make the launcher take replay chunks shorter
 * than the interval (to keep them resident), and each chunk is replayed from the interval's
 * checkpoint: 2 to 8 chunks an interval, a partial last interval (T % C) whose earliest chunk is
 * partial, columns past v (v = 24), f32 states (f32 values, linear_state), and n = 16 and 64. */
Test(cuda_e88, segments_in_several_chunks) {
  SKIP_WITHOUT_GPU();
  const cfg_t cs[] = {
      {.B = 16, .T = 150, .H = 83, .n = 32, .v = 32, .gate = 1, .s0 = 1, .l2 = 1, .C = 64},
      {.B = 16, .T = 40, .H = 83, .n = 32, .v = 24, .gate = 1, .s0 = 0, .l2 = 1, .C = 16},
      {.B = 16, .T = 70, .H = 83, .n = 16, .v = 32, .gate = 0, .s0 = 1, .l2 = 1, .C = 32},
      {.B = 8, .T = 45, .H = 41, .n = 64, .v = 64, .gate = 1, .s0 = 1, .l2 = 1, .C = 32},
      {.B = 16, .T = 50, .H = 83, .n = 32, .v = 32, .gate = 1, .s0 = 1, .l2 = 1, .lin = 1, .C = 16},
  };
  check_chunked(cs, sizeof cs / sizeof cs[0], 0, 60);
}

/* Checkpoint intervals shorter than the backward's staged segment (16 steps): a segment then holds
 * several intervals, each walked as one chunk replayed from its own checkpoint. Partial last
 * segments and partial last intervals, C = 1, every n, a tanh and a linear state, both gates. */
Test(cuda_e88, segments_of_several_intervals) {
  SKIP_WITHOUT_GPU();
  const cfg_t cs[] = {
      {.B = 3, .T = 37, .H = 2, .n = 32, .v = 32, .gate = 1, .s0 = 1, .l2 = 1, .C = 5},
      {.B = 2, .T = 29, .H = 3, .n = 32, .v = 32, .gate = 0, .s0 = 0, .l2 = 1, .C = 4},
      {.B = 2, .T = 50, .H = 3, .n = 16, .v = 16, .gate = 0, .s0 = 1, .l2 = 1, .C = 3},
      {.B = 2, .T = 33, .H = 2, .n = 64, .v = 64, .gate = 1, .s0 = 1, .l2 = 1, .C = 8},
      {.B = 2, .T = 20, .H = 2, .n = 32, .v = 24, .gate = 1, .s0 = 1, .l2 = 1, .C = 1},
      {.B = 2, .T = 41, .H = 2, .n = 32, .v = 32, .gate = 1, .s0 = 1, .l2 = 1, .lin = 1, .C = 7},
  };
  check_chunked(cs, sizeof cs / sizeof cs[0], 1, 100);
}

/* q and k rows whose squares sum below f32's smallest normal number: the 16-bit l2 staging's
 * approximate rsqrt flushes such sums, and they must take the a = 0 path (a wrong inf there made
 * q^ zero and the backward's factors NaN). Not f16: 1e-20 is 0 there, and dq = dq^ / eps
 * overflows its range. */
Test(cuda_e88, tiny_q_and_k_rows) {
  SKIP_WITHOUT_GPU();
  const cfg_t c = {.B = 2, .T = 20, .H = 2, .n = 32, .v = 32, .gate = 1, .s0 = 1, .l2 = 1, .C = 8,
                   .qk_range = 1e-20};
  check_case(&c, ENG_BF16, 91);
  check_case(&c, ENG_F32, 92);
}

/* A transposed q and a narrowed v on both devices. */
Test(cuda_e88, strided_inputs) {
  SKIP_WITHOUT_GPU();
  const cfg_t c = {.B = 2, .T = 19, .H = 3, .n = 32, .v = 32, .gate = 1, .s0 = 0, .l2 = 1, .C = 16};
  pair_t in[NIN];
  make_inputs(&c, ENG_BF16, 70, in);
  const int64_t qt[4] = {c.B, c.T, c.n, c.H}, vw[4] = {c.B, c.T, c.H, c.v + 5};
  pair_t q = transpose_pair(pair_rand(qt, 4, ENG_BF16, 71, -1, 1), 2, 3);
  pair_t vb = pair_rand(vw, 4, ENG_BF16, 72, -1, 1), v = pair_consume(vb, pair_narrow(vb, 3, 2, c.v));
  cr_assert(!eng_tensor_is_contiguous(q.g) && !eng_tensor_is_contiguous(v.g));
  const eng_e88_opts_t o = opts_of(&c);
  eng_tensor_t *want = NULL, *got = NULL;
  T_OK(eng_op_e88(q.c, in[IK].c, v.c, in[IDEC].c, in[IG].c, NULL, &o, &want, NULL, NULL));
  T_OK(eng_op_e88(q.g, in[IK].g, v.g, in[IDEC].g, in[IG].g, NULL, &o, &got, NULL, NULL));
  expect(got, want, 1e-2, "e88 with strided q and v", "y");
  eng_tensor_release(want), eng_tensor_release(got);
  pair_release(q), pair_release(v);
  for (int w = 0; w < NIN; w++) pair_release(in[w]);
}

static int all_finite(const eng_tensor_t *t) {
  eng_tensor_t *host = NULL;
  T_OK(eng_tensor_to_device((eng_tensor_t *)t, ENG_CPU_DEVICE, &host));
  double *v = t_values(host);
  int ok = 1;
  for (int64_t i = 0; i < eng_tensor_numel(host) && ok; i++) ok = isfinite(v[i]);
  free(v);
  eng_tensor_release(host);
  return ok;
}

Test(cuda_e88, long_sequence_stays_finite) {
  SKIP_WITHOUT_GPU();
  const cfg_t c = {.B = 2, .T = 4096, .H = 4, .n = 32, .v = 32, .gate = 1, .s0 = 1, .l2 = 1, .C = 16};
  pair_t in[NIN];
  make_inputs(&c, ENG_BF16, 90, in);
  const eng_e88_opts_t o = opts_of(&c);
  eng_tensor_t *y = NULL, *ST = NULL, *ck = NULL;
  T_OK(eng_op_e88(in[IQ].g, in[IK].g, in[IV].g, in[IDEC].g, in[IG].g, in[IS0].g, &o, &y, &ST, &ck));
  cr_assert(all_finite(y) && all_finite(ST), "T=4096: y or S_T is not finite");
  const int64_t vs[4] = {c.B, c.T, c.H, c.v};
  pair_t dy = pair_rand(vs, 4, ENG_BF16, 91, -1, 1);
  eng_e88_grads_t g;
  T_OK(eng_op_e88_backward(in[IQ].g, in[IK].g, in[IV].g, in[IDEC].g, in[IG].g, in[IS0].g, ck, dy.g,
                           NULL, &o, &g));
  eng_tensor_t *gs[6] = {g.dq, g.dk, g.dv, g.ddecay, g.dg, g.dS0};
  for (int k = 0; k < 6; k++) {
    cr_assert(all_finite(gs[k]), "T=4096: %s is not finite", GNAME[k]);
    eng_tensor_release(gs[k]);
  }
  eng_tensor_release(y), eng_tensor_release(ST), eng_tensor_release(ck);
  pair_release(dy);
  for (int w = 0; w < NIN; w++) pair_release(in[w]);
}

Test(cuda_e88, unsupported_sizes_are_errors) {
  SKIP_WITHOUT_GPU();
  cfg_t c = {.B = 1, .T = 4, .H = 2, .n = 24, .v = 32, .gate = 0, .s0 = 0, .l2 = 1, .C = 16};
  pair_t in[NIN];
  make_inputs(&c, ENG_BF16, 95, in);
  eng_tensor_t *y = NULL;
  T_FAILS(eng_op_e88(in[IQ].g, in[IK].g, in[IV].g, in[IDEC].g, NULL, NULL, NULL, &y, NULL, NULL),
          ENG_ERR_UNSUPPORTED, "n_state must be 16, 32 or 64");
  for (int w = 0; w < NIN; w++) pair_release(in[w]);
  c.n = 32, c.v = 12;
  make_inputs(&c, ENG_F64, 96, in);
  T_FAILS(eng_op_e88(in[IQ].g, in[IK].g, in[IV].g, in[IDEC].g, NULL, NULL, NULL, &y, NULL, NULL),
          ENG_ERR_UNSUPPORTED, "f64 is not supported on CUDA");
  for (int w = 0; w < NIN; w++) pair_release(in[w]);
  make_inputs(&c, ENG_BF16, 97, in);
  T_FAILS(eng_op_e88(in[IQ].g, in[IK].g, in[IV].g, in[IDEC].g, NULL, NULL, NULL, &y, NULL, NULL),
          ENG_ERR_UNSUPPORTED, "head_v_dim must be a multiple of 256/n_state");
  for (int w = 0; w < NIN; w++) pair_release(in[w]);
  /* the backward replays at most 64 steps at a time */
  c.v = 32, c.C = 65;
  make_inputs(&c, ENG_BF16, 98, in);
  eng_e88_opts_t o = opts_of(&c);
  eng_tensor_t *ST = NULL, *ck = NULL;
  T_OK(eng_op_e88(in[IQ].g, in[IK].g, in[IV].g, in[IDEC].g, NULL, NULL, &o, &y, &ST, &ck));
  eng_e88_grads_t g;
  T_FAILS(eng_op_e88_backward(in[IQ].g, in[IK].g, in[IV].g, in[IDEC].g, NULL, NULL, ck, y, NULL,
                              &o, &g),
          ENG_ERR_UNSUPPORTED, "ckpt_every must be at most 64");
  eng_tensor_release(y), eng_tensor_release(ST), eng_tensor_release(ck);
  for (int w = 0; w < NIN; w++) pair_release(in[w]);
}
