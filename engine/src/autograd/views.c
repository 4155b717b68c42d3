/* The backward of views: undo the view on the gradient. */
#include "autograd/autograd_internal.h"

/* Zeros shaped like the base, with g written into the part the view took. */
static eng_status_t scatter_into_zeros(eng_ag_node_t *n, eng_tensor_t *g, eng_tensor_t **gin) {
  eng_ag_tmeta_t m = n->in_meta[0];
  m.dtype = g->dtype;
  m.device = eng_tensor_device(g);
  eng_tensor_t *z, *part;
  eng_status_t st = eng_ag_zeros(&m, &z);
  if (st) return st;
  const int64_t *a = n->attrs.i;
  if (n->view_kind == AG_VIEW_SELECT) st = eng_tensor_select(z, a[0], a[1], &part);
  else st = eng_tensor_slice(z, a[0], a[1], a[1] + (a[2] - 1) * a[3] + 1, a[3], &part);
  if (!st && a[2] == 0 && n->view_kind != AG_VIEW_SELECT) { /* an empty piece takes nothing */
    eng_tensor_release(part);
    *gin = z;
    return ENG_OK;
  }
  if (!st) st = eng_tensor_copy_(part, g), eng_tensor_release(part);
  if (st) return eng_tensor_release(z), st;
  *gin = z;
  return ENG_OK;
}

eng_status_t eng_ag_view_backward(eng_ag_node_t *n, eng_tensor_t *g, eng_tensor_t **gin) {
  const eng_ag_tmeta_t *in = &n->in_meta[0];
  switch ((eng_ag_view_kind_t)n->view_kind) {
  case AG_VIEW_RESHAPE:
    return eng_tensor_reshape(g, in->shape, in->ndim, gin);
  case AG_VIEW_PERMUTE: {
    int64_t inv[ENG_MAX_DIMS];
    for (int d = 0; d < n->attrs.ni; d++) inv[n->attrs.i[d]] = d;
    return eng_tensor_permute(g, inv, n->attrs.ni, gin);
  }
  case AG_VIEW_RESTRICT:
  case AG_VIEW_SELECT:
    return scatter_into_zeros(n, g, gin);
  case AG_VIEW_EXPAND:
    return eng_ag_sum_to(g, in->shape, in->ndim, gin);
  }
  return eng_error(ENG_ERR_INTERNAL, "backward: unknown view kind %d", n->view_kind);
}
