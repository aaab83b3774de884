#pragma once
// Streams, events and the current device. On the CPU every operation completes before it
// returns, so a CPU Stream is an empty handle and a CPU Event records a host time stamp; the same
// code (benchmarks, trainers) then runs on both.
//
// Each host thread has its own current stream per device (created on first use, non-blocking),
// so that several threads can drive several devices at once without serialising on CUDA's
// legacy default stream. StreamGuard makes another stream current for a scope.

#include <chrono>
#include <cstdint>
#include <new>

#include "core/device.h"

// The CUDA runtime's own opaque handle types (cudaStream_t is CUstream_st*), declared here so that
// CPU-only code can name them without the CUDA headers.
struct CUstream_st;
struct CUevent_st;

namespace minitrain {

class Event;

/// An ordered queue of device work. Move-only; destroying it waits for its queued work (a new
/// stream may reuse the handle, which keys cached memory blocks and workspaces).
class Stream {
 public:
  static Stream create(Device device);  ///< throws DeviceError where the device is unavailable
  Stream(Stream&& o) noexcept;
  Stream& operator=(Stream&& o) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();

  Device device() const noexcept { return device_; }
  CUstream_st* native_handle() const noexcept { return handle_; }  ///< nullptr on the CPU
  void synchronize() const;             ///< blocks the host until the queue is empty
  void wait_for(const Event& e) const;  ///< enqueues a wait, returns at once

 private:
  Stream(Device device, CUstream_st* handle) : device_(device), handle_(handle) {}
  Device device_;
  CUstream_st* handle_ = nullptr;
};

/// A marker in a stream: to wait for, or to time work between two of them.
class Event {
 public:
  static Event create(Device device);
  Event(Event&& o) noexcept;
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();

  Device device() const noexcept { return device_; }
  CUevent_st* native_handle() const noexcept { return handle_; }
  void record(const Stream& s);
  void synchronize() const;                           ///< blocks until the recorded work is done
  bool query() const;                                 ///< true when the recorded work is done
  double elapsed_ms_since(const Event& start) const;  ///< both recorded and complete

 private:
  Event(Device device, CUevent_st* handle) : device_(device), handle_(handle) {}
  Device device_;
  CUevent_st* handle_ = nullptr;
  std::chrono::steady_clock::time_point host_time_{};
};

/// The calling thread's current stream on `device` (for the CPU, a shared empty stream).
const Stream& current_stream(Device device);

/// Makes `s` the calling thread's current stream for its device until the guard is destroyed.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& s);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Device device_;
  const Stream* previous_;
};

/// Makes `device` the CUDA runtime's current device for a scope (a no-op for the CPU): kernel
/// launches, cuBLAS calls and cudaMalloc act on the current device.
class DeviceGuard {
 public:
  explicit DeviceGuard(Device device);  ///< DeviceError when the switch fails (e.g. after a fault)
  /// For destructors and teardown: switches where it can and never throws, so that cleaning up
  /// after a device fault does not terminate the process before the fault is reported.
  DeviceGuard(Device device, std::nothrow_t) noexcept;
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

/// Waits for all work the calling thread queued on `device`'s current stream.
void synchronize(Device device);

}  // namespace minitrain
