/* safetensors dtype names <-> engine dtypes. */
#include "io/safetensors_dtype.h"

#include <string.h>

static const char *const names[ENG_DTYPE_COUNT] = {
    [ENG_F64] = "F64", [ENG_F32] = "F32", [ENG_F16] = "F16", [ENG_BF16] = "BF16",
    [ENG_I32] = "I32", [ENG_I64] = "I64", [ENG_U8] = "U8",
};

const char *eng_safetensors_dtype_name(eng_dtype_t dt) {
  return (int)dt >= 0 && dt < ENG_DTYPE_COUNT ? names[dt] : "?";
}

int eng_safetensors_dtype_parse(const char *name, eng_dtype_t *out) {
  for (int i = 0; i < ENG_DTYPE_COUNT; i++) {
    if (strcmp(name, names[i]) == 0) {
      *out = (eng_dtype_t)i;
      return 1;
    }
  }
  return 0;
}
