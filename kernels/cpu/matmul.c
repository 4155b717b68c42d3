/* Batched strided matrix products on top of cblas_sgemm / cblas_dgemm. OpenBLAS threads each
 * gemm itself, so the batch loop stays serial. */
#include "cpu/matmul.h"

#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* How gemm reads one operand: in place (transposed or not, with leading dim ld) or from a
 * contiguous packed copy. */
typedef struct {
  enum CBLAS_TRANSPOSE trans;
  int64_t ld;
  int packed;
} blas_view_t;

static int fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

/* An r x c matrix with strides rs, cs: BLAS reads it in place when one stride is 1 and the
 * other is a valid leading dim (sizes of 1 make the matching stride irrelevant). */
static int in_place_view(int64_t r, int64_t c, int64_t rs, int64_t cs, blas_view_t *v) {
  int64_t min_ld_rows = c > 1 ? c : 1, min_ld_cols = r > 1 ? r : 1;
  if (cs == 1 || c == 1) {
    int64_t ld = r == 1 ? min_ld_rows : rs;
    if (ld >= min_ld_rows && fits_int(ld)) {
      *v = (blas_view_t){CblasNoTrans, ld, 0};
      return 1;
    }
  }
  if (rs == 1 || r == 1) {
    int64_t ld = c == 1 ? min_ld_cols : cs;
    if (ld >= min_ld_cols && fits_int(ld)) {
      *v = (blas_view_t){CblasTrans, ld, 0};
      return 1;
    }
  }
  return 0;
}

static void pack(void *dst, const void *src, int64_t r, int64_t c, int64_t rs, int64_t cs, size_t es) {
  if (es == sizeof(float)) {
    float *d = dst;
    const float *s = src;
    for (int64_t i = 0; i < r; i++)
      for (int64_t j = 0; j < c; j++) d[i * c + j] = s[i * rs + j * cs];
  } else {
    double *d = dst;
    const double *s = src;
    for (int64_t i = 0; i < r; i++)
      for (int64_t j = 0; j < c; j++) d[i * c + j] = s[i * rs + j * cs];
  }
}

static void gemm(size_t es, const blas_view_t *va, const blas_view_t *vb, int64_t m, int64_t n,
                 int64_t k, const void *a, const void *b, void *c) {
  if (es == sizeof(float))
    cblas_sgemm(CblasRowMajor, va->trans, vb->trans, (int)m, (int)n, (int)k, 1.0f, a, (int)va->ld,
                b, (int)vb->ld, 0.0f, c, (int)n);
  else
    cblas_dgemm(CblasRowMajor, va->trans, vb->trans, (int)m, (int)n, (int)k, 1.0, a, (int)va->ld,
                b, (int)vb->ld, 0.0, c, (int)n);
}

/* When B is shared by every batch and A's batch dims continue its rows with one stride, the
 * whole batch is a single gemm with m * batch rows (C is contiguous, so its rows line up). */
static int fold_batch_into_rows(const eng_kcpu_matmul_t *p, int64_t *rows) {
  int64_t expected = p->a.rs * p->m, total = p->m;
  for (int d = p->nbatch - 1; d >= 0; d--) {
    if (p->bshape[d] == 1) continue;
    if (p->b.bstride[d] != 0 || p->a.bstride[d] != expected) return 0;
    expected *= p->bshape[d];
    total *= p->bshape[d];
  }
  *rows = total;
  return 1;
}

/* Sets up one operand's view; allocates its packing scratch when BLAS cannot read it in place. */
static int prepare(int64_t r, int64_t c, const eng_kcpu_operand_t *o, size_t es, blas_view_t *v,
                   void **scratch) {
  *scratch = NULL;
  if (in_place_view(r, c, o->rs, o->cs, v)) return ENG_KCPU_MATMUL_OK;
  *v = (blas_view_t){CblasNoTrans, c > 1 ? c : 1, 1};
  *scratch = malloc((size_t)(r * c) * es);
  return *scratch ? ENG_KCPU_MATMUL_OK : ENG_KCPU_MATMUL_NOMEM;
}

static int matmul(const eng_kcpu_matmul_t *p, const char *a, const char *b, char *c, size_t es) {
  eng_kcpu_matmul_t q = *p;
  int64_t batch = 1;
  for (int d = 0; d < q.nbatch; d++) batch *= q.bshape[d];
  if (q.m == 0 || q.n == 0 || batch == 0) return ENG_KCPU_MATMUL_OK;
  if (q.k == 0) { /* an empty sum: all zeros (0.0 is all-zero bits) */
    memset(c, 0, (size_t)(batch * q.m * q.n) * es);
    return ENG_KCPU_MATMUL_OK;
  }
  int64_t rows;
  if (q.nbatch > 0 && fold_batch_into_rows(&q, &rows)) {
    q.m = rows;
    q.nbatch = 0;
    batch = 1;
  }
  if (!fits_int(q.m) || !fits_int(q.n) || !fits_int(q.k)) return ENG_KCPU_MATMUL_TOO_BIG;

  blas_view_t va, vb;
  void *pa, *pb;
  int st = prepare(q.m, q.k, &q.a, es, &va, &pa);
  if (st == ENG_KCPU_MATMUL_OK) st = prepare(q.k, q.n, &q.b, es, &vb, &pb);
  if (st != ENG_KCPU_MATMUL_OK) {
    free(pa);
    return st;
  }

  int64_t idx[ENG_MAX_DIMS] = {0};
  int64_t packed_a = -1, packed_b = -1; /* offsets last packed: broadcast operands pack once */
  for (int64_t t = 0; t < batch; t++) {
    int64_t ao = 0, bo = 0;
    for (int d = 0; d < q.nbatch; d++) {
      ao += idx[d] * q.a.bstride[d];
      bo += idx[d] * q.b.bstride[d];
    }
    const void *ap = a + ao * (int64_t)es, *bp = b + bo * (int64_t)es;
    if (pa) {
      if (ao != packed_a) pack(pa, ap, q.m, q.k, q.a.rs, q.a.cs, es);
      packed_a = ao;
      ap = pa;
    }
    if (pb) {
      if (bo != packed_b) pack(pb, bp, q.k, q.n, q.b.rs, q.b.cs, es);
      packed_b = bo;
      bp = pb;
    }
    gemm(es, &va, &vb, q.m, q.n, q.k, ap, bp, c + t * q.m * q.n * (int64_t)es);
    for (int d = q.nbatch - 1; d >= 0; d--) {
      if (++idx[d] < q.bshape[d]) break;
      idx[d] = 0;
    }
  }
  free(pa);
  free(pb);
  return ENG_KCPU_MATMUL_OK;
}

int eng_kcpu_matmul_f32(const eng_kcpu_matmul_t *p, const float *a, const float *b, float *c) {
  return matmul(p, (const char *)a, (const char *)b, (char *)c, sizeof(float));
}

int eng_kcpu_matmul_f64(const eng_kcpu_matmul_t *p, const double *a, const double *b, double *c) {
  return matmul(p, (const char *)a, (const char *)b, (char *)c, sizeof(double));
}
