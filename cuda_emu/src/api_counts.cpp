// The runtime-call counts of cuda_emu/api_counts.h: one relaxed atomic increment per counted call,
// so that counting costs nothing worth turning off.

#include "cuda_emu/api_counts.h"

#include <atomic>
#include <initializer_list>

namespace mtemu {
namespace {

struct Counters {
  std::atomic<uint64_t> launches{0}, memsets{0}, host_syncs{0}, device_to_host_copies{0},
      mallocs{0}, frees{0};
};
Counters& counters() {
  static Counters c;
  return c;
}
thread_local Counters thread_counters;
thread_local int blocking_depth = 0;

void bump(std::atomic<uint64_t>& n) { n.fetch_add(1, std::memory_order_relaxed); }

// Both the process's count and the calling thread's.
void bump(std::atomic<uint64_t> Counters::*n) {
  bump(counters().*n);
  bump(thread_counters.*n);
}

ApiCounts read(const Counters& c) {
  ApiCounts a;
  a.launches = c.launches.load();
  a.memsets = c.memsets.load();
  a.host_syncs = c.host_syncs.load();
  a.device_to_host_copies = c.device_to_host_copies.load();
  a.mallocs = c.mallocs.load();
  a.frees = c.frees.load();
  return a;
}

void zero(Counters& c) {
  for (std::atomic<uint64_t>* n :
       {&c.launches, &c.memsets, &c.host_syncs, &c.device_to_host_copies, &c.mallocs, &c.frees})
    n->store(0);
}

}  // namespace

ApiCounts api_counts() { return read(counters()); }
ApiCounts api_counts_of_this_thread() { return read(thread_counters); }

void api_counts_reset() {
  zero(counters());
  zero(thread_counters);
}

namespace detail {

void count_api(ApiEvent e) noexcept {
  switch (e) {
    case ApiEvent::Launch:
      bump(&Counters::launches);
      break;
    case ApiEvent::Memset:
      bump(&Counters::memsets);
      break;
    case ApiEvent::DeviceToHostCopy:
      bump(&Counters::device_to_host_copies);
      break;
    case ApiEvent::Malloc:
      bump(&Counters::mallocs);
      break;
    case ApiEvent::Free:
      bump(&Counters::frees);
      break;
  }
}

BlockingCall::BlockingCall() noexcept {
  if (blocking_depth++ == 0) bump(&Counters::host_syncs);
}
BlockingCall::~BlockingCall() { --blocking_depth; }

}  // namespace detail
}  // namespace mtemu
