/* Small helpers shared by the elementwise, reduction, norm and loss op files. */
#ifndef ENG_OP_COMMON_H
#define ENG_OP_COMMON_H

#include "eng_registry.h"

/* Room for any shape string: 8 dims of up to 20 digits, commas and brackets. */
#define ENG_OP_SHAPE_BUF 192

/* The registry name of the call's op ("add", "sum", ...). */
const char *eng_call_name(const eng_op_call_t *call);
/* ENG_ERR_ARG naming the op unless inputs 0..n-1 are all given. */
eng_status_t eng_call_need_inputs(const eng_op_call_t *call, int n);
/* meta[0] = t's shape with dtype dt. */
void eng_call_meta_like(eng_op_call_t *call, const eng_tensor_t *t, eng_dtype_t dt);
/* Dispatches the call and hands out its first output. */
eng_status_t eng_call_run(eng_op_call_t *call, eng_tensor_t **out);

/* ENG_ERR_DTYPE "op: expected a floating dtype, got i64" unless t is f64/f32/f16/bf16. */
eng_status_t eng_need_float(const char *op, const eng_tensor_t *t);
/* eng_dim_wrap, except that a 0-d tensor takes dim 0 or -1 as its one (implicit) dim, like torch.
 */
eng_status_t eng_wrap_dim0(const char *op, int64_t dim, int ndim, int *out);
/* The element count of shape[lo..hi-1]. */
int64_t eng_dims_numel(const int64_t *shape, int lo, int hi);
/* x seen as [outer, n, inner] around dims lo..hi-1 (a 0-d x is one line of one). */
void eng_dims_split(const eng_tensor_t *x, int lo, int hi, int64_t *outer, int64_t *n, int64_t *inner);

/* Reductions (the CPU and CUDA adapters prepare their input alike): the reduced dims of a call
 * as a bit mask (attrs: ascending unique dims; none = all), and *xc = x laid out as contiguous
 * [outer, n, inner] with the masked dims in the middle: in place when those dims are adjacent
 * (size-1 dims do not count), else permuted behind the kept dims. */
eng_status_t eng_reduce_mask(const eng_op_call_t *call, const eng_tensor_t *x, unsigned *mask);
eng_status_t eng_reduce_layout(eng_tensor_t *x, unsigned mask, eng_tensor_t **xc, int64_t *outer,
                               int64_t *n, int64_t *inner);

/* Contiguous versions of the call's inputs (NULL stays NULL); releases them all on failure. */
eng_status_t eng_call_contiguous_inputs(const eng_op_call_t *call, eng_tensor_t **c);
/* t's data pointer, or NULL for an absent optional input. */
const void *eng_data_or_null(const eng_tensor_t *t);

#endif
