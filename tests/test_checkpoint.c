/* safetensors checkpoints: round trips of every dtype (with metadata, views, scalars and empty
 * tensors) checked value by value and against the format read back by hand; atomic replacement;
 * every malformed-file and bad-argument error; and a file written by the official Python package
 * (scripts/make_safetensors_fixture.py). */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support.h"

/* ---- temporary directory and file helpers ---- */

static char tmp_root[64];

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

static void make_tmp(void) {
  strcpy(tmp_root, "/tmp/eng_ckpt_XXXXXX");
  cr_assert_not_null(mkdtemp(tmp_root), "mkdtemp failed");
}

static void remove_tmp(void) { nftw(tmp_root, remove_entry, 8, FTW_DEPTH | FTW_PHYS); }

TestSuite(checkpoint, .init = make_tmp, .fini = remove_tmp);

/* tmp_root/name, in a static buffer per slot. */
static const char *tmp_path(const char *name) {
  static char bufs[4][256];
  static int slot;
  char *b = bufs[slot++ % 4];
  snprintf(b, 256, "%s/%s", tmp_root, name);
  return b;
}

static unsigned char *read_file(const char *path, long *size) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  *size = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc((size_t)*size + 1);
  cr_assert_eq(fread(b, 1, (size_t)*size, f), (size_t)*size);
  fclose(f);
  return b;
}

static void write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(data, 1, n, f), n);
  fclose(f);
}

/* A safetensors file by hand: the given header length (normally strlen(header)), the header and
 * n_data bytes of data. */
static void write_raw(const char *path, uint64_t header_len, const char *header, size_t n_data) {
  size_t hl = strlen(header), total = 8 + hl + n_data;
  unsigned char *b = calloc(total, 1);
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)(header_len >> (8 * i));
  memcpy(b + 8, header, hl);
  for (size_t i = 0; i < n_data; i++) b[8 + hl + i] = (unsigned char)(i * 37);
  write_file(path, b, total);
  free(b);
}

static int count_dir_entries(const char *dir) {
  DIR *d = opendir(dir);
  cr_assert_not_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

static eng_tensor_t *rand_any(const int64_t *shape, int nd, eng_dtype_t dt, uint64_t seed) {
  return eng_dtype_is_float(dt) ? t_rand_tensor(shape, nd, dt, seed, -3, 3)
                                : t_rand_tensor(shape, nd, dt, seed, 0, 250);
}

static void assert_same_values(const eng_tensor_t *got, const eng_tensor_t *want, const char *name) {
  char a[128], b[128];
  cr_assert_eq(got->dtype, want->dtype, "%s: dtype %s, want %s", name, eng_dtype_name(got->dtype),
               eng_dtype_name(want->dtype));
  cr_assert(eng_shape_equal(got, want), "%s: shape %s, want %s", name, ENG_SHAPE_STR(got, a), ENG_SHAPE_STR(want, b));
  int64_t n = eng_tensor_numel(want);
  double *g = t_values(got), *w = t_values(want);
  for (int64_t i = 0; i < n; i++) cr_assert_eq(g[i], w[i], "%s: element %lld: %g != %g", name, (long long)i, g[i], w[i]);
  free(g);
  free(w);
}

/* ---- round trip ---- */

#define N_RT 10

Test(checkpoint, round_trip_every_dtype) {
  int64_t s34[2] = {3, 4}, s7[1] = {7}, s232[3] = {2, 3, 2}, s51[2] = {5, 1}, s4[1] = {4}, s22[2] = {2, 2},
          s9[1] = {9}, s35[2] = {3, 5}, s0[1] = {0}, s04[2] = {0, 4};
  eng_tensor_t *base = rand_any(s35, 2, ENG_F32, 8), *transposed;
  T_OK(eng_tensor_transpose(base, 0, 1, &transposed)); /* [5,3], not contiguous */
  double pi = 3.140625;
  eng_tensor_t *ts[N_RT] = {
      rand_any(s34, 2, ENG_F64, 1),  rand_any(s7, 1, ENG_F32, 2), rand_any(s232, 3, ENG_F16, 3),
      rand_any(s51, 2, ENG_BF16, 4), rand_any(s4, 1, ENG_I32, 5), rand_any(s22, 2, ENG_I64, 6),
      rand_any(s9, 1, ENG_U8, 7),    transposed,                  t_tensor(&pi, s0, 0, ENG_F64),
      rand_any(s04, 2, ENG_F32, 9)};
  const char *names[N_RT] = {"w.f64", "b.f32", "h.f16", "g.bf16", "n.i32", "m.i64", "u.u8", "t.view", "scalar", "empty"};
  const char *dt_names[N_RT] = {"F64", "F32", "F16", "BF16", "I32", "I64", "U8", "F32", "F64", "F32"};
  const char *keys[2] = {"format", "note"}, *values[2] = {"pt", "h\xc3\xa9llo, \"quoted\""};
  const char *path = tmp_path("model.safetensors");
  T_OK(eng_safetensors_save(path, N_RT, names, ts, 2, keys, values));

  eng_safetensors_t st;
  T_OK(eng_safetensors_load(path, &st));
  cr_assert_eq(st.n, N_RT);
  for (int k = 0; k < N_RT; k++) {
    cr_assert_str_eq(st.names[k], names[k]);
    cr_assert(eng_tensor_is_contiguous(st.tensors[k]));
    cr_assert_eq(eng_tensor_device(st.tensors[k]).type, ENG_DEV_CPU);
    assert_same_values(st.tensors[k], ts[k], names[k]);
  }
  cr_assert_eq(st.n_meta, 2);
  for (int k = 0; k < 2; k++) {
    cr_assert_str_eq(st.meta_keys[k], keys[k]);
    cr_assert_str_eq(st.meta_values[k], values[k]);
  }
  eng_safetensors_free(&st);
  cr_assert_eq(st.n, 0);

  /* the bytes, read back by hand: padded header, offsets consecutive in the given order,
   * little-endian row-major data */
  long size;
  unsigned char *b = read_file(path, &size);
  uint64_t hl = 0;
  for (int i = 0; i < 8; i++) hl |= (uint64_t)b[i] << (8 * i);
  cr_assert_eq(hl % 8, 0, "header length %llu is not a multiple of 8", (unsigned long long)hl);
  json_error_t je;
  json_t *root = json_loadb((const char *)b + 8, hl, 0, &je);
  cr_assert_not_null(root, "header does not parse: %s", je.text);
  uint64_t close = hl - 1; /* after the JSON's closing brace only padding spaces follow */
  while (b[8 + close] == ' ') close--;
  cr_assert_eq(b[8 + close], '}');
  cr_assert_lt(hl - 1 - close, 8, "%llu padding bytes", (unsigned long long)(hl - 1 - close));
  json_t *meta = json_object_get(root, "__metadata__");
  cr_assert_str_eq(json_string_value(json_object_get(meta, "note")), values[1]);
  int64_t at = 0;
  for (int k = 0; k < N_RT; k++) {
    json_t *e = json_object_get(root, names[k]);
    cr_assert_not_null(e, "no entry for %s", names[k]);
    cr_assert_str_eq(json_string_value(json_object_get(e, "dtype")), dt_names[k]);
    json_t *shape = json_object_get(e, "shape"), *offs = json_object_get(e, "data_offsets");
    cr_assert_eq((int)json_array_size(shape), ts[k]->ndim);
    for (int d = 0; d < ts[k]->ndim; d++) cr_assert_eq(json_integer_value(json_array_get(shape, d)), ts[k]->shape[d]);
    int64_t begin = json_integer_value(json_array_get(offs, 0)), end = json_integer_value(json_array_get(offs, 1));
    cr_assert_eq(begin, at, "%s begins at %lld, want %lld", names[k], (long long)begin, (long long)at);
    cr_assert_eq(end - begin, (int64_t)eng_tensor_nbytes(ts[k]));
    at = end;
  }
  cr_assert_eq((long)(8 + hl + (uint64_t)at), size);
  /* f64 data and the transposed view's f32 data, as little-endian numbers */
  const unsigned char *data = b + 8 + hl;
  double *w = t_values(ts[0]);
  for (int i = 0; i < 12; i++) {
    uint64_t bits = 0, want;
    for (int j = 0; j < 8; j++) bits |= (uint64_t)data[i * 8 + j] << (8 * j);
    memcpy(&want, &w[i], 8);
    cr_assert_eq(bits, want, "w.f64[%d]", i);
  }
  double *tv = t_values(transposed);
  json_t *toffs = json_object_get(json_object_get(root, "t.view"), "data_offsets");
  const unsigned char *tdata = data + json_integer_value(json_array_get(toffs, 0));
  for (int i = 0; i < 15; i++) {
    uint32_t bits = 0, want;
    float f = (float)tv[i];
    for (int j = 0; j < 4; j++) bits |= (uint32_t)tdata[i * 4 + j] << (8 * j);
    memcpy(&want, &f, 4);
    cr_assert_eq(bits, want, "t.view[%d]", i);
  }
  free(w);
  free(tv);
  json_decref(root);
  free(b);
  for (int k = 0; k < N_RT; k++) eng_tensor_release(ts[k]);
  eng_tensor_release(base);
}

Test(checkpoint, empty_checkpoint) {
  const char *path = tmp_path("nothing.safetensors");
  T_OK(eng_safetensors_save(path, 0, NULL, NULL, 0, NULL, NULL));
  eng_safetensors_t st;
  T_OK(eng_safetensors_load(path, &st));
  cr_assert_eq(st.n, 0);
  cr_assert_eq(st.n_meta, 0);
  eng_safetensors_free(&st);
}

/* ---- atomic replacement ---- */

Test(checkpoint, save_into_missing_directory_fails) {
  int64_t s[1] = {3};
  eng_tensor_t *t = rand_any(s, 1, ENG_F32, 1);
  const char *name = "x";
  const char *path = tmp_path("no/such/dir/x.safetensors");
  T_FAILS(eng_safetensors_save(path, 1, &name, &t, 0, NULL, NULL), ENG_ERR_IO, "cannot create a temporary file in");
  cr_assert(strstr(eng_last_error(), path) != NULL, "message lacks the path: %s", eng_last_error());
  T_FAILS(eng_safetensors_save(tmp_root, 1, &name, &t, 0, NULL, NULL), ENG_ERR_IO, "rename");
  eng_tensor_release(t);
  cr_assert_eq(count_dir_entries(tmp_root), 0, "a temporary file was left behind");
}

Test(checkpoint, failed_save_leaves_old_file) {
  int64_t small[1] = {4}, big[1] = {1 << 16};
  eng_tensor_t *old = rand_any(small, 1, ENG_F32, 1), *huge = rand_any(big, 1, ENG_F32, 2);
  const char *name = "x", *path = tmp_path("m.safetensors");
  T_OK(eng_safetensors_save(path, 1, &name, &old, 0, NULL, NULL));
  struct stat sb;
  cr_assert_eq(stat(path, &sb), 0);
  cr_assert_eq(sb.st_mode & 0777, 0644, "new file mode %o", sb.st_mode & 0777);
  long before_size;
  unsigned char *before = read_file(path, &before_size);

  /* the write fails part way: files may not grow past 4 KB in this process */
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit saved, lim;
  cr_assert_eq(getrlimit(RLIMIT_FSIZE, &saved), 0);
  lim = saved;
  lim.rlim_cur = 4096;
  cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
  eng_status_t st = eng_safetensors_save(path, 1, &name, &huge, 0, NULL, NULL);
  setrlimit(RLIMIT_FSIZE, &saved);
  cr_assert_eq(st, ENG_ERR_IO, "expected an I/O error, got %d: %s", (int)st, eng_last_error());
  cr_assert(strstr(eng_last_error(), "save: ") && strstr(eng_last_error(), path), "message: %s", eng_last_error());

  /* and a save refused before writing (a duplicate name) */
  const char *dup[2] = {"x", "x"};
  eng_tensor_t *two[2] = {huge, huge};
  T_FAILS(eng_safetensors_save(path, 2, dup, two, 0, NULL, NULL), ENG_ERR_ARG, "duplicate tensor name 'x'");

  long after_size;
  unsigned char *after = read_file(path, &after_size);
  cr_assert(after_size == before_size && memcmp(before, after, (size_t)after_size) == 0, "the old file changed");
  cr_assert_eq(count_dir_entries(tmp_root), 1, "a temporary file was left behind");

  /* a replaced file keeps its permissions */
  chmod(path, 0600);
  T_OK(eng_safetensors_save(path, 1, &name, &old, 0, NULL, NULL));
  cr_assert_eq(stat(path, &sb), 0);
  cr_assert_eq(sb.st_mode & 0777, 0600);
  free(before);
  free(after);
  eng_tensor_release(old);
  eng_tensor_release(huge);
}

/* ---- save argument errors ---- */

Test(checkpoint, save_argument_errors) {
  int64_t s[1] = {2};
  eng_tensor_t *t = rand_any(s, 1, ENG_F32, 1), *ts[2] = {t, t}, *with_null[2] = {t, NULL};
  const char *path = tmp_path("bad.safetensors");
  const char *reserved[1] = {"__metadata__"}, *empty_name[2] = {"a", ""}, *ab[2] = {"a", "b"};
  T_FAILS(eng_safetensors_save(path, 1, reserved, ts, 0, NULL, NULL), ENG_ERR_ARG, "'__metadata__' is reserved");
  T_FAILS(eng_safetensors_save(path, 2, empty_name, ts, 0, NULL, NULL), ENG_ERR_ARG, "tensor 1 has no name");
  T_FAILS(eng_safetensors_save(path, 2, ab, with_null, 0, NULL, NULL), ENG_ERR_ARG, "tensor 'b' is missing");
  const char *keys[2] = {"k", "k"}, *vals[2] = {"1", "2"}, *null_val[1] = {NULL};
  T_FAILS(eng_safetensors_save(path, 1, ab, ts, 2, keys, vals), ENG_ERR_ARG, "duplicate metadata key 'k'");
  T_FAILS(eng_safetensors_save(path, 1, ab, ts, 1, keys, null_val), ENG_ERR_ARG, "metadata entry 0 is missing its key or value");
  const char *bad_utf8[1] = {"\xff\xfe"};
  T_FAILS(eng_safetensors_save(path, 1, bad_utf8, ts, 0, NULL, NULL), ENG_ERR_ARG, "is not valid UTF-8");
  T_FAILS(eng_safetensors_save(path, 1, ab, ts, 1, keys, (const char *const *)bad_utf8), ENG_ERR_ARG,
          "metadata value of 'k' is not valid UTF-8");
  T_FAILS(eng_safetensors_save(path, -1, ab, ts, 0, NULL, NULL), ENG_ERR_ARG, "bad tensor list (n = -1)");
  T_FAILS(eng_safetensors_save(path, 1, ab, ts, -2, NULL, NULL), ENG_ERR_ARG, "bad metadata list (n_meta = -2)");
  T_FAILS(eng_safetensors_save(NULL, 1, ab, ts, 0, NULL, NULL), ENG_ERR_ARG, "save: no path given");
  T_FAILS(eng_safetensors_save(tmp_path(""), 1, ab, ts, 0, NULL, NULL), ENG_ERR_ARG, "does not name a file");
  cr_assert_eq(count_dir_entries(tmp_root), 0);
  eng_tensor_release(t);
}

/* ---- malformed files ---- */

typedef struct {
  const char *header;
  size_t n_data;
  eng_status_t code;
  const char *needle;
} bad_file_t;

static const bad_file_t BAD_FILES[] = {
    {"{\"a\": {\"dtype\": \"F32\",", 0, ENG_ERR_FORMAT, "header is not valid JSON"},
    {"[1, 2]", 0, ENG_ERR_FORMAT, "header is not a JSON object"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"a\":{}}", 4, ENG_ERR_FORMAT, "duplicate object key"},
    {"{\"w\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2, ENG_ERR_FORMAT,
     "tensor 'w' has unknown dtype \"F8_E4M3\""},
    {"{\"w\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, ENG_ERR_FORMAT, "tensor 'w' has no dtype string"},
    {"{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, ENG_ERR_FORMAT, "tensor 'w' has no shape array"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,8]}}", 8, ENG_ERR_FORMAT,
     "tensor 'w': shape entry 0 is not a non-negative integer"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 8, ENG_ERR_FORMAT,
     "shape entry 0 is not a non-negative integer"},
    {"{\"w\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1, ENG_ERR_FORMAT,
     "tensor 'w' has 9 dims (at most 8 are supported)"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[100],\"data_offsets\":[0,400]}}", 16, ENG_ERR_FORMAT,
     "tensor 'w': data_offsets [0, 400] run past the data (16 bytes)"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]}}", 16, ENG_ERR_FORMAT,
     "tensor 'w': data_offsets [0, 12] hold 12 bytes but shape [2,2] of F32 needs 16"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 16, ENG_ERR_FORMAT,
     "tensor 'w': data_offsets [8, 4] run backwards"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 16, ENG_ERR_FORMAT,
     "tensor 'w' needs data_offsets [begin, end] of two non-negative integers"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 16, ENG_ERR_FORMAT, "needs data_offsets"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],\"data_offsets\":[0,0]}}", 0, ENG_ERR_FORMAT,
     "tensor 'w': shape [4611686018427387904,4] is too large"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
     24, ENG_ERR_FORMAT, "tensors 'a' and 'b' overlap in the data ([0, 16] and [8, 24])"},
    {"{\"w\": 3}", 0, ENG_ERR_FORMAT, "tensor 'w' is not a JSON object"},
    {"{\"__metadata__\": {\"k\": 1}}", 0, ENG_ERR_FORMAT, "metadata value of 'k' is not a string"},
    {"{\"__metadata__\": [\"k\"]}", 0, ENG_ERR_FORMAT, "__metadata__ is not a JSON object"},
};

Test(checkpoint, malformed_files) {
  const char *path = tmp_path("bad.safetensors");
  for (size_t i = 0; i < sizeof BAD_FILES / sizeof *BAD_FILES; i++) {
    const bad_file_t *c = &BAD_FILES[i];
    write_raw(path, strlen(c->header), c->header, c->n_data);
    eng_safetensors_t st;
    eng_status_t s = eng_safetensors_load(path, &st);
    cr_assert_eq(s, c->code, "case %zu (%s): status %d: %s", i, c->header, (int)s, eng_last_error());
    cr_assert(strstr(eng_last_error(), c->needle), "case %zu: message '%s' lacks '%s'", i, eng_last_error(), c->needle);
    cr_assert(strncmp(eng_last_error(), "load: ", 6) == 0 && strstr(eng_last_error(), path),
              "case %zu: message '%s' does not name the file", i, eng_last_error());
    cr_assert(st.n == 0 && st.tensors == NULL && st.n_meta == 0, "case %zu: a failed load left data", i);
  }
}

Test(checkpoint, truncated_and_oversized_headers) {
  const char *path = tmp_path("model.safetensors");
  eng_safetensors_t st;
  write_file(path, "\x10\0\0\0\0", 5);
  T_FAILS(eng_safetensors_load(path, &st), ENG_ERR_FORMAT, "file is truncated (5 bytes; the header length alone takes 8)");

  /* header length larger than the file */
  char want[512];
  write_raw(path, 1200, "{\"__metadata__\":{}}", 80 - 8 - 19);
  snprintf(want, sizeof want, "load: %s: file is truncated (header says 1200 bytes, file has 80)", path);
  T_FAILS(eng_safetensors_load(path, &st), ENG_ERR_FORMAT, want);

  /* a header at the 100 MB limit (a sparse file, so nothing big is written) */
  write_raw(path, 100000000, "{}", 0);
  cr_assert_eq(truncate(path, 100000000 + 8), 0);
  T_FAILS(eng_safetensors_load(path, &st), ENG_ERR_FORMAT, "header of 100000000 bytes is over the 100000000 byte limit");

  T_FAILS(eng_safetensors_load(tmp_path("missing.safetensors"), &st), ENG_ERR_IO, "cannot open: No such file");
  T_FAILS(eng_safetensors_load(tmp_root, &st), ENG_ERR_IO, "not a regular file");
  T_FAILS(eng_safetensors_load(NULL, &st), ENG_ERR_ARG, "load: no path given");

  /* a header padded with spaces and no data is fine */
  write_raw(path, 8, "{}      ", 0);
  T_OK(eng_safetensors_load(path, &st));
  cr_assert_eq(st.n, 0);
  eng_safetensors_free(&st);
}

/* ---- a file from an independent writer ---- */

static const eng_tensor_t *find(const eng_safetensors_t *st, const char *name) {
  for (int k = 0; k < st->n; k++)
    if (strcmp(st->names[k], name) == 0) return st->tensors[k];
  cr_assert_fail("no tensor named %s", name);
  return NULL;
}

/* Checks dtype, shape and every value (row-major position k) against a closed form. */
static void check_closed_form(const eng_safetensors_t *st, const char *name, eng_dtype_t dt,
                              const int64_t *shape, int nd, double (*f)(int64_t)) {
  const eng_tensor_t *t = find(st, name);
  char a[128];
  cr_assert_eq(t->dtype, dt, "%s: dtype %s", name, eng_dtype_name(t->dtype));
  cr_assert(t->ndim == nd && memcmp(t->shape, shape, sizeof(int64_t) * (size_t)nd) == 0, "%s: shape %s", name,
            ENG_SHAPE_STR(t, a));
  double *v = t_values(t);
  for (int64_t k = 0; k < eng_tensor_numel(t); k++)
    cr_assert_eq(v[k], f(k), "%s[%lld] = %g, want %g", name, (long long)k, v[k], f(k));
  free(v);
}

static double f_a(int64_t k) { return (double)k * 0.5; }
static double f_b(int64_t k) { return (double)k - 2; }
static double f_c(int64_t k) { return (double)k / 4 - 1; }
static double f_d(int64_t k) { return ((double)k - 3) * 0.125; }
static double f_e(int64_t k) { return (double)((7 * k) % 256); }
static double f_f(int64_t k) { return 1.0 / ((double)k + 1); }
static double f_g(int64_t k) { return (double)(k * k - 10); }
static double f_h(int64_t k) { return (void)k, 3.25; }

Test(checkpoint, loads_official_writer_file) {
  eng_safetensors_t st;
  T_OK(eng_safetensors_load(ENGINE_SOURCE_DIR "/tests/data/independent.safetensors", &st));
  cr_assert_eq(st.n, 9);
  int64_t s34[2] = {3, 4}, s5[1] = {5}, s24[2] = {2, 4}, s32[2] = {3, 2}, s10[1] = {10}, s22[2] = {2, 2},
          s23[2] = {2, 3}, s03[2] = {0, 3};
  check_closed_form(&st, "a_f32", ENG_F32, s34, 2, f_a);
  check_closed_form(&st, "b_i64", ENG_I64, s5, 1, f_b);
  check_closed_form(&st, "c_bf16", ENG_BF16, s24, 2, f_c);
  check_closed_form(&st, "d_f16", ENG_F16, s32, 2, f_d);
  check_closed_form(&st, "e_u8", ENG_U8, s10, 1, f_e);
  check_closed_form(&st, "f_f64", ENG_F64, s22, 2, f_f);
  check_closed_form(&st, "g_i32", ENG_I32, s23, 2, f_g);
  check_closed_form(&st, "h_scalar", ENG_F32, s5, 0, f_h);
  check_closed_form(&st, "i_empty", ENG_F32, s03, 2, f_h);
  cr_assert_eq(st.n_meta, 2);
  for (int k = 0; k < 2; k++) {
    if (strcmp(st.meta_keys[k], "format") == 0) cr_assert_str_eq(st.meta_values[k], "pt");
    else cr_assert(strcmp(st.meta_keys[k], "source") == 0 && strcmp(st.meta_values[k], "make_safetensors_fixture.py") == 0,
                   "metadata %s = %s", st.meta_keys[k], st.meta_values[k]);
  }
  eng_safetensors_free(&st);
}
