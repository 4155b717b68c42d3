/* The training stack on the GPU: runs the Lua spec tests/lua/cuda/train.lua (nn, models, optim,
 * data and train on CUDA against the CPU) through the embedding API. Skips without a GPU. */
#include "support.h"

#define SPEC_DIR ENGINE_SOURCE_DIR "/tests/lua"

Test(cuda_train, lua_spec) {
  if (eng_cuda_device_count() == 0) cr_skip_test("no CUDA GPU");
  eng_engine_t *e = eng_engine_new();
  cr_assert(e != NULL, "eng_engine_new: %s", eng_last_error());
  int rc =
      eng_engine_run_string(e, "package.path = '" SPEC_DIR "/lib/?.lua;' .. package.path", "setup");
  cr_assert(rc == 0, "setup: %s", eng_engine_last_error(e));
  rc = eng_engine_run_file(e, SPEC_DIR "/cuda/train.lua", 0, NULL);
  cr_assert(rc == 0, "cuda/train.lua stopped with an error:\n%s", eng_engine_last_error(e));
  rc = eng_engine_run_string(e, "require('spec').finish()", "cuda/train.lua");
  cr_assert(rc == 0, "cuda/train.lua: %s", eng_engine_last_error(e));
  eng_engine_free(e);
}
