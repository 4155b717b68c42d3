/* The copy and fill ops on CUDA against the CPU reference, bit for bit. Every dtype pair goes
 * through the three places a conversion can happen (on the GPU; on the CPU before an upload; on the
 * GPU before a download) with values that exercise the rounding rules: exact ties of f16, bf16 and
 * f32, subnormals, overflow, NaNs with payloads, integer truncation and saturation. Then strided
 * and broadcast sources, strided destinations (on either side), overlapping copies, fills, empty
 * tensors and scalars, and copies between two GPUs. Sizes 1, 7, 1023, 4097 and 2^20 + 3 (the
 * vectorized paths and their tails), dense views that start off 16-byte alignment, and every
 * destination poisoned first. Skipped without a GPU. */
#include <stdio.h>

#include "cuda_compare.h"

static const eng_dtype_t ALL[ENG_DTYPE_COUNT] = {ENG_F64, ENG_F32, ENG_F16, ENG_BF16,
                                                 ENG_I32, ENG_I64, ENG_U8};
static const int64_t SIZES[] = {1, 7, 1023, 4097, (1 << 20) + 3};
#define N_SIZES (sizeof SIZES / sizeof SIZES[0])
#define CPU ENG_CPU_DEVICE

static uint64_t next_random(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 0x2545F4914F6CDD1Dull;
}

/* Values where the conversions must agree on more than the easy cases. */
static const double SPECIALS[] = {
    NAN, -NAN, INFINITY, -INFINITY, -0.0, 0.0,
    65504.0, 65519.99, 65520.0, -65520.0,              /* f16 max, just below and at its overflow tie */
    0x1p-24, 0x1p-25, 0x3p-26, 0x1p-26, 0x1p-149, 1e-40, /* f16 and f32 subnormals, underflow ties */
    0x1.fep127, 0x1.ffp127, 0x1.fffffep127, 0x1.ffffffp127, 1e39, /* bf16/f32 max, overflow ties */
    2147483647.0, 2147483647.5, 2147483648.0, -2147483648.0, -2147483648.5, -2147483649.0,
    255.0, 255.5, 256.0, -0.5, -1.0, 0.99, 9.3e18, -9.3e18, 0x1p63, -0x1p63, 1e300, -1e300};
#define N_SPECIALS (sizeof SPECIALS / sizeof SPECIALS[0])

/* The midpoint of a random finite 16-bit float and the next one up (an exact tie), random sign. */
static double small_tie(uint64_t r, int bf16) {
  uint16_t top = bf16 ? 0x7F80 : 0x7C00, h = (uint16_t)(r % top);
  double lo = bf16 ? eng_bf16_to_f32(h) : eng_f16_to_f32(h);
  double hi = h + 1 == top ? (bf16 ? 0x1p128 : 65536.0)
                           : bf16 ? eng_bf16_to_f32((uint16_t)(h + 1)) : eng_f16_to_f32((uint16_t)(h + 1));
  double mid = (lo + hi) / 2;
  return (r >> 40) & 1 ? -mid : mid;
}

/* The same for f32 (exact in double). */
static double f32_tie(uint64_t r) {
  uint32_t b = (uint32_t)(r % 0x7F800000u), b1 = b + 1;
  float lo, hi;
  memcpy(&lo, &b, sizeof lo);
  memcpy(&hi, &b1, sizeof hi);
  double mid = ((double)lo + (b1 == 0x7F800000u ? 0x1p128 : (double)hi)) / 2;
  return (r >> 40) & 1 ? -mid : mid;
}

static uint64_t exponent_mask(eng_dtype_t dt) {
  switch (dt) {
  case ENG_F64: return 0x7FF0000000000000ull;
  case ENG_F32: return 0x7F800000u;
  case ENG_F16: return 0x7C00u;
  case ENG_BF16: return 0x7F80u;
  default: return 0;
  }
}

/* A CPU tensor of dt: an eighth each of raw bit patterns (for floats, a quarter of those NaN or
 * Inf with random payloads), more raw bits, values of random magnitude 2^-27 .. 2^18, f16 ties,
 * bf16 ties, f32 ties, the specials, and halves in [-300, 300]. */
static eng_tensor_t *source(const int64_t *shape, int ndim, eng_dtype_t dt, uint64_t seed) {
  eng_tensor_t *t = NULL;
  T_OK(eng_tensor_empty(shape, ndim, dt, CPU, &t));
  unsigned char *p = eng_tensor_data(t);
  size_t size = eng_dtype_size(dt);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  for (int64_t i = 0, n = eng_tensor_numel(t); i < n; i++) {
    uint64_t cat = next_random(&s) % 8, q = next_random(&s);
    double v;
    switch (cat) {
    case 0:
      if ((q >> 60) == 0) q |= exponent_mask(dt);
      memcpy(p + (size_t)i * size, &q, size);
      continue;
    case 1: memcpy(p + (size_t)i * size, &q, size); continue;
    case 2: v = ((double)(q >> 11) * 0x1p-52 - 1.0) * ldexp(1.0, (int)(q % 46) - 27); break;
    case 3: v = small_tie(q, 0); break;
    case 4: v = small_tie(q, 1); break;
    case 5: v = f32_tie(q); break;
    case 6: v = SPECIALS[q % N_SPECIALS]; break;
    default: v = ((double)(q % 1201) - 600.0) / 2; break;
    }
    eng_store_f64(p, dt, i, v);
  }
  return t;
}

static eng_tensor_t *to_gpu(eng_tensor_t *t) {
  eng_tensor_t *d = NULL;
  T_OK(eng_tensor_to_device(t, GPU0, &d));
  return d;
}

Test(cuda_copy, every_dtype_pair_on_gpu_before_upload_and_before_download) {
  SKIP_WITHOUT_GPU();
  for (size_t k = 0; k < N_SIZES; k++) {
    int64_t n = SIZES[k], m = n - 1;
    for (int a = 0; a < ENG_DTYPE_COUNT; a++) {
      eng_dtype_t S = ALL[a];
      eng_tensor_t *x = source(&n, 1, S, 100 * k + (uint64_t)a), *xd = to_gpu(x);
      for (int b = 0; b < ENG_DTYPE_COUNT; b++) {
        eng_dtype_t D = ALL[b];
        char what[128];
        eng_tensor_t *ref = NULL;
        T_OK(eng_tensor_to_dtype(x, D, &ref)); /* the CPU copy */

        eng_tensor_t *on_gpu = poisoned(&n, 1, D, GPU0);
        T_OK(eng_tensor_copy_(on_gpu, xd));
        snprintf(what, sizeof what, "%s -> %s on the GPU, n %lld", eng_dtype_name(S), eng_dtype_name(D), (long long)n);
        expect_same_bits(on_gpu, ref, what);

        eng_tensor_t *up = poisoned(&n, 1, D, GPU0);
        T_OK(eng_tensor_copy_(up, x));
        snprintf(what, sizeof what, "%s -> %s uploaded, n %lld", eng_dtype_name(S), eng_dtype_name(D), (long long)n);
        expect_same_bits(up, ref, what);

        eng_tensor_t *down = poisoned(&n, 1, D, CPU);
        T_OK(eng_tensor_copy_(down, xd));
        snprintf(what, sizeof what, "%s -> %s downloaded, n %lld", eng_dtype_name(S), eng_dtype_name(D), (long long)n);
        expect_same_bits(down, ref, what);

        /* Dense, but the source starts one element in: off 16-byte alignment for every dtype. */
        if (m > 0) {
          eng_tensor_t *gd = poisoned(&n, 1, D, GPU0), *gh = poisoned(&n, 1, D, CPU);
          eng_tensor_t *sd, *sh, *dd, *dh;
          T_OK(eng_tensor_narrow(xd, 0, 1, m, &sd));
          T_OK(eng_tensor_narrow(x, 0, 1, m, &sh));
          T_OK(eng_tensor_narrow(gd, 0, 0, m, &dd));
          T_OK(eng_tensor_narrow(gh, 0, 0, m, &dh));
          T_OK(eng_tensor_copy_(dd, sd));
          T_OK(eng_tensor_copy_(dh, sh));
          snprintf(what, sizeof what, "%s -> %s from an unaligned view, n %lld", eng_dtype_name(S), eng_dtype_name(D), (long long)n);
          expect_same_bits(gd, gh, what);
          eng_tensor_release(sd), eng_tensor_release(sh), eng_tensor_release(dd), eng_tensor_release(dh);
          eng_tensor_release(gd), eng_tensor_release(gh);
        }
        eng_tensor_release(on_gpu), eng_tensor_release(up), eng_tensor_release(down), eng_tensor_release(ref);
      }
      eng_tensor_release(x), eng_tensor_release(xd);
    }
  }
}

/* ---- views, made the same way on a CPU tensor and its GPU copy ---- */
typedef eng_status_t (*view_fn)(eng_tensor_t *t, eng_tensor_t **out);

static eng_status_t v_transposed(eng_tensor_t *t, eng_tensor_t **out) { return eng_tensor_transpose(t, 0, 2, out); }
static eng_status_t v_permuted(eng_tensor_t *t, eng_tensor_t **out) {
  const int64_t perm[3] = {1, 2, 0};
  return eng_tensor_permute(t, perm, 3, out);
}
static eng_status_t v_stepped(eng_tensor_t *t, eng_tensor_t **out) { return eng_tensor_slice(t, 1, 1, t->shape[1], 2, out); }
static eng_status_t v_narrowed(eng_tensor_t *t, eng_tensor_t **out) {
  return eng_tensor_narrow(t, 2, 1, t->shape[2] - 2, out);
}
static eng_status_t v_selected(eng_tensor_t *t, eng_tensor_t **out) { return eng_tensor_select(t, 0, 1, out); }
/* t[0:1, :, 0:1] expanded back to t's shape: stride 0 on dims 0 and 2. */
static eng_status_t v_broadcast(eng_tensor_t *t, eng_tensor_t **out) {
  eng_tensor_t *a = NULL, *b = NULL;
  eng_status_t st = eng_tensor_narrow(t, 0, 0, 1, &a);
  if (!st) st = eng_tensor_narrow(a, 2, 0, 1, &b);
  if (!st) st = eng_tensor_expand(b, t->shape, t->ndim, out);
  eng_tensor_release(a);
  eng_tensor_release(b);
  return st;
}

static const struct {
  const char *name;
  view_fn fn;
} SOURCE_VIEWS[] = {{"transposed", v_transposed}, {"permuted", v_permuted}, {"stepped", v_stepped},
                    {"narrowed", v_narrowed}, {"selected", v_selected}, {"broadcast", v_broadcast}};
#define N_SOURCE_VIEWS (sizeof SOURCE_VIEWS / sizeof SOURCE_VIEWS[0])

static const int64_t BASES[][3] = {{3, 7, 5}, {2, 1023, 3}, {4097, 2, 3}};
#define N_BASES (sizeof BASES / sizeof BASES[0])

Test(cuda_copy, strided_and_broadcast_sources) {
  SKIP_WITHOUT_GPU();
  for (size_t k = 0; k < N_BASES; k++) {
    for (int a = 0; a < ENG_DTYPE_COUNT; a++) {
      eng_dtype_t S = ALL[a];
      eng_tensor_t *x = source(BASES[k], 3, S, 7000 + 10 * k + (uint64_t)a), *xd = to_gpu(x);
      for (size_t v = 0; v < N_SOURCE_VIEWS; v++) {
        eng_tensor_t *vh, *vd;
        T_OK(SOURCE_VIEWS[v].fn(x, &vh));
        T_OK(SOURCE_VIEWS[v].fn(xd, &vd));
        for (int b = 0; b < ENG_DTYPE_COUNT; b++) {
          eng_dtype_t D = ALL[b];
          char what[160];
          eng_tensor_t *ref = poisoned(vh->shape, vh->ndim, D, CPU);
          T_OK(eng_tensor_copy_(ref, vh));
          const char *how[3] = {"on the GPU", "uploaded", "downloaded"};
          eng_tensor_t *src[3] = {vd, vh, vd};
          eng_device_t dev[3] = {GPU0, GPU0, CPU};
          for (int w = 0; w < 3; w++) {
            eng_tensor_t *y = poisoned(vh->shape, vh->ndim, D, dev[w]);
            T_OK(eng_tensor_copy_(y, src[w]));
            snprintf(what, sizeof what, "%s %s source %s -> %s %s, base %lld x %lld x %lld",
                     SOURCE_VIEWS[v].name, eng_dtype_name(S), how[w], eng_dtype_name(D),
                     eng_device_name(dev[w], (char[16]){0}, 16), (long long)BASES[k][0],
                     (long long)BASES[k][1], (long long)BASES[k][2]);
            expect_same_bits(y, ref, what);
            eng_tensor_release(y);
          }
          eng_tensor_release(ref);
        }
        /* contiguous() of the view on the GPU */
        eng_tensor_t *ch, *cd;
        T_OK(eng_tensor_contiguous(vh, &ch));
        T_OK(eng_tensor_contiguous(vd, &cd));
        cr_assert(eng_tensor_is_contiguous(cd) && eng_tensor_device(cd).type == ENG_DEV_CUDA);
        expect_same_bits(cd, ch, SOURCE_VIEWS[v].name);
        eng_tensor_release(ch), eng_tensor_release(cd);
        eng_tensor_release(vh), eng_tensor_release(vd);
      }
      eng_tensor_release(x), eng_tensor_release(xd);
    }
  }
}

/* ---- strided destinations: views of a poisoned [6, 9, 4] base ---- */
static const struct {
  const char *name;
  view_fn fn;
} DEST_VIEWS[] = {{"transposed", v_transposed}, {"permuted", v_permuted}, {"stepped", v_stepped},
                  {"narrowed", v_narrowed}, {"selected", v_selected}};
#define N_DEST_VIEWS (sizeof DEST_VIEWS / sizeof DEST_VIEWS[0])

Test(cuda_copy, strided_destinations_on_either_side) {
  SKIP_WITHOUT_GPU();
  const int64_t base[3] = {6, 9, 4};
  for (int a = 0; a < ENG_DTYPE_COUNT; a++) {
    for (int b = 0; b < ENG_DTYPE_COUNT; b++) {
      eng_dtype_t S = ALL[a], D = ALL[b];
      for (size_t v = 0; v < N_DEST_VIEWS; v++) {
        /* The view's shape, from a throwaway CPU tensor. */
        eng_tensor_t *probe = poisoned(base, 3, D, CPU), *pv;
        T_OK(DEST_VIEWS[v].fn(probe, &pv));
        const int64_t last = pv->shape[pv->ndim - 1];
        eng_tensor_t *full = source(pv->shape, pv->ndim, S, 900 + 70 * (uint64_t)a + 7 * (uint64_t)b + v);
        eng_tensor_t *row = source(&last, 1, S, 5 + v); /* broadcast over the leading dims */
        eng_tensor_t *srcs_h[2] = {full, row}, *srcs_d[2] = {to_gpu(full), to_gpu(row)};
        for (int s = 0; s < 2; s++) {
          for (int w = 0; w < 3; w++) { /* GPU source into GPU, CPU into GPU, GPU into CPU */
            eng_device_t dev = w == 2 ? CPU : GPU0;
            eng_tensor_t *src = w == 1 ? srcs_h[s] : srcs_d[s];
            eng_tensor_t *bd = poisoned(base, 3, D, dev), *bh = poisoned(base, 3, D, CPU), *vd, *vh;
            T_OK(DEST_VIEWS[v].fn(bd, &vd));
            T_OK(DEST_VIEWS[v].fn(bh, &vh));
            T_OK(eng_tensor_copy_(vd, src));
            T_OK(eng_tensor_copy_(vh, srcs_h[s]));
            char what[160];
            snprintf(what, sizeof what, "%s %s source (%s) into a %s %s destination on %s",
                     s ? "broadcast" : "dense", eng_dtype_name(S), w == 1 ? "cpu" : "cuda",
                     DEST_VIEWS[v].name, eng_dtype_name(D), w == 2 ? "cpu" : "cuda");
            expect_same_bits(bd, bh, what); /* the whole base: written and untouched elements */
            eng_tensor_release(vd), eng_tensor_release(vh), eng_tensor_release(bd), eng_tensor_release(bh);
          }
        }
        eng_tensor_release(srcs_d[0]), eng_tensor_release(srcs_d[1]);
        eng_tensor_release(full), eng_tensor_release(row), eng_tensor_release(pv), eng_tensor_release(probe);
      }
    }
  }
}

Test(cuda_copy, overlapping_source_and_destination) {
  SKIP_WITHOUT_GPU();
  for (size_t k = 0; k < N_SIZES; k++) {
    int64_t n = SIZES[k] + 1;
    for (int a = 0; a < ENG_DTYPE_COUNT; a++) {
      eng_tensor_t *h = source(&n, 1, ALL[a], 31 + k), *d = to_gpu(h), *views[2][2];
      eng_tensor_t *base[2] = {h, d};
      for (int s = 0; s < 2; s++) { /* x[1:] = x[:-1], shifting every element up by one */
        T_OK(eng_tensor_narrow(base[s], 0, 1, n - 1, &views[s][0]));
        T_OK(eng_tensor_narrow(base[s], 0, 0, n - 1, &views[s][1]));
        T_OK(eng_tensor_copy_(views[s][0], views[s][1]));
        eng_tensor_release(views[s][0]), eng_tensor_release(views[s][1]);
      }
      expect_same_bits(d, h, "x[1:] = x[:-1]");
      eng_tensor_release(h), eng_tensor_release(d);
    }
  }
  /* A square matrix onto its own transpose. */
  const int64_t sq[2] = {33, 33};
  eng_tensor_t *h = source(sq, 2, ENG_F32, 77), *d = to_gpu(h), *th, *td;
  T_OK(eng_tensor_transpose(h, 0, 1, &th));
  T_OK(eng_tensor_transpose(d, 0, 1, &td));
  T_OK(eng_tensor_copy_(h, th));
  T_OK(eng_tensor_copy_(d, td));
  expect_same_bits(d, h, "x = x^T");
  eng_tensor_release(th), eng_tensor_release(td), eng_tensor_release(h), eng_tensor_release(d);
}

static const double FILL_VALUES[] = {0.0, -0.0, 1.5, -3.25, NAN, 1e10, -1e10, 255.7, 65520.0, 0x1.0040000000001p0};
#define N_FILL_VALUES (sizeof FILL_VALUES / sizeof FILL_VALUES[0])

static void fill_both(eng_tensor_t *gpu, eng_tensor_t *cpu, double value) {
  T_OK(eng_tensor_fill_(gpu, value));
  T_OK(eng_tensor_fill_(cpu, value));
}

Test(cuda_fill, every_dtype_dense_unaligned_and_strided) {
  SKIP_WITHOUT_GPU();
  char what[128];
  for (int a = 0; a < ENG_DTYPE_COUNT; a++) {
    eng_dtype_t D = ALL[a];
    for (size_t f = 0; f < N_FILL_VALUES; f++) {
      double value = FILL_VALUES[f];
      for (size_t k = 0; k < N_SIZES; k++) {
        int64_t n = SIZES[k];
        eng_tensor_t *gd = poisoned(&n, 1, D, GPU0), *gh = poisoned(&n, 1, D, CPU);
        fill_both(gd, gh, value);
        snprintf(what, sizeof what, "fill %g, n %lld", value, (long long)n);
        expect_same_bits(gd, gh, what);
        eng_tensor_release(gd), eng_tensor_release(gh);
        if (n < 2) continue;
        gd = poisoned(&n, 1, D, GPU0), gh = poisoned(&n, 1, D, CPU);
        eng_tensor_t *vd, *vh;
        T_OK(eng_tensor_narrow(gd, 0, 1, n - 2, &vd));
        T_OK(eng_tensor_narrow(gh, 0, 1, n - 2, &vh));
        fill_both(vd, vh, value);
        snprintf(what, sizeof what, "fill %g of [1, n-1), n %lld", value, (long long)n);
        expect_same_bits(gd, gh, what);
        eng_tensor_release(vd), eng_tensor_release(vh), eng_tensor_release(gd), eng_tensor_release(gh);
      }
      const int64_t base[3] = {6, 9, 4};
      for (size_t v = 0; v < N_DEST_VIEWS; v++) {
        eng_tensor_t *bd = poisoned(base, 3, D, GPU0), *bh = poisoned(base, 3, D, CPU), *vd, *vh;
        T_OK(DEST_VIEWS[v].fn(bd, &vd));
        T_OK(DEST_VIEWS[v].fn(bh, &vh));
        fill_both(vd, vh, value);
        snprintf(what, sizeof what, "fill %g of a %s view", value, DEST_VIEWS[v].name);
        expect_same_bits(bd, bh, what);
        eng_tensor_release(vd), eng_tensor_release(vh), eng_tensor_release(bd), eng_tensor_release(bh);
      }
    }
  }
}

Test(cuda_copy, empty_tensors) {
  SKIP_WITHOUT_GPU();
  const int64_t shapes[2][3] = {{0, 1, 1}, {3, 0, 2}};
  for (int s = 0; s < 2; s++) {
    eng_tensor_t *h, *d, *c, *back, *bf;
    T_OK(eng_tensor_empty(shapes[s], s ? 3 : 1, ENG_F32, CPU, &h));
    T_OK(eng_tensor_to_device(h, GPU0, &d));
    T_OK(eng_tensor_to_dtype(d, ENG_BF16, &bf));
    T_OK(eng_tensor_fill_(bf, 2.0));
    T_OK(eng_tensor_copy_(d, h));
    T_OK(eng_tensor_clone(d, &c));
    T_OK(eng_tensor_to_device(bf, CPU, &back));
    cr_assert(eng_shape_equal(back, h) && eng_tensor_numel(back) == 0 && back->dtype == ENG_BF16);
    eng_tensor_release(h), eng_tensor_release(d), eng_tensor_release(c), eng_tensor_release(back), eng_tensor_release(bf);
  }
}

Test(cuda_copy, scalars_round_trip_and_broadcast) {
  SKIP_WITHOUT_GPU();
  const int64_t mat[2] = {5, 3};
  for (int a = 0; a < ENG_DTYPE_COUNT; a++) {
    double v = -2.75;
    eng_tensor_t *h, *d, *back, *gd = poisoned(mat, 2, ALL[a], GPU0), *gh = poisoned(mat, 2, ALL[a], CPU);
    T_OK(eng_tensor_from_f64(&v, mat, 0, ALL[a], CPU, &h)); /* 0 dims: the shape is not read */
    T_OK(eng_tensor_to_device(h, GPU0, &d));
    T_OK(eng_tensor_to_device(d, CPU, &back));
    expect_same_bits(back, h, "0-d round trip");
    T_OK(eng_tensor_copy_(gd, d));
    T_OK(eng_tensor_copy_(gh, h));
    expect_same_bits(gd, gh, "0-d broadcast into [5, 3]");
    eng_tensor_release(h), eng_tensor_release(d), eng_tensor_release(back), eng_tensor_release(gd), eng_tensor_release(gh);
  }
}

Test(cuda_copy, between_two_gpus) {
  SKIP_WITHOUT_GPU();
  if (eng_cuda_device_count() < 2) cr_skip_test("needs two CUDA devices");
  const eng_device_t gpu1 = {ENG_DEV_CUDA, 1};
  const int64_t base[3] = {6, 9, 4};
  for (int a = 0; a < ENG_DTYPE_COUNT; a++) {
    for (int b = 0; b < ENG_DTYPE_COUNT; b++) {
      eng_tensor_t *x = source(base, 3, ALL[a], 3 + (uint64_t)a), *xd = to_gpu(x);
      /* dense into dense, and a transposed source into a stepped destination */
      eng_tensor_t *d1 = poisoned(base, 3, ALL[b], gpu1), *h1 = poisoned(base, 3, ALL[b], CPU);
      T_OK(eng_tensor_copy_(d1, xd));
      T_OK(eng_tensor_copy_(h1, x));
      expect_same_bits(d1, h1, "cuda:0 -> cuda:1, dense");
      eng_tensor_t *sd, *sh, *vd, *vh, *td, *th;
      eng_tensor_t *d2 = poisoned(base, 3, ALL[b], gpu1), *h2 = poisoned(base, 3, ALL[b], CPU);
      T_OK(v_stepped(d2, &vd));
      T_OK(v_stepped(h2, &vh));
      T_OK(v_stepped(xd, &sd));
      T_OK(v_stepped(x, &sh));
      T_OK(eng_tensor_transpose(sd, 1, 2, &td));
      T_OK(eng_tensor_transpose(sh, 1, 2, &th));
      eng_tensor_t *tvd, *tvh;
      T_OK(eng_tensor_transpose(vd, 1, 2, &tvd));
      T_OK(eng_tensor_transpose(vh, 1, 2, &tvh));
      T_OK(eng_tensor_copy_(tvd, td));
      T_OK(eng_tensor_copy_(tvh, th));
      expect_same_bits(d2, h2, "cuda:0 -> cuda:1, strided");
      eng_tensor_release(tvd), eng_tensor_release(tvh), eng_tensor_release(td), eng_tensor_release(th);
      eng_tensor_release(sd), eng_tensor_release(sh), eng_tensor_release(vd), eng_tensor_release(vh);
      eng_tensor_release(d1), eng_tensor_release(h1), eng_tensor_release(d2), eng_tensor_release(h2);
      eng_tensor_release(x), eng_tensor_release(xd);
    }
  }
}
