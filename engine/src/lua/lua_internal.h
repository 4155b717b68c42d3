/* Private helpers shared by the files of the Lua binding (the .c files of engine/src/lua). Not
 * a public contract: the host and the embedding API use binding.h.
 *
 * Error discipline: every function named lt_check_* / lt_fail / lt_raise may raise a Lua error
 * (longjmp). Callers release any eng_tensor_t they own before calling one, or push it as userdata
 * first so the GC owns it. */
#ifndef ENG_LUA_INTERNAL_H
#define ENG_LUA_INTERNAL_H

#include <lauxlib.h>
#include <lua.h>

#include "eng_ops.h"
#include "lua/binding.h"

#define LT_TENSOR_MT "engine.Tensor"

/* ---- registration with documentation (docs.c) ----
 * doc of a function = "sig\n\ndesc"; when desc is NULL the registry's one-line doc of op `op` is
 * used. */
typedef struct {
  const char *name;
  lua_CFunction fn;
  const char *sig;
  const char *desc;
  const char *op;
} lt_reg_t;

/* Pushes fn (with `nup` upvalues taken from the stack, like lua_pushcclosure) and records its doc.
 */
void lt_push_documented(lua_State *L, lua_CFunction fn, int nup, const char *sig, const char *desc,
                        const char *op);
/* Sets t[name] = function for each entry of regs (terminated by name == NULL). When `also` is
 * non-zero, the same function object is also stored in the table at index `also`. */
void lt_register(lua_State *L, int table, int also, const lt_reg_t *regs);
/* Records doc for the value at idx (any function or table). */
void lt_doc_set(lua_State *L, int idx, const char *doc);
/* Creates the weak-keyed docs table (value -> "signature\n\ndescription") as engine.docs; the Lua
 * half (lua/engine/init.lua) builds engine.help and engine.doc on it. */
void lt_open_docs(lua_State *L, int engine);

/* ---- the per-state context and GC pacing (module.c) ---- */
/* Called after a tensor is handed to Lua: runs a full collection when the bytes (CPU and GPU) held by
 * tensors grew a lot since the last one (Lua cannot see those bytes). */
void lt_gc_pace(lua_State *L);

/* ---- tensors as userdata (tensor_udata.c) ---- */
void lt_open_tensor_metatable(lua_State *L, int methods);
/* Raises a Lua error with a printf-formatted message (no length limits of lua_pushfstring). */
int lt_raise(lua_State *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Raises unless every argument from idx on is nil or absent ("op: unexpected argument N"). */
void lt_no_more_args(lua_State *L, int idx, const char *op);
/* Raises "op: <message of the core>" (the op prefix is added unless the message has it). */
int lt_fail(lua_State *L, const char *op);
/* The usual tail of a binding function: raises on st, else pushes *t (taking its reference) and
 * returns 1. t is read through a pointer because st is often the very call that sets it. */
int lt_push_result(lua_State *L, const char *op, eng_status_t st, eng_tensor_t **t);
/* Raises "op: argument N must be WHAT, got TYPE". */
int lt_type_error(lua_State *L, int idx, const char *op, const char *what);
/* An integer argument (a Lua number with no fraction). */
int64_t lt_check_int(lua_State *L, int idx, const char *op);
int64_t lt_opt_int(lua_State *L, int idx, const char *op, int64_t def);
double lt_check_num(lua_State *L, int idx, const char *op);
double lt_opt_num(lua_State *L, int idx, const char *op, double def);
/* Raises unless v can be stored in dtype dt exactly enough: integer dtypes need an integral value
 * inside their range (floating values are rounded as usual). */
void lt_check_value_fits(lua_State *L, const char *op, double v, eng_dtype_t dt);
/* Reads a list of integers given either as one table at `first` or as the numbers from `first`
 * on. Returns the count and sets *next to the first argument after the list. */
int lt_int_list(lua_State *L, int first, const char *op, const char *what, int64_t *out, int max,
                int *next);
/* Validates that the table at idx only has the keys in `allowed` (NULL-terminated). */
void lt_check_opts(lua_State *L, int idx, const char *op, const char *const *allowed);
/* dtype/device options: {dtype = "f32", device = "cpu"} at idx (nil or none: defaults). Raises on
 * anything else being there. */
void lt_dtype_device_opts(lua_State *L, int idx, const char *op, eng_dtype_t *dt,
                          eng_device_t *dev);
/* A new 0-d tensor holding v on like's device, in like's dtype, except that a fractional (or
 * non-finite) v with an integer `like` gives f32 and an integral v outside like's integer range
 * gives i64, so nothing is truncated silently. NULL like: f32 on cpu. */
eng_status_t lt_scalar_like(double v, const eng_tensor_t *like, eng_tensor_t **out);
/* An index argument: a tensor, or a Lua array of integers (made into an i64 tensor that is left
 * pushed on the stack, so the GC owns it). */
eng_tensor_t *lt_index_arg(lua_State *L, int idx, const char *op);
/* Runs binary op on arguments 1 and 2 (tensors or numbers, at least one tensor); pushes the result.
 * Used by the arithmetic metamethods and by engine.F.add & co. */
int lt_binary(lua_State *L, eng_binary_op_t op);
/* Pushes a new Lua array with the n integers of v. */
void lt_push_int_list(lua_State *L, const int64_t *v, int n);

/* ---- the parts of the module, each adding its functions ---- */
void lt_open_create(lua_State *L, int engine);                /* create.c */
void lt_open_methods(lua_State *L, int methods);              /* tensor_methods.c */
void lt_open_functional(lua_State *L, int F, int methods);    /* functional.c */
void lt_open_functional_nn(lua_State *L, int F, int methods); /* functional_nn.c */
void lt_open_functional_e1e23(lua_State *L, int F);            /* functional_e1e23.c */
void lt_open_functional_e88(lua_State *L, int F);             /* functional_e88.c */
void lt_open_functional_optim(lua_State *L, int F);           /* functional_optim.c */
void lt_open_functional_backward(lua_State *L, int F);        /* functional_backward.c */
void lt_open_inplace(lua_State *L, int methods);              /* inplace.c: t:add_ ... */
void lt_open_io(lua_State *L, int engine);                    /* io.c */
void lt_open_autograd(lua_State *L, int engine, int methods); /* autograd.c */
void lt_open_cuda(lua_State *L, int engine);                  /* cuda.c */
void lt_open_cuda_objects(lua_State *L, int cuda);            /* cuda_objects.c */
void lt_open_data(lua_State *L, int engine);                  /* data.c: mapped files, rng state */
void lt_open_profile(lua_State *L, int engine);               /* profile.c: the profiler */

/* ---- engine.cuda helpers (cuda.c) ---- */
/* Raises the runtime's message as it is (it starts with "cuda: "). */
int lt_cuda_fail(lua_State *L);
/* An optional device argument: nil or none (device 0), an index, or "cuda" / "cuda:N". Raises
 * unless that GPU exists. */
int lt_cuda_device_arg(lua_State *L, int idx, const char *op);
/* __tostring of tensors (format.c) */
int lt_tensor_tostring(lua_State *L);

#endif
