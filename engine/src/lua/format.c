/* __tostring of tensors: a header "tensor(f32, [2,3], cpu)" and the values, with only a few edge
 * values per dim ("..." in between) so that printing any tensor gives at most a few KB. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lua/lua_internal.h"

#define MAX_SHOWN 300 /* values shown at most: edge items per dim shrink until this holds */
#define TEXT_CAP 4096 /* hard cap on the text, whatever the shape */

typedef struct {
  const eng_tensor_t *t;
  int edge; /* values shown at each end of a dim that is elided */
  double vals[MAX_SHOWN];
  int nvals, next; /* collected values; the next one to print */
  int64_t idx[ENG_MAX_DIMS];
  char fmt[16]; /* printf format of one value */
  int width;
  int integral_float; /* floats that are all whole: printed "3." */
  char text[TEXT_CAP];
  size_t len;
  int truncated;
  eng_status_t st;
} fmt_t;

/* Appends s unless the text is full; the last 8 bytes stay free for the " ..." of a cut text. */
static void put(fmt_t *f, const char *s) {
  size_t n = strlen(s);
  if (f->truncated || f->len + n >= TEXT_CAP - 8) {
    f->truncated = 1;
    return;
  }
  memcpy(f->text + f->len, s, n + 1);
  f->len += n;
}

static int64_t shown(const fmt_t *f, int64_t size) {
  return size > 2 * f->edge ? 2 * f->edge : size;
}

/* The k-th shown position of a dim of `size` (edge items at each end when elided). */
static int64_t position(const fmt_t *f, int64_t size, int64_t k) {
  return size > 2 * f->edge && k >= f->edge ? size - 2 * f->edge + k : k;
}

static void format_value(const fmt_t *f, double v, char *buf, size_t n) {
  if (isnan(v))
    snprintf(buf, n, "nan");
  else if (isinf(v))
    snprintf(buf, n, v > 0 ? "inf" : "-inf");
  else if (f->integral_float)
    snprintf(buf, n, "%.0f.", v);
  else
    snprintf(buf, n, f->fmt, v);
}

/* Walks the shown elements in row-major order: collecting values (print = 0) or printing. */
static void walk(fmt_t *f, int d, int print) {
  const eng_tensor_t *t = f->t;
  int64_t size = t->shape[d], count = shown(f, size);
  if (print) put(f, "[");
  for (int64_t k = 0; k < count; k++) {
    if (print && k > 0) {
      if (d == t->ndim - 1) {
        put(f, ", ");
      } else {
        put(f, ",\n");
        for (int i = d + 2; i < t->ndim; i++) put(f, "\n");
        for (int i = 0; i <= d; i++) put(f, " ");
      }
    }
    if (print && size > 2 * f->edge && k == f->edge) {
      put(f, d == t->ndim - 1 ? "..., " : "...,\n");
      if (d < t->ndim - 1)
        for (int i = 0; i <= d; i++) put(f, " ");
    }
    f->idx[d] = position(f, size, k);
    if (d < t->ndim - 1) {
      walk(f, d + 1, print);
    } else if (print) {
      char buf[64], pad[80];
      format_value(f, f->vals[f->next++], buf, sizeof buf);
      snprintf(pad, sizeof pad, "%*s", f->width, buf);
      put(f, pad);
    } else if (f->st == ENG_OK) {
      f->st = eng_tensor_get(t, f->idx, &f->vals[f->nvals]);
      f->nvals++;
    }
  }
  if (print) put(f, "]");
}

/* Picks the number format from the values shown. */
static void choose_format(fmt_t *f) {
  int is_float = eng_dtype_is_float(f->t->dtype);
  double max_abs = 0, min_abs = INFINITY;
  int whole = 1;
  for (int i = 0; i < f->nvals; i++) {
    double v = f->vals[i];
    if (!isfinite(v)) continue;
    double a = fabs(v);
    if (a > max_abs) max_abs = a;
    if (a > 0 && a < min_abs) min_abs = a;
    if (v != floor(v)) whole = 0;
  }
  if (!is_float)
    snprintf(f->fmt, sizeof f->fmt, "%%.0f");
  else if (whole && max_abs < 1e8)
    f->integral_float = 1;
  else if (max_abs >= 1e5 || min_abs < 1e-4)
    snprintf(f->fmt, sizeof f->fmt, "%%.4e");
  else
    snprintf(f->fmt, sizeof f->fmt, "%%.4f");
  for (int i = 0; i < f->nvals; i++) {
    char buf[64];
    format_value(f, f->vals[i], buf, sizeof buf);
    int w = (int)strlen(buf);
    if (w > f->width) f->width = w;
  }
}

int lt_tensor_tostring(lua_State *L) {
  const eng_tensor_t *t = eng_lua_to_tensor(L, 1);
  if (!t) {
    lua_pushstring(L, luaL_testudata(L, 1, LT_TENSOR_MT) ? "tensor(freed)" : "not a tensor");
    return 1;
  }
  fmt_t f;
  memset(&f, 0, sizeof f);
  f.t = t;
  char shape[160], dev[32];
  snprintf(f.text, TEXT_CAP, "tensor(%s, %s, %s)", eng_dtype_name(t->dtype),
           ENG_SHAPE_STR(t, shape), eng_device_name(eng_tensor_device(t), dev, sizeof dev));
  f.len = strlen(f.text);
  put(&f, "\n");
  if (t->ndim == 0) {
    f.st = eng_tensor_get(t, f.idx, &f.vals[0]);
    f.nvals = 1;
  } else if (eng_tensor_numel(t) == 0) {
    put(&f, "[]");
  } else {
    for (f.edge = 3; f.edge > 1; f.edge--) {
      int64_t n = 1;
      for (int d = 0; d < t->ndim; d++) n *= shown(&f, t->shape[d]);
      if (n <= MAX_SHOWN) break;
    }
    walk(&f, 0, 0);
  }
  if (f.st != ENG_OK) {
    put(&f, "<values unavailable: ");
    put(&f, eng_last_error());
    put(&f, ">");
  } else if (f.nvals > 0) {
    choose_format(&f);
    if (t->ndim == 0) {
      char buf[64];
      format_value(&f, f.vals[0], buf, sizeof buf);
      put(&f, buf);
    } else {
      walk(&f, 0, 1);
    }
  }
  if (f.truncated) {
    memcpy(f.text + f.len, " ...", 5);
    f.len += 4;
  }
  lua_pushlstring(L, f.text, f.len);
  return 1;
}
