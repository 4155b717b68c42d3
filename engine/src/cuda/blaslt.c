/* cuBLASLt handles, the plan cache and the product itself (see blaslt.h).
 *
 * Row-major C[m,n] = A[m,k] B[k,n] is, read column-major, C^T[n,m] = B^T[n,k] A^T[k,m]: cuBLASLt's
 * "A" is our B and its "B" our A, its M is n and its N is m. A row-major matrix with row stride ld
 * is, column-major, its transpose with the same ld, so an operand stored as is needs no transpose
 * op and one stored transposed needs CUBLAS_OP_T. The bias epilogue adds a vector along cuBLASLt's
 * rows, i.e. along our n.
 *
 * Algorithm choice: a plan takes the heuristic's first pick. For a big product (PLAN_TUNE_FLOPS and
 * up) the heuristic's first pick can be well off the fastest kernel (10%+ at 8192^3 bf16 on
 * H200), so the first run of the plan outside graph capture times the heuristic's top
 * TUNE_CANDIDATES on the call's own operands and stream with CUDA events, and the plan keeps the
 * fastest: a one-time cost per shape (tens of ms). Every candidate is a valid algorithm for the
 * descriptors, so results differ at most by GEMM rounding (accumulation order). */
#include "cuda/blaslt.h"

#include <cublasLt.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "cuda/cuda_internal.h"
#include "eng_ops.h"

/* The most workspace the heuristic may pick an algorithm for; each call allocates what its
 * algorithm needs from the caching allocator. */
#define MAX_WORKSPACE ((uint64_t)32 << 20)
/* Cached plans: a fixed open-addressed table (a power of two), probed PLAN_PROBES slots deep; a
 * full neighbourhood evicts its home slot. */
#define PLAN_SLOTS 512
#define PLAN_PROBES 8
/* Autotuning (see the top): products of at least this many flops (2 m n k batch) are timed, over
 * the heuristic's first TUNE_CANDIDATES algorithms, TUNE_PASSES times each (the fastest time of a
 * candidate counts); when one pass over all candidates takes longer than TUNE_BUDGET_MS, that
 * pass alone decides. */
#define PLAN_TUNE_FLOPS 8589934592.0 /* 2^33 */
#define TUNE_CANDIDATES 8
#define TUNE_PASSES 3
#define TUNE_BUDGET_MS 100.0f

/* Everything the descriptors and the algorithm depend on. Laid out without padding (`zero` keeps
 * the int64s 8-aligned) and always zeroed first, so keys compare with memcmp. */
typedef struct {
  int32_t device, dtype, act, has_bias, trans_a, trans_b, c_f32, zero;
  uint32_t align_a, align_b, align_c, align_bias;
  int64_t m, n, k, batch, lda, ldb, bstride_a, bstride_b;
} plan_key_t;

typedef struct {
  int used;
  int found; /* 0: cuBLASLt has no algorithm for this problem (remembered too) */
  int tune;  /* 1: a big product still on the heuristic's first pick, to be timed (plan_tune) */
  plan_key_t key;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, lc; /* cuBLASLt's A (our B), B (our A), C and D */
  cublasLtMatmulAlgo_t algo;
  size_t workspace;
} plan_t;

/* Guards the handles and the plans, and keeps a plan's bias pointer fixed from the moment it is set
 * until cublasLtMatmul has read it. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static cublasLtHandle_t handles[ENG_CUDA_MAX_DEVICES];
static plan_t plans[PLAN_SLOTS];

static eng_status_t lt_error(const char *what, cublasStatus_t s) {
  return eng_error(s == CUBLAS_STATUS_ALLOC_FAILED ? ENG_ERR_OOM : ENG_ERR_DEVICE,
                   "cuBLASLt %s failed: %s (%s)", what, cublasLtGetStatusString(s),
                   cublasLtGetStatusName(s));
}

/* The device's handle, created on first use with the device current (the handle reads its
 * properties). Called with the lock held. */
static eng_status_t handle_for(int device, cublasLtHandle_t *out) {
  if (device < 0 || device >= ENG_CUDA_MAX_DEVICES)
    return eng_error(ENG_ERR_DEVICE, "cuBLASLt: device %d is beyond the %d supported", device,
                     ENG_CUDA_MAX_DEVICES);
  if (!handles[device]) {
    eng_status_t st = eng_cuda_select(device);
    if (st) return st;
    cublasLtHandle_t h = NULL;
    cublasStatus_t s = cublasLtCreate(&h);
    if (s != CUBLAS_STATUS_SUCCESS) return lt_error("handle creation", s);
    handles[device] = h;
  }
  *out = handles[device];
  return ENG_OK;
}

/* The largest power of two (up to cuBLASLt's default 256) dividing the address. */
static uint32_t alignment(const void *p) {
  uintptr_t v = (uintptr_t)p;
  uint32_t a = 1;
  while (a < 256 && !(v & a)) a <<= 1;
  return a;
}

static uint32_t hash_key(const plan_key_t *k) {
  const unsigned char *b = (const unsigned char *)k;
  uint32_t h = 2166136261u; /* FNV-1a */
  for (size_t i = 0; i < sizeof *k; i++) h = (h ^ b[i]) * 16777619u;
  return h;
}

static void plan_destroy(plan_t *p) {
  if (p->desc) cublasLtMatmulDescDestroy(p->desc);
  if (p->la) cublasLtMatrixLayoutDestroy(p->la);
  if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
  if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
  memset(p, 0, sizeof *p);
}

/* The slot holding key (*hit = 1), or an empty / evicted slot to build it in (*hit = 0). */
static plan_t *plan_slot(const plan_key_t *key, int *hit) {
  uint32_t h = hash_key(key);
  plan_t *empty = NULL;
  for (uint32_t i = 0; i < PLAN_PROBES; i++) {
    plan_t *p = &plans[(h + i) & (PLAN_SLOTS - 1)];
    if (p->used && memcmp(&p->key, key, sizeof *key) == 0) {
      *hit = 1;
      return p;
    }
    if (!p->used && !empty) empty = p;
  }
  *hit = 0;
  if (empty) return empty;
  plan_t *victim = &plans[h & (PLAN_SLOTS - 1)];
  plan_destroy(victim);
  return victim;
}

static int lt_types(eng_dtype_t dt, cublasComputeType_t *compute, cudaDataType_t *scale,
                    cudaDataType_t *data) {
  *compute = CUBLAS_COMPUTE_32F; /* never the TF32 variant: f32 stays f32 */
  *scale = CUDA_R_32F;
  switch (dt) {
  case ENG_F32: *data = CUDA_R_32F; return 1;
  case ENG_F16: *data = CUDA_R_16F; return 1;
  case ENG_BF16: *data = CUDA_R_16BF; return 1;
  case ENG_F64:
    *compute = CUBLAS_COMPUTE_64F;
    *scale = *data = CUDA_R_64F;
    return 1;
  default: return 0;
  }
}

static uint32_t epilogue_of(int act, int has_bias) {
  switch (act) {
  case ENG_ACT_RELU: return has_bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
  case ENG_ACT_GELU_TANH: return has_bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
  default: return has_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  }
}

/* A column-major layout of rows x cols with leading dim ld, strided over `batch` matrices. */
static cublasStatus_t make_layout(cublasLtMatrixLayout_t *l, cudaDataType_t t, int64_t rows,
                                  int64_t cols, int64_t ld, int64_t batch, int64_t bstride) {
  cublasStatus_t s = cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, ld);
  if (s == CUBLAS_STATUS_SUCCESS && batch > 1) {
    int32_t count = (int32_t)batch;
    s = cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                         sizeof count);
    if (s == CUBLAS_STATUS_SUCCESS)
      s = cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                           &bstride, sizeof bstride);
  }
  return s;
}

/* The heuristic's best `want` algorithms for the plan's descriptors, within MAX_WORKSPACE and the
 * key's pointer alignments (cuBLASLt's A is our B, its B our A). *count = 0 when it has none. */
static cublasStatus_t query_algos(cublasLtHandle_t h, const plan_t *p, int want,
                                  cublasLtMatmulHeuristicResult_t *r, int *count) {
  uint64_t max_ws = MAX_WORKSPACE;
  uint32_t align_a = p->key.align_b, align_b = p->key.align_a, align_c = p->key.align_c;
  cublasLtMatmulPreference_t pref = NULL;
  *count = 0;
  cublasStatus_t s = cublasLtMatmulPreferenceCreate(&pref);
  if (!s)
    s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws,
                                             sizeof max_ws);
  if (!s)
    s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                             &align_a, sizeof align_a);
  if (!s)
    s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                             &align_b, sizeof align_b);
  if (!s)
    s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                             &align_c, sizeof align_c);
  if (!s)
    s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                             &align_c, sizeof align_c);
  if (!s) {
    memset(r, 0, sizeof *r * (size_t)want);
    s = cublasLtMatmulAlgoGetHeuristic(h, p->desc, p->la, p->lb, p->lc, p->lc, pref, want, r, count);
    if (s == CUBLAS_STATUS_NOT_SUPPORTED) { /* no algorithm */
      s = CUBLAS_STATUS_SUCCESS;
      *count = 0;
    }
  }
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  return s;
}

/* Descriptors for the problem and the heuristic's first choice (or found = 0 when it has none). */
static eng_status_t plan_build(cublasLtHandle_t h, const eng_blaslt_gemm_t *g,
                               const plan_key_t *key, plan_t *p) {
  cublasComputeType_t compute;
  cudaDataType_t scale, data;
  if (!lt_types(g->dtype, &compute, &scale, &data))
    return eng_error(ENG_ERR_DTYPE, "cuBLASLt: no matrix product for %s", eng_dtype_name(g->dtype));
  memset(p, 0, sizeof *p);
  p->key = *key;
  int32_t op_a = g->b.trans ? CUBLAS_OP_T : CUBLAS_OP_N; /* cuBLASLt's A is our B */
  int32_t op_b = g->a.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  uint32_t epilogue = epilogue_of(g->act, g->bias != NULL);
  const char *what = "descriptor setup";

  cublasStatus_t s = cublasLtMatmulDescCreate(&p->desc, compute, scale);
  if (!s) s = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a);
  if (!s) s = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b);
  if (!s)
    s = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                       sizeof epilogue);
  if (!s && g->bias) /* the heuristic reads the bias pointer's alignment */
    s = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g->bias,
                                       sizeof g->bias);
  if (!s)
    s = make_layout(&p->la, data, g->b.trans ? g->k : g->n, g->b.trans ? g->n : g->k, g->b.ld,
                    g->batch, g->b.bstride);
  if (!s)
    s = make_layout(&p->lb, data, g->a.trans ? g->m : g->k, g->a.trans ? g->k : g->m, g->a.ld,
                    g->batch, g->a.bstride);
  if (!s)
    s = make_layout(&p->lc, g->c_f32 ? CUDA_R_32F : data, g->n, g->m, g->n, g->batch, g->m * g->n);
  if (!s) {
    what = "heuristic query";
    cublasLtMatmulHeuristicResult_t r;
    int count = 0;
    s = query_algos(h, p, 1, &r, &count);
    if (!s && count > 0 && r.state == CUBLAS_STATUS_SUCCESS) {
      p->found = 1;
      p->algo = r.algo;
      p->workspace = r.workspaceSize;
      p->tune = 2.0 * (double)g->m * (double)g->n * (double)g->k * (double)g->batch >=
                PLAN_TUNE_FLOPS;
    }
  }
  if (s) {
    plan_destroy(p);
    return lt_error(what, s);
  }
  p->used = 1;
  return ENG_OK;
}

/* Whether the plan may be timed now: not while this thread captures a graph on the device, nor
 * while the stream is being captured by anyone (event synchronisation would break the capture). */
static int may_tune(int device, cudaStream_t stream) {
  if (eng_cuda_is_capturing(device)) return 0;
  enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  cudaError_t err = cudaStreamIsCapturing(stream, &cs);
  if (err) {
    cudaGetLastError(); /* not sticky: leave no error behind for the next runtime call */
    return 0;
  }
  return cs == cudaStreamCaptureStatusNone;
}

/* Times the heuristic's top TUNE_CANDIDATES algorithms for the plan on g's operands (writing g->c,
 * which the real run then overwrites: beta is 0; an accumulating product's candidates write a
 * scratch C instead) and keeps the fastest in the plan. Runs once per plan (p->tune is cleared
 * first, whatever happens). A candidate cuBLASLt refuses to launch is skipped; CUDA failures of
 * the timing itself are errors. Lock held, device current. */
static eng_status_t plan_tune(cublasLtHandle_t h, plan_t *p, const eng_blaslt_gemm_t *g, int device,
                              cudaStream_t stream) {
  p->tune = 0;
  cublasLtMatmulHeuristicResult_t r[TUNE_CANDIDATES];
  int count = 0;
  cublasStatus_t s;
  if (g->bias) { /* the heuristic and the runs read it */
    s = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g->bias,
                                       sizeof g->bias);
    if (s) return lt_error("bias setup", s);
  }
  s = query_algos(h, p, TUNE_CANDIDATES, r, &count);
  if (s) return lt_error("heuristic query", s);
  size_t ws_size = 0;
  int usable = 0;
  for (int i = 0; i < count; i++) {
    if (r[i].state != CUBLAS_STATUS_SUCCESS) continue;
    usable++;
    if (r[i].workspaceSize > ws_size) ws_size = r[i].workspaceSize;
  }
  if (usable < 2) return ENG_OK; /* nothing to choose between */

  eng_status_t st = ENG_OK;
  void *ws = NULL;
  cudaEvent_t ev[TUNE_CANDIDATES + 1];
  int nev = 0;
  float best[TUNE_CANDIDATES];
  int ok[TUNE_CANDIDATES];
  for (int i = 0; i < count; i++) {
    best[i] = -1.0f; /* no time yet */
    ok[i] = r[i].state == CUBLAS_STATUS_SUCCESS;
  }
  /* No memory for the largest candidate's workspace: keep the heuristic's pick, untimed. */
  if (ws_size && eng_cuda_malloc(device, ws_size, (eng_stream_t)stream, &ws)) return ENG_OK;
  void *c = g->c;
  if (g->accumulate &&
      eng_cuda_malloc(device,
                      (size_t)(g->m * g->n * g->batch) * (g->c_f32 ? 4 : eng_dtype_size(g->dtype)),
                      (eng_stream_t)stream, &c)) {
    if (ws) eng_cuda_free(device, ws);
    return ENG_OK;
  }
  cudaError_t err = cudaSuccess;
  for (; !st && !err && nev <= count; nev++) err = cudaEventCreate(&ev[nev]);
  if (!st && err) {
    nev--; /* the failed one was not created */
    st = eng_cuda_error(err, "cudaEventCreate (GEMM autotuning)");
  }
  const float one32 = 1.0f, zero32 = 0.0f;
  const double one64 = 1.0, zero64 = 0.0;
  int f64 = g->dtype == ENG_F64;
  const void *alpha = f64 ? (const void *)&one64 : (const void *)&one32;
  const void *beta = f64 ? (const void *)&zero64 : (const void *)&zero32;
  /* One pass: ev[i] .. ev[i+1] brackets candidate i, one synchronisation at the end. */
  for (int pass = 0; !st && pass < TUNE_PASSES; pass++) {
    err = cudaEventRecord(ev[0], stream);
    for (int i = 0; !err && i < count; i++) {
      if (ok[i] &&
          cublasLtMatmul(h, p->desc, alpha, g->b.data, p->la, g->a.data, p->lb, beta, c, p->lc,
                         c, p->lc, &r[i].algo, ws, r[i].workspaceSize,
                         stream) != CUBLAS_STATUS_SUCCESS)
        ok[i] = 0; /* refused to launch: not a candidate */
      err = cudaEventRecord(ev[i + 1], stream);
    }
    if (!err) err = cudaEventSynchronize(ev[count]);
    float total = 0.0f;
    for (int i = 0; !err && i < count; i++) {
      float ms = 0.0f;
      if (!ok[i]) continue;
      err = cudaEventElapsedTime(&ms, ev[i], ev[i + 1]);
      if (!err && (best[i] < 0.0f || ms < best[i])) best[i] = ms;
      total += ms;
    }
    if (err) st = eng_cuda_error(err, "GEMM autotuning");
    if (total > TUNE_BUDGET_MS) break; /* slow products: one pass decides */
  }
  int pick = -1;
  for (int i = 0; !st && i < count; i++)
    if (ok[i] && best[i] >= 0.0f && (pick < 0 || best[i] < best[pick])) pick = i;
  if (pick >= 0) {
    p->algo = r[pick].algo;
    p->workspace = r[pick].workspaceSize;
  }
  for (int i = 0; i < nev; i++) cudaEventDestroy(ev[i]);
  if (ws) eng_cuda_free(device, ws); /* stream-ordered, like plan_run's */
  if (c != g->c) eng_cuda_free(device, c);
  return st;
}

static eng_status_t plan_run(cublasLtHandle_t h, plan_t *p, const eng_blaslt_gemm_t *g, int device,
                             eng_stream_t stream) {
  cublasStatus_t s;
  if (g->bias) {
    s = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g->bias,
                                       sizeof g->bias);
    if (s) return lt_error("bias setup", s);
  }
  void *ws = NULL;
  if (p->workspace) {
    eng_status_t st = eng_cuda_malloc(device, p->workspace, stream, &ws);
    if (st) return st;
  }
  const float alpha32 = g->negate ? -1.0f : 1.0f, beta32 = g->accumulate ? 1.0f : 0.0f;
  const double alpha64 = alpha32, beta64 = beta32;
  int f64 = g->dtype == ENG_F64;
  s = cublasLtMatmul(h, p->desc, f64 ? (const void *)&alpha64 : (const void *)&alpha32, g->b.data,
                     p->la, g->a.data, p->lb, f64 ? (const void *)&beta64 : (const void *)&beta32,
                     g->c, p->lc, g->c, p->lc, &p->algo, ws, p->workspace, (cudaStream_t)stream);
  if (ws) eng_cuda_free(device, ws); /* stream-ordered: reused only after this product */
  return s ? lt_error("matmul", s) : ENG_OK;
}

eng_status_t eng_blaslt_gemm(int device, eng_stream_t stream, const eng_blaslt_gemm_t *g) {
  if (g->batch > INT32_MAX)
    return eng_error(ENG_ERR_SHAPE, "cuBLASLt: a batch of %lld products is more than it takes",
                     (long long)g->batch);
  plan_key_t key;
  memset(&key, 0, sizeof key);
  key.device = device;
  key.dtype = (int32_t)g->dtype;
  key.act = g->act;
  key.has_bias = g->bias != NULL;
  key.trans_a = g->a.trans;
  key.trans_b = g->b.trans;
  key.c_f32 = g->c_f32;
  key.align_a = alignment(g->a.data);
  key.align_b = alignment(g->b.data);
  key.align_c = alignment(g->c);
  key.align_bias = g->bias ? alignment(g->bias) : 0;
  key.m = g->m;
  key.n = g->n;
  key.k = g->k;
  key.batch = g->batch;
  key.lda = g->a.ld;
  key.ldb = g->b.ld;
  key.bstride_a = g->batch > 1 ? g->a.bstride : 0;
  key.bstride_b = g->batch > 1 ? g->b.bstride : 0;

  pthread_mutex_lock(&lock);
  cublasLtHandle_t h = NULL;
  plan_t *p = NULL;
  eng_status_t st = handle_for(device, &h);
  if (!st) {
    int hit;
    p = plan_slot(&key, &hit);
    if (!hit) st = plan_build(h, g, &key, p);
  }
  if (!st && !p->found)
    st = eng_error(ENG_ERR_UNSUPPORTED,
                   "cuBLASLt has no algorithm for a %s product %lldx%lldx%lld (batch %lld, %s%s)",
                   eng_dtype_name(g->dtype), (long long)g->m, (long long)g->k, (long long)g->n,
                   (long long)g->batch, g->bias ? "bias" : "no bias",
                   g->act == ENG_ACT_RELU ? ", relu" : g->act == ENG_ACT_GELU_TANH ? ", gelu" : "");
  if (!st && p->tune && may_tune(device, (cudaStream_t)stream))
    st = plan_tune(h, p, g, device, (cudaStream_t)stream);
  if (!st) st = plan_run(h, p, g, device, stream);
  pthread_mutex_unlock(&lock);
  return st;
}
