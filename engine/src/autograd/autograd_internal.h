/* The autograd layer's private structures: graph nodes, the per-op backward definitions that the
 * registry entries point to, and what the formula files share. */
#ifndef ENG_AUTOGRAD_INTERNAL_H
#define ENG_AUTOGRAD_INTERNAL_H

#include "eng_autograd.h"
#include "eng_ops.h"
#include "eng_registry.h"

typedef struct eng_ag_node eng_ag_node_t;

/* Computes the gradients of a node's inputs from those of its outputs. gout[j] is the gradient of
 * output j; zeros are made for outputs that got none, except those in the def's optional_gout,
 * which stay NULL. The formula sets gin[k] (a new
 * reference) for the inputs with eng_ag_needs(n, k), and may leave others NULL. A result must have
 * the input's exact shape (it may be a strided view); the engine converts its dtype and device to
 * the input's and checks the shape. */
typedef eng_status_t (*eng_backward_fn)(eng_ag_node_t *n, eng_tensor_t *const *gout, eng_tensor_t **gin);

/* What a registry entry's .backward points to. */
typedef struct eng_backward_def {
  eng_backward_fn fn;
  unsigned save_in;  /* bit k: keep input k for the formula */
  unsigned save_out; /* bit j: keep output j */
  unsigned no_grad_in; /* bit k: input k is never differentiable (indices, conditions) */
  unsigned optional_gout; /* bit j: the formula takes NULL for output j when it got no gradient */
} eng_backward_def_t;

#define AG_IN(k) ((k) < 32 ? 1u << (k) : 0u) /* inputs past 32 (cat) take the defaults */
#define AG_ALL 0xffffffffu

/* Shape, dtype and device of an input or output, kept even when the tensor is not. */
typedef struct {
  int ndim;
  int64_t shape[ENG_MAX_DIMS];
  eng_dtype_t dtype;
  eng_device_t device;
} eng_ag_tmeta_t;

/* An edge to where an input's gradient goes: output `index` of `node`; node NULL: nowhere. */
typedef struct {
  eng_ag_node_t *node;
  int index;
} eng_ag_edge_t;

/* How a view was made, so its backward can undo it. */
typedef enum {
  AG_VIEW_RESHAPE, /* view, reshape, squeeze, unsqueeze: reshape back */
  AG_VIEW_PERMUTE, /* transpose, permute: i[] is the permutation */
  AG_VIEW_RESTRICT, /* narrow, slice, split, chunk: i[0] dim, i[1] start, i[2] length, i[3] step */
  AG_VIEW_SELECT,  /* i[0] dim, i[1] index */
  AG_VIEW_EXPAND,  /* sum over the broadcast dims */
} eng_ag_view_kind_t;

struct eng_ag_node {
  int refcount;
  const char *name;
  const eng_backward_def_t *def; /* NULL for view nodes and leaf accumulators */
  eng_op_id_t op;
  eng_op_attrs_t attrs;
  int n_in, n_out;
  eng_ag_edge_t *next;     /* [n_in] */
  eng_ag_tmeta_t *in_meta; /* [n_in] */
  eng_ag_tmeta_t *out_meta; /* [n_out] */
  eng_tensor_t **saved;    /* [n_in + n_out]: inputs then outputs; NULL when not kept */
  uint32_t *saved_version; /* [n_in + n_out] */
  int released;            /* saved tensors were dropped by a backward without retain_graph */
  eng_tensor_t *leaf;      /* accumulators: the leaf whose .grad receives the gradient */
  int view_kind;           /* view nodes */
  /* scratch of one backward run */
  int deps;
  int visited;
  eng_tensor_t **gbuf; /* [n_out] */
};

/* The autograd state a tensor points to (t->autograd). */
typedef struct {
  int requires_grad;
  eng_ag_node_t *grad_fn; /* NULL for leaves */
  int output_nr;
  eng_tensor_t *grad;
} eng_ag_meta_t;

/* ---- recording (graph.c) ---- */
/* Called by eng_op_dispatch after a kernel ran: records a node when an input requires grad. */
eng_status_t eng_ag_record_op(const eng_op_call_t *call, const eng_backward_def_t *def, const char *name);
/* Refuses in-place writes into tensors that require grad (dispatch calls it for preset outputs). */
eng_status_t eng_ag_check_inplace(const eng_op_call_t *call, const char *name);
/* Records a view node from `base` to `view` (view.c calls it); i[] as documented per kind. */
eng_status_t eng_ag_record_view(eng_tensor_t *base, eng_tensor_t *view, eng_ag_view_kind_t kind,
                                const int64_t *i, int ni);
void eng_ag_node_release(eng_ag_node_t *n);
void eng_ag_node_retain(eng_ag_node_t *n);
eng_ag_meta_t *eng_ag_meta(const eng_tensor_t *t); /* NULL when t has none */
/* Leaves' accumulator nodes and non-leaves' grad_fn: where t's gradient goes (new node ref). */
eng_status_t eng_ag_edge_of(eng_tensor_t *t, eng_ag_edge_t *e);
/* Marks the calling thread as running backward formulas; returns the previous mark. */
int eng_ag_set_in_backward(int on);

/* ---- what formulas use (formulas_common.c) ---- */
static inline int eng_ag_needs(const eng_ag_node_t *n, int k) { return n->next[k].node != NULL; }
/* Saved input k / output j (borrowed). */
static inline eng_tensor_t *eng_ag_in(const eng_ag_node_t *n, int k) { return n->saved[k]; }
static inline eng_tensor_t *eng_ag_out(const eng_ag_node_t *n, int j) { return n->saved[n->n_in + j]; }
/* Sums g over the dims it was broadcast along, to `shape`. */
eng_status_t eng_ag_sum_to(eng_tensor_t *g, const int64_t *shape, int ndim, eng_tensor_t **out);
/* A 0-d tensor holding v with like's dtype and device. */
eng_status_t eng_ag_scalar(const eng_tensor_t *like, double v, eng_tensor_t **out);
/* a * v (v a number). */
eng_status_t eng_ag_mul_scalar(eng_tensor_t *a, double v, eng_tensor_t **out);
/* a OP b, releasing a and b when `consume` bits are set (1: a, 2: b). */
eng_status_t eng_ag_bin(eng_binary_op_t op, eng_tensor_t *a, eng_tensor_t *b, int consume, eng_tensor_t **out);
/* where(mask, a, 0): keeps a where mask is non-zero. */
eng_status_t eng_ag_mask(eng_tensor_t *mask, eng_tensor_t *a, eng_tensor_t **out);
/* Zeros of a meta's shape/dtype/device. */
eng_status_t eng_ag_zeros(const eng_ag_tmeta_t *m, eng_tensor_t **out);
/* g reshaped back to the shape of a reduction's input over dims (keepdim or not), then expanded. */
eng_status_t eng_ag_unreduce(eng_tensor_t *g, const eng_ag_tmeta_t *in, const eng_op_attrs_t *a,
                             eng_tensor_t **out);

/* ---- the backward definitions the registry points to ---- */
extern const eng_backward_def_t eng_bw_unary, eng_bw_binary, eng_bw_clamp, eng_bw_where,
    eng_bw_reduce, eng_bw_softmax, eng_bw_log_softmax, eng_bw_layer_norm, eng_bw_rms_norm,
    eng_bw_cross_entropy, eng_bw_matmul, eng_bw_linear, eng_bw_embedding, eng_bw_index_select,
    eng_bw_gather, eng_bw_cat, eng_bw_copy, eng_bw_add_rms_norm, eng_bw_e1, eng_bw_e23, eng_bw_e88;

/* The view backward (views.c). */
eng_status_t eng_ag_view_backward(eng_ag_node_t *n, eng_tensor_t *g, eng_tensor_t **gin);

#endif
