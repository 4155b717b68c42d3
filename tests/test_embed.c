/* The embedding API (engine.h) used directly from C, the embedding example program, and the Lua
 * module loaded by a plain luajit. */
#include "support.h" /* criterion.h must come before the other criterion headers */

#include <criterion/redirect.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static eng_engine_t *new_engine(void) {
  eng_engine_t *e = eng_engine_new();
  cr_assert(e != NULL, "eng_engine_new: %s", eng_last_error());
  return e;
}

static void run(eng_engine_t *e, const char *code) {
  cr_assert(eng_engine_run_string(e, code, "test") == 0, "`%s`: %s", code,
            eng_engine_last_error(e));
}

/* The first n values of global `name` (a tensor) in e, malloc'd. */
static double *global_values(eng_engine_t *e, const char *name) {
  eng_tensor_t *t = NULL;
  cr_assert(eng_engine_get_tensor(e, name, &t) == 0, "%s", eng_engine_last_error(e));
  double *v = t_values(t);
  eng_tensor_release(t);
  return v;
}

Test(embed, two_engines_coexist) {
  eng_engine_t *a = new_engine(), *b = new_engine();
  run(a, "only_in_a = 1");
  run(b, "assert(only_in_a == nil, 'globals leak between engines')");
  /* Each engine has its own generator: draws in one do not move the other. */
  run(a, "engine.manual_seed(7)");
  run(b, "engine.manual_seed(7); local skip = engine.randn(100)");
  run(a, "draw = engine.randn(8, {dtype = 'f64'})");
  run(b, "draw = engine.randn(8, {dtype = 'f64'})");
  run(b, "engine.manual_seed(7); fresh = engine.randn(8, {dtype = 'f64'})");
  double *da = global_values(a, "draw"), *db = global_values(b, "draw"),
         *fresh = global_values(b, "fresh");
  int differ = 0;
  for (int i = 0; i < 8; i++) {
    cr_expect(da[i] == fresh[i], "a's draw %d: %g, a fresh seed-7 draw gives %g", i, da[i],
              fresh[i]);
    differ |= da[i] != db[i];
  }
  cr_expect(differ, "b drew 100 more values first, so its draw must differ");
  free(da);
  free(db);
  free(fresh);
  eng_engine_free(a);
  run(b, "assert(engine.ones(3):sum():item() == 3)"); /* b outlives a */
  eng_engine_free(b);
}

Test(embed, wrapped_buffer_is_shared_without_copy) {
  eng_engine_t *e = new_engine();
  double vals[6];
  t_random(vals, 6, 1, -1, 1);
  float buf[6];
  for (int i = 0; i < 6; i++) buf[i] = (float)vals[i];
  int64_t shape[2] = {2, 3};
  eng_tensor_t *t = NULL;
  T_OK(eng_tensor_wrap(buf, ENG_F32, shape, 2, NULL, ENG_CPU_DEVICE, &t));
  cr_assert(eng_engine_set_tensor(e, "buf", t) == 0, "%s", eng_engine_last_error(e));
  char code[256];
  snprintf(code, sizeof code, "assert(buf:get(1, 2) == %.17g, 'Lua reads the C values')",
           (double)buf[5]);
  run(e, code);
  buf[5] = 1234.5f; /* changed in C, seen from Lua */
  run(e, "assert(buf:get(1, 2) == 1234.5, 'Lua sees a change made in C')");
  run(e, "buf:set(0, 0, -7.25)");
  cr_expect(buf[0] == -7.25f, "C sees a change made in Lua: %g", buf[0]);
  eng_tensor_t *back = NULL;
  cr_assert(eng_engine_get_tensor(e, "buf", &back) == 0, "%s", eng_engine_last_error(e));
  cr_expect(eng_tensor_data(back) == (void *)buf, "get_tensor hands back the same memory");
  eng_tensor_release(back);
  eng_tensor_release(t);
  run(e, "n = 42");
  cr_expect(eng_engine_get_tensor(e, "n", &back) != 0 && back == NULL, "a number is not a tensor");
  cr_expect(strstr(eng_engine_last_error(e), "'n'") && strstr(eng_engine_last_error(e), "number"),
            "%s", eng_engine_last_error(e));
  eng_engine_free(e); /* drops Lua's reference before buf goes out of scope */
}

Test(embed, call_with_tensors_in_and_out) {
  eng_engine_t *e = new_engine();
  run(e, "function both(a, b) return a + b, a * b end\n"
         "lib = {nested = {scale = function(a) return a * 3 end}}\n"
         "function not_a_tensor(a) return a, 5 end\n"
         "function fails(a) error('deliberate failure in fails') end");
  int64_t shape[2] = {3, 4};
  eng_tensor_t *a = t_rand_tensor(shape, 2, ENG_F64, 2, -2, 2),
               *b = t_rand_tensor(shape, 2, ENG_F64, 3, -2, 2);
  double *va = t_values(a), *vb = t_values(b);
  double sum[12], prod[12], tanh_ref[12], scaled[12];
  for (int i = 0; i < 12; i++) {
    sum[i] = va[i] + vb[i];
    prod[i] = va[i] * vb[i];
    tanh_ref[i] = tanh(va[i]);
    scaled[i] = va[i] * 3;
  }
  eng_tensor_t *in[2] = {a, b}, *out[3] = {NULL, NULL, NULL};

  cr_assert_eq(eng_engine_call(e, "both", in, 2, out, 2), 2, "%s", eng_engine_last_error(e));
  cr_expect(t_max_abs_err(out[0], sum, 12) == 0);
  cr_expect(t_max_abs_err(out[1], prod, 12) == 0);
  eng_tensor_release(out[0]);
  eng_tensor_release(out[1]);

  cr_assert_eq(eng_engine_call(e, "both", in, 2, out, 3), 2, "fewer results than slots");
  cr_expect(out[2] == NULL);
  eng_tensor_release(out[0]);
  eng_tensor_release(out[1]);

  cr_assert_eq(eng_engine_call(e, "both", in, 2, out, 1), 1);
  cr_expect(t_max_abs_err(out[0], sum, 12) == 0);
  eng_tensor_release(out[0]);

  cr_assert_eq(eng_engine_call(e, "engine.F.tanh", in, 1, out, 1), 1, "%s",
               eng_engine_last_error(e));
  cr_expect(t_max_abs_err(out[0], tanh_ref, 12) < 1e-14);
  eng_tensor_release(out[0]);

  cr_assert_eq(eng_engine_call(e, "lib.nested.scale", in, 1, out, 1), 1, "%s",
               eng_engine_last_error(e));
  cr_expect(t_max_abs_err(out[0], scaled, 12) < 1e-14);
  eng_tensor_release(out[0]);

  cr_expect_eq(eng_engine_call(e, "not_a_tensor", in, 1, out, 2), -1,
               "a number where a tensor is expected");
  cr_expect(out[0] == NULL && out[1] == NULL, "nothing is handed out on error");
  cr_expect(strstr(eng_engine_last_error(e), "result 2") &&
                strstr(eng_engine_last_error(e), "number"),
            "%s", eng_engine_last_error(e));
  cr_expect_eq(eng_engine_call(e, "not_a_tensor", in, 1, out, 1), 1,
               "only the first result is wanted");
  eng_tensor_release(out[0]);

  cr_expect_eq(eng_engine_call(e, "no.such.fn", in, 1, out, 1), -1);
  cr_expect(strstr(eng_engine_last_error(e), "no.such.fn") != NULL, "%s", eng_engine_last_error(e));
  cr_expect_eq(eng_engine_call(e, "engine.F.nope", in, 1, out, 1), -1);
  cr_expect(strstr(eng_engine_last_error(e), "engine.F.nope") != NULL, "%s",
            eng_engine_last_error(e));

  cr_expect_eq(eng_engine_call(e, "fails", in, 1, out, 1), -1);
  const char *err = eng_engine_last_error(e);
  cr_expect(strstr(err, "deliberate failure in fails") && strstr(err, "stack traceback"), "%s",
            err);

  cr_expect_eq(eng_engine_call(e, "engine.F.matmul", in, 2, out, 1), -1);
  err = eng_engine_last_error(e);
  cr_expect(strstr(err, "matmul") && strstr(err, "[3,4]") && strstr(err, "stack traceback"), "%s",
            err);

  eng_tensor_t *with_null[2] = {a, NULL};
  cr_expect_eq(eng_engine_call(e, "both", with_null, 2, out, 1), -1);
  cr_expect(strstr(eng_engine_last_error(e), "input 2") != NULL, "%s", eng_engine_last_error(e));

  free(va);
  free(vb);
  eng_tensor_release(a);
  eng_tensor_release(b);
  eng_engine_free(e);
}

Test(embed, run_string_and_run_file_report_errors) {
  eng_engine_t *e = new_engine();
  cr_expect(eng_engine_run_string(e, "local = 1", "broken") != 0);
  cr_expect(strstr(eng_engine_last_error(e), "broken:1:") != NULL, "%s", eng_engine_last_error(e));
  cr_expect(eng_engine_run_string(e, "local function f() error('deep') end\nf()", "chunk") != 0);
  const char *err = eng_engine_last_error(e);
  cr_expect(strstr(err, "chunk:1: deep") && strstr(err, "stack traceback") &&
                strstr(err, "in function 'f'"),
            "%s", err);

  char path[] = "/tmp/engine_test_XXXXXX.lua";
  int fd = mkstemps(path, 4);
  cr_assert(fd >= 0);
  const char *script =
      "local a, b = ...\n"
      "got = table.concat({arg[0] == SCRIPT and 'path' or 'no-path', arg[1], arg[2], a, b}, ',')\n";
  cr_assert(write(fd, script, strlen(script)) == (ssize_t)strlen(script));
  close(fd);
  char set[256];
  snprintf(set, sizeof set, "SCRIPT = '%s'", path);
  run(e, set);
  const char *argv[2] = {"one", "two"};
  cr_assert(eng_engine_run_file(e, path, 2, argv) == 0, "%s", eng_engine_last_error(e));
  run(e, "assert(got == 'path,one,two,one,two', got)");
  unlink(path);
  cr_expect(eng_engine_run_file(e, path, 0, NULL) != 0);
  cr_expect(strstr(eng_engine_last_error(e), "engine_test_") != NULL, "%s",
            eng_engine_last_error(e));
  eng_engine_free(e);
}

typedef struct {
  char text[4096];
  int levels[16];
  int n;
} log_sink_t;

static void sink(void *user, int level, const char *msg) {
  log_sink_t *s = user;
  if (s->n < 16) s->levels[s->n] = level;
  s->n++;
  strncat(s->text, msg, sizeof s->text - strlen(s->text) - 2);
  strcat(s->text, "\n");
}

Test(embed, log_callback_gets_print_and_engine_log, .init = cr_redirect_stdout) {
  eng_engine_t *e = new_engine();
  log_sink_t s = {0};
  eng_engine_set_log(e, sink, &s);
  run(e, "print('hello', 42, nil)\n"
         "print(engine.tensor({1, 2}, {dtype = 'i64'}))\n"
         "engine.log('careful', 'warn')\n"
         "engine.log(engine.ones(1))");
  cr_expect_str_eq(s.text, "hello\t42\tnil\n"
                           "tensor(i64, [2], cpu)\n[1, 2]\n"
                           "careful\n"
                           "tensor(f32, [1], cpu)\n[1.]\n");
  cr_expect_eq(s.n, 4);
  cr_expect(s.levels[0] == ENG_LOG_INFO && s.levels[2] == ENG_LOG_WARN);
  eng_engine_set_log(e, NULL, NULL);
  run(e, "print('back on stdout', 7)");
  cr_expect_eq(s.n, 4, "nothing reaches the callback once it is removed");
  fflush(stdout);
  cr_expect_stdout_eq_str("back on stdout\t7\n");
  eng_engine_free(e);
}

Test(embed, gc_runs_when_tensor_memory_grows) {
  eng_engine_t *e = new_engine();
  size_t before = eng_cpu_bytes_live();
  /* 64 temporaries of 8 MB: Lua sees only small userdata, the pacing must collect anyway. */
  run(e, "for i = 1, 64 do local t = engine.zeros(2 * 1024 * 1024) end");
  size_t grown = eng_cpu_bytes_live() - before;
  cr_expect(grown < (size_t)160 << 20, "tensor bytes still live after the loop: %zu MB",
            grown >> 20);
  eng_engine_free(e);
  cr_expect_eq(eng_cpu_bytes_live(), before, "freeing the engine gives everything back");
}

Test(embed, the_example_program_runs) {
  char *out = NULL;
  int rc = t_run_capture(ENGINE_EMBED_BIN, &out);
  cr_expect_eq(rc, 0, "embed example failed (%d):\n%s", rc, out);
  static const char *const expected[] = {
      "softmax(x @ W):",
      "matches the C loop",
      "after x[0] = 3 in C:",
      "a bad call reports: setup:2: matmul: inner dims differ: [3,4] @ [2,3]",
      "[engine 2/1] ready\t" ENG_VERSION,
      "engine 2: twice(x) is right",
      "engine 1 has no 'twice'",
      "all checks passed"};
  for (size_t i = 0; i < sizeof expected / sizeof *expected; i++)
    cr_expect(strstr(out, expected[i]) != NULL, "output lacks '%s':\n%s", expected[i], out);
  free(out);
}

/* engine.so loaded by a plain luajit: `require "engine"` works and gives one table. */
Test(embed, plain_luajit_requires_the_module) {
  char module[512], cmd[2048];
  snprintf(module, sizeof module, "%s", ENGINE_MODULE);
  const char *preload = "";
#ifdef __SANITIZE_ADDRESS__
  /* An ASan-built engine.so needs the ASan runtime loaded first into the uninstrumented luajit. */
  preload = "LD_PRELOAD=$(gcc -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0 ";
#endif
  snprintf(cmd, sizeof cmd,
           "%sLUA_CPATH='%s/?.so' luajit -e '"
           "local engine = require \"engine\"\n"
           "assert(require \"engine\" == engine)\n"
           "engine.manual_seed(3)\n"
           "local x = engine.randn{2, 3}\n"
           "print(table.concat(x:shape(), \"x\"), engine.F.tanh(x):abs():max():item() < 1)\n"
           "print(x)'",
           preload, dirname(module));
  char *out = NULL;
  int rc = t_run_capture(cmd, &out);
  cr_expect_eq(rc, 0, "%s\n%s", cmd, out);
  cr_expect(strstr(out, "2x3\ttrue\n") != NULL, "%s", out);
  cr_expect(strstr(out, "tensor(f32, [2,3], cpu)\n[[") != NULL, "%s", out);
  free(out);
}
