/* Runs every Lua spec (the .lua files of tests/lua) through the embedding API, one Criterion test
 * per file, each in a fresh engine. A failure names the spec file, the failed cases and their
 * lines. */
#include "support.h" /* criterion.h must come before parameterized.h */

#include <criterion/parameterized.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPEC_DIR ENGINE_SOURCE_DIR "/tests/lua"

typedef struct {
  char name[128];
} spec_file_t;

static int by_name(const void *a, const void *b) {
  return strcmp(((const spec_file_t *)a)->name, ((const spec_file_t *)b)->name);
}

static int is_spec(const char *name) {
  size_t n = strlen(name);
  return n > 4 && n < sizeof(((spec_file_t *)0)->name) && strcmp(name + n - 4, ".lua") == 0;
}

/* The spec file names, sorted; *n set. The parameter generator allocates with cr_malloc (the
 * runner shares that memory with the test processes), a test with malloc. */
static spec_file_t *list_specs(size_t *n, void *(*alloc)(size_t)) {
  *n = 0;
  DIR *d = opendir(SPEC_DIR);
  if (!d) return NULL;
  struct dirent *ent;
  while ((ent = readdir(d))) *n += is_spec(ent->d_name);
  spec_file_t *specs = alloc(sizeof *specs * (*n ? *n : 1));
  size_t k = 0;
  rewinddir(d);
  while ((ent = readdir(d)) && k < *n)
    if (is_spec(ent->d_name)) memcpy(specs[k++].name, ent->d_name, strlen(ent->d_name) + 1);
  closedir(d);
  *n = k;
  qsort(specs, *n, sizeof *specs, by_name);
  return specs;
}

static void free_specs(struct criterion_test_params *p) { cr_free(p->params); }

ParameterizedTestParameters(lua, spec) {
  size_t n;
  spec_file_t *specs = list_specs(&n, cr_malloc);
  return cr_make_param_array(spec_file_t, specs, n, free_specs);
}

ParameterizedTest(spec_file_t *spec, lua, spec) {
  eng_engine_t *e = eng_engine_new();
  cr_assert(e != NULL, "eng_engine_new: %s", eng_last_error());
  int rc =
      eng_engine_run_string(e, "package.path = '" SPEC_DIR "/lib/?.lua;' .. package.path", "setup");
  cr_assert(rc == 0, "setup: %s", eng_engine_last_error(e));
  char path[512];
  snprintf(path, sizeof path, "%s/%s", SPEC_DIR, spec->name);
  rc = eng_engine_run_file(e, path, 0, NULL);
  cr_assert(rc == 0, "spec %s stopped with an error:\n%s", spec->name, eng_engine_last_error(e));
  rc = eng_engine_run_string(e, "require('spec').finish()", spec->name);
  cr_assert(rc == 0, "spec %s: %s", spec->name, eng_engine_last_error(e));
  eng_engine_free(e);
}

/* The specs this suite is meant to have are there (a missing file would pass silently). */
Test(lua, all_specs_present) {
  static const char *const expected[] = {
      "creation.lua", "methods.lua", "views.lua",  "arith.lua",  "reductions.lua", "nn.lua",
      "tostring.lua", "io.lua",      "help.lua",   "autograd.lua", "inplace.lua", "nn_modules.lua",
      "models.lua",   "optim.lua",   "data.lua",   "train.lua",  "mixers.lua",  "profile.lua",
      "plot.lua",     "e88.lua",     "e1e23.lua",  "backward_kernels.lua"};
  size_t n;
  spec_file_t *specs = list_specs(&n, malloc);
  for (size_t i = 0; i < sizeof expected / sizeof *expected; i++) {
    int found = 0;
    for (size_t k = 0; k < n; k++) found |= strcmp(specs[k].name, expected[i]) == 0;
    cr_expect(found, "tests/lua/%s is missing", expected[i]);
  }
  free(specs);
}
