/* CUDA graphs: capture the launches of a piece of code once, replay them with one launch.
 *
 * Capture runs on a stream made for it, made current on the device for the capturing thread, so
 * every op issued in between is recorded rather than run. It uses cudaStreamCaptureModeRelaxed:
 * the allocator may need a new segment during capture, and in the global and thread-local modes
 * cudaMalloc is one of the "unsafe" calls that fail and invalidate the capture. The allocator routes
 * the thread's allocations on the device to the graph's private pool meanwhile (allocator.c), so the
 * addresses baked into the graph are never handed to other code while the graph lives.
 *
 * Replay launches the graph on the device's current stream at the time of the replay, so it is
 * ordered after the eager work that produced its inputs and before the work that reads its
 * outputs. Replays of one graph must not overlap (they write the same memory). */
#include <stdlib.h>

#include "cuda/cuda_internal.h"

struct eng_cuda_graph {
  int device;
  int capturing;
  cudaStream_t stream;    /* the capture stream; destroyed when capture ends */
  cudaStream_t prev;      /* the thread's current stream before capture */
  eng_cuda_pool_t *pool;  /* the private pool */
  cudaGraphExec_t exec;   /* NULL for a graph that captured nothing */
};

int eng_cuda_is_capturing(int device) { return eng_cuda_capture_pool(device) != NULL; }

/* Undoes what begin set up: routing, the current stream, the capture stream. */
static void stop_capture(eng_cuda_graph_t *g) {
  eng_cuda_capture_end(g->device);
  eng_cuda_set_current_stream(g->device, g->prev);
  cudaStreamDestroy(g->stream);
  cudaGetLastError();
  g->stream = NULL;
  g->capturing = 0;
}

eng_status_t eng_cuda_graph_begin(int device, eng_cuda_graph_t **out) {
  *out = NULL;
  eng_status_t st = eng_cuda_select(device);
  if (st) return st;
  if (eng_cuda_is_capturing(device))
    return eng_error(ENG_ERR_DEVICE, "cuda: a graph is already being captured on cuda:%d", device);
  eng_cuda_graph_t *g = calloc(1, sizeof *g);
  if (!g || !(g->pool = eng_cuda_pool_new(device))) {
    free(g);
    return eng_error(ENG_ERR_OOM, "cuda: graph: out of host memory");
  }
  g->device = device;
  st = eng_cuda_stream_of(device, &g->prev);
  cudaError_t err = st ? cudaSuccess : cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking);
  if (err) st = eng_cuda_error(err, "cudaStreamCreateWithFlags");
  if (!st) st = eng_cuda_set_current_stream(device, g->stream);
  if (!st) {
    eng_cuda_capture_begin(device, g->pool);
    err = cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeRelaxed);
    if (!err) {
      g->capturing = 1;
      *out = g;
      return ENG_OK;
    }
    st = eng_cuda_error(err, "cudaStreamBeginCapture");
    eng_cuda_capture_end(device);
    eng_cuda_set_current_stream(device, g->prev);
  }
  if (g->stream) cudaStreamDestroy(g->stream);
  eng_cuda_pool_release(g->pool);
  free(g);
  return st;
}

eng_status_t eng_cuda_graph_end(eng_cuda_graph_t **gp) {
  eng_cuda_graph_t *g = gp ? *gp : NULL;
  if (!g) return eng_error(ENG_ERR_ARG, "cuda: graph_end: no graph given");
  eng_status_t st = ENG_OK;
  if (!g->capturing) {
    st = eng_error(ENG_ERR_ARG, "cuda: graph_end: the graph is not being captured");
  } else {
    cudaGraph_t graph = NULL;
    cudaError_t err = cudaStreamEndCapture(g->stream, &graph);
    stop_capture(g);
    if (err) {
      st = eng_cuda_error(err, "graph capture (a host copy, a synchronize or work on another "
                               "stream inside the captured code?): cudaStreamEndCapture");
    } else {
      size_t n_nodes = 0;
      err = cudaGraphGetNodes(graph, NULL, &n_nodes);
      if (!err && n_nodes > 0) err = cudaGraphInstantiate(&g->exec, graph, 0);
      if (err) {
        g->exec = NULL;
        st = eng_cuda_error(err, "cudaGraphInstantiate");
      }
    }
    if (graph) cudaGraphDestroy(graph); /* the executable graph does not need it */
  }
  if (st) {
    eng_cuda_graph_free(g);
    *gp = NULL;
  }
  return st;
}

eng_status_t eng_cuda_graph_replay(eng_cuda_graph_t *g) {
  if (!g) return eng_error(ENG_ERR_ARG, "cuda: graph_replay: no graph given");
  if (g->capturing)
    return eng_error(ENG_ERR_ARG, "cuda: graph_replay: the graph is still being captured");
  eng_status_t st = eng_cuda_select(g->device);
  if (st || !g->exec) return st;
  cudaStream_t s;
  if ((st = eng_cuda_stream_of(g->device, &s))) return st;
  cudaError_t err = cudaGraphLaunch(g->exec, s);
  return err ? eng_cuda_error(err, "cudaGraphLaunch") : ENG_OK;
}

void eng_cuda_graph_free(eng_cuda_graph_t *g) {
  if (!g) return;
  if (g->capturing) {
    cudaGraph_t graph = NULL;
    if (cudaStreamEndCapture(g->stream, &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    stop_capture(g);
  }
  /* An executable graph still running is freed when it completes (CUDA's rule). */
  if (g->exec) cudaGraphExecDestroy(g->exec);
  eng_cuda_pool_release(g->pool);
  free(g);
}
