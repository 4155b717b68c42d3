/* Every op of the registry, once. ENG_OP(ID, "name"). Adding an op: a line here, its entry in
 * engine/src/ops/registry.c, its kernels, a line in the backend test table (tests/test_cuda_ops.c,
 * which fails until the op has one) and CPU tests against an independent reference.
 * No include guard: included with different ENG_OP definitions. */
/* elementwise unary */
ENG_OP(NEG, "neg")
ENG_OP(ABS, "abs")
ENG_OP(EXP, "exp")
ENG_OP(LOG, "log")
ENG_OP(SQRT, "sqrt")
ENG_OP(RSQRT, "rsqrt")
ENG_OP(TANH, "tanh")
ENG_OP(SIGMOID, "sigmoid")
ENG_OP(SILU, "silu")
ENG_OP(GELU, "gelu")
ENG_OP(RELU, "relu")
ENG_OP(SOFTPLUS, "softplus")
/* elementwise binary (broadcasting) */
ENG_OP(ADD, "add")
ENG_OP(SUB, "sub")
ENG_OP(MUL, "mul")
ENG_OP(DIV, "div")
ENG_OP(POW, "pow")
ENG_OP(MAXIMUM, "maximum")
ENG_OP(MINIMUM, "minimum")
ENG_OP(EQ, "eq")
ENG_OP(NE, "ne")
ENG_OP(LT, "lt")
ENG_OP(LE, "le")
ENG_OP(GT, "gt")
ENG_OP(GE, "ge")
/* elementwise, other */
ENG_OP(CLAMP, "clamp")
ENG_OP(WHERE, "where")
/* reductions */
ENG_OP(SUM, "sum")
ENG_OP(MEAN, "mean")
ENG_OP(MAX, "max")
ENG_OP(MIN, "min")
ENG_OP(VAR, "var")
ENG_OP(STD, "std")
ENG_OP(ARGMAX, "argmax")
/* rows */
ENG_OP(SOFTMAX, "softmax")
ENG_OP(LOG_SOFTMAX, "log_softmax")
ENG_OP(LAYER_NORM, "layer_norm")
ENG_OP(RMS_NORM, "rms_norm")
ENG_OP(CROSS_ENTROPY, "cross_entropy")
/* linear algebra */
ENG_OP(MATMUL, "matmul")
ENG_OP(LINEAR, "linear")
/* indexing and joining */
ENG_OP(EMBEDDING, "embedding")
ENG_OP(INDEX_SELECT, "index_select")
ENG_OP(GATHER, "gather")
ENG_OP(CAT, "cat")
/* data movement and creation (outputs may be given: copy and fill write in place) */
ENG_OP(COPY, "copy")
ENG_OP(FILL, "fill")
ENG_OP(ARANGE, "arange")
ENG_OP(EYE, "eye")
ENG_OP(RAND, "rand")
ENG_OP(RANDN, "randn")
ENG_OP(RANDINT, "randint")
/* backward kernels (their inputs are gradients and saved forward values), and the fused
 * residual add + rms_norm forward */
ENG_OP(SOFTMAX_BACKWARD, "softmax_backward")
ENG_OP(RMS_NORM_BACKWARD, "rms_norm_backward")
ENG_OP(LAYER_NORM_BACKWARD, "layer_norm_backward")
ENG_OP(CROSS_ENTROPY_BACKWARD, "cross_entropy_backward")
ENG_OP(ADD_RMS_NORM, "add_rms_norm")
/* E-series: e1, e23 (forward ops also return what their backward needs) */
ENG_OP(E1, "e1")
ENG_OP(E1_BACKWARD, "e1_backward")
ENG_OP(E23, "e23")
ENG_OP(E23_BACKWARD, "e23_backward")
/* E-series: e88 */
ENG_OP(E88, "e88")
ENG_OP(E88_BACKWARD, "e88_backward")
/* opt: scatters (the gradients of indexing) and optimizer ops (adamw_ and scale_ write their
 * inputs in place) */
ENG_OP(INDEX_ADD, "index_add")
ENG_OP(SCATTER_ADD, "scatter_add")
ENG_OP(ADAMW, "adamw_")
ENG_OP(SUM_SQUARES, "sum_squares")
ENG_OP(SCALE, "scale_")
