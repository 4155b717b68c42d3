/* e88 and e88_backward on the CPU: the forward (y, S_T and all of ckpt) against a second
 * implementation written here straight from the math, ckpt's delta and o trace against the
 * forward's other outputs, the backward against central finite differences of the forward in f64
 * (every input, with and without l2, gate, linear_state and S0, T = 1 and T not a multiple of
 * ckpt_every), the default interval, lower dtypes against f64, and the misuse errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

typedef struct {
  int64_t B, T, H, n, v;
  int gate, s0, l2, lin, C;
} cfg_t;

enum { IQ, IK, IV, IDEC, IG, IS0, NIN };
static const char *const NAME[NIN] = {"q", "k", "v", "decay", "g", "S0"};

/* The inputs of one case as CPU tensors (g and S0 NULL when the case has none). */
typedef struct {
  eng_tensor_t *t[NIN];
} inputs_t;

static void shape_of(const cfg_t *c, int which, int64_t *s, int *nd) {
  switch (which) {
  case IQ: case IK: s[0] = c->B; s[1] = c->T; s[2] = c->H; s[3] = c->n; *nd = 4; break;
  case IV: case IG: s[0] = c->B; s[1] = c->T; s[2] = c->H; s[3] = c->v; *nd = 4; break;
  case IDEC: s[0] = c->B; s[1] = c->T; s[2] = c->H; *nd = 3; break;
  default: s[0] = c->B; s[1] = c->H; s[2] = c->n; s[3] = c->v; *nd = 4; break;
  }
}

static inputs_t make_inputs(const cfg_t *c, eng_dtype_t dt, uint64_t seed) {
  /* without l2, |k|^2 < 1 keeps the state map a contraction (decay I - k k^T) */
  const double r = c->l2 ? 1 : 0.5 / sqrt((double)c->n);
  const double lo[NIN] = {-r, -r, -1, 0.5, -2, -0.5}, hi[NIN] = {r, r, 1, 0.99, 2, 0.5};
  inputs_t in = {{0}};
  for (int w = 0; w < NIN; w++) {
    if ((w == IG && !c->gate) || (w == IS0 && !c->s0)) continue;
    int64_t s[4];
    int nd;
    shape_of(c, w, s, &nd);
    eng_dtype_t wdt = w == IS0 && dt != ENG_F64 ? ENG_F32 : dt;
    in.t[w] = t_rand_tensor(s, nd, wdt, seed * 16 + (uint64_t)w, lo[w], hi[w]);
  }
  return in;
}

static void release_inputs(inputs_t *in) {
  for (int w = 0; w < NIN; w++) eng_tensor_release(in->t[w]);
}

static eng_e88_opts_t opts_of(const cfg_t *c) {
  return (eng_e88_opts_t){.l2 = c->l2, .linear_state = c->lin, .ckpt_every = c->C};
}

static void describe(const cfg_t *c, char *buf, size_t n) {
  snprintf(buf, n, "B=%lld T=%lld H=%lld n=%lld v=%lld gate=%d S0=%d l2=%d linear=%d C=%d",
           (long long)c->B, (long long)c->T, (long long)c->H, (long long)c->n, (long long)c->v,
           c->gate, c->s0, c->l2, c->lin, c->C);
}

/* ---- the second implementation: the math of the op, in double, one (b, h) at a time ---- */

/* ckpt's elements per (b, h): the checkpoints, then delta and o of every step (see e88.h). */
static int64_t ckpt_len(const cfg_t *c) {
  return (c->T + c->C - 1) / c->C * c->n * c->v + 2 * c->T * c->v;
}

static void ref_forward(const cfg_t *c, const inputs_t *in, double *y, double *ST, double *ck) {
  double *q = t_values(in->t[IQ]), *k = t_values(in->t[IK]), *v = t_values(in->t[IV]),
         *dec = t_values(in->t[IDEC]), *g = c->gate ? t_values(in->t[IG]) : NULL,
         *S0 = c->s0 ? t_values(in->t[IS0]) : NULL;
  const int64_t n = c->n, V = c->v, W = ckpt_len(c), o_at = W - c->T * V, d_at = o_at - c->T * V;
  double *S = malloc(sizeof(double) * (size_t)(n * V)), kh[64], qh[64], delta[64];
  for (int64_t b = 0; b < c->B; b++)
    for (int64_t h = 0; h < c->H; h++) {
      double *ckr = ck + (b * c->H + h) * W;
      for (int64_t e = 0; e < n * V; e++) S[e] = S0 ? S0[(b * c->H + h) * n * V + e] : 0;
      for (int64_t t = 0; t < c->T; t++) {
        if (t % c->C == 0) memcpy(ckr + t / c->C * n * V, S, sizeof(double) * (size_t)(n * V));
        const int64_t row = (b * c->T + t) * c->H + h;
        double nk = 0, nq = 0;
        for (int64_t i = 0; i < n; i++) {
          nk += k[row * n + i] * k[row * n + i];
          nq += q[row * n + i] * q[row * n + i];
        }
        for (int64_t i = 0; i < n; i++) {
          kh[i] = c->l2 ? k[row * n + i] / (sqrt(nk) + 1e-6) : k[row * n + i];
          qh[i] = c->l2 ? q[row * n + i] / (sqrt(nq) + 1e-6) : q[row * n + i];
        }
        for (int64_t j = 0; j < V; j++) {
          double r = 0;
          for (int64_t i = 0; i < n; i++) r += S[i * V + j] * kh[i];
          delta[j] = v[row * V + j] - r;
          ckr[d_at + t * V + j] = delta[j];
        }
        for (int64_t i = 0; i < n; i++)
          for (int64_t j = 0; j < V; j++) {
            double p = dec[row] * S[i * V + j] + kh[i] * delta[j];
            S[i * V + j] = c->lin ? p : tanh(p);
          }
        for (int64_t j = 0; j < V; j++) {
          double o = 0;
          for (int64_t i = 0; i < n; i++) o += S[i * V + j] * qh[i];
          ckr[o_at + t * V + j] = o;
          if (g) o *= g[row * V + j] / (1 + exp(-g[row * V + j]));
          y[row * V + j] = o;
        }
      }
      memcpy(ST + (b * c->H + h) * n * V, S, sizeof(double) * (size_t)(n * V));
    }
  free(S);
  free(q), free(k), free(v), free(dec), free(g), free(S0);
}

static void check_forward(const cfg_t *c, eng_dtype_t dt, uint64_t seed) {
  char what[256];
  describe(c, what, sizeof what);
  inputs_t in = make_inputs(c, dt, seed);
  eng_tensor_t *y = NULL, *ST = NULL, *ck = NULL;
  eng_e88_opts_t o = opts_of(c);
  T_OK(eng_op_e88(in.t[IQ], in.t[IK], in.t[IV], in.t[IDEC], in.t[IG], in.t[IS0], &o, &y, &ST, &ck));
  const int64_t ny = c->B * c->T * c->H * c->v, ns = c->B * c->H * c->n * c->v,
                nc = c->B * c->H * ckpt_len(c);
  double *ry = malloc(sizeof(double) * (size_t)ny), *rs = malloc(sizeof(double) * (size_t)ns),
         *rc = malloc(sizeof(double) * (size_t)nc);
  ref_forward(c, &in, ry, rs, rc);
  const eng_dtype_t sdt = dt == ENG_F64 ? ENG_F64 : ENG_F32;
  cr_assert_eq(y->dtype, dt, "%s: y dtype", what);
  cr_assert_eq(ST->dtype, sdt, "%s: S_T dtype", what);
  cr_assert(y->ndim == 4 && y->shape[3] == c->v && ck->ndim == 3 && ck->shape[0] == c->B &&
                ck->shape[1] == c->H && ck->shape[2] == ckpt_len(c),
            "%s: output shapes", what);
  double ey = t_rel_err(y, ry, ny), es = t_rel_err(ST, rs, ns), ec = t_rel_err(ck, rc, nc);
  cr_assert(ey <= t_tol(dt), "%s %s: y rel err %g", what, eng_dtype_name(dt), ey);
  cr_assert(es <= t_tol(sdt) * (dt == ENG_F64 ? 1 : 10) && ec <= t_tol(sdt) * 10,
            "%s %s: S_T rel err %g, ckpt rel err %g", what, eng_dtype_name(dt), es, ec);
  free(ry), free(rs), free(rc);
  eng_tensor_release(y), eng_tensor_release(ST), eng_tensor_release(ck);
  release_inputs(&in);
}

static const cfg_t SMALL = {.B = 2, .T = 20, .H = 3, .n = 4, .v = 5, .C = 16};

Test(e88, forward_matches_the_math) {
  for (int mask = 0; mask < 16; mask++) {
    cfg_t c = SMALL;
    c.gate = mask & 1, c.s0 = (mask >> 1) & 1, c.l2 = !((mask >> 2) & 1), c.lin = (mask >> 3) & 1;
    check_forward(&c, ENG_F64, 100 + (uint64_t)mask);
  }
  cfg_t one = {.B = 1, .T = 1, .H = 1, .n = 3, .v = 2, .gate = 1, .s0 = 1, .l2 = 1, .C = 16};
  check_forward(&one, ENG_F64, 7);
  cfg_t wide = {.B = 2, .T = 37, .H = 2, .n = 32, .v = 32, .gate = 1, .s0 = 1, .l2 = 1, .C = 8};
  check_forward(&wide, ENG_F64, 8);
  static const eng_dtype_t low[] = {ENG_F32, ENG_F16, ENG_BF16};
  for (int d = 0; d < 3; d++) {
    cfg_t c = SMALL;
    c.gate = c.s0 = c.l2 = 1;
    check_forward(&c, low[d], 20 + (uint64_t)d);
  }
}

/* ckpt's trace against what this test recomputes from the forward's other outputs: o_t = y_t /
 * silu(g_t) (g kept away from 0), and delta_t = v_t - S^T k^_t with S stepped forward here from
 * each checkpoint, which must then land on the next checkpoint (or S_T). */
Test(e88, ckpt_trace_holds_delta_and_o) {
  const cfg_t c = {.B = 2, .T = 7, .H = 2, .n = 4, .v = 3, .gate = 1, .s0 = 1, .l2 = 1, .C = 3};
  inputs_t in = make_inputs(&c, ENG_F64, 123);
  double *g = eng_tensor_data(in.t[IG]);
  for (int64_t e = 0; e < eng_tensor_numel(in.t[IG]); e++) g[e] += g[e] < 0 ? -0.5 : 0.5;
  eng_tensor_t *y = NULL, *ST = NULL, *ck = NULL;
  eng_e88_opts_t o = opts_of(&c);
  T_OK(eng_op_e88(in.t[IQ], in.t[IK], in.t[IV], in.t[IDEC], in.t[IG], in.t[IS0], &o, &y, &ST, &ck));
  const int64_t n = c.n, V = c.v, nv = n * V, W = ckpt_len(&c), nck = (c.T + c.C - 1) / c.C,
                d_at = nck * nv, o_at = d_at + c.T * V;
  cr_assert(ck->ndim == 3 && ck->shape[0] == c.B && ck->shape[1] == c.H && ck->shape[2] == W,
            "ckpt shape");
  const double *k = eng_tensor_data(in.t[IK]), *v = eng_tensor_data(in.t[IV]),
               *dec = eng_tensor_data(in.t[IDEC]), *yd = eng_tensor_data(y),
               *sd = eng_tensor_data(ST), *cd = eng_tensor_data(ck);
  double S[16], kh[4], d[3], err_d = 0, err_o = 0, err_s = 0, sum_d = 0, sum_o = 0;
  for (int64_t bh = 0; bh < c.B * c.H; bh++) {
    const int64_t b = bh / c.H, h = bh % c.H;
    const double *row = cd + bh * W;
    for (int64_t seg = 0; seg < nck; seg++) {
      memcpy(S, row + seg * nv, sizeof(double) * (size_t)nv);
      for (int64_t t = seg * c.C; t < (seg + 1) * c.C && t < c.T; t++) {
        const int64_t r = (b * c.T + t) * c.H + h;
        double nk = 0;
        for (int64_t i = 0; i < n; i++) nk += k[r * n + i] * k[r * n + i];
        for (int64_t i = 0; i < n; i++) kh[i] = k[r * n + i] / (sqrt(nk) + 1e-6);
        for (int64_t j = 0; j < V; j++) {
          d[j] = v[r * V + j];
          for (int64_t i = 0; i < n; i++) d[j] -= S[i * V + j] * kh[i];
          const double gj = g[r * V + j], ot = yd[r * V + j] * (1 + exp(-gj)) / gj;
          err_d = fmax(err_d, fabs(row[d_at + t * V + j] - d[j]));
          err_o = fmax(err_o, fabs(row[o_at + t * V + j] - ot));
          sum_d += fabs(d[j]), sum_o += fabs(ot);
        }
        for (int64_t i = 0; i < n; i++)
          for (int64_t j = 0; j < V; j++) S[i * V + j] = tanh(dec[r] * S[i * V + j] + kh[i] * d[j]);
      }
      const double *next = seg + 1 < nck ? row + (seg + 1) * nv : sd + bh * nv;
      for (int64_t e = 0; e < nv; e++) err_s = fmax(err_s, fabs(S[e] - next[e]));
    }
  }
  cr_assert(sum_d > 0 && sum_o > 0, "an all-zero trace proves nothing");
  cr_assert(err_d < 1e-12 && err_o < 1e-12 && err_s < 1e-12,
            "trace: delta err %g, o err %g, stepped state err %g", err_d, err_o, err_s);
  eng_tensor_release(y), eng_tensor_release(ST), eng_tensor_release(ck);
  release_inputs(&in);
}

/* ---- gradients ---- */

/* sum(y * r1) + sum(S_T * r2) */
static double loss_of(const cfg_t *c, const inputs_t *in, const double *r1, const double *r2) {
  eng_tensor_t *y = NULL, *ST = NULL;
  eng_e88_opts_t o = opts_of(c);
  T_OK(eng_op_e88(in->t[IQ], in->t[IK], in->t[IV], in->t[IDEC], in->t[IG], in->t[IS0], &o, &y, &ST,
                  NULL));
  const double *yd = eng_tensor_data(y), *sd = eng_tensor_data(ST);
  double L = 0;
  for (int64_t e = 0; e < eng_tensor_numel(y); e++) L += yd[e] * r1[e];
  for (int64_t e = 0; e < eng_tensor_numel(ST); e++) L += sd[e] * r2[e];
  eng_tensor_release(y), eng_tensor_release(ST);
  return L;
}

/* The gradients of all inputs for upstream r1 (dy) and r2 (dS_T). */
static eng_e88_grads_t grads_of(const cfg_t *c, const inputs_t *in, eng_tensor_t *dy,
                                eng_tensor_t *dST) {
  eng_tensor_t *y = NULL, *ST = NULL, *ck = NULL;
  eng_e88_opts_t o = opts_of(c);
  T_OK(eng_op_e88(in->t[IQ], in->t[IK], in->t[IV], in->t[IDEC], in->t[IG], in->t[IS0], &o, &y, &ST,
                  &ck));
  eng_e88_grads_t gr;
  T_OK(eng_op_e88_backward(in->t[IQ], in->t[IK], in->t[IV], in->t[IDEC], in->t[IG], in->t[IS0],
                           ck, dy, dST, &o, &gr));
  eng_tensor_release(y), eng_tensor_release(ST), eng_tensor_release(ck);
  return gr;
}

static void release_grads(eng_e88_grads_t *g) {
  eng_tensor_t *all[] = {g->dq, g->dk, g->dv, g->ddecay, g->dg, g->dS0};
  for (int w = 0; w < NIN; w++) eng_tensor_release(all[w]);
}

static eng_tensor_t *grad_of(const eng_e88_grads_t *g, int w) {
  eng_tensor_t *all[] = {g->dq, g->dk, g->dv, g->ddecay, g->dg, g->dS0};
  return all[w];
}

static void gradcheck(const cfg_t *c, uint64_t seed) {
  char what[256];
  describe(c, what, sizeof what);
  inputs_t in = make_inputs(c, ENG_F64, seed);
  int64_t ys[4] = {c->B, c->T, c->H, c->v}, ss[4] = {c->B, c->H, c->n, c->v};
  eng_tensor_t *dy = t_rand_tensor(ys, 4, ENG_F64, seed + 7001, -1, 1),
               *dST = t_rand_tensor(ss, 4, ENG_F64, seed + 7002, -1, 1);
  const double *r1 = eng_tensor_data(dy), *r2 = eng_tensor_data(dST);
  eng_e88_grads_t gr = grads_of(c, &in, dy, dST);
  cr_assert((gr.dg != NULL) == c->gate && (gr.dS0 != NULL) == c->s0, "%s: optional grads", what);
  const double h = 1e-5;
  for (int w = 0; w < NIN; w++) {
    if (!in.t[w]) continue;
    double *x = eng_tensor_data(in.t[w]);
    const double *an = eng_tensor_data(grad_of(&gr, w));
    cr_assert_eq(eng_tensor_numel(grad_of(&gr, w)), eng_tensor_numel(in.t[w]), "%s: d%s size",
                 what, NAME[w]);
    double worst = 0, nz = 0;
    int64_t at = -1;
    for (int64_t e = 0; e < eng_tensor_numel(in.t[w]); e++) {
      const double x0 = x[e];
      x[e] = x0 + h;
      double lp = loss_of(c, &in, r1, r2);
      x[e] = x0 - h;
      double lm = loss_of(c, &in, r1, r2);
      x[e] = x0;
      double num = (lp - lm) / (2 * h), err = fabs(an[e] - num) / (1 + fabs(num));
      nz += fabs(num);
      if (err > worst) worst = err, at = e;
    }
    cr_assert(worst < 1e-6, "%s: d%s[%lld] = %.10g, finite differences say otherwise (err %g)",
              what, NAME[w], (long long)at, at >= 0 ? an[at] : 0.0, worst);
    cr_assert(nz > 0, "%s: d%s is all zero: the check proves nothing", what, NAME[w]);
  }
  release_grads(&gr);
  eng_tensor_release(dy), eng_tensor_release(dST);
  release_inputs(&in);
}

Test(e88, backward_matches_finite_differences) {
  for (int mask = 0; mask < 16; mask++) {
    cfg_t c = {.B = 2, .T = 20, .H = 2, .n = 3, .v = 4, .C = 16};
    c.gate = mask & 1, c.s0 = (mask >> 1) & 1, c.l2 = !((mask >> 2) & 1), c.lin = (mask >> 3) & 1;
    gradcheck(&c, 300 + (uint64_t)mask);
  }
}

Test(e88, backward_short_sequences) {
  /* T = 1; T = 7 over segments of 3 (the last one short); T = 4 with one step per segment */
  const cfg_t cs[] = {{.B = 1, .T = 1, .H = 2, .n = 3, .v = 2, .gate = 1, .s0 = 1, .l2 = 1, .C = 16},
                      {.B = 2, .T = 7, .H = 1, .n = 4, .v = 3, .gate = 1, .s0 = 1, .l2 = 1, .C = 3},
                      {.B = 1, .T = 7, .H = 2, .n = 2, .v = 5, .gate = 0, .s0 = 1, .l2 = 0, .lin = 1, .C = 2},
                      {.B = 1, .T = 4, .H = 1, .n = 5, .v = 2, .gate = 1, .s0 = 0, .l2 = 1, .C = 1}};
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) gradcheck(&cs[i], 500 + i);
}

/* The checkpoint interval changes what is stored, not the gradients. */
Test(e88, backward_does_not_depend_on_ckpt_every) {
  cfg_t c = {.B = 2, .T = 23, .H = 2, .n = 8, .v = 8, .gate = 1, .s0 = 1, .l2 = 1, .C = 16};
  inputs_t in = make_inputs(&c, ENG_F64, 77);
  int64_t ys[4] = {c.B, c.T, c.H, c.v}, ss[4] = {c.B, c.H, c.n, c.v};
  eng_tensor_t *dy = t_rand_tensor(ys, 4, ENG_F64, 78, -1, 1),
               *dST = t_rand_tensor(ss, 4, ENG_F64, 79, -1, 1);
  eng_e88_grads_t ref = grads_of(&c, &in, dy, dST);
  static const int Cs[] = {1, 5, 23, 64};
  for (int i = 0; i < 4; i++) {
    cfg_t ci = c;
    ci.C = Cs[i];
    eng_e88_grads_t g = grads_of(&ci, &in, dy, dST);
    for (int w = 0; w < NIN; w++) {
      double *r = t_values(grad_of(&ref, w));
      double err = t_rel_err(grad_of(&g, w), r, eng_tensor_numel(grad_of(&ref, w)));
      cr_assert(err < 1e-12, "C=%d: d%s differs from C=16 by %g", Cs[i], NAME[w], err);
      free(r);
    }
    release_grads(&g);
  }
  release_grads(&ref);
  eng_tensor_release(dy), eng_tensor_release(dST);
  release_inputs(&in);
}

/* ckpt_every 0 (and opts NULL) is the default interval: 8 at n = 32, 16 elsewhere. The ckpt holds
 * that many checkpoints, and the backward with C = 0 is the one with the interval written out. */
Test(e88, default_checkpoint_interval) {
  static const struct {
    int64_t n;
    int C;
  } want[] = {{32, 8}, {16, 16}};
  for (int i = 0; i < 2; i++) {
    cfg_t c = {.B = 1, .T = 21, .H = 2, .n = want[i].n, .v = 4, .gate = 1, .s0 = 1, .l2 = 1};
    inputs_t in = make_inputs(&c, ENG_F64, 81 + (uint64_t)i);
    eng_tensor_t *y = NULL, *ck = NULL, *ck_null = NULL;
    const eng_e88_opts_t o = opts_of(&c);
    T_OK(eng_op_e88(in.t[IQ], in.t[IK], in.t[IV], in.t[IDEC], in.t[IG], in.t[IS0], &o, &y, NULL,
                    &ck));
    eng_tensor_release(y), y = NULL;
    T_OK(eng_op_e88(in.t[IQ], in.t[IK], in.t[IV], in.t[IDEC], in.t[IG], in.t[IS0], NULL, &y, NULL,
                    &ck_null));
    cfg_t ce = c;  /* the same case with the interval written out */
    ce.C = want[i].C;
    const int64_t W = ckpt_len(&ce);
    cr_assert_eq(ck->shape[2], W, "n=%lld: ckpt width %lld, want %lld (C = %d)", (long long)c.n,
                 (long long)ck->shape[2], (long long)W, want[i].C);
    cr_assert_eq(ck_null->shape[2], W, "n=%lld: opts NULL gives another interval", (long long)c.n);
    int64_t ys[4] = {c.B, c.T, c.H, c.v}, ss[4] = {c.B, c.H, c.n, c.v};
    eng_tensor_t *dy = t_rand_tensor(ys, 4, ENG_F64, 83, -1, 1),
                 *dST = t_rand_tensor(ss, 4, ENG_F64, 84, -1, 1);
    eng_e88_grads_t g0 = grads_of(&c, &in, dy, dST), ge = grads_of(&ce, &in, dy, dST);
    for (int w = 0; w < NIN; w++) {
      double *r = t_values(grad_of(&ge, w));
      cr_assert(t_rel_err(grad_of(&g0, w), r, eng_tensor_numel(grad_of(&ge, w))) == 0,
                "n=%lld: d%s with C = 0 is not the one with C = %d", (long long)c.n, NAME[w],
                want[i].C);
      free(r);
    }
    release_grads(&g0), release_grads(&ge);
    eng_tensor_release(y), eng_tensor_release(ck), eng_tensor_release(ck_null);
    eng_tensor_release(dy), eng_tensor_release(dST);
    release_inputs(&in);
  }
}

/* f32, f16, bf16 gradients against f64 ones on the same (rounded) values. */
Test(e88, backward_lower_dtypes) {
  cfg_t c = {.B = 2, .T = 19, .H = 3, .n = 8, .v = 4, .gate = 1, .s0 = 1, .l2 = 1, .C = 16};
  static const eng_dtype_t low[] = {ENG_F32, ENG_F16, ENG_BF16};
  for (int d = 0; d < 3; d++) {
    inputs_t in = make_inputs(&c, low[d], 40 + (uint64_t)d), in64 = {{0}};
    for (int w = 0; w < NIN; w++) T_OK(eng_tensor_to_dtype(in.t[w], ENG_F64, &in64.t[w]));
    int64_t ys[4] = {c.B, c.T, c.H, c.v}, ss[4] = {c.B, c.H, c.n, c.v};
    eng_tensor_t *dy = t_rand_tensor(ys, 4, low[d], 50, -1, 1), *dST = t_rand_tensor(ss, 4, ENG_F32, 51, -1, 1),
                 *dy64 = NULL, *dST64 = NULL;
    T_OK(eng_tensor_to_dtype(dy, ENG_F64, &dy64));
    T_OK(eng_tensor_to_dtype(dST, ENG_F64, &dST64));
    eng_e88_grads_t g = grads_of(&c, &in, dy, dST), r = grads_of(&c, &in64, dy64, dST64);
    for (int w = 0; w < NIN; w++) {
      eng_tensor_t *gw = grad_of(&g, w);
      cr_assert_eq(gw->dtype, w == IS0 ? ENG_F32 : low[d], "d%s dtype", NAME[w]);
      double *rv = t_values(grad_of(&r, w)), err = t_rel_err(gw, rv, eng_tensor_numel(gw));
      cr_assert(err <= t_tol(low[d]), "%s: d%s rel err %g", eng_dtype_name(low[d]), NAME[w], err);
      free(rv);
    }
    release_grads(&g), release_grads(&r);
    eng_tensor_release(dy), eng_tensor_release(dST), eng_tensor_release(dy64),
        eng_tensor_release(dST64);
    release_inputs(&in), release_inputs(&in64);
  }
}

/* Strided views give what their contiguous copies give. */
Test(e88, strided_inputs) {
  cfg_t c = {.B = 2, .T = 9, .H = 3, .n = 4, .v = 4, .gate = 1, .s0 = 0, .l2 = 1, .C = 4};
  inputs_t in = make_inputs(&c, ENG_F32, 61);
  /* q as the transpose of a [B,T,n,H] tensor */
  int64_t qs[4] = {c.B, c.T, c.n, c.H};
  eng_tensor_t *qb = t_rand_tensor(qs, 4, ENG_F32, 62, -1, 1), *qv = NULL, *qc = NULL;
  T_OK(eng_tensor_transpose(qb, 2, 3, &qv));
  T_OK(eng_tensor_contiguous(qv, &qc));
  cr_assert(!eng_tensor_is_contiguous(qv));
  eng_tensor_t *y1 = NULL, *y2 = NULL;
  eng_e88_opts_t o = opts_of(&c);
  T_OK(eng_op_e88(qv, in.t[IK], in.t[IV], in.t[IDEC], in.t[IG], NULL, &o, &y1, NULL, NULL));
  T_OK(eng_op_e88(qc, in.t[IK], in.t[IV], in.t[IDEC], in.t[IG], NULL, &o, &y2, NULL, NULL));
  double *r = t_values(y2);
  cr_assert(t_rel_err(y1, r, eng_tensor_numel(y2)) == 0, "a strided q changes y");
  free(r);
  eng_tensor_release(y1), eng_tensor_release(y2), eng_tensor_release(qb), eng_tensor_release(qv),
      eng_tensor_release(qc);
  release_inputs(&in);
}

Test(e88, misuse_is_an_error) {
  cfg_t c = {.B = 2, .T = 5, .H = 2, .n = 4, .v = 3, .gate = 1, .s0 = 1, .l2 = 1, .C = 16};
  inputs_t in = make_inputs(&c, ENG_BF16, 90);
  eng_tensor_t *y = NULL, *ck = NULL, *ST = NULL, *bad = NULL;
  int64_t s3[3] = {2, 5, 8}, sk[4] = {2, 5, 2, 5}, sd[3] = {2, 5, 2}, s0[4] = {2, 2, 4, 3};
  bad = t_rand_tensor(s3, 3, ENG_BF16, 1, -1, 1);
  T_FAILS(eng_op_e88(bad, in.t[IK], in.t[IV], in.t[IDEC], NULL, NULL, NULL, &y, NULL, NULL),
          ENG_ERR_SHAPE, "q must be [B,T,H,n]");
  eng_tensor_release(bad);
  bad = t_rand_tensor(sk, 4, ENG_BF16, 1, -1, 1);
  T_FAILS(eng_op_e88(in.t[IQ], bad, in.t[IV], in.t[IDEC], NULL, NULL, NULL, &y, NULL, NULL),
          ENG_ERR_SHAPE, "k must have shape [2,5,2,4]");
  eng_tensor_release(bad);
  bad = t_rand_tensor(sd, 3, ENG_F32, 1, 0, 1);
  T_FAILS(eng_op_e88(in.t[IQ], in.t[IK], in.t[IV], bad, NULL, NULL, NULL, &y, NULL, NULL),
          ENG_ERR_DTYPE, "decay must be bf16, got f32");
  eng_tensor_release(bad);
  bad = t_rand_tensor(s0, 4, ENG_BF16, 1, -1, 1);
  T_FAILS(eng_op_e88(in.t[IQ], in.t[IK], in.t[IV], in.t[IDEC], NULL, bad, NULL, &y, NULL, NULL),
          ENG_ERR_DTYPE, "S0 must be f32");
  eng_tensor_release(bad);
  T_FAILS(eng_op_e88(in.t[IQ], in.t[IK], NULL, in.t[IDEC], NULL, NULL, NULL, &y, NULL, NULL),
          ENG_ERR_ARG, "v is missing");
  eng_e88_opts_t o = {.l2 = 1, .ckpt_every = -1};
  T_FAILS(eng_op_e88(in.t[IQ], in.t[IK], in.t[IV], in.t[IDEC], NULL, NULL, &o, &y, NULL, NULL),
          ENG_ERR_ARG, "ckpt_every must be >= 1 (or 0: the default), got -1");
  int64_t si[4] = {2, 5, 2, 4};
  bad = t_rand_tensor(si, 4, ENG_I32, 1, -3, 3);
  T_FAILS(eng_op_e88(bad, bad, bad, in.t[IDEC], NULL, NULL, NULL, &y, NULL, NULL), ENG_ERR_DTYPE,
          "expected a floating dtype");
  eng_tensor_release(bad);
  /* a checkpoint made with another interval */
  o = (eng_e88_opts_t){.l2 = 1, .ckpt_every = 2};
  T_OK(eng_op_e88(in.t[IQ], in.t[IK], in.t[IV], in.t[IDEC], in.t[IG], in.t[IS0], &o, &y, &ST, &ck));
  eng_e88_grads_t g;
  T_FAILS(eng_op_e88_backward(in.t[IQ], in.t[IK], in.t[IV], in.t[IDEC], in.t[IG], in.t[IS0], ck, y,
                              NULL, NULL, &g),
          ENG_ERR_SHAPE, "ckpt must have shape [2,2,42]");
  eng_tensor_release(y), eng_tensor_release(ST), eng_tensor_release(ck);
  release_inputs(&in);
}
