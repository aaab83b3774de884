// racecheck's stream order (race.h): a vector clock per stream, per recorded event and for the
// host, and the copies and memsets still unordered with some later work.
//
// A stream's clock says, for every stream, how many of its operations the stream's next
// operation is ordered after. Queueing an operation on stream s counts it in s's own entry and
// takes in the host's clock (what the host had waited for before the call); the legacy default
// stream's implicit waits take in the other streams' clocks; cudaStreamWaitEvent takes in the
// clock the event was recorded with. The host's clock takes in a stream's (or an event's) when
// the host waits for it. A copy queued on stream c as its k-th operation is ordered before a
// launch whose clock has entry c >= k; otherwise the launch may run while the copy does.
//
// The host's clock is one for the whole process, not one per host thread: a thread that waits
// for a stream and then tells another thread (through a mutex, a join) orders that thread's later
// work too, and a clock per thread would call that a race. So a race whose only "order" is a
// wait by another host thread with no synchronisation between the threads is missed, never a
// false report.

#include <algorithm>
#include <deque>
#include <mutex>

#include "race.h"
#include "runtime.h"

namespace mtemu::detail {

namespace {

using Clock = std::vector<uint64_t>;

struct Queued {
  RaceCopy copy;
  uint64_t position = 0;  // its place in its stream's order (1 = the stream's first operation)
};

// One lock for every clock and the list; never held while taking another lock.
std::mutex order_mutex;
int next_stream = 0;
Clock& host_clock() {
  static auto* c = new Clock();
  return *c;
}
std::deque<Queued>& queued() {
  static auto* q = new std::deque<Queued>();
  return *q;
}
// A program that never waits keeps at most this many copies: the oldest are forgotten (a race
// with them is then missed).
constexpr std::size_t kMaxQueued = 4096;

// This host thread's last queued operation (for racecheck_copy_queued), and the launch whose
// unordered copies the next enqueue fills in.
thread_local int last_stream = -1;
thread_local uint64_t last_position = 0;
thread_local std::shared_ptr<RaceCopies> expected_launch;

uint64_t at(const Clock& c, int stream) { return std::size_t(stream) < c.size() ? c[stream] : 0; }

void join(Clock& into, const Clock& from) {
  if (into.size() < from.size()) into.resize(from.size(), 0);
  for (std::size_t i = 0; i < from.size(); ++i) into[i] = std::max(into[i], from[i]);
}

int id_of(CUstream_st& s) {
  if (s.race_id < 0) s.race_id = next_stream++;
  return s.race_id;
}

// Copies the host has waited for are ordered before everything queued from now on.
void forget_waited_for() {
  auto& q = queued();
  const Clock& h = host_clock();
  for (auto it = q.begin(); it != q.end();)
    it = at(h, it->copy.stream) >= it->position ? q.erase(it) : it + 1;
}

}  // namespace

void racecheck_enqueue(CUstream_st& s, const std::vector<CUstream_st*>& waits_for) {
  std::lock_guard<std::mutex> lock(order_mutex);
  const int id = id_of(s);
  Clock& c = s.race_clock;
  for (CUstream_st* o : waits_for) join(c, o->race_clock);
  join(c, host_clock());
  if (c.size() <= std::size_t(id)) c.resize(id + 1, 0);
  last_stream = id;
  last_position = ++c[id];
  if (expected_launch) {
    for (const Queued& q : queued())
      if (q.copy.stream != id && at(c, q.copy.stream) < q.position)
        expected_launch->unordered.push_back(q.copy);
    expected_launch.reset();
  }
}

void racecheck_not_enqueued() {
  last_stream = -1;
  expected_launch.reset();
}

void racecheck_host_waited(CUstream_st& s) {
  std::lock_guard<std::mutex> lock(order_mutex);
  join(host_clock(), s.race_clock);
  forget_waited_for();
}

void racecheck_event_recorded(CUevent_st& e, CUstream_st& s) {
  std::lock_guard<std::mutex> lock(order_mutex);
  e.race_clock = s.race_clock;
}

void racecheck_event_waited(CUstream_st& s, const CUevent_st& e) {
  std::lock_guard<std::mutex> lock(order_mutex);
  join(s.race_clock, e.race_clock);
}

void racecheck_host_waited_event(const CUevent_st& e) {
  std::lock_guard<std::mutex> lock(order_mutex);
  join(host_clock(), e.race_clock);
  forget_waited_for();
}

void racecheck_copy_queued(const void* dst, const void* src, std::size_t bytes, const char* call,
                           uintptr_t caller) {
  if (last_stream < 0) return;  // captured into a graph, or racecheck came on meanwhile
  Queued q;
  q.copy.dst_lo = reinterpret_cast<uintptr_t>(dst);
  q.copy.dst_hi = q.copy.dst_lo + bytes;
  if (src != nullptr) {
    q.copy.src_lo = reinterpret_cast<uintptr_t>(src);
    q.copy.src_hi = q.copy.src_lo + bytes;
  }
  q.copy.call = call;
  q.copy.caller = caller;
  q.copy.stream = last_stream;
  q.position = last_position;
  last_stream = -1;
  std::lock_guard<std::mutex> lock(order_mutex);
  if (at(host_clock(), q.copy.stream) >= q.position) return;  // a synchronous copy, waited for
  auto& list = queued();
  list.push_back(q);
  if (list.size() > kMaxQueued) list.pop_front();
}

std::shared_ptr<RaceCopies> racecheck_expect_launch() {
  expected_launch = std::make_shared<RaceCopies>();
  return expected_launch;
}

void racecheck_forget_stream_order() {
  std::lock_guard<std::mutex> lock(order_mutex);
  queued().clear();
}

}  // namespace mtemu::detail
