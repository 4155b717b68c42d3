/* Strided tensors as cuBLASLt operands (see gemm_operand.h). The in-place rules are those of the
 * CPU matmul (kernels/cpu/matmul.c); on top, cuBLASLt takes one batch stride per operand. */
#include "cuda/gemm_operand.h"

#include <string.h>

/* The operand's matrix (r x c, strides rs, cs) and its stride over each batch dim (0 where it is
 * broadcast). A 1-D left operand is one row, a 1-D right operand one column. */
typedef struct {
  int64_t r, c, rs, cs;
  int64_t bstride[ENG_MAX_DIMS];
} view_t;

static void describe(const eng_tensor_t *t, int is_b, int nbatch, const int64_t *bshape, view_t *v) {
  int nd = t->ndim;
  if (nd == 1) {
    int64_t s = t->stride[0];
    v->r = is_b ? t->shape[0] : 1;
    v->c = is_b ? 1 : t->shape[0];
    v->rs = is_b ? s : s * t->shape[0];
    v->cs = is_b ? 1 : s;
  } else {
    v->r = t->shape[nd - 2];
    v->c = t->shape[nd - 1];
    v->rs = t->stride[nd - 2];
    v->cs = t->stride[nd - 1];
  }
  int own = nd > 2 ? nd - 2 : 0;
  for (int d = 0; d < nbatch; d++) {
    int td = d - (nbatch - own);
    v->bstride[d] = (td >= 0 && t->shape[td] == bshape[d] && bshape[d] != 1) ? t->stride[td] : 0;
  }
}

/* Stored as is (one row after another, ld apart) or transposed (one column after another); sizes
 * of 1 make the matching stride irrelevant. cuBLASLt needs ld >= the stored matrix's row length. */
static int in_place(const view_t *v, int *trans, int64_t *ld) {
  int64_t row_len = v->c > 1 ? v->c : 1, col_len = v->r > 1 ? v->r : 1;
  if (v->cs == 1 || v->c == 1) {
    int64_t l = v->r == 1 ? row_len : v->rs;
    if (l >= row_len) {
      *trans = 0;
      *ld = l;
      return 1;
    }
  }
  if (v->rs == 1 || v->r == 1) {
    int64_t l = v->c == 1 ? col_len : v->cs;
    if (l >= col_len) {
      *trans = 1;
      *ld = l;
      return 1;
    }
  }
  return 0;
}

/* One stride for the whole (row-major) batch: each batch dim's stride is the next inner one's
 * times its size (dims of size 1 do not count). Broadcast everywhere gives stride 0. */
static int collapse(const view_t *v, int nbatch, const int64_t *bshape, int64_t *bstride) {
  int64_t s = 0, span = 0;
  int first = 1;
  for (int d = nbatch - 1; d >= 0; d--) {
    if (bshape[d] == 1) continue;
    if (first) {
      s = v->bstride[d];
      first = 0;
    } else if (v->bstride[d] != span) {
      return 0;
    }
    span = v->bstride[d] * bshape[d];
  }
  *bstride = s;
  return 1;
}

/* Fills op when t can be read as it is. */
static int fits(const eng_tensor_t *t, int is_b, int nbatch, const int64_t *bshape,
                eng_blaslt_operand_t *op) {
  view_t v;
  describe(t, is_b, nbatch, bshape, &v);
  if (!in_place(&v, &op->trans, &op->ld) || !collapse(&v, nbatch, bshape, &op->bstride)) return 0;
  op->data = eng_tensor_data(t);
  return 1;
}

eng_status_t eng_gemm_operand(eng_tensor_t *t, int is_b, int nbatch, const int64_t *bshape,
                              eng_blaslt_operand_t *op, eng_tensor_t **hold) {
  *hold = NULL;
  if (fits(t, is_b, nbatch, bshape, op)) return ENG_OK;
  /* A dense copy of t as it is: fixes the matrix strides and batch dims t really has. */
  eng_tensor_t *dense = NULL, *full = NULL;
  eng_status_t st = eng_tensor_contiguous(t, &dense);
  if (st) return st;
  if (fits(dense, is_b, nbatch, bshape, op)) {
    *hold = dense;
    return ENG_OK;
  }
  /* Still no single batch stride (t broadcast over some batch dims but not others): one matrix per
   * batch entry. Only a tensor with matrix dims gets here: a 1-D one has no batch dims. */
  int64_t shape[ENG_MAX_DIMS];
  memcpy(shape, bshape, sizeof(int64_t) * (size_t)nbatch);
  shape[nbatch] = dense->shape[dense->ndim - 2];
  shape[nbatch + 1] = dense->shape[dense->ndim - 1];
  eng_tensor_t *wide = NULL;
  st = eng_tensor_expand(dense, shape, nbatch + 2, &wide);
  if (!st) st = eng_tensor_contiguous(wide, &full);
  eng_tensor_release(wide);
  eng_tensor_release(dense);
  if (st) return st;
  if (!fits(full, is_b, nbatch, bshape, op)) {
    eng_tensor_release(full);
    return eng_error(ENG_ERR_INTERNAL, "a dense operand found no cuBLASLt layout");
  }
  *hold = full;
  return ENG_OK;
}
