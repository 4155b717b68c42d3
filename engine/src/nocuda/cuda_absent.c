/* eng_cuda.h in a build without CUDA: every call says so, nothing pretends to work. */
#include "eng_cuda.h"

#define ABSENT() eng_error(ENG_ERR_DEVICE, "cuda: this engine was built without CUDA")

eng_status_t eng_cuda_properties(int device, eng_cuda_props_t *out) {
  (void)device, (void)out;
  return ABSENT();
}
eng_status_t eng_cuda_check_device(int device) {
  (void)device;
  return ABSENT();
}
eng_stream_t eng_cuda_current_stream(int device) {
  (void)device;
  return NULL;
}
eng_status_t eng_cuda_set_current_stream(int device, eng_stream_t s) {
  (void)device, (void)s;
  return ABSENT();
}
eng_status_t eng_cuda_stream_new(int device, eng_stream_t *out) {
  (void)device, (void)out;
  return ABSENT();
}
void eng_cuda_stream_free(eng_stream_t s) { (void)s; }
eng_status_t eng_cuda_stream_synchronize(eng_stream_t s) {
  (void)s;
  return ABSENT();
}
eng_status_t eng_cuda_synchronize(int device) {
  (void)device;
  return ABSENT();
}
eng_status_t eng_cuda_event_new(int device, eng_event_t *out) {
  (void)device, (void)out;
  return ABSENT();
}
void eng_cuda_event_free(eng_event_t e) { (void)e; }
eng_status_t eng_cuda_event_record(eng_event_t e, eng_stream_t s) {
  (void)e, (void)s;
  return ABSENT();
}
eng_status_t eng_cuda_event_synchronize(eng_event_t e) {
  (void)e;
  return ABSENT();
}
eng_status_t eng_cuda_event_elapsed(eng_event_t start, eng_event_t end, float *ms) {
  (void)start, (void)end, (void)ms;
  return ABSENT();
}
eng_status_t eng_cuda_malloc(int device, size_t nbytes, eng_stream_t stream, void **out) {
  (void)device, (void)nbytes, (void)stream, (void)out;
  return ABSENT();
}
void eng_cuda_free(int device, void *ptr) { (void)device, (void)ptr; }
eng_status_t eng_cuda_empty_cache(int device) {
  (void)device;
  return ABSENT();
}
eng_status_t eng_cuda_memory_stats(int device, eng_cuda_mem_stats_t *out) {
  (void)device, (void)out;
  return ABSENT();
}
void eng_cuda_reset_peak(int device) { (void)device; }
void eng_cuda_set_oom_hook(void (*fn)(void *user), void *user) { (void)fn, (void)user; }
size_t eng_cuda_bytes_live(void) { return 0; }
eng_status_t eng_cuda_copy_h2d(int device, void *dst, const void *src, size_t nbytes, eng_stream_t s) {
  (void)device, (void)dst, (void)src, (void)nbytes, (void)s;
  return ABSENT();
}
eng_status_t eng_cuda_copy_d2h(int device, void *dst, const void *src, size_t nbytes, eng_stream_t s) {
  (void)device, (void)dst, (void)src, (void)nbytes, (void)s;
  return ABSENT();
}
eng_status_t eng_cuda_graph_begin(int device, eng_cuda_graph_t **out) {
  (void)device, (void)out;
  return ABSENT();
}
eng_status_t eng_cuda_graph_end(eng_cuda_graph_t **g) {
  (void)g;
  return ABSENT();
}
eng_status_t eng_cuda_graph_replay(eng_cuda_graph_t *g) {
  (void)g;
  return ABSENT();
}
void eng_cuda_graph_free(eng_cuda_graph_t *g) { (void)g; }
int eng_cuda_is_capturing(int device) {
  (void)device;
  return 0;
}
void eng_cuda_nvtx_enable(int on) { (void)on; }
