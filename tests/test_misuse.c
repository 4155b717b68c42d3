/* Misuse from Lua: every kind raises a Lua error (pcall returns false) whose message names the op
 * and the offending shapes/dtypes/values, and the state keeps working afterwards. */
#include <lua.h>
#include <stdio.h>
#include <string.h>

#include "support.h"

static eng_engine_t *E;

static void setup(void) {
  E = eng_engine_new();
  cr_assert(E != NULL, "eng_engine_new: %s", eng_last_error());
  int rc = eng_engine_run_string(E,
                                 "x = engine.randn(4, 3)\n"
                                 "y = engine.randn(5, 2)\n"
                                 "tmp = os.tmpname()\n",
                                 "setup");
  cr_assert(rc == 0, "setup: %s", eng_engine_last_error(E));
}

static void teardown(void) {
  eng_engine_run_string(E, "os.remove(tmp)", "cleanup");
  eng_engine_free(E);
}

TestSuite(misuse, .init = setup, .fini = teardown);

typedef struct {
  const char *code;
  const char *needles[6]; /* NULL-terminated */
} misuse_t;

/* Runs m->code in a pcall: it must fail with every needle in the message; the state must then
 * still compute. */
static void check_misuse(const misuse_t *m) {
  char code[2048];
  snprintf(code, sizeof code,
           "local ok, err = pcall(function() %s end)\n"
           "misuse_ok, misuse_err = ok, tostring(err)\n",
           m->code);
  int rc = eng_engine_run_string(E, code, "misuse");
  cr_assert(rc == 0, "running `%s` failed outside its pcall: %s", m->code,
            eng_engine_last_error(E));
  lua_State *L = eng_engine_lua(E);
  lua_getglobal(L, "misuse_ok");
  int ok = lua_toboolean(L, -1);
  lua_getglobal(L, "misuse_err");
  char err[1024];
  snprintf(err, sizeof err, "%s", lua_tostring(L, -1));
  lua_pop(L, 2);
  cr_expect(!ok, "`%s` should have raised an error", m->code);
  for (int i = 0; !ok && m->needles[i]; i++)
    cr_expect(strstr(err, m->needles[i]) != NULL, "`%s`: message '%s' lacks '%s'", m->code, err,
              m->needles[i]);
  rc = eng_engine_run_string(E,
                             "assert((engine.ones(2, 2) * 3):sum():item() == 12)\n"
                             "assert(x:matmul(x:t()):shape()[1] == 4)",
                             "still-works");
  cr_assert(rc == 0, "after `%s` the state is broken: %s", m->code, eng_engine_last_error(E));
}

static void check_all(const misuse_t *list, size_t n) {
  for (size_t i = 0; i < n; i++) check_misuse(&list[i]);
}

#define CHECK_ALL(list) check_all(list, sizeof(list) / sizeof(list[0]))

Test(misuse, wrong_argument_types) {
  static const misuse_t cases[] = {
      {"return x:add('a')", {"add: argument 2 must be a tensor or number, got string"}},
      {"return x + {}", {"add", "argument 2", "table"}},
      {"return {} * x", {"mul", "argument 1", "table"}},
      {"return engine.F.add(1, 2)", {"add", "two numbers"}},
      {"return engine.F.matmul(x, 3)", {"matmul: argument 2 must be a tensor, got number"}},
      {"return engine.Tensor.add(nil, nil)", {"add", "argument 1", "nil"}},
      {"return engine.zeros('a')", {"zeros", "argument 1", "string"}},
      {"return engine.zeros(2, 'f32')", {"zeros", "argument 2", "options table", "string"}},
      {"return engine.zeros(2, {dtyp = 'f32'})", {"zeros", "unknown option 'dtyp'"}},
      {"return x:view(2.5, 4)", {"view", "integer", "2.5"}},
      {"return engine.F.cat({x, 3}, 0)", {"cat", "element 2", "number"}},
      {"return engine.F.cat({}, 0)", {"cat", "empty"}},
      {"return x:sum('a')", {"sum", "argument 2", "string"}},
      {"return x:sum(0, false, {correction = 1})", {"sum", "takes no options", "correction"}},
      {"return x:var(0, false, {correction = -1})", {"var", "correction", "-1"}},
      {"return x:clamp()", {"clamp", "lo, hi"}},
      {"return engine.tensor({{1, 2}, {3}})",
       {"tensor", "ragged", "depth 2", "expected 2", "got 1"}},
      {"return engine.tensor({{1, 2}, 3})", {"tensor", "ragged", "depth 2"}},
      {"return engine.tensor({1, 'a'})", {"tensor", "string"}},
      {"return engine.tensor({{{{{{{{{1}}}}}}}}})", {"tensor", "deeper than 8"}},
      {"return engine.tensor({1.5}, {dtype = 'i32'})", {"tensor", "1.5", "not an integer", "i32"}},
      {"return engine.full({2}, 300, {dtype = 'u8'})", {"full", "300", "out of range", "u8"}},
      {"return engine.zeros(3, {dtype = 'i64'}):fill_(0.5)", {"fill_", "0.5", "i64"}},
      {"return x:view(1, 1, 1, 1, 1, 1, 1, 1, 12)", {"view", "more than 8"}},
      {"return engine.manual_seed(1.5)", {"manual_seed", "1.5"}},
      {"return engine.randint(5, 5, {2})", {"randint", "high (5)", "low (5)"}},
      {"return engine.arange(0, 1, 0)", {"arange", "step"}},
      {"return engine.zeros(2, -1)", {"zeros", "-1", "[2,-1]"}},
      {"return engine.log('hi', 'loud')", {"log", "unknown level 'loud'"}},
      {"return getmetatable(x).__len(1)", {"len", "argument 1", "number"}},
      {"local z = engine.ones(2); z:free(); return z + 1", {"add", "freed tensor"}},
  };
  CHECK_ALL(cases);
}

Test(misuse, shape_and_dtype_mismatch) {
  static const misuse_t cases[] = {
      {"return x:matmul(y)", {"matmul", "[4,3]", "[5,2]"}},
      {"return x + engine.randn(5, 7)", {"add", "[4,3]", "[5,7]"}},
      {"return engine.where(x:gt(0), x, y)", {"where", "[4,3]", "[5,2]"}},
      {"return engine.F.linear(x, y)", {"linear", "[4,3]", "[5,2]"}},
      {"return engine.F.linear(x, engine.ones(3))", {"linear", "2-D", "[3]"}},
      {"return engine.F.layer_norm(x, engine.ones(5))", {"layer_norm", "[5]"}},
      {"return engine.cat({x, y}, 0)", {"cat", "[4,3]", "[5,2]"}},
      {"return x:expand(5, 3)", {"expand", "[4,3]", "[5,3]"}},
      {"return x:view(5, 3)", {"view", "[5,3]", "12 elements"}},
      {"return engine.zeros(3, {dtype = 'i64'}):exp()", {"exp", "i64"}},
      {"return x:int():matmul(x:t():int())", {"matmul", "i32"}},
      {"return x:mean(0):long():mean()", {"mean", "i64"}},
      {"return engine.F.cross_entropy(x, engine.tensor({0, 1, 2, 1}))", {"cross_entropy", "f32"}},
      {"return engine.F.embedding(engine.tensor({1}), x)", {"embedding", "f32"}},
      {"return x:gather(1, engine.tensor({{0}}, {dtype = 'f32'}))", {"gather", "f32"}},
  };
  CHECK_ALL(cases);
}

Test(misuse, bad_dims_and_indices) {
  static const misuse_t cases[] = {
      {"return x:sum(5)", {"sum", "5"}},
      {"return x:transpose(0, 2)", {"transpose", "2"}},
      {"return x:softmax(3)", {"softmax", "3"}},
      {"return x:size(2)", {"size", "2"}},
      {"return x:unsqueeze(4)", {"unsqueeze", "4"}},
      {"return x:narrow(1, 2, 5)", {"narrow", "[4,3]"}},
      {"return x:get(4, 0)", {"get: index 4 is out of range for dim 0 of size 4 (shape [4,3])"}},
      {"return x:get(0, -4)", {"get", "index -4", "dim 1"}},
      {"return x:get(0)", {"get: expected 2 indices for a tensor of shape [4,3], got 1"}},
      {"return x:set(0, 5, 1)", {"set", "index 5"}},
      {"return x:select(0, 9)", {"select", "9"}},
      {"return x:item()", {"item", "[4,3]"}},
      {"return #engine.tensor(1)", {"len", "0-d"}},
      {"return x:t():view(12)", {"view", "[3,4]"}},
      {"return engine.F.embedding(engine.tensor({7}, {dtype = 'i64'}), x)", {"embedding", "7"}},
      {"return x:index_select(0, {0, 9})", {"index_select", "9"}},
      {"return x:index_select(0, {0.5})", {"index_select", "integer"}},
      {"return engine.F.cross_entropy(x, engine.tensor({0, 1, 5, 2}, {dtype = 'i64'}))",
       {"cross_entropy", "5"}},
      {"return x:gather(0, engine.tensor({{4}}, {dtype = 'i64'}))", {"gather", "4"}},
  };
  CHECK_ALL(cases);
}

Test(misuse, unknown_dtype_and_device) {
  static const misuse_t cases[] = {
      {"return engine.zeros(2, {dtype = 'f33'})", {"zeros: unknown dtype 'f33'"}},
      {"return engine.randn(2, {dtype = 5})", {"randn", "dtype", "number"}},
      {"return x:to('f33')", {"to", "'f33'", "neither a dtype"}},
      {"return x:to({dtype = 'f33'})", {"to: unknown dtype 'f33'"}},
      {"return engine.zeros(2, {device = 'tpu'})", {"zeros", "tpu"}},
      {"return x:to({device = 'cuda:7'})", {"to", "cuda"}},
  };
  CHECK_ALL(cases);
}

Test(misuse, bad_files) {
  static const misuse_t cases[] = {
      {"return engine.load('/nonexistent/dir/w.safetensors')",
       {"load", "/nonexistent/dir/w.safetensors"}},
      {"return engine.load(tmp)", {"load"}}, /* an empty file */
      {"return engine.load(5)", {"load", "argument 1", "number"}},
      {"return engine.save('/nonexistent/dir/w.safetensors', {x = x})",
       {"save", "/nonexistent/dir"}},
      {"return engine.save(tmp, {x = x}, {step = 1})", {"save", "metadata 'step'", "number"}},
      {"return engine.save(tmp, {x = 1})", {"save", "tensors['x']", "number"}},
      {"return engine.save(tmp, {x})", {"save", "names", "number"}},
      {"return engine.save(tmp, x)", {"save", "argument 2", "tensor"}},
  };
  CHECK_ALL(cases);
}

/* Without a pcall the error reaches the embedding API, with a traceback, and the state survives. */
Test(misuse, unprotected_errors_come_back_with_a_traceback) {
  int rc = eng_engine_run_string(E, "local z = x:matmul(y)", "direct");
  cr_assert(rc != 0);
  const char *err = eng_engine_last_error(E);
  cr_expect(strstr(err, "direct:1:") != NULL, "position missing: %s", err);
  cr_expect(strstr(err, "matmul") && strstr(err, "[4,3]") && strstr(err, "[5,2]"), "message: %s",
            err);
  cr_expect(strstr(err, "stack traceback") != NULL, "traceback missing: %s", err);
  cr_assert(eng_engine_run_string(E, "assert(x:sum():item() == x:sum():item())", "after") == 0,
            "%s", eng_engine_last_error(E));
}

/* Calling the metamethods and methods by hand with odd arguments never crashes. */
Test(misuse, metamethods_called_by_hand) {
  int rc = eng_engine_run_string(E,
                                 "local mt = getmetatable(x)\n"
                                 "mt.__gc(1); mt.__gc({}); mt.__gc(nil)\n"
                                 "assert(mt.__tostring(5) == 'not a tensor')\n"
                                 "assert(pcall(mt.__add, 1, 'a') == false)\n"
                                 "assert(pcall(mt.__unm, nil) == false)\n"
                                 "local z = engine.ones(3)\n"
                                 "mt.__gc(z)\n"
                                 "assert(tostring(z) == 'tensor(freed)')\n"
                                 "assert(pcall(z.sum, z) == false)\n",
                                 "by-hand");
  cr_assert(rc == 0, "%s", eng_engine_last_error(E));
}
