/* Small building blocks of the backward formulas: all made of registry ops. */
#include "autograd/autograd_internal.h"
#include "ops/ops_internal.h"

eng_status_t eng_ag_scalar(const eng_tensor_t *like, double v, eng_tensor_t **out) {
  return eng_tensor_full(NULL, 0, v, like->dtype, eng_tensor_device(like), out);
}

eng_status_t eng_ag_bin(eng_binary_op_t op, eng_tensor_t *a, eng_tensor_t *b, int consume, eng_tensor_t **out) {
  eng_status_t st = eng_op_binary(op, a, b, out);
  if (consume & 1) eng_tensor_release(a);
  if (consume & 2) eng_tensor_release(b);
  return st;
}

eng_status_t eng_ag_mul_scalar(eng_tensor_t *a, double v, eng_tensor_t **out) {
  eng_tensor_t *s;
  eng_status_t st = eng_ag_scalar(a, v, &s);
  if (st) return st;
  return eng_ag_bin(ENG_BINARY_MUL, a, s, 2, out);
}

eng_status_t eng_ag_mask(eng_tensor_t *mask, eng_tensor_t *a, eng_tensor_t **out) {
  eng_tensor_t *zero;
  eng_status_t st = eng_ag_scalar(a, 0.0, &zero);
  if (st) return st;
  st = eng_op_where(mask, a, zero, out);
  eng_tensor_release(zero);
  return st;
}

eng_status_t eng_ag_zeros(const eng_ag_tmeta_t *m, eng_tensor_t **out) {
  return eng_tensor_zeros(m->shape, m->ndim, m->dtype, m->device, out);
}

eng_status_t eng_ag_sum_to(eng_tensor_t *g, const int64_t *shape, int ndim, eng_tensor_t **out) {
  int lead = g->ndim - ndim;
  int64_t dims[ENG_MAX_DIMS];
  int nd = 0;
  for (int d = 0; d < g->ndim; d++)
    if (d < lead || (shape[d - lead] == 1 && g->shape[d] != 1)) dims[nd++] = d;
  if (nd == 0) { /* no dim was broadcast (a leading dim always counts) */
    eng_tensor_retain(g);
    *out = g;
    return ENG_OK;
  }
  eng_tensor_t *s;
  eng_status_t st = eng_op_reduce(ENG_REDUCE_SUM, g, dims, nd, 1, 0, &s);
  if (st) return st;
  st = eng_tensor_reshape(s, shape, ndim, out);
  eng_tensor_release(s);
  return st;
}

eng_status_t eng_ag_unreduce(eng_tensor_t *g, const eng_ag_tmeta_t *in, const eng_op_attrs_t *a,
                             eng_tensor_t **out) {
  int64_t kept[ENG_MAX_DIMS];
  for (int d = 0; d < in->ndim; d++) kept[d] = a->ni ? in->shape[d] : 1;
  for (int k = 0; k < a->ni; k++) kept[a->i[k]] = 1;
  eng_tensor_t *r;
  eng_status_t st = eng_tensor_reshape(g, kept, in->ndim, &r);
  if (st) return st;
  st = eng_tensor_expand(r, in->shape, in->ndim, out);
  eng_tensor_release(r);
  return st;
}
