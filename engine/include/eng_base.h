/* Basic vocabulary of the engine core: status codes, error messages, dtypes, devices.
 * Lua-free; every other header builds on this one. */
#ifndef ENG_BASE_H
#define ENG_BASE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ENG_VERSION "0.1.0"
#define ENG_MAX_DIMS 8

/* Core functions return a status; the message describing the failure (op name, shapes, dtypes,
 * device) is kept per thread and read with eng_last_error(). */
typedef enum {
  ENG_OK = 0,
  ENG_ERR_ARG,         /* bad argument value (negative size, bad option, ...) */
  ENG_ERR_SHAPE,       /* shapes do not fit the op */
  ENG_ERR_DTYPE,       /* dtype not supported or mismatched */
  ENG_ERR_DEVICE,      /* unknown/unavailable device, or inputs on different devices */
  ENG_ERR_INDEX,       /* index or dim out of range */
  ENG_ERR_LAYOUT,      /* non-contiguous where contiguous is required, or a view that cannot be made */
  ENG_ERR_OOM,         /* allocation failed */
  ENG_ERR_IO,          /* file system error */
  ENG_ERR_FORMAT,      /* malformed file contents */
  ENG_ERR_UNSUPPORTED, /* not implemented for this backend/dtype */
  ENG_ERR_INTERNAL
} eng_status_t;

/* Records a formatted message for the current thread and returns `code` (so `return eng_error(...)`). */
eng_status_t eng_error(eng_status_t code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prepends "prefix: " to the current message (used to add context such as the op name). */
void eng_error_prefix(const char *prefix);
const char *eng_last_error(void);
void eng_clear_error(void);
const char *eng_status_name(eng_status_t s);

typedef enum {
  ENG_F64 = 0,
  ENG_F32,
  ENG_F16,
  ENG_BF16,
  ENG_I32,
  ENG_I64,
  ENG_U8,
  ENG_DTYPE_COUNT
} eng_dtype_t;

size_t eng_dtype_size(eng_dtype_t dt);
const char *eng_dtype_name(eng_dtype_t dt); /* "f32", ... */
/* Parses "f32", "float32", "float", "bf16", "bfloat16", "half", "int64", "long", "uint8", ...
 * Returns ENG_ERR_DTYPE with a message naming the bad string. */
eng_status_t eng_dtype_parse(const char *name, eng_dtype_t *out);
int eng_dtype_is_float(eng_dtype_t dt);
/* The dtype both operands are converted to for a binary op (PyTorch-like promotion:
 * any float beats ints; f64 > f32 > {f16, bf16}; f16 with bf16 gives f32; i64 > i32 > u8). */
eng_dtype_t eng_dtype_promote(eng_dtype_t a, eng_dtype_t b);

/* Scalar conversions; bf16/f16 round to nearest even, NaN and Inf are kept. */
uint16_t eng_f32_to_bf16(float x);
float eng_bf16_to_f32(uint16_t h);
uint16_t eng_f32_to_f16(float x);
float eng_f16_to_f32(uint16_t h);
uint16_t eng_f64_to_bf16(double x); /* rounds once, directly from double */
uint16_t eng_f64_to_f16(double x);
/* Load element i of a buffer of dtype dt as double / store a double into it (rounding as above;
 * integer stores truncate toward zero and saturate at the type's range). Slow path helpers. */
double eng_load_f64(const void *p, eng_dtype_t dt, int64_t i);
void eng_store_f64(void *p, eng_dtype_t dt, int64_t i, double v);

typedef enum { ENG_DEV_CPU = 0, ENG_DEV_CUDA = 1 } eng_device_type_t;
typedef struct {
  int type;  /* eng_device_type_t */
  int index; /* 0 for cpu */
} eng_device_t;

#define ENG_CPU_DEVICE ((eng_device_t){ENG_DEV_CPU, 0})
/* "cpu", "cuda", "cuda:1". "cuda" on a machine without a GPU is ENG_ERR_DEVICE with a clear message. */
eng_status_t eng_device_parse(const char *name, eng_device_t *out);
/* Writes "cpu" or "cuda:N" into buf. */
const char *eng_device_name(eng_device_t d, char *buf, size_t n);
int eng_device_equal(eng_device_t a, eng_device_t b);
/* The default device: cuda:0 when a GPU is present, else cpu. */
eng_device_t eng_device_default(void);
int eng_cuda_device_count(void); /* 0 when built without CUDA or no GPU */

/* Logging: the host installs a callback; the core reports warnings through it. */
typedef enum { ENG_LOG_DEBUG, ENG_LOG_INFO, ENG_LOG_WARN, ENG_LOG_ERROR } eng_log_level_t;
typedef void (*eng_log_fn)(void *user, int level, const char *msg);

#ifdef __cplusplus
}
#endif
#endif
