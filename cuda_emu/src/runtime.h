#pragma once
// The emulated runtime's state, shared by its API files: the devices, the calling thread's
// current device and last error, and the device faults that poison a device for good (as a
// sticky error ends a CUDA context).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cuda_runtime_api.h"

namespace mtemu::detail {

struct DeviceState {
  int index = 0;
  std::size_t capacity = 0;
  std::atomic<std::size_t> used{0};
  std::atomic<int> sticky{cudaSuccess};  // a device fault: every later call on the device fails
  std::mutex m;                          // guards what follows
  std::string fault_text;
  std::vector<std::weak_ptr<CUstream_st>> streams;
  std::shared_ptr<CUstream_st> null_stream;
  std::vector<bool> peer_enabled;
};

int device_count();
DeviceState& device(int index);  ///< index already checked
int current_device();
/// The error a call on `index` returns because of an earlier fault, or cudaSuccess.
cudaError_t sticky_error(int index);
/// Marks device `index` faulted (first fault wins) and prints the report.
void device_fault(int index, cudaError_t code, const std::string& text);

/// Sets the calling thread's last error (with a detail for cudaGetErrorString) and returns it.
cudaError_t fail(cudaError_t code, const std::string& detail);
inline cudaError_t ok() { return cudaSuccess; }

/// The stream a call with `s` means: the device's legacy default stream for nullptr.
std::shared_ptr<CUstream_st> resolve_stream(cudaStream_t s, int device_for_null);
/// What a queued operation is: a graph node's label when the stream captures.
struct OpLabel {
  const char* kind = "op";
  const char* name = nullptr;  ///< the kernel, for a launch (a string literal)
};
/// Queues `op` on `s` (honouring the legacy default stream's implicit ordering), or records it as
/// a node when `s` captures: then `op` must be runnable again at every replay. Fails only for a
/// capture rule (graphs.cpp), with the error set as the thread's last.
cudaError_t enqueue(CUstream_st& s, std::function<void()> op, OpLabel label = {});
/// Waits until what is queued on `s` so far has run.
void wait_until_done(CUstream_st& s);
/// Where `s` stands now, and waiting until it has got there (for orders across streams).
uint64_t stream_mark(CUstream_st& s);
void wait_for_mark(CUstream_st& s, uint64_t target);

// ---- stream capture (graphs.cpp) ----
struct Capture;
/// Captures in progress in the process: while 0, no capture rule applies (a check without lock).
extern std::atomic<int> active_captures;
/// When `s` captures, records `op` as a node and returns true with *result set; when `s` is the
/// legacy default stream and a blocking stream of its device captures, fails with
/// cudaErrorStreamCaptureImplicit (true). Otherwise false: the caller queues `op`.
bool capture_op(CUstream_st& s, std::function<void()>& op, OpLabel label, cudaError_t* result);
/// A potentially unsafe call (an allocation, a synchronous copy, a device synchronize): under the
/// rules of the calling thread's capture interaction mode it fails with
/// cudaErrorStreamCaptureUnsupported and invalidates the capture(s) it would have broken.
cudaError_t check_unsafe_call(const char* call);
/// A call that synchronises with or queries `s`: fails and invalidates when `s` captures
/// (cudaErrorStreamCaptureUnsupported) or is the legacy stream beside a capturing blocking stream
/// (cudaErrorStreamCaptureImplicit).
cudaError_t check_not_capturing(CUstream_st& s, const char* call);
bool is_capturing(CUstream_st& s);
/// Fails a call on capturing stream `s` with `code` and invalidates its capture.
cudaError_t fail_capture(CUstream_st& s, cudaError_t code, const std::string& detail);
/// cudaEventRecord on a capturing stream: true with *result when the record was captured.
bool capture_event_record(CUevent_st& e, CUstream_st& s, cudaError_t* result);
/// cudaStreamWaitEvent: true with *result when capture decided it (a join, a fork, an error).
bool capture_event_wait(const std::shared_ptr<CUstream_st>& s, CUevent_st& e, bool recorded,
                        cudaError_t* result);
/// cudaEventQuery/Synchronize: fails for an event last recorded in a capture in progress.
cudaError_t check_event_not_captured(CUevent_st& e, const char* call);
/// Waits until every stream of the device has drained.
void synchronize_device(int index);

// ---- memory ----
enum class Space { Pageable, Pinned, Device };
struct Region {
  Space space = Space::Pageable;
  int device = -1;
  const char* base = nullptr;  ///< the allocation's start (null for pageable memory)
  std::size_t bytes = 0;       ///< the allocation's size
};
Region find_region(const void* p);
/// Checks that [p, p + bytes) lies in one allocation if it starts in one; "" or the problem.
std::string check_range(const void* p, std::size_t bytes, const char* what);

}  // namespace mtemu::detail

struct CUstream_st {
  int device = 0;
  unsigned flags = 0;
  bool legacy_default = false;
  std::mutex m;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  uint64_t enqueued = 0, completed = 0;
  bool destroyed = false;
  std::atomic<long> delay_us{0};  // sleep before each operation (mtemu::set_stream_delay)
  // Stream capture, guarded by graphs.cpp's capture mutex: the capture this stream is part of,
  // the nodes its next operation depends on, and the handles cudaStreamGetCaptureInfo returns.
  std::shared_ptr<mtemu::detail::Capture> capture;
  std::vector<std::size_t> capture_tail;
  std::vector<CUgraphNode_st*> capture_deps_out;
  // racecheck's stream order (race_streams.cpp, under its mutex): the stream's number there, and
  // how far into each stream's work its next operation is ordered after.
  int race_id = -1;
  std::vector<uint64_t> race_clock;
};

struct CUevent_st {
  // The event's own reference, dropped by cudaEventDestroy: records still queued hold copies, so
  // the event is freed when the last of them has run (a real leak shows under LeakSanitizer).
  std::shared_ptr<CUevent_st> self;
  int device = 0;
  unsigned flags = 0;
  std::mutex m;
  std::shared_ptr<CUstream_st> stream;  // where it was last recorded
  uint64_t target = 0;                  // complete once stream->completed >= target
  uint64_t generation = 0;              // of the latest record
  std::chrono::steady_clock::time_point when{};
  uint64_t when_generation = 0;  // the record whose time `when` is
  // A record captured into a graph (guarded by graphs.cpp's capture mutex): the capture, and the
  // nodes a stream that waits for the event comes to depend on.
  std::shared_ptr<mtemu::detail::Capture> capture;
  std::vector<std::size_t> capture_deps;
  std::vector<uint64_t> race_clock;  // racecheck: the recording stream's order at the record
};
