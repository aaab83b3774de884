#pragma once
// The emulator's side of racecheck (cuda_emu/racecheck.h): the AddressSanitizer access hooks
// (counters.cpp, through unchecked_stores.cpp) pass it every kernel load and store, the worker
// pool every grid's start and end.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "cuda_emu/racecheck.h"

struct CUstream_st;
struct CUevent_st;

namespace mtemu::detail {

struct Grid;

/// A kernel's load or store of `size` bytes at `addr`; `pc` is the access's return address.
void racecheck_access(uintptr_t addr, uint32_t size, bool store, uintptr_t pc);
/// Around a grid's run: a grid gets a serial number; grids in flight together are unordered.
void racecheck_launch_begin(Grid& g);
void racecheck_launch_end(const Grid& g);

// ---- Stream order (race_streams.cpp): copies and memsets in the race shadow.
//
// Each operation queued on a stream gets, on the host, at the call that queues it, a vector clock:
// how far into every stream's queue it is ordered after (its own stream's earlier work, the
// streams an event wait or the legacy default stream makes it wait for, and whatever the host
// had waited for before queueing it). A copy or memset is remembered with its stream and place
// in that order; a launch takes the list of those it is not ordered after, and each of its
// accesses is checked against them (race.cpp). It is decided from the calls the program makes,
// not from when the emulator's stream threads happen to run, so a missing event wait is reported
// on every run.

/// A copy or memset that a launch is not ordered after: the bytes it writes and reads.
struct RaceCopy {
  uintptr_t dst_lo = 0, dst_hi = 0;
  uintptr_t src_lo = 0, src_hi = 0;  // empty for a memset
  const char* call = "";             // "cudaMemcpyAsync", "cudaMemsetAsync"
  uintptr_t caller = 0;              // the return address into the program that queued it
  int stream = 0;                    // racecheck's number of its stream
};
struct RaceCopies {
  std::vector<RaceCopy> unordered;
};

/// In enqueue (streams.cpp), before `s` queues an operation that waits for `waits_for`'s work
/// queued so far (the legacy default stream's implicit waits).
void racecheck_enqueue(CUstream_st& s, const std::vector<CUstream_st*>& waits_for);
/// enqueue did not queue the operation (a stream capture took it).
void racecheck_not_enqueued();
/// The host waited for all the work queued on `s` (a synchronisation, a synchronous copy).
void racecheck_host_waited(CUstream_st& s);
/// cudaEventRecord of `e` on `s` (after its record operation was queued); cudaStreamWaitEvent;
/// cudaEventSynchronize (or a cudaEventQuery that found the event complete).
void racecheck_event_recorded(CUevent_st& e, CUstream_st& s);
void racecheck_event_waited(CUstream_st& s, const CUevent_st& e);
void racecheck_host_waited_event(const CUevent_st& e);
/// After enqueue queued a copy (`src` non-null) or memset on this thread: remember it.
void racecheck_copy_queued(const void* dst, const void* src, std::size_t bytes, const char* call,
                           uintptr_t caller);
/// Before a launch's enqueue: the list that enqueue fills with the copies the launch is not
/// ordered after (the launch's Grid keeps it).
std::shared_ptr<RaceCopies> racecheck_expect_launch();
/// racecheck turned on or off: what was remembered is stale.
void racecheck_forget_stream_order();

}  // namespace mtemu::detail
