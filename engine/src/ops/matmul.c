/* matmul with torch.matmul semantics: 1-D operands are promoted to matrices (a 1 prepended to a,
 * appended to b) and those dims dropped from the result; leading dims are batch dims that
 * broadcast. The shape rule, the CPU adapter and the typed eng_op_matmul live here. */
#include <string.h>

#include "cpu/matmul.h"
#include "eng_ops.h"
#include "ops/op_common.h"
#include "ops/ops_internal.h"

/* The batch dims of both operands broadcast right-aligned into bshape (nbatch of them). */
static int broadcast_batch(const eng_tensor_t *a, const eng_tensor_t *b, int64_t *bshape,
                           int *nbatch) {
  int na = a->ndim > 2 ? a->ndim - 2 : 0, nb = b->ndim > 2 ? b->ndim - 2 : 0;
  int n = na > nb ? na : nb;
  for (int d = 0; d < n; d++) {
    int da = d - (n - na), db = d - (n - nb);
    int64_t sa = da >= 0 ? a->shape[da] : 1, sb = db >= 0 ? b->shape[db] : 1;
    if (sa != sb && sa != 1 && sb != 1) return 0;
    bshape[d] = sa == 1 ? sb : sa;
  }
  *nbatch = n;
  return 1;
}

eng_status_t eng_infer_matmul(eng_op_call_t *call) {
  const eng_tensor_t *a = call->in[0], *b = call->in[1];
  char sa[ENG_OP_SHAPE_BUF], sb[ENG_OP_SHAPE_BUF];
  if (a->ndim == 0 || b->ndim == 0)
    return eng_error(ENG_ERR_SHAPE, "matmul: both arguments need at least 1 dim: %s @ %s",
                     ENG_SHAPE_STR(a, sa), ENG_SHAPE_STR(b, sb));
  if (a->dtype != b->dtype)
    return eng_error(ENG_ERR_DTYPE, "matmul: dtypes differ: %s @ %s", eng_dtype_name(a->dtype),
                     eng_dtype_name(b->dtype));
  if (!eng_dtype_is_float(a->dtype))
    return eng_error(ENG_ERR_DTYPE, "matmul: needs floating dtypes, got %s @ %s",
                     eng_dtype_name(a->dtype), eng_dtype_name(b->dtype));
  int64_t ka = a->shape[a->ndim - 1], kb = b->ndim == 1 ? b->shape[0] : b->shape[b->ndim - 2];
  if (ka != kb)
    return eng_error(ENG_ERR_SHAPE, "matmul: inner dims differ: %s @ %s", ENG_SHAPE_STR(a, sa),
                     ENG_SHAPE_STR(b, sb));
  eng_op_meta_t *m = &call->meta[0];
  if (!broadcast_batch(a, b, m->shape, &m->ndim))
    return eng_error(ENG_ERR_SHAPE, "matmul: batch dims do not broadcast: %s @ %s",
                     ENG_SHAPE_STR(a, sa), ENG_SHAPE_STR(b, sb));
  if (a->ndim >= 2) m->shape[m->ndim++] = a->shape[a->ndim - 2];
  if (b->ndim >= 2) m->shape[m->ndim++] = b->shape[b->ndim - 1];
  m->dtype = a->dtype;
  call->n_out = 1;
  return ENG_OK;
}

/* One operand's matrix strides and batch strides (0 where it is broadcast). A 1-D a is a single
 * row, a 1-D b a single column. */
static void describe_operand(const eng_tensor_t *t, int is_b, int nbatch, const int64_t *bshape,
                             eng_kcpu_operand_t *o) {
  int nd = t->ndim;
  if (nd == 1) {
    int64_t s = t->stride[0];
    o->rs = is_b ? s : s * t->shape[0];
    o->cs = is_b ? 1 : s;
  } else {
    o->rs = t->stride[nd - 2];
    o->cs = t->stride[nd - 1];
  }
  int own = nd > 2 ? nd - 2 : 0;
  for (int d = 0; d < nbatch; d++) {
    int td = d - (nbatch - own);
    o->bstride[d] = (td >= 0 && t->shape[td] == bshape[d] && bshape[d] != 1) ? t->stride[td] : 0;
  }
}

static eng_status_t run_kernel(const eng_kcpu_matmul_t *p, const eng_tensor_t *a,
                               const eng_tensor_t *b, eng_tensor_t *c) {
  int rc = c->dtype == ENG_F64
               ? eng_kcpu_matmul_f64(p, eng_tensor_data(a), eng_tensor_data(b), eng_tensor_data(c))
               : eng_kcpu_matmul_f32(p, eng_tensor_data(a), eng_tensor_data(b), eng_tensor_data(c));
  if (rc == ENG_KCPU_MATMUL_NOMEM)
    return eng_error(ENG_ERR_OOM, "matmul: out of memory packing a %lldx%lldx%lld product",
                     (long long)p->m, (long long)p->k, (long long)p->n);
  if (rc == ENG_KCPU_MATMUL_TOO_BIG)
    return eng_error(ENG_ERR_UNSUPPORTED, "matmul: sizes %lldx%lldx%lld exceed BLAS's 32-bit limit",
                     (long long)p->m, (long long)p->k, (long long)p->n);
  return ENG_OK;
}

/* f16/bf16 go through f32: convert the inputs, multiply with sgemm into an f32 result, then round
 * each element once into the output. */
static eng_status_t run_half(const eng_kcpu_matmul_t *p, eng_tensor_t *a, eng_tensor_t *b,
                             eng_tensor_t *out) {
  eng_tensor_t *a32 = NULL, *b32 = NULL, *c32 = NULL;
  eng_status_t st = eng_tensor_to_dtype(a, ENG_F32, &a32);
  if (!st) st = eng_tensor_to_dtype(b, ENG_F32, &b32);
  if (!st) st = eng_tensor_empty(out->shape, out->ndim, ENG_F32, ENG_CPU_DEVICE, &c32);
  if (!st) {
    /* the converted copies are contiguous: their strides replace the originals' */
    eng_kcpu_matmul_t q = *p;
    describe_operand(a32, 0, q.nbatch, q.bshape, &q.a);
    describe_operand(b32, 1, q.nbatch, q.bshape, &q.b);
    st = run_kernel(&q, a32, b32, c32);
  }
  if (!st) st = eng_tensor_copy_(out, c32);
  eng_tensor_release(a32);
  eng_tensor_release(b32);
  eng_tensor_release(c32);
  return st;
}

eng_status_t eng_cpu_matmul(const eng_op_call_t *call) {
  eng_tensor_t *a = call->in[0], *b = call->in[1], *out = call->out[0];
  eng_kcpu_matmul_t p;
  memset(&p, 0, sizeof p);
  broadcast_batch(a, b, p.bshape, &p.nbatch);
  p.m = a->ndim >= 2 ? a->shape[a->ndim - 2] : 1;
  p.k = a->shape[a->ndim - 1];
  p.n = b->ndim >= 2 ? b->shape[b->ndim - 1] : 1;
  describe_operand(a, 0, p.nbatch, p.bshape, &p.a);
  describe_operand(b, 1, p.nbatch, p.bshape, &p.b);
  if (a->dtype == ENG_F16 || a->dtype == ENG_BF16) return run_half(&p, a, b, out);
  return run_kernel(&p, a, b, out);
}

eng_status_t eng_op_matmul(eng_tensor_t *a, eng_tensor_t *b, eng_tensor_t **out) {
  *out = NULL;
  if (!a || !b) return eng_error(ENG_ERR_ARG, "matmul: missing argument");
  eng_dtype_t dt = eng_dtype_promote(a->dtype, b->dtype);
  if (!eng_dtype_is_float(dt))
    return eng_error(ENG_ERR_DTYPE, "matmul: needs floating dtypes, got %s @ %s",
                     eng_dtype_name(a->dtype), eng_dtype_name(b->dtype));
  eng_tensor_t *pa = NULL, *pb = NULL;
  eng_status_t st = eng_tensor_to_dtype(a, dt, &pa);
  if (!st) st = eng_tensor_to_dtype(b, dt, &pb);
  if (!st) {
    eng_tensor_t *in[2] = {pa, pb};
    eng_op_call_t call = {.id = ENG_OP_MATMUL, .n_in = 2, .in = in, .n_out = 1};
    st = eng_call_run(&call, out);
  }
  eng_tensor_release(pa);
  eng_tensor_release(pb);
  return st;
}
