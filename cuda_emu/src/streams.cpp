// Streams and events. Each stream is a queue with its own host thread, so work really runs
// asynchronously and streams really overlap: a missing event or wait gives a wrong result or a
// race report, as on a GPU. MINITRAIN_EMU_STREAM_DELAY_US (default 0) makes every stream sleep
// that long before each operation, and mtemu::set_stream_delay one stream: either makes an
// unordered reader overtake its writer.

#include <chrono>
#include <cstdlib>
#include <thread>

#include "cuda_emu/testing.h"
#include "cuda_emu/api_counts.h"
#include "race.h"
#include "runtime.h"
#include "sanitizer.h"

namespace mtemu::detail {

namespace {

long default_delay_us() {
  static const long d = [] {
    const char* v = std::getenv("MINITRAIN_EMU_STREAM_DELAY_US");
    return v && *v ? std::atol(v) : 0l;
  }();
  return d;
}

void stream_loop(std::shared_ptr<CUstream_st> s) {
  for (;;) {
    std::function<void()> op;
    {
      std::unique_lock<std::mutex> lock(s->m);
      s->cv.wait(lock, [&] { return !s->queue.empty() || s->destroyed; });
      if (s->queue.empty()) return;  // destroyed and drained
      op = std::move(s->queue.front());
      s->queue.pop_front();
    }
    if (const long us = s->delay_us.load(); us > 0)
      std::this_thread::sleep_for(std::chrono::microseconds(us));
    // After a device fault the context is gone: later work is dropped, as on a GPU.
    if (device(s->device).sticky.load() == cudaSuccess) op();
    std::lock_guard<std::mutex> lock(s->m);
    ++s->completed;
    s->cv.notify_all();
  }
}

std::shared_ptr<CUstream_st> make_stream(int dev, unsigned flags, bool legacy_default) {
  auto s = std::make_shared<CUstream_st>();
  s->device = dev;
  s->flags = flags;
  s->legacy_default = legacy_default;
  s->delay_us = default_delay_us();
  std::thread(stream_loop, s).detach();
  DeviceState& d = device(dev);
  std::lock_guard<std::mutex> lock(d.m);
  d.streams.push_back(s);
  return s;
}

// Streams keyed by handle; a destroyed handle is gone from here (its thread still drains).
std::mutex registry_mutex;
std::vector<std::shared_ptr<CUstream_st>>& registry() {
  static auto* r = new std::vector<std::shared_ptr<CUstream_st>>();
  return *r;
}

void wait_until(CUstream_st& s, uint64_t target) {
  std::unique_lock<std::mutex> lock(s.m);
  s.cv.wait(lock, [&] { return s.completed >= target; });
}

}  // namespace

uint64_t stream_mark(CUstream_st& s) {
  std::lock_guard<std::mutex> lock(s.m);
  return s.enqueued;
}
void wait_for_mark(CUstream_st& s, uint64_t target) { wait_until(s, target); }

namespace {

uint64_t push(CUstream_st& s, std::function<void()> op) {
  std::lock_guard<std::mutex> lock(s.m);
  s.queue.push_back(std::move(op));
  s.cv.notify_all();
  return ++s.enqueued;
}

// Where `s` stands now: its work so far is done once completed reaches this.
uint64_t mark(CUstream_st& s) {
  std::lock_guard<std::mutex> lock(s.m);
  return s.enqueued;
}

}  // namespace

std::shared_ptr<CUstream_st> resolve_stream(cudaStream_t s, int device_for_null) {
  if (s == nullptr) {
    DeviceState& d = device(device_for_null);
    {
      std::lock_guard<std::mutex> lock(d.m);
      if (d.null_stream) return d.null_stream;
    }
    auto created = make_stream(device_for_null, cudaStreamDefault, true);
    std::lock_guard<std::mutex> lock(d.m);
    if (!d.null_stream) d.null_stream = created;
    return d.null_stream;
  }
  std::lock_guard<std::mutex> lock(registry_mutex);
  for (const auto& p : registry())
    if (p.get() == s) return p;
  return nullptr;
}

cudaError_t enqueue(CUstream_st& s, std::function<void()> op, OpLabel label) {
  if (cudaError_t r; capture_op(s, op, label, &r)) {
    if (racecheck_on) racecheck_not_enqueued();
    return r;
  }
  // The legacy default stream and blocking streams of a device wait for each other's earlier work.
  std::vector<std::pair<std::shared_ptr<CUstream_st>, uint64_t>> waits;
  if (s.legacy_default || (s.flags & cudaStreamNonBlocking) == 0) {
    DeviceState& d = device(s.device);
    std::vector<std::shared_ptr<CUstream_st>> others;
    {
      std::lock_guard<std::mutex> lock(d.m);
      for (const auto& w : d.streams)
        if (auto o = w.lock(); o && o.get() != &s && (o->flags & cudaStreamNonBlocking) == 0 &&
                               (s.legacy_default || o->legacy_default))
          others.push_back(o);
    }
    for (auto& o : others) waits.emplace_back(o, mark(*o));
  }
  if (racecheck_on) {
    std::vector<CUstream_st*> after;
    for (const auto& w : waits) after.push_back(w.first.get());
    racecheck_enqueue(s, after);
  }
  if (!waits.empty())
    push(s, [waits] {
      for (const auto& [o, target] : waits) wait_until(*o, target);
    });
  push(s, std::move(op));
  return cudaSuccess;
}

void wait_until_done(CUstream_st& s) {
  wait_until(s, mark(s));
  if (racecheck_on) racecheck_host_waited(s);
}

void synchronize_device(int index) {
  std::vector<std::shared_ptr<CUstream_st>> all;
  {
    DeviceState& d = device(index);
    std::lock_guard<std::mutex> lock(d.m);
    for (const auto& w : d.streams)
      if (auto s = w.lock()) all.push_back(s);
  }
  for (auto& s : all) wait_until_done(*s);
}

}  // namespace mtemu::detail

void mtemu::set_stream_delay(cudaStream_t stream, long microseconds) {
  if (auto s = detail::resolve_stream(stream, detail::current_device())) s->delay_us = microseconds;
}

using namespace mtemu::detail;

namespace {
// Where an event's latest record sits: its stream, and the count that stream must complete.
std::pair<std::shared_ptr<CUstream_st>, uint64_t> recorded_point(CUevent_st& e) {
  std::lock_guard<std::mutex> lock(e.m);
  return {e.stream, e.target};
}

cudaError_t stream_arg(cudaStream_t s, std::shared_ptr<CUstream_st>* out, const char* call) {
  const int dev = current_device();
  if (dev >= device_count()) return fail(cudaErrorInvalidDevice, call);
  *out = resolve_stream(s, dev);
  if (!*out) return fail(cudaErrorInvalidResourceHandle, std::string(call) + ": not a live stream");
  return cudaSuccess;
}
}  // namespace

extern "C" {

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  const int dev = current_device();
  if (dev >= device_count())
    return fail(cudaErrorInvalidDevice, "cudaStreamCreate: no such device");
  if (cudaError_t e = sticky_error(dev); e != cudaSuccess) return e;
  auto s = make_stream(dev, flags, false);
  std::lock_guard<std::mutex> lock(registry_mutex);
  registry().push_back(s);
  *stream = s.get();
  return ok();
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  std::shared_ptr<CUstream_st> s;
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    auto& r = registry();
    for (auto it = r.begin(); it != r.end(); ++it)
      if (it->get() == stream) {
        s = *it;
        r.erase(it);
        break;
      }
  }
  if (!s) return fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy: not a live stream");
  std::lock_guard<std::mutex> lock(s->m);
  s->destroyed = true;  // queued work still completes; the thread then ends
  s->cv.notify_all();
  return ok();
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  BlockingCall blocking;
  std::shared_ptr<CUstream_st> s;
  if (cudaError_t e = stream_arg(stream, &s, "cudaStreamSynchronize"); e != cudaSuccess) return e;
  if (cudaError_t e = check_not_capturing(*s, "cudaStreamSynchronize"); e != cudaSuccess) return e;
  wait_until_done(*s);
  if (cudaError_t e = sticky_error(s->device); e != cudaSuccess) return e;
  return ok();
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  std::shared_ptr<CUstream_st> s;
  if (cudaError_t e = stream_arg(stream, &s, "cudaStreamQuery"); e != cudaSuccess) return e;
  if (cudaError_t e = check_not_capturing(*s, "cudaStreamQuery"); e != cudaSuccess) return e;
  if (cudaError_t e = sticky_error(s->device); e != cudaSuccess) return e;
  {
    std::lock_guard<std::mutex> lock(s->m);
    if (s->completed != s->enqueued) return cudaErrorNotReady;
  }
  if (racecheck_on) racecheck_host_waited(*s);
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  std::shared_ptr<CUstream_st> s;
  if (cudaError_t e = stream_arg(stream, &s, "cudaStreamWaitEvent"); e != cudaSuccess) return e;
  if (event == nullptr)
    return fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent: null event");
  if (flags != 0) return fail(cudaErrorInvalidValue, "cudaStreamWaitEvent: flags must be 0");
  std::shared_ptr<CUstream_st> source;
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(event->m);
    source = event->stream;
    target = event->target;
  }
  if (cudaError_t r; capture_event_wait(s, *event, source != nullptr, &r)) return r;
  if (!source) return ok();  // never recorded: nothing to wait for, as in CUDA
  const cudaError_t e =
      enqueue(*s, [source, target] { wait_until(*source, target); }, {"event wait"});
  if (e == cudaSuccess && racecheck_on) racecheck_event_waited(*s, *event);
  return e;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  const int dev = current_device();
  if (dev >= device_count()) return fail(cudaErrorInvalidDevice, "cudaEventCreate: no such device");
  auto e = std::make_shared<CUevent_st>();
  e->device = dev;
  e->flags = flags;
  e->self = e;
  *event = e.get();
  return ok();
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle, "cudaEventDestroy: null event");
  std::shared_ptr<CUevent_st> own;  // released after the lock: it may be the last reference
  {
    std::lock_guard<std::mutex> lock(event->m);
    if (!event->self)
      return fail(cudaErrorInvalidResourceHandle, "cudaEventDestroy: destroyed twice");
    event->device = -1;
    own = std::move(event->self);
  }
  return ok();
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (event == nullptr || event->device < 0)
    return fail(cudaErrorInvalidResourceHandle, "cudaEventRecord: not a live event");
  std::shared_ptr<CUstream_st> s;
  if (cudaError_t e = stream_arg(stream, &s, "cudaEventRecord"); e != cudaSuccess) return e;
  if (s->device != event->device)
    return fail(cudaErrorInvalidResourceHandle,
                "cudaEventRecord: event of cuda:" + std::to_string(event->device) +
                    " recorded on a stream of cuda:" + std::to_string(s->device));
  uint64_t generation;
  std::shared_ptr<CUevent_st> e;  // keeps the event alive until the record has run
  {
    std::lock_guard<std::mutex> lock(event->m);
    generation = ++event->generation;
    e = event->self;
  }
  if (!e) return fail(cudaErrorInvalidResourceHandle, "cudaEventRecord: not a live event");
  if (cudaError_t r; capture_event_record(*event, *s, &r)) return r;
  enqueue(*s, [e, generation] {
    std::lock_guard<std::mutex> lock(e->m);
    if (e->generation == generation) {
      e->when = std::chrono::steady_clock::now();
      e->when_generation = generation;
    }
  });
  {
    std::lock_guard<std::mutex> lock(event->m);
    event->stream = s;
    event->target = mark(*s);
  }
  if (racecheck_on) racecheck_event_recorded(*event, *s);
  return ok();
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle, "cudaEventQuery: null event");
  if (cudaError_t e = check_event_not_captured(*event, "cudaEventQuery"); e != cudaSuccess)
    return e;
  const auto [s, target] = recorded_point(*event);
  if (!s) return ok();
  if (cudaError_t e = sticky_error(s->device); e != cudaSuccess) return e;
  {
    std::lock_guard<std::mutex> lock(s->m);
    if (s->completed < target) return cudaErrorNotReady;
  }
  if (racecheck_on) racecheck_host_waited_event(*event);
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  BlockingCall blocking;
  if (event == nullptr)
    return fail(cudaErrorInvalidResourceHandle, "cudaEventSynchronize: null event");
  if (cudaError_t e = check_event_not_captured(*event, "cudaEventSynchronize"); e != cudaSuccess)
    return e;
  const auto [s, target] = recorded_point(*event);
  if (!s) return ok();
  wait_until(*s, target);
  if (racecheck_on) racecheck_host_waited_event(*event);
  if (cudaError_t e = sticky_error(s->device); e != cudaSuccess) return e;
  return ok();
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (start == nullptr || end == nullptr)
    return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: null event");
  if ((start->flags | end->flags) & cudaEventDisableTiming)
    return fail(cudaErrorInvalidResourceHandle,
                "cudaEventElapsedTime: an event was created with DisableTiming");
  for (cudaEvent_t e : {start, end})
    if (cudaError_t q = cudaEventQuery(e); q != cudaSuccess) return q;
  std::lock_guard<std::mutex> l1(start->m);
  std::lock_guard<std::mutex> l2(end->m);
  if (start->when_generation == 0 || end->when_generation == 0 ||
      start->when_generation != start->generation || end->when_generation != end->generation)
    return fail(cudaErrorInvalidResourceHandle,
                "cudaEventElapsedTime: both events must be recorded and complete");
  *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
  return ok();
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* user_data) {
  std::shared_ptr<CUstream_st> s;
  if (cudaError_t e = stream_arg(stream, &s, "cudaLaunchHostFunc"); e != cudaSuccess) return e;
  if (fn == nullptr) return fail(cudaErrorInvalidValue, "cudaLaunchHostFunc: null function");
  if (cudaError_t e = sticky_error(s->device); e != cudaSuccess) return e;
  return enqueue(*s, [fn, user_data] { fn(user_data); }, {"host function"});
}

}  // extern "C"
