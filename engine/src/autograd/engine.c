/* Running the backward: collect the nodes reachable from the roots, count how many edges lead into
 * each, then run each node's formula once all its output gradients have arrived. */
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd_internal.h"

/* What eng_grad wants back: for each input, either its accumulator's leaf or (node, index). */
typedef struct {
  eng_tensor_t *const *inputs;
  int n;
  eng_tensor_t **out;
} capture_t;

typedef struct {
  eng_ag_node_t **items;
  int n, cap;
} node_list_t;

static eng_status_t list_push(node_list_t *l, eng_ag_node_t *x) {
  if (l->n == l->cap) {
    int cap = l->cap ? l->cap * 2 : 64;
    eng_ag_node_t **p = realloc(l->items, sizeof *p * (size_t)cap);
    if (!p) return eng_error(ENG_ERR_OOM, "backward: out of memory for the graph walk");
    l->items = p;
    l->cap = cap;
  }
  l->items[l->n++] = x;
  return ENG_OK;
}

/* sum = a + b (either may be NULL); consumes both. */
static eng_status_t accumulate(eng_tensor_t **slot, eng_tensor_t *g) {
  if (!*slot) {
    *slot = g;
    return ENG_OK;
  }
  eng_tensor_t *sum;
  eng_status_t st = eng_op_binary(ENG_BINARY_ADD, *slot, g, &sum);
  eng_tensor_release(g);
  if (st) return st;
  eng_tensor_release(*slot);
  *slot = sum;
  return ENG_OK;
}

/* g with the dtype and device of m, and checked against its shape; consumes g. */
static eng_status_t conform(const char *op, eng_tensor_t *g, const eng_ag_tmeta_t *m, eng_tensor_t **out) {
  int same = g->ndim == m->ndim;
  for (int d = 0; same && d < m->ndim; d++) same = g->shape[d] == m->shape[d];
  if (!same) {
    char a[192], b[192];
    eng_tensor_release(g);
    return eng_error(ENG_ERR_INTERNAL, "backward of %s: gradient of shape %s for an input of shape %s",
                     op, ENG_SHAPE_STR(g, a), eng_shape_str(m->shape, m->ndim, b, sizeof b));
  }
  eng_tensor_t *x = g, *y;
  eng_status_t st = ENG_OK;
  if (!eng_device_equal(eng_tensor_device(x), m->device)) {
    st = eng_tensor_to_device(x, m->device, &y);
    eng_tensor_release(x);
    x = st ? NULL : y;
  }
  if (!st && x->dtype != m->dtype) {
    st = eng_tensor_to_dtype(x, m->dtype, &y);
    eng_tensor_release(x);
    x = st ? NULL : y;
  }
  *out = x;
  return st;
}

/* The gradient a leaf keeps: its own dense memory, so in-place updates (clipping, optimizers) of
 * one .grad never touch another tensor. Consumes g. */
static eng_status_t exclusive(eng_tensor_t *g, eng_tensor_t **out) {
  if (g->refcount == 1 && g->storage->refcount == 1 && eng_tensor_is_contiguous(g)) {
    *out = g;
    return ENG_OK;
  }
  eng_status_t st = eng_tensor_clone(g, out);
  eng_tensor_release(g);
  return st;
}

static eng_status_t accumulate_leaf(eng_tensor_t *leaf, eng_tensor_t *g) {
  eng_ag_meta_t *m = leaf->autograd; /* leaves with accumulators have state */
  eng_tensor_t *sum = g;
  eng_status_t st = ENG_OK;
  if (m->grad) {
    st = eng_op_binary(ENG_BINARY_ADD, m->grad, g, &sum);
    eng_tensor_release(g);
    if (st) return st;
  }
  st = exclusive(sum, &sum);
  if (st) return st;
  eng_tensor_release(m->grad);
  m->grad = sum;
  return ENG_OK;
}

static eng_status_t check_saved(const eng_ag_node_t *x) {
  int any = 0;
  for (int k = 0; k < x->n_in + x->n_out; k++) {
    eng_tensor_t *s = x->saved[k];
    if (!s) continue;
    any = 1;
    if (eng_tensor_version(s) != x->saved_version[k])
      return eng_error(ENG_ERR_ARG,
                       "backward: a tensor that %s saved for its gradient (its %s %d) was modified in "
                       "place afterwards (version %u, saved at %u)",
                       x->name, k < x->n_in ? "input" : "output", k < x->n_in ? k + 1 : k - x->n_in + 1,
                       eng_tensor_version(s), x->saved_version[k]);
  }
  if (x->released && x->def && (x->def->save_in || x->def->save_out) && !any)
    return eng_error(ENG_ERR_ARG,
                     "backward: trying to go through the graph a second time (through %s), but its "
                     "saved tensors were freed by the first backward; pass retain_graph = true to the "
                     "first one",
                     x->name);
  return ENG_OK;
}

static void capture_add(capture_t *cap, eng_ag_node_t *x, int index, eng_tensor_t *g, eng_status_t *st) {
  for (int k = 0; k < cap->n && !*st; k++) {
    eng_tensor_t *t = cap->inputs[k];
    eng_ag_meta_t *m = t->autograd;
    int hit = x->leaf ? x->leaf == t : (m && m->grad_fn == x && m->output_nr == index);
    if (!hit) continue;
    eng_tensor_retain(g);
    *st = accumulate(&cap->out[k], g);
  }
}

/* Runs one node: its formula, then hands the input gradients to the next nodes. */
static eng_status_t run_node(eng_ag_node_t *x, capture_t *cap, int retain, node_list_t *ready) {
  eng_status_t st = ENG_OK;
  if (x->leaf) { /* an accumulator */
    eng_tensor_t *g = x->gbuf[0];
    x->gbuf[0] = NULL;
    if (!g) return ENG_OK;
    if (cap) capture_add(cap, x, 0, g, &st);
    if (!cap && !st) return accumulate_leaf(x->leaf, g);
    eng_tensor_release(g);
    return st;
  }
  if ((st = check_saved(x))) return st;
  eng_tensor_t *go[ENG_OP_MAX_OUT] = {0}; /* nodes have at most the registry's outputs */
  eng_tensor_t **gin = calloc((size_t)x->n_in, sizeof *gin);
  if (!gin) return eng_error(ENG_ERR_OOM, "backward: out of memory");
  for (int j = 0; j < x->n_out && !st; j++) {
    go[j] = x->gbuf[j];
    x->gbuf[j] = NULL;
    if (cap && go[j]) capture_add(cap, x, j, go[j], &st);
    int optional = x->def && (x->def->optional_gout & AG_IN(j));
    if (!st && !go[j] && !optional) st = eng_ag_zeros(&x->out_meta[j], &go[j]);
  }
  if (!st) st = x->def ? x->def->fn(x, go, gin) : eng_ag_view_backward(x, go[0], &gin[0]);
  for (int j = 0; j < x->n_out; j++) eng_tensor_release(go[j]);
  for (int k = 0; k < x->n_in; k++) {
    eng_ag_node_t *nx = x->next[k].node;
    if (!st && gin[k] && nx) {
      eng_tensor_t *g;
      st = conform(x->name, gin[k], &x->in_meta[k], &g);
      gin[k] = NULL;
      if (!st) st = accumulate(&nx->gbuf[x->next[k].index], g);
    }
    eng_tensor_release(gin[k]);
    if (nx && --nx->deps == 0 && !st) st = list_push(ready, nx);
  }
  free(gin);
  if (!retain) {
    for (int k = 0; k < x->n_in + x->n_out; k++) {
      eng_tensor_release(x->saved[k]);
      x->saved[k] = NULL;
    }
    x->released = 1;
  }
  return st;
}

/* Marks every node reachable from the seeds and counts the edges into each. */
static eng_status_t collect(node_list_t *seeds, node_list_t *all) {
  node_list_t stack = {0};
  eng_status_t st = ENG_OK;
  for (int k = 0; k < seeds->n && !st; k++) {
    if (seeds->items[k]->visited) continue;
    seeds->items[k]->visited = 1;
    st = list_push(&stack, seeds->items[k]);
    if (!st) st = list_push(all, seeds->items[k]);
  }
  while (stack.n > 0 && !st) {
    eng_ag_node_t *x = stack.items[--stack.n];
    for (int k = 0; k < x->n_in && !st; k++) {
      eng_ag_node_t *c = x->next[k].node;
      if (!c) continue;
      c->deps++;
      if (c->visited) continue;
      c->visited = 1;
      st = list_push(&stack, c);
      if (!st) st = list_push(all, c);
    }
  }
  free(stack.items);
  return st;
}

static eng_status_t seed_grad(eng_tensor_t *root, eng_tensor_t *given, eng_tensor_t **out) {
  char a[192], b[192];
  if (!given) {
    if (eng_tensor_numel(root) != 1)
      return eng_error(ENG_ERR_ARG,
                       "backward: the output has shape %s; only a one-element output gets the implicit "
                       "gradient 1, give a gradient of its shape",
                       ENG_SHAPE_STR(root, a));
    return eng_tensor_full(root->shape, root->ndim, 1.0, root->dtype, eng_tensor_device(root), out);
  }
  if (!eng_shape_equal(root, given))
    return eng_error(ENG_ERR_SHAPE, "backward: the gradient has shape %s but the output has shape %s",
                     ENG_SHAPE_STR(given, a), ENG_SHAPE_STR(root, b));
  eng_ag_tmeta_t m = {.ndim = root->ndim, .dtype = root->dtype, .device = eng_tensor_device(root)};
  memcpy(m.shape, root->shape, sizeof(int64_t) * (size_t)root->ndim);
  eng_tensor_retain(given);
  return conform("backward", given, &m, out);
}

static eng_status_t run(eng_tensor_t *const *roots, eng_tensor_t *const *grads, int n, int retain,
                        capture_t *cap) {
  node_list_t seeds = {0}, all = {0}, ready = {0};
  eng_status_t st = ENG_OK;
  for (int k = 0; k < n && !st; k++) {
    if (!eng_tensor_requires_grad(roots[k])) {
      st = eng_error(ENG_ERR_ARG,
                     "backward: output %d does not require grad (nothing that made it requires grad; "
                     "was it computed inside engine.no_grad?)",
                     k + 1);
      break;
    }
    eng_ag_edge_t e = {0};
    eng_tensor_t *g = NULL;
    st = seed_grad(roots[k], grads ? grads[k] : NULL, &g);
    if (!st) st = eng_ag_edge_of(roots[k], &e);
    if (!st) st = list_push(&seeds, e.node);
    if (st) {
      eng_ag_node_release(e.node); /* only set when the push itself failed */
      eng_tensor_release(g);
      break;
    }
    st = accumulate(&e.node->gbuf[e.index], g);
  }
  if (!st) st = collect(&seeds, &all);
  for (int k = 0; k < seeds.n && !st; k++) {
    eng_ag_node_t *x = seeds.items[k];
    if (x->deps == 0 && x->visited == 1) {
      x->visited = 2; /* queued once even if given twice */
      st = list_push(&ready, x);
    }
  }
  int was = eng_grad_set_enabled(0), was_bw = eng_ag_set_in_backward(1);
  while (!st && ready.n > 0) st = run_node(ready.items[--ready.n], cap, retain, &ready);
  eng_ag_set_in_backward(was_bw);
  eng_grad_set_enabled(was);
  /* Whatever happened, leave no scratch behind. */
  for (int k = 0; k < all.n; k++) {
    eng_ag_node_t *x = all.items[k];
    x->deps = 0;
    x->visited = 0;
    for (int j = 0; j < x->n_out; j++) {
      eng_tensor_release(x->gbuf[j]);
      x->gbuf[j] = NULL;
    }
  }
  for (int k = 0; k < seeds.n; k++) eng_ag_node_release(seeds.items[k]);
  free(seeds.items);
  free(all.items);
  free(ready.items);
  return st;
}

eng_status_t eng_backward(eng_tensor_t *const *roots, eng_tensor_t *const *grads, int n, int retain_graph) {
  return run(roots, grads, n, retain_graph, NULL);
}

eng_status_t eng_grad(eng_tensor_t *const *roots, eng_tensor_t *const *grads, int n,
                      eng_tensor_t *const *inputs, int n_inputs, int retain_graph, eng_tensor_t **out) {
  for (int k = 0; k < n_inputs; k++) {
    out[k] = NULL;
    if (!eng_tensor_requires_grad(inputs[k]))
      return eng_error(ENG_ERR_ARG, "grad: input %d does not require grad", k + 1);
  }
  capture_t cap = {.inputs = inputs, .n = n_inputs, .out = out};
  eng_status_t st = run(roots, grads, n, retain_graph, &cap);
  if (st) {
    for (int k = 0; k < n_inputs; k++) {
      eng_tensor_release(out[k]);
      out[k] = NULL;
    }
  }
  return st;
}
