/* linear: y = act(x @ W^T + b) over the last dim of x (torch.nn.functional.linear with a fused
 * activation). The shape rule, the CPU adapter (one BLAS product, then bias and activation in one
 * pass, rounded once) and the typed eng_op_linear live here. */
#include <string.h>

#include "cpu/bias_act.h"
#include "cpu/matmul.h"
#include "eng_ops.h"
#include "ops/op_common.h"
#include "ops/ops_internal.h"

eng_status_t eng_infer_linear(eng_op_call_t *call) {
  const eng_tensor_t *x = call->in[0], *w = call->in[1], *b = call->in[2];
  char sx[ENG_OP_SHAPE_BUF], sw[ENG_OP_SHAPE_BUF], sb[ENG_OP_SHAPE_BUF];
  eng_status_t st = eng_call_need_inputs(call, 2);
  if (st) return st;
  if (w->ndim != 2)
    return eng_error(ENG_ERR_SHAPE, "linear: weight must be 2-D [out, in], got %s",
                     ENG_SHAPE_STR(w, sw));
  if (x->ndim == 0 || x->shape[x->ndim - 1] != w->shape[1])
    return eng_error(ENG_ERR_SHAPE, "linear: x %s does not end in the %lld input features of weight %s",
                     ENG_SHAPE_STR(x, sx), (long long)w->shape[1], ENG_SHAPE_STR(w, sw));
  if (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))
    return eng_error(ENG_ERR_SHAPE, "linear: bias must be [%lld] (the outputs of weight %s), got %s",
                     (long long)w->shape[0], ENG_SHAPE_STR(w, sw), ENG_SHAPE_STR(b, sb));
  if ((st = eng_need_float("linear", x))) return st;
  if (w->dtype != x->dtype || (b && b->dtype != x->dtype))
    return eng_error(ENG_ERR_DTYPE, "linear: dtypes differ: x %s, weight %s, bias %s",
                     eng_dtype_name(x->dtype), eng_dtype_name(w->dtype),
                     b ? eng_dtype_name(b->dtype) : "none");
  int64_t act = call->attrs.i[0];
  if (act < 0 || act >= ENG_ACT_COUNT)
    return eng_error(ENG_ERR_ARG, "linear: unknown activation %lld", (long long)act);
  eng_call_meta_like(call, x, x->dtype);
  call->meta[0].shape[x->ndim - 1] = w->shape[0];
  call->n_out = 1;
  return ENG_OK;
}

/* c = x @ W^T, c contiguous [..., N]: x's leading dims are batch dims sharing W (the matmul kernel
 * folds them into rows when it can), and W^T is read in place through W's swapped strides. */
static eng_status_t product(const eng_tensor_t *x, const eng_tensor_t *w, eng_tensor_t *c) {
  eng_kcpu_matmul_t p;
  memset(&p, 0, sizeof p);
  int nd = x->ndim;
  p.k = w->shape[1];
  p.n = w->shape[0];
  if (nd == 1) { /* one row */
    p.m = 1;
    p.a.rs = x->stride[0] * p.k;
    p.a.cs = x->stride[0];
  } else {
    p.m = x->shape[nd - 2];
    p.a.rs = x->stride[nd - 2];
    p.a.cs = x->stride[nd - 1];
    p.nbatch = nd - 2;
    memcpy(p.bshape, x->shape, sizeof(int64_t) * (size_t)p.nbatch);
    memcpy(p.a.bstride, x->stride, sizeof(int64_t) * (size_t)p.nbatch);
  }
  p.b.rs = w->stride[1];
  p.b.cs = w->stride[0];
  int rc = c->dtype == ENG_F64 ? eng_kcpu_matmul_f64(&p, eng_tensor_data(x), eng_tensor_data(w),
                                                     eng_tensor_data(c))
                               : eng_kcpu_matmul_f32(&p, eng_tensor_data(x), eng_tensor_data(w),
                                                     eng_tensor_data(c));
  if (rc == ENG_KCPU_MATMUL_NOMEM)
    return eng_error(ENG_ERR_OOM, "linear: out of memory packing a %lldx%lldx%lld product",
                     (long long)p.m, (long long)p.k, (long long)p.n);
  if (rc == ENG_KCPU_MATMUL_TOO_BIG)
    return eng_error(ENG_ERR_UNSUPPORTED, "linear: sizes %lldx%lldx%lld exceed BLAS's 32-bit limit",
                     (long long)p.m, (long long)p.k, (long long)p.n);
  return ENG_OK;
}

/* Product, bias and activation on f32/f64 tensors; c is contiguous [rows, N]. */
static eng_status_t linear_into(const eng_tensor_t *x, const eng_tensor_t *w, const eng_tensor_t *b,
                                int act, eng_tensor_t *c) {
  eng_status_t st = product(x, w, c);
  if (st) return st;
  int64_t n = w->shape[0], rows = n ? eng_tensor_numel(c) / n : 0;
  int64_t bs = b ? b->stride[0] : 0;
  if (c->dtype == ENG_F64)
    eng_kcpu_bias_act_f64(eng_tensor_data(c), rows, n, b ? eng_tensor_data(b) : NULL, bs, act);
  else
    eng_kcpu_bias_act_f32(eng_tensor_data(c), rows, n, b ? eng_tensor_data(b) : NULL, bs, act);
  return ENG_OK;
}

eng_status_t eng_cpu_linear(const eng_op_call_t *call) {
  eng_tensor_t *x = call->in[0], *w = call->in[1], *b = call->in[2], *out = call->out[0];
  int act = (int)call->attrs.i[0];
  if (out->dtype != ENG_F16 && out->dtype != ENG_BF16) return linear_into(x, w, b, act, out);
  /* f16/bf16: everything in f32, rounded once into the output */
  eng_tensor_t *x32 = NULL, *w32 = NULL, *b32 = NULL, *c32 = NULL;
  eng_status_t st = eng_tensor_to_dtype(x, ENG_F32, &x32);
  if (!st) st = eng_tensor_to_dtype(w, ENG_F32, &w32);
  if (!st && b) st = eng_tensor_to_dtype(b, ENG_F32, &b32);
  if (!st) st = eng_tensor_empty(out->shape, out->ndim, ENG_F32, ENG_CPU_DEVICE, &c32);
  if (!st) st = linear_into(x32, w32, b32, act, c32);
  if (!st) st = eng_tensor_copy_(out, c32);
  eng_tensor_release(x32);
  eng_tensor_release(w32);
  eng_tensor_release(b32);
  eng_tensor_release(c32);
  return st;
}

eng_status_t eng_op_linear(eng_tensor_t *x, eng_tensor_t *w, eng_tensor_t *b, int act,
                           eng_tensor_t **out) {
  *out = NULL;
  if (!x || !w) return eng_error(ENG_ERR_ARG, "linear: missing argument");
  if (act < 0 || act >= ENG_ACT_COUNT)
    return eng_error(ENG_ERR_ARG, "linear: unknown activation %d", act);
  eng_dtype_t dt = eng_dtype_promote(x->dtype, w->dtype);
  if (b) dt = eng_dtype_promote(dt, b->dtype);
  if (!eng_dtype_is_float(dt))
    return eng_error(ENG_ERR_DTYPE, "linear: needs floating dtypes, got x %s, weight %s",
                     eng_dtype_name(x->dtype), eng_dtype_name(w->dtype));
  eng_tensor_t *px = NULL, *pw = NULL, *pb = NULL;
  eng_status_t st = eng_tensor_to_dtype(x, dt, &px);
  if (!st) st = eng_tensor_to_dtype(w, dt, &pw);
  if (!st && b) st = eng_tensor_to_dtype(b, dt, &pb);
  if (!st) {
    eng_tensor_t *in[3] = {px, pw, pb};
    eng_op_call_t call = {.id = ENG_OP_LINEAR, .n_in = 3, .in = in, .n_out = 1};
    call.attrs.i[0] = act;
    call.attrs.ni = 1;
    st = eng_call_run(&call, out);
  }
  eng_tensor_release(px);
  eng_tensor_release(pw);
  eng_tensor_release(pb);
  return st;
}
