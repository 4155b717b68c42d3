/* The autograd graph: grad mode, per-tensor state, and the nodes that ops and views record. */
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd_internal.h"

static _Thread_local int grad_off;    /* grad mode is on unless set */
static _Thread_local int in_backward;

int eng_grad_enabled(void) { return !grad_off; }
int eng_grad_set_enabled(int on) {
  int was = !grad_off;
  grad_off = !on;
  return was;
}
int eng_grad_in_backward(void) { return in_backward; }
int eng_ag_set_in_backward(int on) {
  int was = in_backward;
  in_backward = on;
  return was;
}

uint32_t eng_tensor_version(const eng_tensor_t *t) { return t->storage->version; }
void eng_tensor_bump_version(eng_tensor_t *t) { __atomic_fetch_add(&t->storage->version, 1, __ATOMIC_RELAXED); }

eng_ag_meta_t *eng_ag_meta(const eng_tensor_t *t) { return (eng_ag_meta_t *)t->autograd; }

static eng_status_t meta_get(eng_tensor_t *t, eng_ag_meta_t **out) {
  if (!t->autograd) {
    t->autograd = calloc(1, sizeof(eng_ag_meta_t));
    if (!t->autograd) return eng_error(ENG_ERR_OOM, "autograd: out of memory");
  }
  *out = t->autograd;
  return ENG_OK;
}

void eng_autograd_release(eng_tensor_t *t) {
  eng_ag_meta_t *m = t->autograd;
  if (!m) return;
  eng_ag_node_release(m->grad_fn);
  eng_tensor_release(m->grad);
  free(m);
  t->autograd = NULL;
}

int eng_tensor_requires_grad(const eng_tensor_t *t) {
  const eng_ag_meta_t *m = t->autograd;
  return m && (m->requires_grad || m->grad_fn);
}

int eng_tensor_is_leaf(const eng_tensor_t *t) {
  const eng_ag_meta_t *m = t->autograd;
  return !m || !m->grad_fn;
}

eng_tensor_t *eng_tensor_grad(const eng_tensor_t *t) {
  const eng_ag_meta_t *m = t->autograd;
  return m ? m->grad : NULL;
}

const char *eng_tensor_grad_fn_name(const eng_tensor_t *t) {
  const eng_ag_meta_t *m = t->autograd;
  return m && m->grad_fn ? m->grad_fn->name : NULL;
}

eng_status_t eng_tensor_set_requires_grad(eng_tensor_t *t, int on) {
  if (!eng_tensor_is_leaf(t)) {
    if (on) return ENG_OK; /* already requires grad through its op */
    return eng_error(ENG_ERR_ARG,
                     "requires_grad: this tensor was made by %s and is part of a graph; use detach() "
                     "to get one that does not require grad",
                     eng_tensor_grad_fn_name(t));
  }
  if (on && !eng_dtype_is_float(t->dtype))
    return eng_error(ENG_ERR_DTYPE, "requires_grad: only floating tensors can require grad, got %s",
                     eng_dtype_name(t->dtype));
  if (!on && !t->autograd) return ENG_OK;
  eng_ag_meta_t *m = NULL;
  eng_status_t st = meta_get(t, &m);
  if (!st) m->requires_grad = on != 0;
  return st;
}

eng_status_t eng_tensor_set_grad(eng_tensor_t *t, eng_tensor_t *g) {
  if (g) {
    char a[32], b[32];
    if (!eng_shape_equal(t, g) || g->dtype != t->dtype ||
        !eng_device_equal(eng_tensor_device(g), eng_tensor_device(t))) {
      char sa[192], sb[192];
      return eng_error(ENG_ERR_SHAPE, "set_grad: the gradient must match the tensor: %s %s on %s, got %s %s on %s",
                       eng_dtype_name(t->dtype), ENG_SHAPE_STR(t, sa),
                       eng_device_name(eng_tensor_device(t), a, sizeof a), eng_dtype_name(g->dtype),
                       ENG_SHAPE_STR(g, sb), eng_device_name(eng_tensor_device(g), b, sizeof b));
    }
  }
  if (!g && !t->autograd) return ENG_OK;
  eng_ag_meta_t *m = NULL;
  eng_status_t st = meta_get(t, &m);
  if (st) return st;
  if (g) eng_tensor_retain(g);
  eng_tensor_release(m->grad);
  m->grad = g;
  return ENG_OK;
}

eng_status_t eng_tensor_detach(eng_tensor_t *t, eng_tensor_t **out) {
  eng_tensor_t *d = calloc(1, sizeof *d);
  if (!d) return eng_error(ENG_ERR_OOM, "detach: out of memory");
  *d = *t;
  d->refcount = 1;
  d->autograd = NULL;
  eng_storage_retain(t->storage);
  *out = d;
  return ENG_OK;
}

/* ---- nodes ---- */

void eng_ag_node_retain(eng_ag_node_t *n) {
  if (n) n->refcount++;
}

static void drop_saved(eng_ag_node_t *n) {
  if (!n->saved) return;
  for (int k = 0; k < n->n_in + n->n_out; k++) {
    eng_tensor_release(n->saved[k]);
    n->saved[k] = NULL;
  }
}

/* Nodes form a DAG from outputs towards leaves; releasing iteratively keeps deep graphs (long
 * recurrences unrolled step by step) from overflowing the C stack. */
void eng_ag_node_release(eng_ag_node_t *n) {
  eng_ag_node_t *stack_small[64], **stack = stack_small;
  int cap = 64, top = 0;
  if (n) stack[top++] = n;
  while (top > 0) {
    eng_ag_node_t *x = stack[--top];
    if (--x->refcount > 0) continue;
    for (int k = 0; k < x->n_in; k++) {
      eng_ag_node_t *c = x->next[k].node;
      if (!c) continue;
      if (top == cap) {
        eng_ag_node_t **bigger = malloc(sizeof *bigger * (size_t)cap * 2);
        if (!bigger) { /* cannot grow: release this subtree recursively instead */
          eng_ag_node_release(c);
          continue;
        }
        memcpy(bigger, stack, sizeof *stack * (size_t)top);
        if (stack != stack_small) free(stack);
        stack = bigger;
        cap *= 2;
      }
      stack[top++] = c;
    }
    drop_saved(x);
    eng_tensor_release(x->leaf);
    free(x->next);
    free(x->in_meta);
    free(x->out_meta);
    free(x->saved);
    free(x->saved_version);
    free(x->gbuf);
    free(x);
  }
  if (stack != stack_small) free(stack);
}

static void tmeta_of(const eng_tensor_t *t, eng_ag_tmeta_t *m) {
  m->ndim = t->ndim;
  memcpy(m->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  m->dtype = t->dtype;
  m->device = eng_tensor_device(t);
}

static eng_ag_node_t *node_new(const char *name, int n_in, int n_out) {
  eng_ag_node_t *n = calloc(1, sizeof *n);
  if (!n) return NULL;
  n->refcount = 1;
  n->name = name;
  n->n_in = n_in;
  n->n_out = n_out;
  int ns = n_in + n_out;
  n->next = calloc((size_t)(n_in ? n_in : 1), sizeof *n->next);
  n->in_meta = calloc((size_t)(n_in ? n_in : 1), sizeof *n->in_meta);
  n->out_meta = calloc((size_t)n_out, sizeof *n->out_meta);
  n->saved = calloc((size_t)ns, sizeof *n->saved);
  n->saved_version = calloc((size_t)ns, sizeof *n->saved_version);
  n->gbuf = calloc((size_t)n_out, sizeof *n->gbuf);
  if (!n->next || !n->in_meta || !n->out_meta || !n->saved || !n->saved_version || !n->gbuf) {
    eng_ag_node_release(n);
    return NULL;
  }
  return n;
}

/* The accumulator a leaf's gradients flow into. */
static eng_ag_node_t *accumulator_new(eng_tensor_t *leaf) {
  eng_ag_node_t *n = node_new("accumulate_grad", 0, 1);
  if (!n) return NULL;
  eng_tensor_retain(leaf);
  n->leaf = leaf;
  tmeta_of(leaf, &n->out_meta[0]);
  return n;
}

eng_status_t eng_ag_edge_of(eng_tensor_t *t, eng_ag_edge_t *e) {
  e->node = NULL;
  e->index = 0;
  eng_ag_meta_t *m = t->autograd;
  if (!m) return ENG_OK;
  if (m->grad_fn) {
    eng_ag_node_retain(m->grad_fn);
    e->node = m->grad_fn;
    e->index = m->output_nr;
  } else if (m->requires_grad) {
    e->node = accumulator_new(t);
    if (!e->node) return eng_error(ENG_ERR_OOM, "autograd: out of memory");
  }
  return ENG_OK;
}

/* A saved tensor: an alias without autograd state, so the node does not keep its own outputs'
 * graph alive (which would be a reference cycle). */
static eng_status_t save(eng_ag_node_t *n, int slot, eng_tensor_t *t) {
  eng_status_t st = eng_tensor_detach(t, &n->saved[slot]);
  if (!st) n->saved_version[slot] = eng_tensor_version(t);
  return st;
}

static eng_status_t attach(eng_ag_node_t *n, eng_tensor_t *out, int index) {
  eng_ag_meta_t *m = NULL;
  eng_status_t st = meta_get(out, &m);
  if (st) return st;
  eng_ag_node_retain(n);
  eng_ag_node_release(m->grad_fn);
  m->grad_fn = n;
  m->output_nr = index;
  return ENG_OK;
}

static eng_status_t fail_node(eng_ag_node_t *n, eng_status_t st) {
  eng_ag_node_release(n);
  return st;
}

eng_status_t eng_ag_record_op(const eng_op_call_t *call, const eng_backward_def_t *def, const char *name) {
  int any = 0;
  for (int k = 0; k < call->n_in; k++) {
    const eng_tensor_t *t = call->in[k];
    if (t && !(def->no_grad_in & AG_IN(k)) && eng_tensor_requires_grad(t)) any = 1;
  }
  if (!any) return ENG_OK;
  eng_ag_node_t *n = node_new(name, call->n_in, call->n_out);
  if (!n) return eng_error(ENG_ERR_OOM, "%s: out of memory for its autograd node", name);
  n->def = def;
  n->op = call->id;
  n->attrs = call->attrs;
  eng_status_t st = ENG_OK;
  for (int k = 0; k < call->n_in && !st; k++) {
    eng_tensor_t *t = call->in[k];
    if (!t) {
      n->in_meta[k].ndim = -1; /* an absent optional input */
      continue;
    }
    tmeta_of(t, &n->in_meta[k]);
    if (!(def->no_grad_in & AG_IN(k))) st = eng_ag_edge_of(t, &n->next[k]);
    if (!st && (def->save_in & AG_IN(k))) st = save(n, k, t);
  }
  for (int j = 0; j < call->n_out && !st; j++) {
    tmeta_of(call->out[j], &n->out_meta[j]);
    if (def->save_out & AG_IN(j)) st = save(n, call->n_in + j, call->out[j]);
  }
  /* Only floating outputs carry gradients (argmax-like integer outputs of a multi-output op don't). */
  for (int j = 0; j < call->n_out && !st; j++)
    if (eng_dtype_is_float(call->out[j]->dtype)) st = attach(n, call->out[j], j);
  if (st) {
    for (int j = 0; j < call->n_out; j++) {
      eng_ag_meta_t *m = call->out[j]->autograd;
      if (m && m->grad_fn == n) {
        m->grad_fn = NULL;
        eng_ag_node_release(n);
      }
    }
    return fail_node(n, st);
  }
  eng_ag_node_release(n); /* the outputs hold it now */
  return ENG_OK;
}

eng_status_t eng_ag_record_view(eng_tensor_t *base, eng_tensor_t *view, eng_ag_view_kind_t kind,
                                const int64_t *i, int ni) {
  if (!eng_grad_enabled() || !eng_tensor_requires_grad(base)) return ENG_OK;
  eng_ag_node_t *n = node_new(kind == AG_VIEW_EXPAND ? "expand" : kind == AG_VIEW_PERMUTE ? "permute"
                              : kind == AG_VIEW_RESHAPE ? "reshape" : kind == AG_VIEW_SELECT ? "select"
                              : "narrow", 1, 1);
  if (!n) return eng_error(ENG_ERR_OOM, "view: out of memory for its autograd node");
  n->view_kind = kind;
  n->attrs.ni = ni;
  for (int k = 0; k < ni; k++) n->attrs.i[k] = i[k];
  tmeta_of(base, &n->in_meta[0]);
  tmeta_of(view, &n->out_meta[0]);
  eng_status_t st = eng_ag_edge_of(base, &n->next[0]);
  if (!st) st = attach(n, view, 0);
  eng_ag_node_release(n);
  return st;
}

eng_status_t eng_ag_check_inplace(const eng_op_call_t *call, const char *name) {
  /* Reading a tensor that requires grad into a given buffer (item, tolist, copy_) is fine: the
   * result simply is not part of the graph. Writing into one would corrupt it. */
  for (int j = 0; j < call->n_out; j++) {
    if (call->out[j] && eng_tensor_requires_grad(call->out[j]))
      return eng_error(ENG_ERR_ARG,
                       "%s: writes in place into a tensor that requires grad, which autograd cannot "
                       "follow; do it inside engine.no_grad (as optimizers do) or on a detach()ed tensor",
                       name);
  }
  return ENG_OK;
}
