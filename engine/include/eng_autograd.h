/* Reverse-mode automatic differentiation, in the C core.
 *
 * A tensor that requires grad is either a leaf (made by the user, flagged with
 * eng_tensor_set_requires_grad) or the output of a recorded op. Every registry op whose entry has a
 * .backward records a node when grad mode is on and one of its inputs requires grad; views
 * (reshape, transpose, narrow, expand, ...) record nodes too. eng_backward walks the graph from the
 * roots in reverse topological order and adds each leaf's gradient into its .grad; eng_grad returns
 * the gradients of chosen inputs instead. The backward formulas are written with registry ops, so
 * they run on whatever device the tensors live on.
 *
 * Saved tensors: a node keeps what its formula needs (inputs and/or outputs) as aliases of the same
 * storage. Each storage has a version counter that in-place writes bump; backward refuses a saved
 * tensor whose storage was written after it was saved. After a backward the saved tensors are
 * released unless retain_graph is set; a second backward through such a node is an error.
 *
 * In-place ops (copy_, fill_, ops with preset outputs) are not recorded: with grad mode on they
 * refuse to write into a tensor that requires grad (use eng_grad_set_enabled(0), as optimizers and
 * initialisers do); what they write from one is not part of the graph. Grad mode is per thread. */
#ifndef ENG_AUTOGRAD_H
#define ENG_AUTOGRAD_H

#include "eng_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- grad mode (thread-local; on by default) ---- */
int eng_grad_enabled(void);
/* Returns the previous setting. */
int eng_grad_set_enabled(int on);
/* Non-zero while eng_backward / eng_grad run their formulas (the profiler labels ops with it). */
int eng_grad_in_backward(void);

/* ---- per-tensor state ---- */
/* Only leaves (tensors no recorded op made) of floating dtypes can be flagged. Turning it off on a
 * leaf keeps its .grad. */
eng_status_t eng_tensor_set_requires_grad(eng_tensor_t *t, int on);
int eng_tensor_requires_grad(const eng_tensor_t *t);
/* A leaf: not made by a recorded op (every tensor that does not require grad is a leaf). */
int eng_tensor_is_leaf(const eng_tensor_t *t);
/* The accumulated gradient of a leaf (borrowed: no new reference), or NULL. */
eng_tensor_t *eng_tensor_grad(const eng_tensor_t *t);
/* Replaces the gradient (g may be NULL to clear it; else same shape and dtype and device as t). */
eng_status_t eng_tensor_set_grad(eng_tensor_t *t, eng_tensor_t *g);
/* The name of the op that made t ("matmul", "view", ...), or NULL for a leaf. */
const char *eng_tensor_grad_fn_name(const eng_tensor_t *t);
/* A new tensor over the same storage that does not require grad. */
eng_status_t eng_tensor_detach(eng_tensor_t *t, eng_tensor_t **out);
/* Storage version: bumped by every in-place write (copy_, fill_, in-place ops, optimizers). */
uint32_t eng_tensor_version(const eng_tensor_t *t);
void eng_tensor_bump_version(eng_tensor_t *t);
/* Frees t's autograd state (eng_tensor_release calls it). */
void eng_autograd_release(eng_tensor_t *t);

/* ---- running the backward ---- */
/* Adds d(roots)/d(leaf) into every reachable leaf's .grad. grads[k] is the gradient of roots[k]
 * (same shape; NULL only for a one-element root, which gets 1). grads may be NULL. */
eng_status_t eng_backward(eng_tensor_t *const *roots, eng_tensor_t *const *grads, int n,
                          int retain_graph);
/* The gradients of roots with respect to inputs (which must require grad), without touching any
 * .grad. out[k] gets a new reference, or NULL when roots do not depend on inputs[k]. */
eng_status_t eng_grad(eng_tensor_t *const *roots, eng_tensor_t *const *grads, int n,
                      eng_tensor_t *const *inputs, int n_inputs, int retain_graph,
                      eng_tensor_t **out);

#ifdef __cplusplus
}
#endif
#endif
