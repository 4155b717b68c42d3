/* Per-thread error messages: core functions record what went wrong and return a status. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "eng_base.h"

#define ENG_ERROR_CAP 1024

static _Thread_local char last_msg[ENG_ERROR_CAP];

eng_status_t eng_error(eng_status_t code, const char *fmt, ...) {
  /* Format into a scratch buffer first: the arguments may point into last_msg itself. */
  char tmp[ENG_ERROR_CAP];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  memcpy(last_msg, tmp, sizeof tmp);
  return code;
}

void eng_error_prefix(const char *prefix) {
  size_t p = strnlen(prefix, ENG_ERROR_CAP - 3), m = strlen(last_msg);
  if (p + 2 + m > ENG_ERROR_CAP - 1) m = ENG_ERROR_CAP - 1 - p - 2; /* keep the start of the message */
  memmove(last_msg + p + 2, last_msg, m);
  memcpy(last_msg, prefix, p);
  last_msg[p] = ':';
  last_msg[p + 1] = ' ';
  last_msg[p + 2 + m] = 0;
}

const char *eng_last_error(void) { return last_msg; }

void eng_clear_error(void) { last_msg[0] = 0; }

const char *eng_status_name(eng_status_t s) {
  switch (s) {
  case ENG_OK: return "ENG_OK";
  case ENG_ERR_ARG: return "ENG_ERR_ARG";
  case ENG_ERR_SHAPE: return "ENG_ERR_SHAPE";
  case ENG_ERR_DTYPE: return "ENG_ERR_DTYPE";
  case ENG_ERR_DEVICE: return "ENG_ERR_DEVICE";
  case ENG_ERR_INDEX: return "ENG_ERR_INDEX";
  case ENG_ERR_LAYOUT: return "ENG_ERR_LAYOUT";
  case ENG_ERR_OOM: return "ENG_ERR_OOM";
  case ENG_ERR_IO: return "ENG_ERR_IO";
  case ENG_ERR_FORMAT: return "ENG_ERR_FORMAT";
  case ENG_ERR_UNSUPPORTED: return "ENG_ERR_UNSUPPORTED";
  case ENG_ERR_INTERNAL: return "ENG_ERR_INTERNAL";
  }
  return "ENG_ERR_UNKNOWN";
}
