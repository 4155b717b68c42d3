/* engine: embed the engine (LuaJIT + tensors + kernels) in a C program.
 *
 *   eng_engine_t *e = eng_engine_new();
 *   if (eng_engine_run_string(e, "function double(x) return x * 2 end", "setup") != 0)
 *     fprintf(stderr, "%s\n", eng_engine_last_error(e));
 *   float buf[6] = {...};
 *   int64_t shape[2] = {2, 3};
 *   eng_tensor_t *x, *y;
 *   eng_tensor_wrap(buf, ENG_F32, shape, 2, NULL, ENG_CPU_DEVICE, &x);   // no copy
 *   eng_engine_call(e, "double", &x, 1, &y, 1);
 *   float *out = eng_tensor_data(y);
 *   eng_tensor_release(x); eng_tensor_release(y); eng_engine_free(e);
 *
 * Several engines may coexist in one process; each has its own Lua state and RNG. One engine must
 * not be used from two threads at once. */
#ifndef ENGINE_H
#define ENGINE_H

#include "eng_base.h"
#include "eng_tensor.h"
#include "eng_ops.h"
#include "eng_checkpoint.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct eng_engine eng_engine_t;
struct lua_State;

/* A new engine with the `engine` module loaded as the global `engine`. NULL if out of memory. */
eng_engine_t *eng_engine_new(void);
void eng_engine_free(eng_engine_t *e);

/* Run Lua code. Return 0 on success, non-zero on error (message in eng_engine_last_error, with a
 * traceback). */
int eng_engine_run_string(eng_engine_t *e, const char *code, const char *chunkname);
/* Runs a file with the global `arg` set to {[0] = path, argv...}. */
int eng_engine_run_file(eng_engine_t *e, const char *path, int argc, const char *const *argv);

/* Calls the Lua function named `fname` (a global, or a dotted path such as "engine.F.tanh") with
 * n_in tensors. Up to n_out tensor results are returned as new references in out[] (unused slots
 * set to NULL). Returns the number of tensors stored, or -1 on error (a non-tensor result among
 * the first n_out is an error too). */
int eng_engine_call(eng_engine_t *e, const char *fname, eng_tensor_t *const *in, int n_in,
                    eng_tensor_t **out, int n_out);

/* Global tensors: set_tensor stores a new reference to t under a global name; get_tensor hands
 * out a new reference (or fails if the global is not a tensor). 0 on success. */
int eng_engine_set_tensor(eng_engine_t *e, const char *name, eng_tensor_t *t);
int eng_engine_get_tensor(eng_engine_t *e, const char *name, eng_tensor_t **out);

/* The last error of this engine ("" when none). */
const char *eng_engine_last_error(const eng_engine_t *e);

/* Routes this engine's log messages, and the output of Lua's print(), to fn. NULL restores
 * stdout. */
void eng_engine_set_log(eng_engine_t *e, eng_log_fn fn, void *user);

/* The engine's Lua state, for callers that want the full Lua C API. */
struct lua_State *eng_engine_lua(eng_engine_t *e);

#ifdef __cplusplus
}
#endif
#endif
