/* The dtype names of the safetensors format ("F32", "BF16", ...), shared by save and load. */
#ifndef ENG_SAFETENSORS_DTYPE_H
#define ENG_SAFETENSORS_DTYPE_H

#include "eng_base.h"

/* The file format stores little-endian data, which is what this engine keeps in memory. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors I/O assumes a little-endian host");

/* Headers of this many bytes or more are refused on load (the reference implementation's limit). */
#define ENG_SAFETENSORS_MAX_HEADER (100u * 1000u * 1000u)

const char *eng_safetensors_dtype_name(eng_dtype_t dt);
/* 1 and *out set when name is one of ours, else 0. */
int eng_safetensors_dtype_parse(const char *name, eng_dtype_t *out);

#endif
