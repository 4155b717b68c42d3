/* The op registry: one entry per op, and the dispatch that every op goes through. */
#include <stdio.h>
#include <string.h>

#include "eng_cuda.h"
#include "autograd/autograd_internal.h"
#include "eng_registry.h"
#include "ops/ops_internal.h"

#ifdef ENG_HAVE_CUDA
#include "cuda/cuda_internal.h"
#define CUDA(fn) fn
#else
#define CUDA(fn) NULL
#endif
/* Until the CUDA backend lands, no op has a CUDA kernel: CUDA(...) entries are added per op then. */

#define UNARY(ID, doc_) [ENG_OP_##ID] = {.doc = doc_, .n_in = 1, .infer = eng_infer_unary, .backward = &eng_bw_unary, .kernel = {[ENG_BACKEND_CPU] = eng_cpu_unary, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_unary)}}
#define BINARY(ID, doc_) [ENG_OP_##ID] = {.doc = doc_, .n_in = 2, .infer = eng_infer_binary, .backward = &eng_bw_binary, .kernel = {[ENG_BACKEND_CPU] = eng_cpu_binary, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_binary)}}
/* comparisons: u8 results, no gradient */
#define COMPARE(ID, doc_) [ENG_OP_##ID] = {.doc = doc_, .n_in = 2, .infer = eng_infer_binary, .kernel = {[ENG_BACKEND_CPU] = eng_cpu_binary, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_binary)}}
#define REDUCE(ID, doc_) [ENG_OP_##ID] = {.doc = doc_, .n_in = 1, .infer = eng_infer_reduce, .backward = &eng_bw_reduce, .kernel = {[ENG_BACKEND_CPU] = eng_cpu_reduce, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_reduce)}}
#define CREATE(ID, doc_, cpu, cuda) [ENG_OP_##ID] = {.doc = doc_, .n_in = 0, .infer = eng_infer_create, .kernel = {[ENG_BACKEND_CPU] = cpu, [ENG_BACKEND_CUDA] = CUDA(cuda)}}

/* Attrs per op (see eng_op_attrs_t):
 *   clamp:          flags ENG_ATTR_HAS_LO|HAS_HI, f[0] lo, f[1] hi
 *   reductions:     i[0..ni-1] dims (normalised, ascending, unique; ni = 0: all), flags KEEPDIM,
 *                   f[0] correction (var/std)
 *   argmax:         i[0] dim, flags KEEPDIM|FLATTEN
 *   (log_)softmax:  i[0] dim (normalised)
 *   layer/rms_norm: f[0] eps; inputs x, weight (optional), bias (optional, layer_norm only)
 *   cross_entropy:  i[0] ignore_index
 *   linear:         inputs x, W, b (optional); i[0] activation (eng_act_t)
 *   index_select, gather, cat: i[0] dim (normalised)
 *   copy:           out[0] preset (copy_), or attrs.dtype/attrs.device give a fresh destination
 *   fill:           out[0] preset, f[0] value
 *   creation ops:   shape i[0..ni-1], attrs.dtype, attrs.device;
 *                   arange f[0] start, f[1] step, f[2] end, flags LINSPACE;
 *                   eye i[0] rows, i[1] cols (ni = 2);
 *                   rand f[0] low, f[1] high; randn f[0] mean, f[1] std; randint f[0] low, f[1] high;
 *                   random ops: u[0] seed, u[1] first Philox block
 *   index_add, scatter_add: inputs base, index, src; i[0] dim (normalised)
 *   adamw_, sum_squares, scale_: see ops/optim.h */
static eng_op_def_t defs[ENG_OP_COUNT] = {
    UNARY(NEG, "-x"),
    UNARY(ABS, "|x|"),
    UNARY(EXP, "e^x"),
    UNARY(LOG, "natural logarithm"),
    UNARY(SQRT, "square root"),
    UNARY(RSQRT, "1 / sqrt(x)"),
    UNARY(TANH, "hyperbolic tangent"),
    UNARY(SIGMOID, "1 / (1 + e^-x)"),
    UNARY(SILU, "x * sigmoid(x)"),
    UNARY(GELU, "x * Phi(x) (exact, erf form)"),
    UNARY(RELU, "max(x, 0)"),
    UNARY(SOFTPLUS, "log(1 + e^x)"),
    BINARY(ADD, "a + b (broadcasting)"),
    BINARY(SUB, "a - b (broadcasting)"),
    BINARY(MUL, "a * b (broadcasting)"),
    BINARY(DIV, "a / b (broadcasting; integers give f32)"),
    BINARY(POW, "a ^ b (broadcasting)"),
    BINARY(MAXIMUM, "elementwise max(a, b)"),
    BINARY(MINIMUM, "elementwise min(a, b)"),
    COMPARE(EQ, "a == b, as u8"),
    COMPARE(NE, "a ~= b, as u8"),
    COMPARE(LT, "a < b, as u8"),
    COMPARE(LE, "a <= b, as u8"),
    COMPARE(GT, "a > b, as u8"),
    COMPARE(GE, "a >= b, as u8"),
    [ENG_OP_CLAMP] = {.doc = "clamp(x, lo, hi)", .n_in = 1, .backward = &eng_bw_clamp, .infer = eng_infer_clamp,
                      .kernel = {[ENG_BACKEND_CPU] = eng_cpu_clamp, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_clamp)}},
    [ENG_OP_WHERE] = {.doc = "where(cond, a, b)", .n_in = 3, .backward = &eng_bw_where, .infer = eng_infer_where,
                      .kernel = {[ENG_BACKEND_CPU] = eng_cpu_where, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_where)}},
    REDUCE(SUM, "sum over dims"),
    REDUCE(MEAN, "mean over dims"),
    REDUCE(MAX, "max over dims"),
    REDUCE(MIN, "min over dims"),
    REDUCE(VAR, "variance over dims (correction 1 by default)"),
    REDUCE(STD, "standard deviation over dims (correction 1 by default)"),
    [ENG_OP_ARGMAX] = {.doc = "index of the max along a dim", .n_in = 1, .infer = eng_infer_argmax,
                       .kernel = {[ENG_BACKEND_CPU] = eng_cpu_argmax, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_argmax)}},
    [ENG_OP_SOFTMAX] = {.doc = "softmax along a dim", .n_in = 1, .backward = &eng_bw_softmax, .infer = eng_infer_softmax,
                        .kernel = {[ENG_BACKEND_CPU] = eng_cpu_softmax, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_softmax)}},
    [ENG_OP_LOG_SOFTMAX] = {.doc = "log of softmax along a dim", .n_in = 1, .backward = &eng_bw_log_softmax, .infer = eng_infer_softmax,
                            .kernel = {[ENG_BACKEND_CPU] = eng_cpu_softmax, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_softmax)}},
    [ENG_OP_LAYER_NORM] = {.doc = "layer norm over the last dim", .n_in = 3, .backward = &eng_bw_layer_norm, .infer = eng_infer_norm,
                           .kernel = {[ENG_BACKEND_CPU] = eng_cpu_layer_norm, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_layer_norm)}},
    [ENG_OP_RMS_NORM] = {.doc = "RMS norm over the last dim", .n_in = 2, .backward = &eng_bw_rms_norm, .infer = eng_infer_norm,
                         .kernel = {[ENG_BACKEND_CPU] = eng_cpu_rms_norm, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_rms_norm)}},
    [ENG_OP_CROSS_ENTROPY] = {.doc = "mean cross-entropy of logits [...,C] against integer targets",
                              .n_in = 2, .backward = &eng_bw_cross_entropy, .infer = eng_infer_cross_entropy,
                              .kernel = {[ENG_BACKEND_CPU] = eng_cpu_cross_entropy, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_cross_entropy)}},
    [ENG_OP_MATMUL] = {.doc = "matrix product (torch.matmul semantics)", .n_in = 2,
                       .backward = &eng_bw_matmul, .infer = eng_infer_matmul, .kernel = {[ENG_BACKEND_CPU] = eng_cpu_matmul, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_matmul)}},
    [ENG_OP_LINEAR] = {.doc = "act(x @ W^T + b); act none, relu or gelu (tanh approximation)", .n_in = 3,
                       .backward = &eng_bw_linear, .infer = eng_infer_linear, .kernel = {[ENG_BACKEND_CPU] = eng_cpu_linear, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_linear)}},
    [ENG_OP_EMBEDDING] = {.doc = "rows of a table picked by integer ids", .n_in = 2,
                          .backward = &eng_bw_embedding, .infer = eng_infer_embedding, .kernel = {[ENG_BACKEND_CPU] = eng_cpu_embedding, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_embedding)}},
    [ENG_OP_INDEX_SELECT] = {.doc = "entries along a dim picked by a 1-D integer index", .n_in = 2,
                             .backward = &eng_bw_index_select, .infer = eng_infer_index_select,
                             .kernel = {[ENG_BACKEND_CPU] = eng_cpu_index_select, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_index_select)}},
    [ENG_OP_GATHER] = {.doc = "torch.gather along a dim", .n_in = 2, .backward = &eng_bw_gather, .infer = eng_infer_gather,
                       .kernel = {[ENG_BACKEND_CPU] = eng_cpu_gather, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_gather)}},
    [ENG_OP_CAT] = {.doc = "concatenate along a dim", .n_in = -1, .backward = &eng_bw_cat, .infer = eng_infer_cat,
                    .kernel = {[ENG_BACKEND_CPU] = eng_cpu_cat, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_cat)}},
    [ENG_OP_COPY] = {.doc = "copy with dtype conversion (and across devices)", .n_in = 1,
                     .flags = ENG_OPDEF_CROSS_DEVICE | ENG_OPDEF_STRIDED_OUT, .backward = &eng_bw_copy, .infer = eng_infer_copy,
                     .kernel = {[ENG_BACKEND_CPU] = eng_cpu_copy, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_copy)}},
    [ENG_OP_FILL] = {.doc = "fill with one value", .n_in = 0, .flags = ENG_OPDEF_STRIDED_OUT, .infer = eng_infer_fill,
                     .kernel = {[ENG_BACKEND_CPU] = eng_cpu_fill, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_fill)}},
    CREATE(ARANGE, "evenly spaced values", eng_cpu_arange, eng_cuda_arange),
    CREATE(EYE, "identity matrix", eng_cpu_eye, eng_cuda_eye),
    CREATE(RAND, "uniform random values (Philox)", eng_cpu_rand, eng_cuda_rand),
    CREATE(RANDN, "normal random values (Philox, Box-Muller)", eng_cpu_randn, eng_cuda_randn),
    CREATE(RANDINT, "uniform random integers (Philox)", eng_cpu_randint, eng_cuda_randint),
    /* backward kernels and the fused add + rms_norm (attrs: see ops_internal.h) */
    [ENG_OP_SOFTMAX_BACKWARD] = {.doc = "gradient of softmax / log_softmax from its output", .n_in = 2,
                                 .infer = eng_infer_softmax_backward,
                                 .kernel = {[ENG_BACKEND_CPU] = eng_cpu_softmax_backward, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_softmax_backward)}},
    [ENG_OP_RMS_NORM_BACKWARD] = {.doc = "gradients of rms_norm (gx, gw)", .n_in = 3,
                                  .infer = eng_infer_norm_backward,
                                  .kernel = {[ENG_BACKEND_CPU] = eng_cpu_rms_norm_backward, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_rms_norm_backward)}},
    [ENG_OP_LAYER_NORM_BACKWARD] = {.doc = "gradients of layer_norm (gx, gw, gb)", .n_in = 4,
                                    .infer = eng_infer_norm_backward,
                                    .kernel = {[ENG_BACKEND_CPU] = eng_cpu_layer_norm_backward, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_layer_norm_backward)}},
    [ENG_OP_CROSS_ENTROPY_BACKWARD] = {.doc = "gradient of the mean cross-entropy, scaled by a gloss tensor",
                                       .n_in = 3, .infer = eng_infer_cross_entropy_backward,
                                       .kernel = {[ENG_BACKEND_CPU] = eng_cpu_cross_entropy_backward, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_cross_entropy_backward)}},
    [ENG_OP_ADD_RMS_NORM] = {.doc = "residual add (kept in f32) then rms_norm: y, residual_out", .n_in = 3,
                             .backward = &eng_bw_add_rms_norm, .infer = eng_infer_add_rms_norm,
                             .kernel = {[ENG_BACKEND_CPU] = eng_cpu_add_rms_norm, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_add_rms_norm)}},
    /* E-series: e1, e23 (inputs, outputs and attrs: ops_internal.h) */
    [ENG_OP_E1] = {.doc = "E1 gated Elman recurrence: y, h_T, hs", .n_in = 5, .backward = &eng_bw_e1, .infer = eng_infer_e1,
                   .kernel = {[ENG_BACKEND_CPU] = eng_cpu_e1, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_e1)}},
    [ENG_OP_E1_BACKWARD] = {.doc = "gradients of e1: dxw, dz, dW_h, db, dh0", .n_in = 6,
                            .infer = eng_infer_e1_backward,
                            .kernel = {[ENG_BACKEND_CPU] = eng_cpu_e1_backward, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_e1_backward)}},
    [ENG_OP_E23] = {.doc = "E23 dual-memory Elman recurrence: hs, h_T, tape_T, tape checkpoints",
                    .n_in = 6, .backward = &eng_bw_e23, .infer = eng_infer_e23, .kernel = {[ENG_BACKEND_CPU] = eng_cpu_e23, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_e23)}},
    [ENG_OP_E23_BACKWARD] = {.doc = "gradients of e23: dxw, dW_h, dW_write, db, dh0, dtape0",
                             .n_in = 10, .infer = eng_infer_e23_backward,
                             .kernel = {[ENG_BACKEND_CPU] = eng_cpu_e23_backward, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_e23_backward)}},
    /* E-series: e88 (inputs, outputs and attrs: ops_internal.h) */
    [ENG_OP_E88] = {.doc = "E88 matrix-state delta rule: y, S_T, state checkpoints", .n_in = 6,
                    .backward = &eng_bw_e88, .infer = eng_infer_e88,
                    .kernel = {[ENG_BACKEND_CPU] = eng_cpu_e88, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_e88)}},
    [ENG_OP_E88_BACKWARD] = {.doc = "gradients of e88: dq, dk, dv, ddecay, dg, dS0", .n_in = 9,
                             .infer = eng_infer_e88_backward,
                             .kernel = {[ENG_BACKEND_CPU] = eng_cpu_e88_backward,
                                        [ENG_BACKEND_CUDA] = CUDA(eng_cuda_e88_backward)}},
    /* opt: scatters (the gradients of indexing) and the optimizer ops */
    [ENG_OP_INDEX_ADD] = {.doc = "torch.index_add, out of place: base with src added at a 1-D index along a dim",
                          .n_in = 3, .infer = eng_infer_index_add,
                          .kernel = {[ENG_BACKEND_CPU] = eng_cpu_index_add, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_index_add)}},
    [ENG_OP_SCATTER_ADD] = {.doc = "torch.scatter_add, out of place: base with src added at index along a dim",
                            .n_in = 3, .infer = eng_infer_scatter_add,
                            .kernel = {[ENG_BACKEND_CPU] = eng_cpu_scatter_add, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_scatter_add)}},
    [ENG_OP_ADAMW] = {.doc = "one fused AdamW step over lists of params, grads and moments, in place",
                      .n_in = -1, .flags = ENG_OPDEF_INPLACE, .infer = eng_infer_adamw,
                      .kernel = {[ENG_BACKEND_CPU] = eng_cpu_adamw, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_adamw)}},
    [ENG_OP_SUM_SQUARES] = {.doc = "sum of x^2 over a list of tensors (one scalar, f64 accumulation)",
                            .n_in = -1, .infer = eng_infer_sum_squares,
                            .kernel = {[ENG_BACKEND_CPU] = eng_cpu_sum_squares, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_sum_squares)}},
    [ENG_OP_SCALE] = {.doc = "multiplies a list of tensors in place by a one-element tensor",
                      .n_in = -1, .flags = ENG_OPDEF_INPLACE, .infer = eng_infer_scale,
                      .kernel = {[ENG_BACKEND_CPU] = eng_cpu_scale, [ENG_BACKEND_CUDA] = CUDA(eng_cuda_scale)}},
};

static const char *const names[ENG_OP_COUNT] = {
#define ENG_OP(id, name) [ENG_OP_##id] = name,
#include "eng_op_list.h"
#undef ENG_OP
};

static eng_op_hook_fn hook_fn;
static void *hook_user;

const eng_op_def_t *eng_op_def(eng_op_id_t id) {
  if ((int)id < 0 || id >= ENG_OP_COUNT) return NULL;
  eng_op_def_t *d = &defs[id];
  d->name = names[id];
  return d;
}

const eng_op_def_t *eng_op_find(const char *name, eng_op_id_t *id) {
  for (int i = 0; i < ENG_OP_COUNT; i++) {
    if (strcmp(names[i], name) == 0) {
      if (id) *id = (eng_op_id_t)i;
      return eng_op_def((eng_op_id_t)i);
    }
  }
  return NULL;
}

eng_backend_t eng_backend_of(eng_device_t d) {
  return d.type == ENG_DEV_CUDA ? ENG_BACKEND_CUDA : ENG_BACKEND_CPU;
}

void eng_op_set_hook(eng_op_hook_fn fn, void *user) {
  hook_fn = fn;
  hook_user = user;
}

/* The device the op runs on: its inputs' (which must agree unless the op crosses devices), or
 * for ops without inputs, attrs.device; a copy runs where the non-CPU side is. */
static eng_status_t pick_device(const eng_op_def_t *def, const eng_op_call_t *call, eng_device_t *dev) {
  int have = 0;
  char a[32], b[32];
  for (int k = 0; k < call->n_in; k++) {
    const eng_tensor_t *t = call->in[k];
    if (!t) continue;
    eng_device_t d = t->storage->device;
    if (!have) {
      *dev = d;
      have = 1;
    } else if (!eng_device_equal(*dev, d) && !(def->flags & ENG_OPDEF_CROSS_DEVICE)) {
      return eng_error(ENG_ERR_DEVICE, "%s: inputs are on different devices: %s and %s", def->name,
                       eng_device_name(*dev, a, sizeof a), eng_device_name(d, b, sizeof b));
    }
  }
  if (!have) {
    *dev = call->out[0] ? call->out[0]->storage->device : call->attrs.device;
    return ENG_OK;
  }
  if (def->flags & ENG_OPDEF_CROSS_DEVICE) {
    eng_device_t dst = call->out[0] ? call->out[0]->storage->device : call->attrs.device;
    if (dst.type == ENG_DEV_CUDA) *dev = dst;
  }
  return ENG_OK;
}

/* A missing GPU (or a build without CUDA) is said as such for every op, before any question of
 * kernels; with CUDA, the op's device also becomes the thread's CUDA device, where kernels launch. */
static eng_status_t cuda_device_ready(int device) {
#ifdef ENG_HAVE_CUDA
  return eng_cuda_select(device);
#else
  return eng_cuda_check_device(device);
#endif
}

/* Prefixes the message with "op: " unless it already starts that way. */
static eng_status_t name_error(const char *op, eng_status_t st) {
  const char *msg = eng_last_error();
  size_t n = strlen(op);
  if (!(strncmp(msg, op, n) == 0 && msg[n] == ':')) eng_error_prefix(op);
  return st;
}

/* Kernels trust the shape rule: an output the caller preset must be exactly what the rule says,
 * and dense unless the op writes strided outputs. */
static eng_status_t check_preset(const eng_op_def_t *def, const eng_op_call_t *call, int k) {
  const eng_tensor_t *o = call->out[k];
  const eng_op_meta_t *m = &call->meta[k];
  int same = o->ndim == m->ndim && o->dtype == m->dtype;
  for (int d = 0; same && d < m->ndim; d++) same = o->shape[d] == m->shape[d];
  int dense = (def->flags & ENG_OPDEF_STRIDED_OUT) || eng_tensor_is_contiguous(o);
  if (same && dense) return ENG_OK;
  char want[192], got[192];
  return eng_error(same ? ENG_ERR_LAYOUT : ENG_ERR_SHAPE,
                   "%s: the output must be a contiguous %s %s, got a%s %s %s", def->name,
                   eng_dtype_name(m->dtype), eng_shape_str(m->shape, m->ndim, want, sizeof want),
                   eng_tensor_is_contiguous(o) ? "" : " non-contiguous", eng_dtype_name(o->dtype),
                   eng_shape_str(o->shape, o->ndim, got, sizeof got));
}

eng_status_t eng_op_dispatch(eng_op_call_t *call) {
  const eng_op_def_t *def = eng_op_def(call->id);
  if (!def) return eng_error(ENG_ERR_INTERNAL, "dispatch: unknown op id %d", (int)call->id);
  if (def->n_in >= 0 && call->n_in != def->n_in)
    return eng_error(ENG_ERR_INTERNAL, "%s: expected %d inputs, got %d", def->name, def->n_in, call->n_in);

  eng_device_t dev;
  eng_status_t st = pick_device(def, call, &dev);
  if (st) return st;
  if (dev.type == ENG_DEV_CUDA && (st = cuda_device_ready(dev.index))) return name_error(def->name, st);
  eng_op_kernel_fn kernel = def->kernel[eng_backend_of(dev)];
  if (!kernel) {
    char d[32];
    return eng_error(ENG_ERR_UNSUPPORTED, "%s: not implemented on %s", def->name,
                     eng_device_name(dev, d, sizeof d));
  }

  if (def->flags & ENG_OPDEF_INPLACE) call->n_out = 0; /* it writes its inputs, makes nothing */
  else if (call->n_out == 0) call->n_out = 1;
  st = def->infer(call);
  if (st) return name_error(def->name, st);

  eng_tensor_t *made[ENG_OP_MAX_OUT] = {0};
  /* Fresh outputs go where the op runs, except a copy's, which go where the caller asked. */
  eng_device_t out_dev = (def->flags & ENG_OPDEF_CROSS_DEVICE) ? call->attrs.device : dev;
  int preset = 0, recording = eng_grad_enabled();
  for (int k = 0; k < call->n_out; k++) {
    if (!call->out[k]) continue;
    preset = 1;
    if ((st = check_preset(def, call, k))) return name_error(def->name, st);
  }
  /* Writes into given outputs are in place: autograd cannot follow them. */
  if (preset && recording && (st = eng_ag_check_inplace(call, def->name))) return st;
  for (int k = 0; k < call->n_out; k++) {
    if (call->out[k]) continue;
    const eng_op_meta_t *m = &call->meta[k];
    st = eng_tensor_empty(m->shape, m->ndim, m->dtype, out_dev, &made[k]);
    if (st) goto fail;
    call->out[k] = made[k];
  }

  if (hook_fn) hook_fn(hook_user, call, 1);
  /* Kernels built from other ops must not record their insides. */
  if (recording) eng_grad_set_enabled(0);
#ifdef ENG_HAVE_CUDA
  /* An NVTX range per op, so profilers attribute the kernels (and CPU time) to it. */
  int ranged = eng_cuda_nvtx_push(def->name);
  st = kernel(call);
  if (ranged) eng_cuda_nvtx_pop();
#else
  st = kernel(call);
#endif
  if (recording) eng_grad_set_enabled(1);
  if (hook_fn) hook_fn(hook_user, call, 0);
  if (st) goto fail;
  if (recording && !preset && def->backward && (st = eng_ag_record_op(call, def->backward, def->name)))
    goto fail;
  return ENG_OK;

fail:
  for (int k = 0; k < call->n_out; k++) {
    if (made[k]) {
      eng_tensor_release(made[k]);
      call->out[k] = NULL;
    }
  }
  return name_error(def->name, st);
}
