/* What the CPU and CUDA adapters of the e88 ops share (engine/src/ops/e88.c defines them). */
#ifndef ENG_OPS_E88_H
#define ENG_OPS_E88_H

#include "cpu/e88.h"
#include "eng_registry.h"

/* Input order of both ops; e88 takes the first six. */
enum { ENG_E88_Q, ENG_E88_K, ENG_E88_V, ENG_E88_DECAY, ENG_E88_G, ENG_E88_S0, ENG_E88_CKPT,
       ENG_E88_DY, ENG_E88_DST };

/* The state dtype for values of dtype dt: f64 for f64, else f32. */
eng_dtype_t eng_e88_state_dtype(eng_dtype_t dt);
/* Sizes and options of a call the shape rule accepted. */
void eng_e88_shape_of(const eng_op_call_t *call, eng_e88_shape_t *s);

#endif
