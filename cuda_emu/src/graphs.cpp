// Stream capture and CUDA graphs on the emulated GPU. While a stream captures, what is queued on it
// (launches, copies, memsets, host functions, graph launches) becomes a node of a graph instead of
// running, each node depending on what the stream had queued before it; an event recorded in a
// capturing stream and waited for by another stream forks that stream into the capture, and a
// wait the other way joins it back. Replaying an instantiated graph queues one operation that runs
// the nodes in capture order, which is an order that their dependencies allow. The rules a GPU
// enforces during capture are checked here (docs/emulator_graphs.md lists them).

#include <algorithm>
#include <cstdio>
#include <set>
#include <thread>

#include "runtime.h"

struct CUgraphNode_st {
  std::size_t index = 0;
  std::string label;              // "kernel 'name'", "memcpy", ...
  std::function<void()> run;      // runnable again at every replay
  std::vector<std::size_t> deps;  // indices of earlier nodes
};

struct CUgraph_st {
  int device = 0;
  std::vector<std::unique_ptr<CUgraphNode_st>> nodes;
};

struct CUgraphExec_st {
  int device = 0;
  std::shared_ptr<const std::vector<std::function<void()>>> steps;
  // The previous launch: launches of one executable graph run one after the other, as in CUDA.
  std::shared_ptr<CUstream_st> last_stream;
  uint64_t last_target = 0;
};

namespace mtemu::detail {

struct Capture {
  uint64_t id = 0;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::thread::id thread;
  int device = 0;
  std::shared_ptr<CUstream_st> origin;
  std::unique_ptr<CUgraph_st> graph;
  std::vector<std::shared_ptr<CUstream_st>> streams;  // the origin, then every stream forked in
  cudaError_t invalidated = cudaSuccess;              // what broke it, first error only
  std::string why;
  bool ended = false;
};

std::atomic<int> active_captures{0};

namespace {

std::mutex capture_mutex;  // guards every Capture, the streams' and events' capture fields
// Never destroyed, as the stream registry: runtime calls may come from static destructors.
std::vector<std::shared_ptr<Capture>>& captures_ref() {  // in progress
  static auto* c = new std::vector<std::shared_ptr<Capture>>();
  return *c;
}
std::set<CUgraph_st*>& live_graphs_ref() {
  static auto* g = new std::set<CUgraph_st*>();
  return *g;
}
std::set<CUgraphExec_st*>& live_execs_ref() {
  static auto* e = new std::set<CUgraphExec_st*>();
  return *e;
}
#define captures captures_ref()
#define live_graphs live_graphs_ref()
#define live_execs live_execs_ref()
uint64_t next_capture_id = 1;
thread_local cudaStreamCaptureMode tl_mode = cudaStreamCaptureModeGlobal;

const char* mode_name(cudaStreamCaptureMode m) {
  switch (m) {
    case cudaStreamCaptureModeGlobal:
      return "cudaStreamCaptureModeGlobal";
    case cudaStreamCaptureModeThreadLocal:
      return "cudaStreamCaptureModeThreadLocal";
    case cudaStreamCaptureModeRelaxed:
      return "cudaStreamCaptureModeRelaxed";
  }
  return "an unknown mode";
}

std::string describe(const Capture& c) {
  return "capture " + std::to_string(c.id) + " (" + mode_name(c.mode) +
         ", cuda:" + std::to_string(c.device) + ")";
}

void invalidate(Capture& c, cudaError_t code, const std::string& why) {
  if (c.invalidated != cudaSuccess) return;
  c.invalidated = code;
  c.why = why;
}

// A blocking stream of `device` in a capture: the legacy stream would depend on its captured work.
Capture* blocking_capture_on(int device) {
  for (const auto& c : captures)
    for (const auto& s : c->streams)
      if (s->device == device && (s->flags & cudaStreamNonBlocking) == 0) return c.get();
  return nullptr;
}

cudaError_t implicit_dependency(Capture& c, const char* call) {
  const std::string why = std::string(call) +
                          " on the legacy default stream while a blocking stream of the device "
                          "captures (" +
                          describe(c) +
                          "): create the capturing stream with cudaStreamNonBlocking, or queue "
                          "the work on another stream";
  invalidate(c, cudaErrorStreamCaptureImplicit, why);
  return fail(cudaErrorStreamCaptureImplicit, why);
}

cudaError_t invalidated_error(const Capture& c, const char* call) {
  return fail(cudaErrorStreamCaptureInvalidated,
              std::string(call) + " on a stream of " + describe(c) +
                  ", which an earlier error invalidated: " + c.why);
}

std::size_t add_node(Capture& c, CUstream_st& s, std::string label, std::function<void()> run) {
  auto node = std::make_unique<CUgraphNode_st>();
  node->index = c.graph->nodes.size();
  node->label = std::move(label);
  node->run = std::move(run);
  node->deps = s.capture_tail;
  c.graph->nodes.push_back(std::move(node));
  s.capture_tail.assign(1, c.graph->nodes.size() - 1);
  return c.graph->nodes.size() - 1;
}

// Leaves every stream of `c` out of capture; the caller holds capture_mutex.
void end_capture(Capture& c) {
  c.ended = true;
  for (const auto& s : c.streams) {
    s->capture.reset();
    s->capture_tail.clear();
    s->capture_deps_out.clear();
  }
  captures.erase(std::remove_if(captures.begin(), captures.end(),
                                [&](const std::shared_ptr<Capture>& p) { return p.get() == &c; }),
                 captures.end());
  --active_captures;
}

cudaError_t stream_of(cudaStream_t stream, std::shared_ptr<CUstream_st>* out, const char* call) {
  const int dev = current_device();
  if (dev >= device_count()) return fail(cudaErrorInvalidDevice, call);
  *out = resolve_stream(stream, dev);
  if (!*out) return fail(cudaErrorInvalidResourceHandle, std::string(call) + ": not a live stream");
  return cudaSuccess;
}

}  // namespace

bool capture_op(CUstream_st& s, std::function<void()>& op, OpLabel label, cudaError_t* result) {
  if (active_captures.load() == 0) return false;
  std::lock_guard<std::mutex> lock(capture_mutex);
  if (s.capture) {
    Capture& c = *s.capture;
    if (c.invalidated != cudaSuccess) {
      *result = invalidated_error(c, label.kind);
      return true;
    }
    std::string text = label.kind;
    if (label.name) text += std::string(" '") + label.name + "'";
    add_node(c, s, std::move(text), std::move(op));
    *result = cudaSuccess;
    return true;
  }
  if (s.legacy_default)
    if (Capture* c = blocking_capture_on(s.device)) {
      *result = implicit_dependency(*c, label.kind);
      return true;
    }
  return false;
}

cudaError_t check_unsafe_call(const char* call) {
  if (active_captures.load() == 0) return cudaSuccess;
  std::lock_guard<std::mutex> lock(capture_mutex);
  if (tl_mode == cudaStreamCaptureModeRelaxed) return cudaSuccess;
  const std::thread::id me = std::this_thread::get_id();
  std::string broken;
  for (const auto& c : captures) {
    const bool own = c->thread == me && c->mode != cudaStreamCaptureModeRelaxed;
    const bool other = tl_mode == cudaStreamCaptureModeGlobal && c->thread != me &&
                       c->mode == cudaStreamCaptureModeGlobal;
    if (!own && !other) continue;
    invalidate(*c, cudaErrorStreamCaptureUnsupported,
               std::string(call) + " during the capture (a potentially unsafe call)");
    broken += (broken.empty() ? "" : ", ") + describe(*c);
  }
  if (broken.empty()) return cudaSuccess;
  return fail(cudaErrorStreamCaptureUnsupported,
              std::string(call) + " while " + broken +
                  " is in progress: it may synchronise or allocate, which a graph cannot replay; "
                  "the capture is invalidated. Allocate before cudaStreamBeginCapture, or use "
                  "cudaStreamCaptureModeRelaxed for calls known to be safe");
}

cudaError_t check_not_capturing(CUstream_st& s, const char* call) {
  if (active_captures.load() == 0) return cudaSuccess;
  std::lock_guard<std::mutex> lock(capture_mutex);
  if (s.capture) {
    const std::string why = std::string(call) + " on a stream of " + describe(*s.capture) +
                            ": its work is recorded, not run, until the graph is launched";
    invalidate(*s.capture, cudaErrorStreamCaptureUnsupported, why);
    return fail(cudaErrorStreamCaptureUnsupported, why);
  }
  if (s.legacy_default)
    if (Capture* c = blocking_capture_on(s.device)) return implicit_dependency(*c, call);
  return cudaSuccess;
}

bool is_capturing(CUstream_st& s) {
  if (active_captures.load() == 0) return false;
  std::lock_guard<std::mutex> lock(capture_mutex);
  return s.capture != nullptr;
}

cudaError_t fail_capture(CUstream_st& s, cudaError_t code, const std::string& detail) {
  std::lock_guard<std::mutex> lock(capture_mutex);
  if (s.capture) invalidate(*s.capture, code, detail);
  return fail(code, detail);
}

bool capture_event_record(CUevent_st& e, CUstream_st& s, cudaError_t* result) {
  std::lock_guard<std::mutex> lock(capture_mutex);
  if (s.capture) {
    if (s.capture->invalidated != cudaSuccess) {
      *result = invalidated_error(*s.capture, "cudaEventRecord");
      return true;
    }
    e.capture = s.capture;
    e.capture_deps = s.capture_tail;
    std::lock_guard<std::mutex> event_lock(e.m);
    e.stream.reset();  // outside the capture the event counts as never recorded
    *result = cudaSuccess;
    return true;
  }
  if (s.legacy_default && active_captures.load() > 0)
    if (Capture* c = blocking_capture_on(s.device)) {
      *result = implicit_dependency(*c, "cudaEventRecord");
      return true;
    }
  e.capture.reset();
  e.capture_deps.clear();
  return false;
}

bool capture_event_wait(const std::shared_ptr<CUstream_st>& s, CUevent_st& e, bool recorded,
                        cudaError_t* result) {
  std::lock_guard<std::mutex> lock(capture_mutex);
  const std::shared_ptr<Capture> from = e.capture && !e.capture->ended ? e.capture : nullptr;
  if (from) {
    if (s->capture == from) {  // a join: the stream depends on both
      if (from->invalidated != cudaSuccess) {
        *result = invalidated_error(*from, "cudaStreamWaitEvent");
        return true;
      }
      for (std::size_t d : e.capture_deps)
        if (std::find(s->capture_tail.begin(), s->capture_tail.end(), d) == s->capture_tail.end())
          s->capture_tail.push_back(d);
      *result = cudaSuccess;
      return true;
    }
    if (s->capture) {
      const std::string why = "cudaStreamWaitEvent: the event was recorded in " + describe(*from) +
                              " and the waiting stream is in " + describe(*s->capture) +
                              ": two captures cannot be merged";
      invalidate(*from, cudaErrorStreamCaptureMerge, why);
      invalidate(*s->capture, cudaErrorStreamCaptureMerge, why);
      *result = fail(cudaErrorStreamCaptureMerge, why);
      return true;
    }
    if (s->legacy_default || s->device != from->device) {
      const std::string why =
          "cudaStreamWaitEvent: the legacy default stream, or a stream of another device, cannot "
          "join " +
          describe(*from);
      invalidate(*from, cudaErrorStreamCaptureUnsupported, why);
      *result = fail(cudaErrorStreamCaptureUnsupported, why);
      return true;
    }
    if (from->invalidated != cudaSuccess) {
      *result = invalidated_error(*from, "cudaStreamWaitEvent");
      return true;
    }
    // A fork: the stream joins the capture, its next node depends on the event's nodes.
    s->capture = from;
    s->capture_tail = e.capture_deps;
    from->streams.push_back(s);
    *result = cudaSuccess;
    return true;
  }
  if (s->capture && recorded) {
    const std::string why =
        "cudaStreamWaitEvent: a capturing stream (" + describe(*s->capture) +
        ") waits for an event recorded outside the capture; order that work before "
        "cudaStreamBeginCapture";
    invalidate(*s->capture, cudaErrorStreamCaptureIsolation, why);
    *result = fail(cudaErrorStreamCaptureIsolation, why);
    return true;
  }
  if (s->capture) {  // never recorded: nothing to wait for, as outside a capture
    *result = cudaSuccess;
    return true;
  }
  if (s->legacy_default && active_captures.load() > 0)
    if (Capture* c = blocking_capture_on(s->device)) {
      *result = implicit_dependency(*c, "cudaStreamWaitEvent");
      return true;
    }
  return false;
}

cudaError_t check_event_not_captured(CUevent_st& e, const char* call) {
  if (active_captures.load() == 0) return cudaSuccess;
  std::lock_guard<std::mutex> lock(capture_mutex);
  if (e.capture && !e.capture->ended)
    return fail(cudaErrorStreamCaptureUnsupported,
                std::string(call) + ": the event was last recorded in " + describe(*e.capture) +
                    ", which has not ended: it marks a point in a graph, not in time");
  return cudaSuccess;
}

}  // namespace mtemu::detail

using namespace mtemu::detail;

extern "C" {

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
      mode != cudaStreamCaptureModeRelaxed)
    return fail(cudaErrorInvalidValue,
                "cudaStreamBeginCapture: mode " + std::to_string(int(mode)) + " is not a mode");
  if (stream == nullptr)
    return fail(cudaErrorStreamCaptureUnsupported,
                "cudaStreamBeginCapture: the legacy default stream cannot capture; create a "
                "stream (cudaStreamNonBlocking)");
  std::shared_ptr<CUstream_st> s;
  if (cudaError_t e = stream_of(stream, &s, "cudaStreamBeginCapture"); e != cudaSuccess) return e;
  if (cudaError_t e = sticky_error(s->device); e != cudaSuccess) return e;
  std::lock_guard<std::mutex> lock(capture_mutex);
  if (s->capture)
    return fail(cudaErrorIllegalState,
                "cudaStreamBeginCapture: the stream is already part of " + describe(*s->capture));
  auto c = std::make_shared<Capture>();
  c->id = next_capture_id++;
  c->mode = mode;
  c->thread = std::this_thread::get_id();
  c->device = s->device;
  c->origin = s;
  c->graph = std::make_unique<CUgraph_st>();
  c->graph->device = s->device;
  c->streams.push_back(s);
  s->capture = c;
  s->capture_tail.clear();
  captures.push_back(c);
  ++active_captures;
  return ok();
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (graph == nullptr) return fail(cudaErrorInvalidValue, "cudaStreamEndCapture: null graph");
  std::shared_ptr<CUstream_st> s;
  if (cudaError_t e = stream_of(stream, &s, "cudaStreamEndCapture"); e != cudaSuccess) return e;
  std::lock_guard<std::mutex> lock(capture_mutex);
  if (!s->capture)
    return fail(cudaErrorIllegalState, "cudaStreamEndCapture: the stream is not capturing");
  const std::shared_ptr<Capture> c = s->capture;
  if (c->origin != s)
    return fail(cudaErrorStreamCaptureUnmatched,
                "cudaStreamEndCapture: the stream was forked into " + describe(*c) +
                    "; end it on the stream that began it");
  if (c->mode != cudaStreamCaptureModeRelaxed && c->thread != std::this_thread::get_id())
    return fail(cudaErrorStreamCaptureWrongThread,
                "cudaStreamEndCapture: " + describe(*c) +
                    " began on another thread; only a relaxed capture may end elsewhere");
  *graph = nullptr;
  // Every forked stream must have joined back: its last nodes are ancestors of the origin's.
  std::vector<bool> joined(c->graph->nodes.size(), false);
  std::vector<std::size_t> todo = c->origin->capture_tail;
  while (!todo.empty()) {
    const std::size_t n = todo.back();
    todo.pop_back();
    if (joined[n]) continue;
    joined[n] = true;
    for (std::size_t d : c->graph->nodes[n]->deps) todo.push_back(d);
  }
  std::string unjoined;
  for (const auto& f : c->streams)
    for (std::size_t n : f->capture_tail)
      if (!joined[n]) {
        unjoined = c->graph->nodes[n]->label;
        break;
      }
  end_capture(*c);
  if (c->invalidated != cudaSuccess) return invalidated_error(*c, "cudaStreamEndCapture");
  if (!unjoined.empty())
    return fail(cudaErrorStreamCaptureUnjoined,
                "cudaStreamEndCapture: a stream forked into " + describe(*c) + " ends with " +
                    unjoined +
                    ", which the capturing stream does not wait for: record an event after it "
                    "and cudaStreamWaitEvent the capturing stream on it before ending");
  live_graphs.insert(c->graph.get());
  *graph = c->graph.release();
  return ok();
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  return cudaStreamGetCaptureInfo(stream, status);
}

cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, cudaStreamCaptureStatus* status_out,
                                     unsigned long long* id_out, cudaGraph_t* graph_out,
                                     const cudaGraphNode_t** dependencies_out,
                                     const cudaGraphEdgeData** edge_data_out,
                                     std::size_t* num_dependencies_out) {
  if (status_out == nullptr)
    return fail(cudaErrorInvalidValue, "cudaStreamGetCaptureInfo: null status");
  std::shared_ptr<CUstream_st> s;
  if (cudaError_t e = stream_of(stream, &s, "cudaStreamGetCaptureInfo"); e != cudaSuccess) return e;
  std::lock_guard<std::mutex> lock(capture_mutex);
  if (s->legacy_default)
    if (Capture* c = blocking_capture_on(s->device))
      return implicit_dependency(*c, "cudaStreamIsCapturing");
  if (edge_data_out) *edge_data_out = nullptr;
  if (!s->capture) {
    *status_out = cudaStreamCaptureStatusNone;
    return ok();
  }
  const Capture& c = *s->capture;
  *status_out = c.invalidated == cudaSuccess ? cudaStreamCaptureStatusActive
                                             : cudaStreamCaptureStatusInvalidated;
  if (id_out) *id_out = c.id;
  if (graph_out) *graph_out = c.graph.get();
  s->capture_deps_out.clear();
  for (std::size_t n : s->capture_tail) s->capture_deps_out.push_back(c.graph->nodes[n].get());
  if (dependencies_out) *dependencies_out = s->capture_deps_out.data();
  if (num_dependencies_out) *num_dependencies_out = s->capture_deps_out.size();
  return ok();
}

cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  if (mode == nullptr ||
      (*mode != cudaStreamCaptureModeGlobal && *mode != cudaStreamCaptureModeThreadLocal &&
       *mode != cudaStreamCaptureModeRelaxed))
    return fail(cudaErrorInvalidValue, "cudaThreadExchangeStreamCaptureMode: not a mode");
  std::swap(*mode, tl_mode);
  return ok();
}

cudaError_t cudaGraphCreate(cudaGraph_t* graph, unsigned int flags) {
  if (graph == nullptr || flags != 0)
    return fail(cudaErrorInvalidValue, "cudaGraphCreate: null graph or flags other than 0");
  auto g = std::make_unique<CUgraph_st>();
  g->device = current_device();
  std::lock_guard<std::mutex> lock(capture_mutex);
  live_graphs.insert(g.get());
  *graph = g.release();
  return ok();
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  std::lock_guard<std::mutex> lock(capture_mutex);
  if (live_graphs.erase(graph) == 0)
    return fail(cudaErrorInvalidValue, "cudaGraphDestroy: not a live graph");
  delete graph;
  return ok();
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, std::size_t* num_nodes) {
  std::lock_guard<std::mutex> lock(capture_mutex);
  if (live_graphs.count(graph) == 0 || num_nodes == nullptr)
    return fail(cudaErrorInvalidValue, "cudaGraphGetNodes: not a live graph, or null count");
  const std::size_t n = graph->nodes.size();
  if (nodes != nullptr) {
    for (std::size_t i = 0; i < *num_nodes; ++i) nodes[i] = i < n ? graph->nodes[i].get() : nullptr;
    *num_nodes = std::min(*num_nodes, n);
    return ok();
  }
  *num_nodes = n;
  return ok();
}

cudaError_t cudaGraphDebugDotPrint(cudaGraph_t graph, const char* path, unsigned int) {
  std::lock_guard<std::mutex> lock(capture_mutex);
  if (live_graphs.count(graph) == 0 || path == nullptr)
    return fail(cudaErrorInvalidValue, "cudaGraphDebugDotPrint: not a live graph, or null path");
  std::FILE* f = std::fopen(path, "w");
  if (f == nullptr)
    return fail(cudaErrorInvalidValue, std::string("cudaGraphDebugDotPrint: cannot write ") + path);
  std::fprintf(f, "digraph cuda_graph {\n");
  for (const auto& node : graph->nodes) {
    std::string label = node->label;
    std::replace(label.begin(), label.end(), '"', '\'');
    std::fprintf(f, "  n%zu [label=\"%zu: %s\"];\n", node->index, node->index, label.c_str());
    for (std::size_t d : node->deps) std::fprintf(f, "  n%zu -> n%zu;\n", d, node->index);
  }
  std::fprintf(f, "}\n");
  const bool written = std::fclose(f) == 0;
  return written ? ok()
                 : fail(cudaErrorInvalidValue,
                        std::string("cudaGraphDebugDotPrint: cannot write ") + path);
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long flags) {
  constexpr unsigned long long known =
      cudaGraphInstantiateFlagAutoFreeOnLaunch | cudaGraphInstantiateFlagUpload |
      cudaGraphInstantiateFlagDeviceLaunch | cudaGraphInstantiateFlagUseNodePriority;
  if (exec == nullptr || (flags & ~known) != 0)
    return fail(cudaErrorInvalidValue,
                "cudaGraphInstantiate: null result or unknown flags " + std::to_string(flags));
  if (flags & cudaGraphInstantiateFlagDeviceLaunch)
    return fail(cudaErrorNotSupported,
                "cudaGraphInstantiate: the emulator has no device-side graph launch");
  std::lock_guard<std::mutex> lock(capture_mutex);
  if (live_graphs.count(graph) == 0)
    return fail(cudaErrorInvalidValue, "cudaGraphInstantiate: not a live graph");
  // Capture appends a node after every node it depends on: index order is a dependency order.
  auto steps = std::make_shared<std::vector<std::function<void()>>>();
  for (const auto& node : graph->nodes) steps->push_back(node->run);
  auto e = std::make_unique<CUgraphExec_st>();
  e->device = graph->device;
  e->steps = std::move(steps);
  live_execs.insert(e.get());
  *exec = e.release();
  return ok();
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t graph,
                                          unsigned long long flags) {
  return cudaGraphInstantiate(exec, graph, flags);
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  std::shared_ptr<CUstream_st> s;
  if (cudaError_t e = stream_of(stream, &s, "cudaGraphLaunch"); e != cudaSuccess) return e;
  // A launch captured into another graph is ordered by that graph's edges alone.
  const bool capturing = is_capturing(*s);
  std::shared_ptr<const std::vector<std::function<void()>>> steps;
  std::shared_ptr<CUstream_st> previous;
  uint64_t previous_target = 0;
  int dev = 0;
  {
    std::lock_guard<std::mutex> lock(capture_mutex);
    if (live_execs.count(exec) == 0)
      return fail(cudaErrorInvalidValue, "cudaGraphLaunch: not a live executable graph");
    steps = exec->steps;
    dev = exec->device;
    if (!capturing && exec->last_stream != s) {
      previous = exec->last_stream;
      previous_target = exec->last_target;
    }
  }
  if (s->device != dev)
    return fail(cudaErrorInvalidValue,
                "cudaGraphLaunch: the graph was captured on cuda:" + std::to_string(dev) +
                    " and the stream is of cuda:" + std::to_string(s->device));
  if (cudaError_t e = sticky_error(dev); e != cudaSuccess) return e;
  auto run = [steps, previous, previous_target, dev] {
    if (previous) wait_for_mark(*previous, previous_target);
    for (const auto& step : *steps) {
      if (device(dev).sticky.load() != cudaSuccess) return;  // a fault ends the context
      step();
    }
  };
  if (cudaError_t e = enqueue(*s, std::move(run), {"graph"}); e != cudaSuccess) return e;
  if (!capturing) {
    std::lock_guard<std::mutex> lock(capture_mutex);
    if (live_execs.count(exec) != 0) {
      exec->last_stream = s;
      exec->last_target = stream_mark(*s);
    }
  }
  return ok();
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  std::lock_guard<std::mutex> lock(capture_mutex);
  if (live_execs.erase(exec) == 0)
    return fail(cudaErrorInvalidValue, "cudaGraphExecDestroy: not a live executable graph");
  delete exec;  // launches still queued hold their own steps
  return ok();
}

}  // extern "C"
