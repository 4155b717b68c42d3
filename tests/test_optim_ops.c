/* adamw_, sum_squares and scale_ on the CPU against scalar loops written here: several AdamW
 * steps with weight decay and bias correction in f64, f32 and bf16 (grads in the param's dtype or
 * f32), lists of several tensors, version counters, and every error. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eng_autograd.h"
#include "support.h"

/* One scalar AdamW step in double (torch.optim.AdamW's formulas). */
static void adamw_scalar(double *p, double g, double *m, double *v, const eng_adamw_hparams_t *h) {
  double bc1 = 1 - pow(h->beta1, (double)h->step), bc2 = 1 - pow(h->beta2, (double)h->step);
  *p *= 1 - h->lr * h->weight_decay;
  *m = h->beta1 * *m + (1 - h->beta1) * g;
  *v = h->beta2 * *v + (1 - h->beta2) * g * g;
  *p -= h->lr / bc1 * *m / (sqrt(*v) / sqrt(bc2) + h->eps);
}

/* Rounds a value to dtype dt and back (the reference keeps params in their storage dtype). */
static double round_to(double x, eng_dtype_t dt) {
  switch (dt) {
  case ENG_F32: return (float)x;
  case ENG_BF16: return eng_bf16_to_f32(eng_f32_to_bf16((float)x));
  case ENG_F16: return eng_f16_to_f32(eng_f32_to_f16((float)x));
  default: return x;
  }
}

/* Runs `steps` AdamW steps on two tensors of sizes 37 and 5 (param dtype pdt, grad dtype gdt)
 * through eng_op_adamw_ and through the scalar loop, and compares params and moments. */
static void run_adamw(eng_dtype_t pdt, eng_dtype_t gdt, int steps, double tol) {
  enum { K = 2 };
  int64_t sizes[K] = {37, 5};
  eng_dtype_t mdt = pdt == ENG_F64 ? ENG_F64 : ENG_F32;
  eng_tensor_t *p[K], *m[K], *v[K];
  double *rp[K], *rm[K], *rv[K];
  for (int k = 0; k < K; k++) {
    p[k] = t_rand_tensor(&sizes[k], 1, pdt, 10 + (uint64_t)k, -1, 1);
    m[k] = t_rand_tensor(&sizes[k], 1, mdt, 20 + (uint64_t)k, -0.1, 0.1);
    v[k] = t_rand_tensor(&sizes[k], 1, mdt, 30 + (uint64_t)k, 0.01, 0.2);
    rp[k] = t_values(p[k]);
    rm[k] = t_values(m[k]);
    rv[k] = t_values(v[k]);
  }
  for (int s = 1; s <= steps; s++) {
    eng_adamw_hparams_t h = {.lr = 0.01, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
                             .weight_decay = 0.1, .step = s};
    eng_tensor_t *g[K];
    uint32_t before[K];
    for (int k = 0; k < K; k++) {
      g[k] = t_rand_tensor(&sizes[k], 1, gdt, 100 * (uint64_t)s + (uint64_t)k, -1, 1);
      double *gv = t_values(g[k]);
      for (int64_t i = 0; i < sizes[k]; i++) {
        adamw_scalar(&rp[k][i], gv[i], &rm[k][i], &rv[k][i], &h);
        rp[k][i] = round_to(rp[k][i], pdt);
      }
      free(gv);
      before[k] = eng_tensor_version(p[k]);
    }
    uint32_t gver = eng_tensor_version(g[0]);
    T_OK(eng_op_adamw_(p, g, m, v, K, &h));
    for (int k = 0; k < K; k++) cr_assert_eq(eng_tensor_version(p[k]), before[k] + 1, "param version not bumped");
    cr_assert_eq(eng_tensor_version(g[0]), gver, "grads are only read");
    for (int k = 0; k < K; k++) eng_tensor_release(g[k]);
  }
  for (int k = 0; k < K; k++) {
    double ep = t_rel_err(p[k], rp[k], sizes[k]), em = t_rel_err(m[k], rm[k], sizes[k]),
           ev = t_rel_err(v[k], rv[k], sizes[k]);
    cr_assert(ep <= tol && em <= tol && ev <= tol,
              "adamw_ %s params, %s grads, tensor %d after %d steps: rel err p %g m %g v %g > %g",
              eng_dtype_name(pdt), eng_dtype_name(gdt), k, steps, ep, em, ev, tol);
    free(rp[k]);
    free(rm[k]);
    free(rv[k]);
    eng_tensor_release(p[k]);
    eng_tensor_release(m[k]);
    eng_tensor_release(v[k]);
  }
}

Test(adamw, f64_five_steps) { run_adamw(ENG_F64, ENG_F64, 5, 1e-12); }
Test(adamw, f64_with_f32_grads) { run_adamw(ENG_F64, ENG_F32, 3, 1e-12); }
Test(adamw, f32_five_steps) { run_adamw(ENG_F32, ENG_F32, 5, 1e-5); }
/* bf16/f16 params: the reference rounds after each step as the kernel does; a value near a
 * rounding tie may go the other way once (2^-8 relative), far inside 1e-2 */
Test(adamw, bf16_params_five_steps) { run_adamw(ENG_BF16, ENG_BF16, 5, 1e-2); }
Test(adamw, bf16_params_f32_grads) { run_adamw(ENG_BF16, ENG_F32, 5, 1e-2); }
Test(adamw, f16_params) { run_adamw(ENG_F16, ENG_F16, 3, 1e-2); }

/* The first step from zero moments with no weight decay moves each param by lr * sign(g) (for
 * |g| >> eps): a closed form independent of the loop above. */
Test(adamw, first_step_closed_form) {
  double pv[4] = {0.5, -0.5, 2, -3}, gv[4] = {0.3, -2, 1e-3, -0.7};
  int64_t n = 4;
  eng_tensor_t *p = t_tensor(pv, &n, 1, ENG_F64), *g = t_tensor(gv, &n, 1, ENG_F64);
  eng_tensor_t *m = NULL, *v = NULL;
  T_OK(eng_tensor_zeros(&n, 1, ENG_F64, ENG_CPU_DEVICE, &m));
  T_OK(eng_tensor_zeros(&n, 1, ENG_F64, ENG_CPU_DEVICE, &v));
  eng_adamw_hparams_t h = {.lr = 0.125, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-12, .step = 1};
  T_OK(eng_op_adamw_(&p, &g, &m, &v, 1, &h));
  double want[4];
  for (int i = 0; i < 4; i++) want[i] = pv[i] - 0.125 * (gv[i] > 0 ? 1 : -1);
  cr_assert(t_max_abs_err(p, want, 4) < 1e-9, "first step is not lr * sign(g)");
  eng_tensor_release(p);
  eng_tensor_release(g);
  eng_tensor_release(m);
  eng_tensor_release(v);
}

Test(adamw, errors) {
  int64_t n2 = 2, n3 = 3, s2[2] = {2, 2};
  eng_tensor_t *p = t_rand_tensor(&n2, 1, ENG_F32, 1, -1, 1), *g = t_rand_tensor(&n2, 1, ENG_F32, 2, -1, 1);
  eng_tensor_t *m = t_rand_tensor(&n2, 1, ENG_F32, 3, -1, 1), *v = t_rand_tensor(&n2, 1, ENG_F32, 4, 0.1, 1);
  eng_tensor_t *g3 = t_rand_tensor(&n3, 1, ENG_F32, 5, -1, 1), *g16 = t_rand_tensor(&n2, 1, ENG_F16, 6, -1, 1);
  eng_tensor_t *m16 = t_rand_tensor(&n2, 1, ENG_BF16, 7, -1, 1), *pi = t_rand_tensor(&n2, 1, ENG_I32, 8, 0, 5);
  eng_tensor_t *sq = t_rand_tensor(s2, 2, ENG_F32, 9, -1, 1), *pt = NULL, *gt = NULL, *mt = NULL, *vt = NULL;
  T_OK(eng_tensor_transpose(sq, 0, 1, &pt));
  eng_tensor_t *sq_g = t_rand_tensor(s2, 2, ENG_F32, 10, -1, 1), *sq_m = t_rand_tensor(s2, 2, ENG_F32, 11, -1, 1),
               *sq_v = t_rand_tensor(s2, 2, ENG_F32, 12, 0.1, 1);
  gt = sq_g, mt = sq_m, vt = sq_v;
  eng_adamw_hparams_t h = {.lr = 0.1, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0, .step = 1};
  uint32_t pver = eng_tensor_version(p);
  T_FAILS(eng_op_adamw_(&p, &g3, &m, &v, 1, &h), ENG_ERR_SHAPE, "param 1 of 1 is f32 [2] but its grad is f32 [3]");
  T_FAILS(eng_op_adamw_(&p, &g16, &m, &v, 1, &h), ENG_ERR_DTYPE, "its grad must be f32, got f16");
  T_FAILS(eng_op_adamw_(&p, &g, &m16, &v, 1, &h), ENG_ERR_DTYPE, "its exp_avg must be f32, got bf16");
  T_FAILS(eng_op_adamw_(&pi, &g, &m, &v, 1, &h), ENG_ERR_DTYPE, "params must be floating");
  T_FAILS(eng_op_adamw_(&pt, &gt, &mt, &vt, 1, &h), ENG_ERR_LAYOUT, "must be contiguous");
  eng_adamw_hparams_t bad = h;
  bad.step = 0;
  T_FAILS(eng_op_adamw_(&p, &g, &m, &v, 1, &bad), ENG_ERR_ARG, "step must be >= 1");
  bad = h;
  bad.beta2 = 1;
  T_FAILS(eng_op_adamw_(&p, &g, &m, &v, 1, &bad), ENG_ERR_ARG, "beta2 must be in [0, 1)");
  bad = h;
  bad.eps = 0;
  T_FAILS(eng_op_adamw_(&p, &g, &m, &v, 1, &bad), ENG_ERR_ARG, "eps must be > 0");
  cr_assert_eq(eng_tensor_version(p), pver, "a failed step bumps no version");
  T_OK(eng_op_adamw_(&p, &g, &m, &v, 0, &h)); /* an empty list is a no-op */
  eng_tensor_t *all[] = {p, g, m, v, g3, g16, m16, pi, sq, pt, sq_g, sq_m, sq_v};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) eng_tensor_release(all[i]);
}

Test(sum_squares, lists_of_dtypes_and_layouts) {
  int64_t s1[2] = {30, 17}, s2 = 9000, s3[3] = {2, 3, 4};
  eng_tensor_t *a = t_rand_tensor(s1, 2, ENG_F32, 1, -2, 2), *b = t_rand_tensor(&s2, 1, ENG_BF16, 2, -2, 2);
  eng_tensor_t *c = t_rand_tensor(s3, 3, ENG_F16, 3, -2, 2), *at = NULL, *out = NULL;
  T_OK(eng_tensor_transpose(a, 0, 1, &at));
  double want = 0;
  eng_tensor_t *list[3] = {at, b, c};
  for (int k = 0; k < 3; k++) {
    double *x = t_values(list[k]);
    for (int64_t i = 0; i < eng_tensor_numel(list[k]); i++) want += x[i] * x[i];
    free(x);
  }
  T_OK(eng_op_sum_squares(list, 3, &out));
  cr_assert(out->ndim == 0 && out->dtype == ENG_F32, "a 0-d f32 result");
  double got, again;
  T_OK(eng_tensor_to_f64(out, &got));
  cr_assert(fabs(got - want) <= 1e-6 * want, "sum_squares %.9g, want %.9g", got, want);
  eng_tensor_release(out);
  T_OK(eng_op_sum_squares(list, 3, &out));
  T_OK(eng_tensor_to_f64(out, &again));
  cr_assert(got == again, "not deterministic: %.17g then %.17g", got, again);
  eng_tensor_release(out);
  eng_tensor_t *d = t_rand_tensor(s3, 3, ENG_F64, 4, -2, 2), *pair[2] = {c, d};
  T_OK(eng_op_sum_squares(pair, 2, &out));
  cr_assert(out->dtype == ENG_F64, "an f64 input gives an f64 result");
  eng_tensor_release(out);
  eng_tensor_t *ints = t_rand_tensor(s3, 3, ENG_I32, 5, 0, 9);
  T_FAILS(eng_op_sum_squares(&ints, 1, &out), ENG_ERR_DTYPE, "tensor 1 of 1 is i32 [2,3,4]");
  T_FAILS(eng_op_sum_squares(list, 0, &out), ENG_ERR_ARG, "at least one");
  eng_tensor_t *all[] = {a, b, c, at, d, ints};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) eng_tensor_release(all[i]);
}

Test(scale_, in_place_by_a_tensor) {
  int64_t s1[2] = {3, 40000}, s2 = 7, one = 1;
  double sv = 0.37;
  eng_tensor_t *a = t_rand_tensor(s1, 2, ENG_F32, 1, -2, 2), *b = t_rand_tensor(&s2, 1, ENG_BF16, 2, -2, 2);
  eng_tensor_t *s = t_tensor(&sv, &one, 1, ENG_F32), *list[2] = {a, b};
  double *wa = t_values(a), *wb = t_values(b);
  uint32_t va = eng_tensor_version(a), vb = eng_tensor_version(b);
  for (int64_t i = 0; i < 120000; i++) wa[i] = (float)((float)wa[i] * (float)sv);
  for (int64_t i = 0; i < 7; i++) wb[i] = round_to((float)wb[i] * (float)sv, ENG_BF16);
  T_OK(eng_op_scale_(list, 2, s));
  cr_assert(t_max_abs_err(a, wa, 120000) == 0, "f32 scale differs from (float)x * (float)s");
  cr_assert(t_max_abs_err(b, wb, 7) == 0, "bf16 scale differs from one rounding");
  cr_assert(eng_tensor_version(a) == va + 1 && eng_tensor_version(b) == vb + 1, "versions bumped");
  eng_tensor_t *at = NULL, *two = t_rand_tensor(s1, 2, ENG_F32, 3, -1, 1), *sv_view = NULL;
  T_OK(eng_tensor_transpose(a, 0, 1, &at));
  T_FAILS(eng_op_scale_(&at, 1, s), ENG_ERR_LAYOUT, "must be contiguous");
  T_FAILS(eng_op_scale_(list, 2, two), ENG_ERR_ARG, "one floating element");
  T_OK(eng_tensor_narrow(a, 1, 0, 1, &sv_view));
  eng_tensor_t *sview = NULL;
  T_OK(eng_tensor_narrow(sv_view, 0, 0, 1, &sview));
  T_FAILS(eng_op_scale_(list, 2, sview), ENG_ERR_ARG, "shares memory with the scale");
  free(wa);
  free(wb);
  eng_tensor_t *all[] = {a, b, s, at, two, sv_view, sview};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) eng_tensor_release(all[i]);
}
