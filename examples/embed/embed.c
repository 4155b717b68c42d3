/* embed: a C program that uses the engine as a library.
 *
 * It wraps its own float buffers as tensors (no copy), defines a Lua function computing
 * softmax(x @ W), calls it, and checks the answer against a plain C loop. It then changes the C
 * buffer and calls again (Lua sees the change: nothing was copied), shows how an error from Lua
 * comes back, and runs a second, independent engine whose print() goes to a log callback.
 * Exits non-zero when a check fails. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <engine.h>

enum { ROWS = 2, IN = 3, OUT = 4 };

static const char *const SETUP = "function scores(x, W)\n"
                                 "  return engine.F.softmax(x:matmul(W), -1)\n"
                                 "end\n";

/* softmax(x @ W) row by row, in double. */
static void reference(const float *x, const float *w, double *out) {
  for (int i = 0; i < ROWS; i++) {
    double logits[OUT], max = -INFINITY, sum = 0;
    for (int k = 0; k < OUT; k++) {
      logits[k] = 0;
      for (int d = 0; d < IN; d++) logits[k] += (double)x[i * IN + d] * w[d * OUT + k];
      if (logits[k] > max) max = logits[k];
    }
    for (int k = 0; k < OUT; k++) sum += exp(logits[k] - max);
    for (int k = 0; k < OUT; k++) out[i * OUT + k] = exp(logits[k] - max) / sum;
  }
}

/* Prints y and returns 1 when it matches the C loop. */
static int check_scores(const char *what, const float *x, const float *w, eng_tensor_t *y) {
  if (y->dtype != ENG_F32 || y->ndim != 2 || y->shape[0] != ROWS || y->shape[1] != OUT ||
      !eng_tensor_is_contiguous(y)) {
    printf("%s: unexpected result layout\n", what);
    return 0;
  }
  const float *got = eng_tensor_data(y);
  double want[ROWS * OUT], max_err = 0;
  reference(x, w, want);
  printf("%s:\n", what);
  for (int i = 0; i < ROWS; i++) {
    printf("  ");
    for (int k = 0; k < OUT; k++) {
      printf(" %.6f", got[i * OUT + k]);
      double err = fabs(got[i * OUT + k] - want[i * OUT + k]);
      if (!(err <= max_err)) max_err = err;
    }
    printf("\n");
  }
  int ok = max_err < 1e-6;
  printf("  %s the C loop (max error %.2e)\n", ok ? "matches" : "DOES NOT MATCH", max_err);
  return ok;
}

static void print_to_log(void *user, int level, const char *msg) {
  printf("[%s/%d] %s\n", (const char *)user, level, msg);
}

int main(void) {
  int ok = 1;
  float x[ROWS * IN] = {0.5f, -1.0f, 2.0f, 1.5f, 0.25f, -0.75f};
  float w[IN * OUT] = {0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f, 0.7f, -0.8f, 0.9f, 1.0f, -1.1f, 0.2f};
  int64_t x_shape[2] = {ROWS, IN}, w_shape[2] = {IN, OUT};

  eng_engine_t *e = eng_engine_new();
  if (!e) {
    fprintf(stderr, "eng_engine_new failed: %s\n", eng_last_error());
    return 1;
  }
  if (eng_engine_run_string(e, SETUP, "setup") != 0) {
    fprintf(stderr, "setup failed: %s\n", eng_engine_last_error(e));
    return 1;
  }

  /* The tensors view the C arrays: nothing is copied. */
  eng_tensor_t *in[2] = {NULL, NULL}, *y = NULL;
  if (eng_tensor_wrap(x, ENG_F32, x_shape, 2, NULL, ENG_CPU_DEVICE, &in[0]) != ENG_OK ||
      eng_tensor_wrap(w, ENG_F32, w_shape, 2, NULL, ENG_CPU_DEVICE, &in[1]) != ENG_OK) {
    fprintf(stderr, "wrap failed: %s\n", eng_last_error());
    return 1;
  }

  if (eng_engine_call(e, "scores", in, 2, &y, 1) != 1) {
    fprintf(stderr, "scores failed: %s\n", eng_engine_last_error(e));
    return 1;
  }
  ok &= check_scores("softmax(x @ W)", x, w, y);
  eng_tensor_release(y);

  x[0] = 3.0f; /* seen by Lua at the next call: the tensor is a view of x */
  if (eng_engine_call(e, "scores", in, 2, &y, 1) != 1) {
    fprintf(stderr, "scores failed: %s\n", eng_engine_last_error(e));
    return 1;
  }
  ok &= check_scores("after x[0] = 3 in C", x, w, y);
  eng_tensor_release(y);

  /* A bad call: [3,4] @ [2,3] does not fit. The engine reports it; nothing crashes. */
  eng_tensor_t *swapped[2] = {in[1], in[0]};
  if (eng_engine_call(e, "scores", swapped, 2, &y, 1) >= 0) {
    printf("a mismatched call unexpectedly succeeded\n");
    ok = 0;
  } else {
    const char *msg = eng_engine_last_error(e);
    printf("a bad call reports: %.*s\n", (int)strcspn(msg, "\n"), msg);
  }

  /* A second engine: its own globals and RNG, and print() going to a callback. */
  eng_engine_t *e2 = eng_engine_new();
  if (!e2) {
    fprintf(stderr, "eng_engine_new failed: %s\n", eng_last_error());
    return 1;
  }
  eng_engine_set_log(e2, print_to_log, "engine 2");
  if (eng_engine_run_string(e2,
                            "function twice(x) return x * 2 end\nprint('ready', engine.version)",
                            "setup2") != 0) {
    fprintf(stderr, "setup2 failed: %s\n", eng_engine_last_error(e2));
    return 1;
  }
  if (eng_engine_call(e2, "twice", in, 1, &y, 1) != 1) {
    fprintf(stderr, "twice failed: %s\n", eng_engine_last_error(e2));
    return 1;
  }
  const float *t2 = eng_tensor_data(y);
  for (int i = 0; i < ROWS * IN; i++) ok &= t2[i] == 2 * x[i];
  printf("engine 2: twice(x) %s\n", ok ? "is right" : "IS WRONG");
  eng_tensor_release(y);
  if (eng_engine_call(e, "twice", in, 1, &y, 1) >= 0) {
    printf("engine 1 sees engine 2's function\n");
    ok = 0;
  } else {
    printf("engine 1 has no 'twice': the engines are independent\n");
  }

  eng_tensor_release(in[0]);
  eng_tensor_release(in[1]);
  eng_engine_free(e2);
  eng_engine_free(e);
  printf("%s\n", ok ? "all checks passed" : "SOME CHECKS FAILED");
  return ok ? 0 : 1;
}
