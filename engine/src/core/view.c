/* Views: new shapes/strides/offsets over the same storage; no data is copied (except by reshape
 * when no view is possible). */
#include <limits.h>
#include <stdlib.h>

#include "autograd/autograd_internal.h"
#include "core/tensor_internal.h"

/* Hands out a view, recording it for autograd when its base requires grad. */
static eng_status_t recorded(eng_tensor_t *base, eng_status_t st, eng_tensor_t **out, eng_ag_view_kind_t kind,
                             const int64_t *i, int ni) {
  if (st || !eng_grad_enabled() || !eng_tensor_requires_grad(base)) return st;
  st = eng_ag_record_view(base, *out, kind, i, ni);
  if (st) {
    eng_tensor_release(*out);
    *out = NULL;
  }
  return st;
}

/* Fills shape from a requested one: at most one -1 (inferred), other sizes >= 0, same numel. */
static eng_status_t resolve_shape(const char *op, const eng_tensor_t *t, const int64_t *req, int ndim,
                                  int64_t *shape) {
  char sb[ENG_SHAPE_BUF];
  if (ndim < 0 || ndim > ENG_MAX_DIMS)
    return eng_error(ENG_ERR_SHAPE, "%s: %d dims requested; at most %d are supported", op, ndim,
                     ENG_MAX_DIMS);
  int64_t numel = eng_tensor_numel(t), prod = 1;
  int infer = -1, overflow = 0;
  for (int d = 0; d < ndim; d++) {
    shape[d] = req[d];
    if (req[d] == -1) {
      if (infer >= 0)
        return eng_error(ENG_ERR_ARG, "%s: only one dim can be -1 in %s", op,
                         eng_shape_str(req, ndim, sb, sizeof sb));
      infer = d;
    } else if (req[d] < 0) {
      return eng_error(ENG_ERR_SHAPE, "%s: invalid size %lld in shape %s", op, (long long)req[d],
                       eng_shape_str(req, ndim, sb, sizeof sb));
    } else {
      overflow |= __builtin_mul_overflow(prod, req[d], &prod);
    }
  }
  int ok = !overflow && (infer >= 0 ? prod > 0 && numel % prod == 0 : prod == numel);
  if (!ok)
    return eng_error(ENG_ERR_SHAPE, "%s: shape %s is invalid for a tensor of %lld elements", op,
                     eng_shape_str(req, ndim, sb, sizeof sb), (long long)numel);
  if (infer >= 0) shape[infer] = numel / prod;
  return ENG_OK;
}

/* Strides that view t as `shape` without moving data, following PyTorch's computeStride: the old
 * dims are cut into chunks that are contiguous among themselves, and each chunk must be covered
 * exactly by a run of new dims. Returns 0 when no such strides exist. */
static int view_strides(const eng_tensor_t *t, const int64_t *shape, int ndim, int64_t *stride) {
  if (eng_tensor_numel(t) == 0 || t->ndim == 0) {
    eng_contiguous_strides(shape, ndim, stride);
    return 1;
  }
  int view_d = ndim - 1;
  int64_t chunk_base = t->stride[t->ndim - 1], tensor_numel = 1, view_numel = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    tensor_numel *= t->shape[d];
    if (d == 0 || (t->shape[d - 1] != 1 && t->stride[d - 1] != tensor_numel * chunk_base)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        stride[view_d] = view_numel * chunk_base;
        view_numel *= shape[view_d];
        view_d--;
      }
      if (view_numel != tensor_numel) return 0;
      if (d > 0) {
        chunk_base = t->stride[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

eng_status_t eng_tensor_view(eng_tensor_t *t, const int64_t *shape, int ndim, eng_tensor_t **out) {
  int64_t sh[ENG_MAX_DIMS], st[ENG_MAX_DIMS];
  eng_status_t s = resolve_shape("view", t, shape, ndim, sh);
  if (s) return s;
  if (!view_strides(t, sh, ndim, st)) {
    char a[ENG_SHAPE_BUF], b[ENG_SHAPE_BUF], c[ENG_SHAPE_BUF];
    return eng_error(ENG_ERR_LAYOUT,
                     "view: shape %s is not compatible with the strides of a %s tensor (strides %s); "
                     "use reshape",
                     eng_shape_str(sh, ndim, a, sizeof a), ENG_SHAPE_STR(t, b),
                     eng_shape_str(t->stride, t->ndim, c, sizeof c));
  }
  return recorded(t, eng_tensor_alias(t, ndim, sh, st, t->offset, out), out, AG_VIEW_RESHAPE, NULL, 0);
}

eng_status_t eng_tensor_reshape(eng_tensor_t *t, const int64_t *shape, int ndim, eng_tensor_t **out) {
  int64_t sh[ENG_MAX_DIMS], st[ENG_MAX_DIMS];
  eng_status_t s = resolve_shape("reshape", t, shape, ndim, sh);
  if (s) return s;
  if (view_strides(t, sh, ndim, st))
    return recorded(t, eng_tensor_alias(t, ndim, sh, st, t->offset, out), out, AG_VIEW_RESHAPE, NULL, 0);
  eng_tensor_t *c;
  s = eng_tensor_contiguous(t, &c);
  if (s) return s;
  eng_contiguous_strides(sh, ndim, st);
  s = eng_tensor_alias(c, ndim, sh, st, c->offset, out);
  eng_tensor_release(c);
  return recorded(t, s, out, AG_VIEW_RESHAPE, NULL, 0);
}

eng_status_t eng_tensor_transpose(eng_tensor_t *t, int64_t d0, int64_t d1, eng_tensor_t **out) {
  int a, b;
  eng_status_t s = eng_dim_wrap("transpose", d0, t->ndim, &a);
  if (!s) s = eng_dim_wrap("transpose", d1, t->ndim, &b);
  if (s) return s;
  int64_t sh[ENG_MAX_DIMS], st[ENG_MAX_DIMS], perm[ENG_MAX_DIMS];
  for (int d = 0; d < t->ndim; d++) {
    int from = d == a ? b : d == b ? a : d;
    sh[d] = t->shape[from];
    st[d] = t->stride[from];
    perm[d] = from;
  }
  return recorded(t, eng_tensor_alias(t, t->ndim, sh, st, t->offset, out), out, AG_VIEW_PERMUTE, perm, t->ndim);
}

eng_status_t eng_tensor_permute(eng_tensor_t *t, const int64_t *perm, int ndim, eng_tensor_t **out) {
  char pb[ENG_SHAPE_BUF];
  if (ndim != t->ndim)
    return eng_error(ENG_ERR_SHAPE, "permute: %s has %d dims but the tensor has %d",
                     eng_shape_str(perm, ndim, pb, sizeof pb), ndim, t->ndim);
  int64_t sh[ENG_MAX_DIMS], st[ENG_MAX_DIMS], order[ENG_MAX_DIMS];
  int seen[ENG_MAX_DIMS] = {0};
  for (int d = 0; d < ndim; d++) {
    int from;
    eng_status_t s = eng_dim_wrap("permute", perm[d], ndim, &from);
    if (s) return s;
    if (seen[from]++)
      return eng_error(ENG_ERR_ARG, "permute: %s is not a permutation of %d dims",
                       eng_shape_str(perm, ndim, pb, sizeof pb), ndim);
    sh[d] = t->shape[from];
    st[d] = t->stride[from];
    order[d] = from;
  }
  return recorded(t, eng_tensor_alias(t, ndim, sh, st, t->offset, out), out, AG_VIEW_PERMUTE, order, ndim);
}

/* t with dim d restricted to `len` elements from `start`, stepping `step`. */
static eng_status_t restrict_dim(eng_tensor_t *t, int d, int64_t start, int64_t len, int64_t step,
                                 eng_tensor_t **out) {
  int64_t sh[ENG_MAX_DIMS], st[ENG_MAX_DIMS];
  for (int k = 0; k < t->ndim; k++) {
    sh[k] = t->shape[k];
    st[k] = t->stride[k];
  }
  sh[d] = len;
  st[d] = t->stride[d] * step;
  int64_t spec[4] = {d, start, len, step};
  return recorded(t, eng_tensor_alias(t, t->ndim, sh, st, t->offset + start * t->stride[d], out), out,
                  AG_VIEW_RESTRICT, spec, 4);
}

eng_status_t eng_tensor_narrow(eng_tensor_t *t, int64_t dim, int64_t start, int64_t length,
                               eng_tensor_t **out) {
  int d;
  eng_status_t s = eng_dim_wrap("narrow", dim, t->ndim, &d);
  if (s) return s;
  int64_t size = t->shape[d], from = start < 0 ? start + size : start;
  if (from < 0 || from > size || length < 0 || length > size - from) {
    char sb[ENG_SHAPE_BUF];
    return eng_error(ENG_ERR_INDEX, "narrow: start %lld, length %lld do not fit dim %d of size %lld (%s)",
                     (long long)start, (long long)length, d, (long long)size, ENG_SHAPE_STR(t, sb));
  }
  return restrict_dim(t, d, from, length, 1, out);
}

/* Python's rule for one slice bound: negatives count from the end, then clamp to [0, size]. */
static int64_t slice_bound(int64_t i, int64_t size) {
  if (i < 0) i = i < -size ? 0 : i + size;
  return i > size ? size : i;
}

eng_status_t eng_tensor_slice(eng_tensor_t *t, int64_t dim, int64_t start, int64_t stop,
                              int64_t step, eng_tensor_t **out) {
  int d;
  eng_status_t s = eng_dim_wrap("slice", dim, t->ndim, &d);
  if (s) return s;
  if (step <= 0) return eng_error(ENG_ERR_ARG, "slice: step must be positive, got %lld", (long long)step);
  int64_t size = t->shape[d], a = slice_bound(start, size), b = slice_bound(stop, size);
  int64_t len = b > a ? (b - a - 1) / step + 1 : 0;
  return restrict_dim(t, d, len ? a : 0, len, step, out);
}

eng_status_t eng_tensor_select(eng_tensor_t *t, int64_t dim, int64_t index, eng_tensor_t **out) {
  int d;
  eng_status_t s = eng_dim_wrap("select", dim, t->ndim, &d);
  if (s) return s;
  int64_t size = t->shape[d], i = index < 0 ? index + size : index;
  if (i < 0 || i >= size) {
    char sb[ENG_SHAPE_BUF];
    return eng_error(ENG_ERR_INDEX, "select: index %lld out of range for dim %d of size %lld (%s)",
                     (long long)index, d, (long long)size, ENG_SHAPE_STR(t, sb));
  }
  int64_t sh[ENG_MAX_DIMS], st[ENG_MAX_DIMS];
  int n = 0;
  for (int k = 0; k < t->ndim; k++) {
    if (k == d) continue;
    sh[n] = t->shape[k];
    st[n++] = t->stride[k];
  }
  int64_t spec[2] = {d, i};
  return recorded(t, eng_tensor_alias(t, n, sh, st, t->offset + i * t->stride[d], out), out, AG_VIEW_SELECT,
                  spec, 2);
}

eng_status_t eng_tensor_squeeze(eng_tensor_t *t, int64_t dim, int all, eng_tensor_t **out) {
  int only = -1;
  if (!all) {
    eng_status_t s = eng_dim_wrap("squeeze", dim, t->ndim, &only);
    if (s) return s;
  }
  int64_t sh[ENG_MAX_DIMS], st[ENG_MAX_DIMS];
  int n = 0;
  for (int k = 0; k < t->ndim; k++) {
    if (t->shape[k] == 1 && (all || k == only)) continue;
    sh[n] = t->shape[k];
    st[n++] = t->stride[k];
  }
  return recorded(t, eng_tensor_alias(t, n, sh, st, t->offset, out), out, AG_VIEW_RESHAPE, NULL, 0);
}

eng_status_t eng_tensor_unsqueeze(eng_tensor_t *t, int64_t dim, eng_tensor_t **out) {
  int nd = t->ndim;
  if (nd >= ENG_MAX_DIMS)
    return eng_error(ENG_ERR_SHAPE, "unsqueeze: a %d-d tensor cannot get another dim (at most %d)", nd,
                     ENG_MAX_DIMS);
  if (dim < -(int64_t)nd - 1 || dim > nd)
    return eng_error(ENG_ERR_INDEX, "unsqueeze: dim %lld out of range for a %d-d tensor (expected %d..%d)",
                     (long long)dim, nd, -nd - 1, nd);
  int at = (int)(dim < 0 ? dim + nd + 1 : dim);
  int64_t sh[ENG_MAX_DIMS], st[ENG_MAX_DIMS];
  for (int k = 0, n = 0; k <= nd; k++) {
    if (k == at) {
      sh[k] = 1;
      st[k] = at < nd ? t->shape[at] * t->stride[at] : 1;
    } else {
      sh[k] = t->shape[n];
      st[k] = t->stride[n++];
    }
  }
  return recorded(t, eng_tensor_alias(t, nd + 1, sh, st, t->offset, out), out, AG_VIEW_RESHAPE, NULL, 0);
}

eng_status_t eng_tensor_expand(eng_tensor_t *t, const int64_t *shape, int ndim, eng_tensor_t **out) {
  char a[ENG_SHAPE_BUF], b[ENG_SHAPE_BUF];
  if (ndim > ENG_MAX_DIMS)
    return eng_error(ENG_ERR_SHAPE, "expand: %d dims requested; at most %d are supported", ndim,
                     ENG_MAX_DIMS);
  if (ndim < t->ndim)
    return eng_error(ENG_ERR_SHAPE, "expand: the shape %s has fewer dims than the %s tensor",
                     eng_shape_str(shape, ndim, a, sizeof a), ENG_SHAPE_STR(t, b));
  int lead = ndim - t->ndim;
  int64_t sh[ENG_MAX_DIMS], st[ENG_MAX_DIMS];
  for (int d = 0; d < ndim; d++) {
    int64_t want = shape[d];
    if (want < -1 || (want == -1 && d < lead))
      return eng_error(ENG_ERR_SHAPE, "expand: invalid size %lld for dim %d in %s", (long long)want, d,
                       eng_shape_str(shape, ndim, a, sizeof a));
    if (d < lead) { /* a new leading dim */
      sh[d] = want;
      st[d] = 0;
      continue;
    }
    int64_t have = t->shape[d - lead];
    if (want == -1 || want == have) {
      sh[d] = have;
      st[d] = t->stride[d - lead];
    } else if (have == 1) {
      sh[d] = want;
      st[d] = 0;
    } else {
      return eng_error(ENG_ERR_SHAPE, "expand: cannot expand %s to %s: dim %d has size %lld, not 1",
                       ENG_SHAPE_STR(t, a), eng_shape_str(shape, ndim, b, sizeof b), d - lead,
                       (long long)have);
    }
  }
  return recorded(t, eng_tensor_alias(t, ndim, sh, st, t->offset, out), out, AG_VIEW_EXPAND, NULL, 0);
}

/* count views along dim d: piece k covers [k*piece, min((k+1)*piece, size)). */
static eng_status_t cut(const char *op, eng_tensor_t *t, int d, int64_t count, int64_t piece,
                        eng_tensor_t ***outs, int *n) {
  if (count > INT_MAX) return eng_error(ENG_ERR_ARG, "%s: %lld pieces are too many", op, (long long)count);
  eng_tensor_t **v = calloc((size_t)count, sizeof *v);
  if (!v) return eng_error(ENG_ERR_OOM, "%s: out of memory for %lld pieces", op, (long long)count);
  int64_t size = t->shape[d];
  for (int64_t k = 0; k < count; k++) {
    int64_t from = k * piece < size ? k * piece : size;
    int64_t len = size - from < piece ? size - from : piece;
    eng_status_t s = restrict_dim(t, d, from, len, 1, &v[k]);
    if (s) {
      for (int64_t j = 0; j < k; j++) eng_tensor_release(v[j]);
      free(v);
      return s;
    }
  }
  *outs = v;
  *n = (int)count;
  return ENG_OK;
}

eng_status_t eng_tensor_split(eng_tensor_t *t, int64_t size, int64_t dim, eng_tensor_t ***outs, int *n) {
  int d;
  eng_status_t s = eng_dim_wrap("split", dim, t->ndim, &d);
  if (s) return s;
  int64_t total = t->shape[d];
  if (size < 0 || (size == 0 && total != 0))
    return eng_error(ENG_ERR_ARG, "split: size must be positive, got %lld (dim %d has size %lld)",
                     (long long)size, d, (long long)total);
  /* torch: one piece when the dim is empty or shorter than size */
  int64_t count = size == 0 || total == 0 ? 1 : (total + size - 1) / size;
  return cut("split", t, d, count, size, outs, n);
}

eng_status_t eng_tensor_chunk(eng_tensor_t *t, int64_t chunks, int64_t dim, eng_tensor_t ***outs,
                              int *n) {
  int d;
  eng_status_t s = eng_dim_wrap("chunk", dim, t->ndim, &d);
  if (s) return s;
  if (chunks <= 0) return eng_error(ENG_ERR_ARG, "chunk: chunks must be positive, got %lld", (long long)chunks);
  int64_t total = t->shape[d];
  int64_t piece = total / chunks + (total % chunks != 0);
  /* torch: an empty dim still gives `chunks` (empty) pieces; otherwise pieces of ceil(n/chunks),
   * which may be fewer than asked */
  int64_t count = total == 0 ? chunks : (total + piece - 1) / piece;
  return cut("chunk", t, d, count, piece, outs, n);
}

eng_status_t eng_broadcast_shapes(const char *op, const eng_tensor_t *const *ts, int n, int64_t *shape,
                                  int *ndim) {
  int64_t acc[ENG_MAX_DIMS];
  int nd = 0;
  for (int k = 0; k < n; k++) {
    const eng_tensor_t *t = ts[k];
    if (!t) continue;
    int out_nd = nd > t->ndim ? nd : t->ndim;
    int64_t next[ENG_MAX_DIMS];
    for (int i = 0; i < out_nd; i++) { /* i counts from the right */
      int64_t a = i < nd ? acc[nd - 1 - i] : 1, b = i < t->ndim ? t->shape[t->ndim - 1 - i] : 1;
      if (a != b && a != 1 && b != 1) {
        char sa[ENG_SHAPE_BUF], sb[ENG_SHAPE_BUF];
        return eng_error(ENG_ERR_SHAPE, "%s: shapes %s and %s cannot be broadcast", op,
                         eng_shape_str(acc, nd, sa, sizeof sa), ENG_SHAPE_STR(t, sb));
      }
      next[out_nd - 1 - i] = a == 1 ? b : a;
    }
    for (int i = 0; i < out_nd; i++) acc[i] = next[i];
    nd = out_nd;
  }
  for (int i = 0; i < nd; i++) shape[i] = acc[i];
  *ndim = nd;
  return ENG_OK;
}
