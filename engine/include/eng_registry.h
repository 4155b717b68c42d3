/* The op registry: one entry per op with its name, arity, shape/dtype rule, one kernel per
 * backend, and (from the autograd layer) its backward. The typed functions of eng_ops.h pack their
 * arguments into an eng_op_call_t and hand it to eng_op_dispatch().
 *
 * Adding a backend = filling kernel[ENG_BACKEND_X] in each entry. Adding a backward = filling
 * .backward. Nothing else changes. */
#ifndef ENG_REGISTRY_H
#define ENG_REGISTRY_H

#include "eng_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
#define ENG_OP(id, name) ENG_OP_##id,
#include "eng_op_list.h"
#undef ENG_OP
  ENG_OP_COUNT
} eng_op_id_t;

typedef enum { ENG_BACKEND_CPU = 0, ENG_BACKEND_CUDA, ENG_BACKEND_COUNT } eng_backend_t;

#define ENG_OP_MAX_OUT 6 /* e23_backward returns six gradients */
#define ENG_OP_MAX_INTS 16

/* Op parameters: which slot means what is documented at each op's entry in registry.c. */
typedef struct {
  double f[6];
  int64_t i[ENG_OP_MAX_INTS];
  int ni;
  int flags;
  uint64_t u[2];       /* RNG seed and block offset */
  eng_dtype_t dtype;   /* output dtype, for ops that take one */
  eng_device_t device; /* output device, for ops without inputs */
} eng_op_attrs_t;

/* What the shape rule says of one output. */
typedef struct {
  int ndim;
  int64_t shape[ENG_MAX_DIMS];
  eng_dtype_t dtype;
} eng_op_meta_t;

typedef struct eng_op_call {
  eng_op_id_t id;
  int n_in;
  eng_tensor_t *const *in;  /* entries may be NULL for optional inputs */
  int n_out;
  eng_tensor_t *out[ENG_OP_MAX_OUT]; /* preset by the caller for in-place ops; else made by dispatch */
  eng_op_meta_t meta[ENG_OP_MAX_OUT];
  eng_op_attrs_t attrs;
} eng_op_call_t;

/* Validates inputs and attrs and fills call->meta[0..n_out-1] (and call->n_out). Errors name the
 * op and the offending shapes/dtypes. */
typedef eng_status_t (*eng_op_infer_fn)(eng_op_call_t *call);
/* Computes call->out from call->in. Outputs are contiguous unless the caller preset them. */
typedef eng_status_t (*eng_op_kernel_fn)(const eng_op_call_t *call);

/* The op reads and writes across devices (copy): inputs may sit on another device than outputs. */
#define ENG_OPDEF_CROSS_DEVICE 1
/* The kernels write strided outputs (copy, fill): a preset output need not be contiguous. */
#define ENG_OPDEF_STRIDED_OUT 2
/* The op writes its inputs in place and makes no outputs (adamw_, scale_): n_out is 0. */
#define ENG_OPDEF_INPLACE 4

typedef struct {
  const char *name;
  const char *doc;   /* one line; help() shows it */
  int n_in;          /* -1: variable (cat) */
  int flags;         /* ENG_OPDEF_* */
  eng_op_infer_fn infer;
  eng_op_kernel_fn kernel[ENG_BACKEND_COUNT];
  /* How gradients flow back (engine/src/autograd); NULL: not differentiable. */
  const struct eng_backward_def *backward;
} eng_op_def_t;

const eng_op_def_t *eng_op_def(eng_op_id_t id);
/* Looks an op up by name; NULL when unknown. */
const eng_op_def_t *eng_op_find(const char *name, eng_op_id_t *id);
eng_backend_t eng_backend_of(eng_device_t d);

/* Runs one op: checks that all inputs share a device, runs the shape rule, checks preset outputs
 * against it (shape, dtype, contiguity), allocates outputs that were not preset, runs the kernel, and on failure releases what it allocated and
 * prefixes the message with the op name when it lacks one. */
eng_status_t eng_op_dispatch(eng_op_call_t *call);

/* Hook for the profiler/NVTX layer: called around every dispatch when set. */
typedef void (*eng_op_hook_fn)(void *user, const eng_op_call_t *call, int begin);
void eng_op_set_hook(eng_op_hook_fn fn, void *user);

#ifdef __cplusplus
}
#endif
#endif
