/* embedding, index_select, gather and cat on CUDA against the CPU reference. They move elements,
 * so the GPU result must equal the CPU one exactly; the GPU output is poisoned (NaN, or a value
 * outside the data's range for integer dtypes) before each run. Every data dtype, i32/i64/u8
 * indices, non-contiguous sources and indices, odd sizes (1, 7, 1023, 4097), the CPU's error (the
 * same message, naming the first bad value) for out-of-range indices, and NaN/0 entries for them
 * inside a CUDA graph capture, where nothing may synchronise. Every test skips itself without a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_numeric.h"

#define CUDA0 GPU0
#define MAX_IN 8

static const eng_dtype_t DATA_TYPES[] = {ENG_F64, ENG_F32, ENG_F16, ENG_BF16, ENG_I32, ENG_I64, ENG_U8};
static const eng_dtype_t INDEX_TYPES[] = {ENG_I32, ENG_I64, ENG_U8};
#define N_DATA (int)(sizeof DATA_TYPES / sizeof DATA_TYPES[0])
#define N_INDEX (int)(sizeof INDEX_TYPES / sizeof INDEX_TYPES[0])

#define SHAPE(...) (const int64_t[]){__VA_ARGS__}, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

/* Data: floats in [-1, 1), integers in [-100, 100) (u8: [0, 100)). */
static pair_t data_pair(const int64_t *shape, int nd, eng_dtype_t dt, uint64_t seed) {
  double lo = dt == ENG_U8 ? 0 : eng_dtype_is_float(dt) ? -1 : -100;
  return pair_rand(shape, nd, dt, seed, lo, eng_dtype_is_float(dt) ? 1 : 100);
}

/* Indices in [0, limit) (capped for u8). */
static pair_t index_pair(const int64_t *shape, int nd, eng_dtype_t dt, uint64_t seed, int64_t limit) {
  if (dt == ENG_U8 && limit > 256) limit = 256;
  return pair_rand(shape, nd, dt, seed, 0, (double)limit);
}

/* A value the op cannot produce from data_pair's inputs. */
static double poison(eng_dtype_t dt) {
  return eng_dtype_is_float(dt) ? NAN : dt == ENG_U8 ? 201 : 1e6;
}

/* Runs op id (attrs.i[0] = dim) on the CPU and the GPU halves, the GPU output poisoned first;
 * the results must be equal. Releases the inputs. */
static void check_op(eng_op_id_t id, pair_t *in, int n, int64_t dim, const char *what) {
  eng_tensor_t *cin[MAX_IN], *gin[MAX_IN];
  for (int k = 0; k < n; k++) {
    cin[k] = in[k].c;
    gin[k] = in[k].g;
  }
  eng_op_call_t c = {.id = id, .n_in = n, .in = cin, .n_out = 1};
  c.attrs.i[0] = dim;
  c.attrs.ni = 1;
  T_OK(eng_op_dispatch(&c));
  eng_tensor_t *ref = c.out[0], *out = NULL;
  T_OK(eng_tensor_full(ref->shape, ref->ndim, poison(ref->dtype), ref->dtype, CUDA0, &out));
  eng_op_call_t g = {.id = id, .n_in = n, .in = gin, .n_out = 1, .out = {out}};
  g.attrs = c.attrs;
  T_OK(eng_op_dispatch(&g));
  double *rv = t_values(ref);
  double err = t_max_abs_err(out, rv, eng_tensor_numel(ref));
  char s[128];
  cr_assert(err == 0, "%s (%s, out %s): max abs err %g", what, eng_dtype_name(ref->dtype),
            ENG_SHAPE_STR(ref, s), err);
  free(rv);
  eng_tensor_release(ref);
  eng_tensor_release(out);
  for (int k = 0; k < n; k++) pair_release(in[k]);
}

static void check_embedding(pair_t ids, pair_t w, const char *what) {
  pair_t in[2] = {ids, w};
  check_op(ENG_OP_EMBEDDING, in, 2, 0, what);
}

static void check_along(eng_op_id_t id, pair_t x, int64_t dim, pair_t idx, const char *what) {
  pair_t in[2] = {x, idx};
  check_op(id, in, 2, dim, what);
}

Test(cuda_index, embedding_every_dtype) {
  SKIP_WITHOUT_GPU();
  for (int d = 0; d < N_DATA; d++)
    for (int i = 0; i < N_INDEX; i++) {
      eng_dtype_t dt = DATA_TYPES[d], it = INDEX_TYPES[i];
      check_embedding(index_pair(SHAPE(3, 5), it, 1, 37), data_pair(SHAPE(37, 7), dt, 2), "[3,5] ids");
      check_embedding(index_pair(SHAPE(4097), it, 3, 1023), data_pair(SHAPE(1023, 1), dt, 4),
                      "4097 ids, rows of 1");
      check_embedding(index_pair(SHAPE(7), it, 5, 4097), data_pair(SHAPE(4097, 1023), dt, 6),
                      "rows of 1023");
    }
}

Test(cuda_index, embedding_shapes_and_views) {
  SKIP_WITHOUT_GPU();
  for (int i = 0; i < N_INDEX; i++) {
    eng_dtype_t it = INDEX_TYPES[i];
    check_embedding(index_pair((const int64_t[]){1}, 0, it, 10, 5), data_pair(SHAPE(5, 7), ENG_BF16, 11), "0-d id");
    check_embedding(index_pair(SHAPE(6), it, 12, 5), data_pair(SHAPE(5), ENG_F32, 13), "1-D table");
    check_embedding(index_pair(SHAPE(2, 3), it, 14, 9), data_pair(SHAPE(9, 3, 5), ENG_F16, 15),
                    "3-D table");
    check_embedding(index_pair(SHAPE(4, 7), it, 16, 33), transpose_pair(data_pair(SHAPE(9, 33), ENG_F32, 17), 0, 1),
                    "transposed table");
    check_embedding(slice_pair(index_pair(SHAPE(4, 14), it, 18, 33), 1, 1, 14, 2),
                    data_pair(SHAPE(33, 9), ENG_F64, 19), "strided ids");
    check_embedding(index_pair(SHAPE(0, 3), it, 20, 5), data_pair(SHAPE(5, 4), ENG_F32, 21), "no ids");
  }
}

Test(cuda_index, index_select) {
  SKIP_WITHOUT_GPU();
  for (int d = 0; d < N_DATA; d++)
    for (int i = 0; i < N_INDEX; i++) {
      eng_dtype_t dt = DATA_TYPES[d], it = INDEX_TYPES[i];
      check_along(ENG_OP_INDEX_SELECT, data_pair(SHAPE(7, 1023), dt, 30), 0,
                  index_pair(SHAPE(9), it, 31, 7), "rows");
      check_along(ENG_OP_INDEX_SELECT, data_pair(SHAPE(7, 1023), dt, 32), 1,
                  index_pair(SHAPE(4097), it, 33, 1023), "columns");
      check_along(ENG_OP_INDEX_SELECT, data_pair(SHAPE(5, 7, 9), dt, 34), 1,
                  index_pair(SHAPE(1), it, 35, 7), "middle dim, one entry");
      check_along(ENG_OP_INDEX_SELECT, transpose_pair(data_pair(SHAPE(9, 7), dt, 36), 0, 1), 1,
                  slice_pair(index_pair(SHAPE(12), it, 37, 9), 0, 0, 12, 3), "transposed x, strided index");
    }
}

Test(cuda_index, gather) {
  SKIP_WITHOUT_GPU();
  for (int d = 0; d < N_DATA; d++)
    for (int i = 0; i < N_INDEX; i++) {
      eng_dtype_t dt = DATA_TYPES[d], it = INDEX_TYPES[i];
      check_along(ENG_OP_GATHER, data_pair(SHAPE(7, 9), dt, 40), 1, index_pair(SHAPE(7, 4), it, 41, 9),
                  "dim 1");
      check_along(ENG_OP_GATHER, data_pair(SHAPE(7, 9), dt, 42), 0, index_pair(SHAPE(5, 9), it, 43, 7),
                  "dim 0");
      check_along(ENG_OP_GATHER, data_pair(SHAPE(4, 5, 1023), dt, 44), 2,
                  index_pair(SHAPE(3, 5, 7), it, 45, 1023), "3-D, smaller index");
      check_along(ENG_OP_GATHER, transpose_pair(data_pair(SHAPE(9, 7), dt, 46), 0, 1), 0,
                  transpose_pair(index_pair(SHAPE(9, 7), it, 47, 7), 0, 1), "transposed x and index");
    }
}

Test(cuda_index, out_of_range_is_the_cpu_error) {
  SKIP_WITHOUT_GPU();
  static const double IDS[] = {1, 9, -3, 2}, IDS_U8[] = {3, 200, 1, 250};
  for (int i = 0; i < N_INDEX; i++) {
    eng_dtype_t it = INDEX_TYPES[i];
    pair_t ids = pair_values(it == ENG_U8 ? IDS_U8 : IDS, SHAPE(2, 2), it);
    pair_t flat = pair_values(it == ENG_U8 ? IDS_U8 : IDS, SHAPE(4), it);
    pair_t w = data_pair(SHAPE(5, 3), ENG_F32, 50);
    for (int op = 0; op < 3; op++) {
      eng_tensor_t *out = NULL;
      eng_status_t cs, gs;
      char cpu_msg[512];
      if (op == 0) cs = eng_op_embedding(ids.c, w.c, &out);
      else if (op == 1) cs = eng_op_index_select(w.c, 0, flat.c, &out);
      else cs = eng_op_gather(w.c, 1, ids.c, &out);
      snprintf(cpu_msg, sizeof cpu_msg, "%s", eng_last_error());
      cr_assert(cs == ENG_ERR_INDEX && !out, "op %d: the CPU accepted bad indices", op);
      if (op == 0) gs = eng_op_embedding(ids.g, w.g, &out);
      else if (op == 1) gs = eng_op_index_select(w.g, 0, flat.g, &out);
      else gs = eng_op_gather(w.g, 1, ids.g, &out);
      cr_assert(gs == ENG_ERR_INDEX && !out, "op %d (%s): CUDA gave status %d: %s", op,
                eng_dtype_name(it), (int)gs, eng_last_error());
      cr_assert_str_eq(eng_last_error(), cpu_msg, "op %d (%s): the CUDA message differs",
                       op, eng_dtype_name(it));
    }
    pair_release(ids);
    pair_release(flat);
    pair_release(w);
  }
}

/* Inside a capture the bounds check cannot read back: bad rows come out NaN (floats) or 0. */
Test(cuda_index, out_of_range_during_capture) {
  SKIP_WITHOUT_GPU();
  static const double IDS[] = {1, 7, 0};
  pair_t ids = pair_values(IDS, SHAPE(3), ENG_I64);
  pair_t wf = data_pair(SHAPE(5, 4), ENG_F32, 60), wi = data_pair(SHAPE(5, 4), ENG_I32, 61);
  eng_tensor_t *outs[3] = {NULL};
  eng_cuda_graph_t *graph = NULL;
  T_OK(eng_cuda_graph_begin(0, &graph));
  eng_status_t s0 = eng_op_embedding(ids.g, wf.g, &outs[0]);
  eng_status_t s1 = eng_op_embedding(ids.g, wi.g, &outs[1]);
  eng_status_t s2 = eng_op_index_select(wf.g, 0, ids.g, &outs[2]);
  T_OK(eng_cuda_graph_end(&graph));
  cr_assert(!s0 && !s1 && !s2, "ops during capture failed: %s", eng_last_error());
  T_OK(eng_cuda_graph_replay(graph));
  T_OK(eng_cuda_synchronize(0));
  eng_tensor_t *tables[3] = {wf.c, wi.c, wf.c};
  for (int k = 0; k < 3; k++) {
    double *got = t_values(outs[k]), *table = t_values(tables[k]);
    int is_float = k != 1;
    for (int r = 0; r < 3; r++)
      for (int j = 0; j < 4; j++) {
        double g = got[r * 4 + j];
        if (r == 1)
          cr_assert(is_float ? isnan(g) : g == 0, "output %d: bad id gave %g", k, g);
        else
          cr_assert(g == table[(int64_t)IDS[r] * 4 + j], "output %d [%d,%d]: %g", k, r, j, g);
      }
    free(got);
    free(table);
    eng_tensor_release(outs[k]);
  }
  eng_cuda_graph_free(graph);
  pair_release(ids);
  pair_release(wf);
  pair_release(wi);
}

Test(cuda_index, cat_views_dtypes_and_empty_pieces) {
  SKIP_WITHOUT_GPU();
  for (int d = 0; d < N_DATA; d++) {
    eng_dtype_t dt = DATA_TYPES[d];
    pair_t in[4] = {data_pair(SHAPE(3, 7), dt, 70), transpose_pair(data_pair(SHAPE(4, 3), dt, 71), 0, 1),
                    data_pair(SHAPE(3, 0), dt, 72), data_pair(SHAPE(3, 1023), dt, 73)};
    check_op(ENG_OP_CAT, in, 4, 1, "dim 1 with a transposed and an empty piece");
    pair_t rows[3] = {data_pair(SHAPE(1, 4097), dt, 74), data_pair(SHAPE(7, 4097), dt, 75),
                      slice_pair(data_pair(SHAPE(4, 8194), dt, 76), 1, 0, 8194, 2)};
    check_op(ENG_OP_CAT, rows, 3, 0, "dim 0 with a strided piece");
    pair_t last[2] = {data_pair(SHAPE(2, 3, 5), dt, 77), data_pair(SHAPE(2, 3, 1), dt, 78)};
    check_op(ENG_OP_CAT, last, 2, 2, "last dim");
  }
  pair_t mixed[3] = {data_pair(SHAPE(2, 3), ENG_BF16, 79), data_pair(SHAPE(2, 5), ENG_F32, 80),
                     data_pair(SHAPE(2, 1), ENG_I32, 81)};
  check_op(ENG_OP_CAT, mixed, 3, 1, "bf16, f32 and i32 promoted to f32");
}
