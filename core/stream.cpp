#include "core/stream.h"

#include <map>
#include <memory>

#include "core/error.h"

#if MINITRAIN_WITH_CUDA
#include <cuda_runtime_api.h>

#include "core/cuda_check.h"
#endif

namespace minitrain {

// ---- Stream ----

Stream Stream::create(Device device) {
  if (device.is_cpu()) return Stream(device, nullptr);
  check_available(device);
#if MINITRAIN_WITH_CUDA
  DeviceGuard guard(device);
  cudaStream_t s = nullptr;
  // Non-blocking: no implicit synchronisation with the legacy default stream, so threads that
  // drive different devices, or copies on side streams, never wait on each other by accident.
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return Stream(device, s);
#else
  MT_THROW(DeviceError, "Stream::create(", device, "): this is a CPU-only build");
#endif
}

Stream::Stream(Stream&& o) noexcept : device_(o.device_), handle_(o.handle_) {
  o.handle_ = nullptr;
}

Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    this->~Stream();
    device_ = o.device_;
    handle_ = o.handle_;
    o.handle_ = nullptr;
  }
  return *this;
}

Stream::~Stream() {
#if MINITRAIN_WITH_CUDA
  if (handle_ != nullptr) {
    DeviceGuard guard(device_, std::nothrow);
    // Wait for the queued work first: the caching allocator's blocks and the cuBLASLt workspaces
    // are keyed by the handle, and a stream created later may get the same address. Errors (a
    // fault) have nobody to go to here; the next checked call reports them.
    (void)cudaStreamSynchronize(handle_);
    (void)cudaStreamDestroy(handle_);
  }
#endif
}

void Stream::synchronize() const {
#if MINITRAIN_WITH_CUDA
  if (handle_ != nullptr) CHECK_CUDA(cudaStreamSynchronize(handle_));
#endif
}

void Stream::wait_for(const Event& e) const {
  MT_CHECK_AS(DeviceError, e.device() == device_, "Stream::wait_for: event on ", e.device(),
              " but stream on ", device_);
#if MINITRAIN_WITH_CUDA
  if (handle_ != nullptr && e.native_handle() != nullptr)
    CHECK_CUDA(cudaStreamWaitEvent(handle_, e.native_handle(), 0));
#endif
}

// ---- Event ----

Event Event::create(Device device) {
  if (device.is_cpu()) return Event(device, nullptr);
  check_available(device);
#if MINITRAIN_WITH_CUDA
  DeviceGuard guard(device);
  cudaEvent_t e = nullptr;
  CHECK_CUDA(cudaEventCreate(&e));  // with timing: benchmarks use elapsed_ms_since
  return Event(device, e);
#else
  MT_THROW(DeviceError, "Event::create(", device, "): this is a CPU-only build");
#endif
}

Event::Event(Event&& o) noexcept
    : device_(o.device_), handle_(o.handle_), host_time_(o.host_time_) {
  o.handle_ = nullptr;
}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    this->~Event();
    device_ = o.device_;
    handle_ = o.handle_;
    host_time_ = o.host_time_;
    o.handle_ = nullptr;
  }
  return *this;
}

Event::~Event() {
#if MINITRAIN_WITH_CUDA
  if (handle_ != nullptr) (void)cudaEventDestroy(handle_);
#endif
}

void Event::record(const Stream& s) {
  MT_CHECK_AS(DeviceError, s.device() == device_, "Event::record: stream on ", s.device(),
              " but event on ", device_);
  if (device_.is_cpu()) {
    host_time_ = std::chrono::steady_clock::now();
    return;
  }
#if MINITRAIN_WITH_CUDA
  CHECK_CUDA(cudaEventRecord(handle_, s.native_handle()));
#endif
}

void Event::synchronize() const {
#if MINITRAIN_WITH_CUDA
  if (handle_ != nullptr) CHECK_CUDA(cudaEventSynchronize(handle_));
#endif
}

bool Event::query() const {
#if MINITRAIN_WITH_CUDA
  if (handle_ != nullptr) {
    const cudaError_t e = cudaEventQuery(handle_);
    if (e == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    CHECK_CUDA(e);
  }
#endif
  return true;
}

double Event::elapsed_ms_since(const Event& start) const {
  MT_CHECK_AS(DeviceError, start.device_ == device_, "Event::elapsed_ms_since: events on ",
              start.device_, " and ", device_);
  if (device_.is_cpu())
    return std::chrono::duration<double, std::milli>(host_time_ - start.host_time_).count();
#if MINITRAIN_WITH_CUDA
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start.handle_, handle_));
  return ms;
#else
  return 0.0;
#endif
}

// ---- current stream per thread and device ----

namespace {
struct ThreadStreams {
  std::map<int, std::unique_ptr<Stream>> owned;  // created on first use by this thread
  std::map<int, const Stream*> current;          // set by StreamGuard
  ~ThreadStreams() {
    // A block freed on one of these streams may be handed out again once a new stream reuses the
    // handle's address (Note [streams and the caching allocator]); finishing the work first
    // makes that safe.
    for (auto& [index, s] : owned) {
      try {
        s->synchronize();
      } catch (...) {
      }
    }
  }
};
ThreadStreams& thread_streams() {
  thread_local ThreadStreams t;
  return t;
}
}  // namespace

const Stream& current_stream(Device device) {
  if (device.is_cpu()) {
    static const Stream* cpu = new Stream(Stream::create(Device::cpu()));
    return *cpu;
  }
  ThreadStreams& t = thread_streams();
  if (auto it = t.current.find(device.index()); it != t.current.end() && it->second)
    return *it->second;
  auto& slot = t.owned[device.index()];
  if (!slot) slot = std::make_unique<Stream>(Stream::create(device));
  return *slot;
}

StreamGuard::StreamGuard(const Stream& s) : device_(s.device()), previous_(nullptr) {
  if (device_.is_cpu()) return;
  auto& current = thread_streams().current;
  auto it = current.find(device_.index());
  previous_ = it == current.end() ? nullptr : it->second;
  current[device_.index()] = &s;
}

StreamGuard::~StreamGuard() {
  if (device_.is_cpu()) return;
  thread_streams().current[device_.index()] = previous_;
}

// ---- current device ----

DeviceGuard::DeviceGuard(Device device) {
  if (device.is_cpu()) return;
#if MINITRAIN_WITH_CUDA
  int prev = 0;
  CHECK_CUDA(cudaGetDevice(&prev));
  if (prev != device.index()) {
    CHECK_CUDA(cudaSetDevice(device.index()));
    previous_ = prev;
  }
#else
  MT_THROW(DeviceError, "cannot use ", device, ": this is a CPU-only build");
#endif
}

DeviceGuard::DeviceGuard(Device device, std::nothrow_t) noexcept {
  if (device.is_cpu()) return;
#if MINITRAIN_WITH_CUDA
  int prev = 0;
  if (cudaGetDevice(&prev) == cudaSuccess && prev != device.index()) {
    (void)cudaSetDevice(
        device.index());  // may report an earlier fault; the caller tears down anyway
    previous_ = prev;
  }
  (void)cudaGetLastError();
#endif
}

DeviceGuard::~DeviceGuard() {
#if MINITRAIN_WITH_CUDA
  if (previous_ >= 0) (void)cudaSetDevice(previous_);
#endif
}

void synchronize(Device device) { current_stream(device).synchronize(); }

}  // namespace minitrain
