/* Elementwise kernels: per dtype, a switch on the op outside a tight loop per stride pattern. */
#include "cpu/elementwise.h"

#include <tgmath.h> /* exp/log/... pick the float versions for float operands */

#include "cpu/convert.h"

#define BLOCK 256

typedef struct {
  int op;
  eng_dtype_t dt;
  int bad_pow; /* set (atomically) by any thread that meets a negative integer exponent */
} ew_ctx_t;

/* ---- f16/bf16 blocks ---- */

static void load_half(float *dst, const uint16_t *x, int64_t sx, int64_t m, eng_dtype_t dt) {
  if (dt == ENG_BF16)
    for (int64_t k = 0; k < m; k++) dst[k] = eng_k_bf16_to_f32(x[k * sx]);
  else
    for (int64_t k = 0; k < m; k++) dst[k] = eng_k_f16_to_f32(x[k * sx]);
}

static void store_half(uint16_t *y, const float *src, int64_t m, eng_dtype_t dt) {
  if (dt == ENG_BF16)
    for (int64_t k = 0; k < m; k++) y[k] = eng_k_f32_to_bf16(src[k]);
  else
    for (int64_t k = 0; k < m; k++) y[k] = eng_k_f32_to_f16(src[k]);
}

/* ---- unary ---- */

/* y[i] = EXPR of v = x[i*sx]; stride 1 has its own loop so that it vectorises. E is the type. */
#define MAP1(EXPR)                      \
  do {                                  \
    if (sx == 1)                        \
      for (int64_t i = 0; i < n; i++) { \
        const E v = x[i];               \
        y[i] = (EXPR);                  \
      }                                 \
    else                                \
      for (int64_t i = 0; i < n; i++) { \
        const E v = x[i * sx];          \
        y[i] = (EXPR);                  \
      }                                 \
  } while (0)

#define DEFINE_UNARY_FLOAT(NAME, TYPE)                                             \
  static void NAME(int op, int64_t n, TYPE *y, const TYPE *x, int64_t sx) {        \
    typedef TYPE E;                                                                \
    switch (op) {                                                                  \
    case ENG_UNARY_NEG: MAP1(-v); break;                                           \
    case ENG_UNARY_ABS: MAP1(fabs(v)); break;                                      \
    case ENG_UNARY_EXP: MAP1(exp(v)); break;                                       \
    case ENG_UNARY_LOG: MAP1(log(v)); break;                                       \
    case ENG_UNARY_SQRT: MAP1(sqrt(v)); break;                                     \
    case ENG_UNARY_RSQRT: MAP1((E)1 / sqrt(v)); break;                             \
    case ENG_UNARY_TANH: MAP1(tanh(v)); break;                                     \
    case ENG_UNARY_SIGMOID: MAP1((E)1 / ((E)1 + exp(-v))); break;                  \
    case ENG_UNARY_SILU: MAP1(v / ((E)1 + exp(-v))); break;                        \
    case ENG_UNARY_GELU: MAP1((E)0.5 * v * ((E)1 + erf(v * (E)M_SQRT1_2))); break; \
    case ENG_UNARY_RELU: MAP1(v < 0 ? (E)0 : v); break; /* keeps NaN */            \
    case ENG_UNARY_SOFTPLUS: MAP1(v > 20 ? v : log1p(exp(v))); break;              \
    default: break;                                                                \
    }                                                                              \
  }

DEFINE_UNARY_FLOAT(unary_f32, float)
DEFINE_UNARY_FLOAT(unary_f64, double)

/* Negation through the unsigned type so that the most negative value wraps instead of being UB. */
#define DEFINE_UNARY_INT(NAME, TYPE, UTYPE)                                 \
  static void NAME(int op, int64_t n, TYPE *y, const TYPE *x, int64_t sx) { \
    typedef TYPE E;                                                         \
    switch (op) {                                                           \
    case ENG_UNARY_NEG: MAP1((E)(0 - (UTYPE)v)); break;                     \
    case ENG_UNARY_ABS: MAP1(v < 0 ? (E)(0 - (UTYPE)v) : v); break;         \
    case ENG_UNARY_RELU: MAP1(v < 0 ? (E)0 : v); break;                     \
    default: break;                                                         \
    }                                                                       \
  }

DEFINE_UNARY_INT(unary_i32, int32_t, uint32_t)
DEFINE_UNARY_INT(unary_i64, int64_t, uint64_t)

/* u8 takes abs and relu, which are both the identity on unsigned values. */
static void unary_u8(int64_t n, uint8_t *y, const uint8_t *x, int64_t sx) {
  typedef uint8_t E;
  MAP1(v);
}

static void unary_half(const ew_ctx_t *c, int64_t n, uint16_t *y, const uint16_t *x, int64_t sx) {
  float buf[BLOCK];
  for (int64_t i0 = 0; i0 < n; i0 += BLOCK) {
    int64_t m = n - i0 < BLOCK ? n - i0 : BLOCK;
    load_half(buf, x + i0 * sx, sx, m, c->dt);
    unary_f32(c->op, m, buf, buf, 1);
    store_half(y + i0, buf, m, c->dt);
  }
}

static void unary_run(void *ctx, int64_t n, char *const *p, const int64_t *s) {
  const ew_ctx_t *c = ctx;
  switch (c->dt) {
  case ENG_F32: unary_f32(c->op, n, (float *)p[0], (const float *)p[1], s[1]); break;
  case ENG_F64: unary_f64(c->op, n, (double *)p[0], (const double *)p[1], s[1]); break;
  case ENG_F16:
  case ENG_BF16: unary_half(c, n, (uint16_t *)p[0], (const uint16_t *)p[1], s[1]); break;
  case ENG_I32: unary_i32(c->op, n, (int32_t *)p[0], (const int32_t *)p[1], s[1]); break;
  case ENG_I64: unary_i64(c->op, n, (int64_t *)p[0], (const int64_t *)p[1], s[1]); break;
  case ENG_U8: unary_u8(n, (uint8_t *)p[0], (const uint8_t *)p[1], s[1]); break;
  default: break;
  }
}

void eng_kcpu_unary(eng_unary_op_t op, eng_dtype_t dt, const eng_kcpu_nd_t *nd) {
  ew_ctx_t c = {.op = op, .dt = dt};
  eng_kcpu_nd_run(nd, unary_run, &c);
}

/* ---- binary ---- */

/* OUT[i] = EXPR of x = a[i*sa], y = b[i*sb]; the common stride pairs (same shape, one side
 * broadcast) get their own loops. */
#define MAP2(OUT, EXPR)                       \
  do {                                        \
    if (sa == 1 && sb == 1) {                 \
      for (int64_t i = 0; i < n; i++) {       \
        const E x = a[i], y = b[i];           \
        OUT[i] = (EXPR);                      \
      }                                       \
    } else if (sa == 1 && sb == 0) {          \
      const E y = b[0];                       \
      for (int64_t i = 0; i < n; i++) {       \
        const E x = a[i];                     \
        OUT[i] = (EXPR);                      \
      }                                       \
    } else if (sa == 0 && sb == 1) {          \
      const E x = a[0];                       \
      for (int64_t i = 0; i < n; i++) {       \
        const E y = b[i];                     \
        OUT[i] = (EXPR);                      \
      }                                       \
    } else {                                  \
      for (int64_t i = 0; i < n; i++) {       \
        const E x = a[i * sa], y = b[i * sb]; \
        OUT[i] = (EXPR);                      \
      }                                       \
    }                                         \
  } while (0)

#define COMPARISON_CASES                      \
  case ENG_BINARY_EQ: MAP2(c, x == y); break; \
  case ENG_BINARY_NE: MAP2(c, x != y); break; \
  case ENG_BINARY_LT: MAP2(c, x < y); break;  \
  case ENG_BINARY_LE: MAP2(c, x <= y); break; \
  case ENG_BINARY_GT: MAP2(c, x > y); break;  \
  case ENG_BINARY_GE: MAP2(c, x >= y); break;

/* maximum/minimum propagate NaN from either side, like torch. */
#define DEFINE_BINARY_FLOAT(NAME, TYPE)                                                     \
  static void NAME(int op, int64_t n, const TYPE *a, int64_t sa, const TYPE *b, int64_t sb, \
                   void *out) {                                                             \
    typedef TYPE E;                                                                         \
    E *o = out;                                                                             \
    uint8_t *c = out;                                                                       \
    switch (op) {                                                                           \
    case ENG_BINARY_ADD: MAP2(o, x + y); break;                                             \
    case ENG_BINARY_SUB: MAP2(o, x - y); break;                                             \
    case ENG_BINARY_MUL: MAP2(o, x *y); break;                                              \
    case ENG_BINARY_DIV: MAP2(o, x / y); break;                                             \
    case ENG_BINARY_POW: MAP2(o, pow(x, y)); break;                                         \
    case ENG_BINARY_MAXIMUM: MAP2(o, (x != x || x > y) ? x : y); break;                     \
    case ENG_BINARY_MINIMUM:                                                                \
      MAP2(o, (x != x || x < y) ? x : y);                                                   \
      break;                                                                                \
      COMPARISON_CASES                                                                      \
    default: break;                                                                         \
    }                                                                                       \
  }

DEFINE_BINARY_FLOAT(binary_f32, float)
DEFINE_BINARY_FLOAT(binary_f64, double)

/* x^y by squaring in wrapping 64-bit arithmetic (the caller narrows, which wraps the same way). */
static inline int64_t int_pow(int64_t x, int64_t y, int *bad) {
  if (y < 0) {
    *bad = 1;
    return 0;
  }
  uint64_t r = 1, b = (uint64_t)x;
  for (; y; y >>= 1) {
    if (y & 1) r *= b;
    b *= b;
  }
  return (int64_t)r;
}

/* add/sub/mul go through the unsigned type: exact, wrapping on overflow, never UB. DIV does not
 * reach integers (the op layer converts them to f32 first). */
#define DEFINE_BINARY_INT(NAME, TYPE, UTYPE)                                               \
  static int NAME(int op, int64_t n, const TYPE *a, int64_t sa, const TYPE *b, int64_t sb, \
                  void *out) {                                                             \
    typedef TYPE E;                                                                        \
    E *o = out;                                                                            \
    uint8_t *c = out;                                                                      \
    int bad = 0;                                                                           \
    switch (op) {                                                                          \
    case ENG_BINARY_ADD: MAP2(o, (E)((UTYPE)x + (UTYPE)y)); break;                         \
    case ENG_BINARY_SUB: MAP2(o, (E)((UTYPE)x - (UTYPE)y)); break;                         \
    case ENG_BINARY_MUL: MAP2(o, (E)((UTYPE)x * (UTYPE)y)); break;                         \
    case ENG_BINARY_POW: MAP2(o, (E)int_pow(x, y, &bad)); break;                           \
    case ENG_BINARY_MAXIMUM: MAP2(o, x > y ? x : y); break;                                \
    case ENG_BINARY_MINIMUM:                                                               \
      MAP2(o, x < y ? x : y);                                                              \
      break;                                                                               \
      COMPARISON_CASES                                                                     \
    default: break;                                                                        \
    }                                                                                      \
    return bad;                                                                            \
  }

DEFINE_BINARY_INT(binary_i32, int32_t, uint32_t)
DEFINE_BINARY_INT(binary_i64, int64_t, uint64_t)
DEFINE_BINARY_INT(binary_u8, uint8_t, uint8_t)

static void binary_half(const ew_ctx_t *c, int64_t n, char *const *p, const int64_t *s) {
  const uint16_t *a = (const uint16_t *)p[1], *b = (const uint16_t *)p[2];
  const int compare = c->op >= ENG_BINARY_EQ;
  const int64_t sb = s[2] ? 1 : 0; /* b's stride in its float block */
  float fa[BLOCK], fb[BLOCK], fo[BLOCK];
  if (!sb) load_half(fb, b, 0, 1, c->dt);
  for (int64_t i0 = 0; i0 < n; i0 += BLOCK) {
    int64_t m = n - i0 < BLOCK ? n - i0 : BLOCK;
    load_half(fa, a + i0 * s[1], s[1], m, c->dt);
    if (sb) load_half(fb, b + i0 * s[2], s[2], m, c->dt);
    if (compare) {
      binary_f32(c->op, m, fa, 1, fb, sb, (uint8_t *)p[0] + i0);
    } else {
      binary_f32(c->op, m, fa, 1, fb, sb, fo);
      store_half((uint16_t *)p[0] + i0, fo, m, c->dt);
    }
  }
}

static void binary_run(void *ctx, int64_t n, char *const *p, const int64_t *s) {
  ew_ctx_t *c = ctx;
  int bad = 0;
  switch (c->dt) {
  case ENG_F32:
    binary_f32(c->op, n, (const float *)p[1], s[1], (const float *)p[2], s[2], p[0]);
    break;
  case ENG_F64:
    binary_f64(c->op, n, (const double *)p[1], s[1], (const double *)p[2], s[2], p[0]);
    break;
  case ENG_F16:
  case ENG_BF16: binary_half(c, n, p, s); break;
  case ENG_I32:
    bad = binary_i32(c->op, n, (const int32_t *)p[1], s[1], (const int32_t *)p[2], s[2], p[0]);
    break;
  case ENG_I64:
    bad = binary_i64(c->op, n, (const int64_t *)p[1], s[1], (const int64_t *)p[2], s[2], p[0]);
    break;
  case ENG_U8:
    bad = binary_u8(c->op, n, (const uint8_t *)p[1], s[1], (const uint8_t *)p[2], s[2], p[0]);
    break;
  default: break;
  }
  if (bad) __atomic_store_n(&c->bad_pow, 1, __ATOMIC_RELAXED);
}

int eng_kcpu_binary(eng_binary_op_t op, eng_dtype_t dt, const eng_kcpu_nd_t *nd) {
  ew_ctx_t c = {.op = op, .dt = dt};
  eng_kcpu_nd_run(nd, binary_run, &c);
  return c.bad_pow;
}

/* ---- clamp ---- */

typedef struct {
  eng_dtype_t dt;
  double lo, hi;    /* floating dtypes: -inf/+inf for an open side */
  int64_t ilo, ihi; /* integer dtypes: the bounds inside the dtype's range */
} clamp_ctx_t;

/* y = min(max(x, lo), hi), so that lo > hi gives hi like torch; NaN fails both tests and stays. */
#define DEFINE_CLAMP(NAME, TYPE)                                                      \
  static void NAME(int64_t n, TYPE *y, const TYPE *x, int64_t sx, TYPE lo, TYPE hi) { \
    typedef TYPE E;                                                                   \
    MAP1(({                                                                           \
      E w_ = v < lo ? lo : v;                                                         \
      w_ > hi ? hi : w_;                                                              \
    }));                                                                              \
  }

DEFINE_CLAMP(clamp_f32, float)
DEFINE_CLAMP(clamp_f64, double)
DEFINE_CLAMP(clamp_i32, int32_t)
DEFINE_CLAMP(clamp_i64, int64_t)
DEFINE_CLAMP(clamp_u8, uint8_t)

static void clamp_half(const clamp_ctx_t *c, int64_t n, uint16_t *y, const uint16_t *x,
                       int64_t sx) {
  float buf[BLOCK];
  for (int64_t i0 = 0; i0 < n; i0 += BLOCK) {
    int64_t m = n - i0 < BLOCK ? n - i0 : BLOCK;
    load_half(buf, x + i0 * sx, sx, m, c->dt);
    clamp_f32(m, buf, buf, 1, (float)c->lo, (float)c->hi);
    store_half(y + i0, buf, m, c->dt);
  }
}

static void clamp_run(void *ctx, int64_t n, char *const *p, const int64_t *s) {
  const clamp_ctx_t *c = ctx;
  switch (c->dt) {
  case ENG_F32:
    clamp_f32(n, (float *)p[0], (const float *)p[1], s[1], (float)c->lo, (float)c->hi);
    break;
  case ENG_F64: clamp_f64(n, (double *)p[0], (const double *)p[1], s[1], c->lo, c->hi); break;
  case ENG_F16:
  case ENG_BF16: clamp_half(c, n, (uint16_t *)p[0], (const uint16_t *)p[1], s[1]); break;
  case ENG_I32:
    clamp_i32(n, (int32_t *)p[0], (const int32_t *)p[1], s[1], (int32_t)c->ilo, (int32_t)c->ihi);
    break;
  case ENG_I64: clamp_i64(n, (int64_t *)p[0], (const int64_t *)p[1], s[1], c->ilo, c->ihi); break;
  case ENG_U8:
    clamp_u8(n, (uint8_t *)p[0], (const uint8_t *)p[1], s[1], (uint8_t)c->ilo, (uint8_t)c->ihi);
    break;
  default: break;
  }
}

/* An integer bound (already ceil'd or floor'd) saturated to [min, max]. */
static int64_t int_bound(double v, int64_t min, int64_t max) {
  int64_t b = eng_k_sat_i64(v);
  return b < min ? min : b > max ? max : b;
}

void eng_kcpu_clamp(eng_dtype_t dt, int has_lo, double lo, int has_hi, double hi,
                    const eng_kcpu_nd_t *nd) {
  int64_t tmin = dt == ENG_I32 ? INT32_MIN : dt == ENG_U8 ? 0 : INT64_MIN;
  int64_t tmax = dt == ENG_I32 ? INT32_MAX : dt == ENG_U8 ? 255 : INT64_MAX;
  clamp_ctx_t c = {
      .dt = dt,
      .lo = has_lo ? lo : -INFINITY,
      .hi = has_hi ? hi : INFINITY,
      .ilo = has_lo ? int_bound(ceil(lo), tmin, tmax) : tmin,
      .ihi = has_hi ? int_bound(floor(hi), tmin, tmax) : tmax,
  };
  eng_kcpu_nd_run(nd, clamp_run, &c);
}

/* ---- where ---- */

typedef struct {
  eng_dtype_t cond_dt;
  int64_t cond_size; /* bytes per cond element */
  size_t elsize;
} where_ctx_t;

#define TRUTH(T, TEST)                \
  do {                                \
    const T *c_ = (const T *)cond;    \
    for (int64_t k = 0; k < m; k++) { \
      const T v = c_[k * sc];         \
      t[k] = (TEST);                  \
    }                                 \
  } while (0)

/* t[k] = cond[k*sc] != 0; a NaN is nonzero; f16/bf16 zero is +-0 (all bits but the sign clear). */
static void truth(uint8_t *t, const char *cond, int64_t sc, int64_t m, eng_dtype_t dt) {
  switch (dt) {
  case ENG_F64: TRUTH(double, v != 0); break;
  case ENG_F32: TRUTH(float, v != 0); break;
  case ENG_F16:
  case ENG_BF16: TRUTH(uint16_t, (v & 0x7FFF) != 0); break;
  case ENG_I32: TRUTH(int32_t, v != 0); break;
  case ENG_I64: TRUTH(int64_t, v != 0); break;
  case ENG_U8: TRUTH(uint8_t, v != 0); break;
  default: break;
  }
}

#define SELECT(T)                                                               \
  do {                                                                          \
    T *o = (T *)p[0] + i0;                                                      \
    const T *a = (const T *)p[2] + i0 * s[2], *b = (const T *)p[3] + i0 * s[3]; \
    for (int64_t k = 0; k < m; k++) o[k] = t[k] ? a[k * s[2]] : b[k * s[3]];    \
  } while (0)

static void where_run(void *ctx, int64_t n, char *const *p, const int64_t *s) {
  const where_ctx_t *c = ctx;
  uint8_t t[BLOCK];
  for (int64_t i0 = 0; i0 < n; i0 += BLOCK) {
    int64_t m = n - i0 < BLOCK ? n - i0 : BLOCK;
    truth(t, p[1] + i0 * s[1] * c->cond_size, s[1], m, c->cond_dt);
    switch (c->elsize) {
    case 1: SELECT(uint8_t); break;
    case 2: SELECT(uint16_t); break;
    case 4: SELECT(uint32_t); break;
    case 8: SELECT(uint64_t); break;
    default: break;
    }
  }
}

void eng_kcpu_where(eng_dtype_t cond_dt, const eng_kcpu_nd_t *nd) {
  where_ctx_t c = {
      .cond_dt = cond_dt, .cond_size = (int64_t)nd->elsize[1], .elsize = nd->elsize[0]};
  eng_kcpu_nd_run(nd, where_run, &c);
}
