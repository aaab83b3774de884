// racecheck (cuda_emu/racecheck.h): a shadow cell per word of global and shared memory that
// kernels touch, holding who wrote it last and who read it last: the grid (a serial number), the
// block, the thread, the block's barrier generation and the warp's __syncwarp generation at the
// access. An access is ordered after an earlier one by another thread only when a barrier of the
// block (__syncthreads) or of the warp (__syncwarp, WMMA) came between them, or when the earlier
// one's grid has finished. What is not ordered is a race: a read after another thread's write
// (RAW), a write after another thread's read (WAR) or write (WAW), across threads of a block,
// blocks of a grid, or grids in flight at once (streams without an event between them). Atomics
// race with nothing (device_api.h marks them). The check is deterministic: it does not depend on
// the order the emulator happens to run threads in, so a race is reported on every run.
//
// Cells are keyed by 4-byte word (accesses of 4 bytes and more) or by byte (1- and 2-byte
// accesses, so that neighbouring chars or halves of different threads do not collide); a byte
// access and a word access of the same memory are not compared. Shared memory is reused by the
// next block: a shared-memory cell written by another block counts as fresh. Every cell is
// forgotten when no grid is in flight.

#include "race.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "block.h"
#include "check_report.h"
#include "counters.h"
#include "grid.h"
#include "routed_memory.h"
#include "sanitizer.h"

namespace mtemu::detail {

bool racecheck_on = false;

namespace {

struct Stamp {
  uint64_t grid = 0;  // 0: none
  uintptr_t pc = 0;
  uint32_t block = 0;    // linear block index
  uint32_t thread = 0;   // linear thread index in the block
  uint32_t barrier = 0;  // barriers the block had completed
  uint32_t warp = 0;     // memory-ordering warp collectives its warp had completed
};
// Two readers: when two different threads read a word without order, at least one of them is not
// the thread that writes it next, so a write after unordered reads is caught whoever makes it.
struct Cell {
  Stamp write, read[2];
};

constexpr int kShards = 64;
struct Shard {
  std::mutex m;
  std::unordered_map<uintptr_t, Cell> cells;
};
Shard* shards() {
  static auto* s = new Shard[kShards];  // never destroyed: hooks may run during exit
  return s;
}

std::mutex flight_mutex;
std::vector<uint64_t>& in_flight() {
  static auto* v = new std::vector<uint64_t>();
  return *v;
}
uint64_t next_serial = 0;  // guarded by flight_mutex

bool grid_in_flight(uint64_t serial) {
  std::lock_guard<std::mutex> lock(flight_mutex);
  for (uint64_t s : in_flight())
    if (s == serial) return true;
  return false;
}

enum class Order { Ordered, SameBlock, OtherBlock, OtherGrid };

// How `earlier` (another access of the word) stands to `now`.
Order order(const Stamp& earlier, const Stamp& now, bool shared) {
  if (earlier.grid == 0) return Order::Ordered;
  if (earlier.grid != now.grid)
    return shared || !grid_in_flight(earlier.grid) ? Order::Ordered : Order::OtherGrid;
  if (earlier.block != now.block) return shared ? Order::Ordered : Order::OtherBlock;
  if (earlier.thread == now.thread || earlier.barrier != now.barrier) return Order::Ordered;
  if (earlier.thread / 32 == now.thread / 32 && earlier.warp != now.warp) return Order::Ordered;
  return Order::SameBlock;
}

void report(BlockRun& b, const ThreadCtx& t, const char* what, uintptr_t addr, uint32_t size,
            bool shared, const Stamp& other, const char* other_what, Order how, uintptr_t pc) {
  if (b.fault_code != cudaSuccess) return;  // the first fault is the report
  const Grid& g = *b.grid;
  std::string who;
  switch (how) {
    case Order::SameBlock:
      who =
          "thread " + idx3(unlinear(other.thread, g.config.block)) +
          " of the same block, with no __syncthreads() between them" +
          (other.thread / 32 == uint32_t(t.linear) / 32 ? " and no __syncwarp() (same warp)" : "");
      break;
    case Order::OtherBlock:
      who = "block " + idx3(unlinear(other.block, g.config.grid)) + " thread " +
            idx3(unlinear(other.thread, g.config.block)) +
            " of the same grid (blocks are not ordered: use atomics, or a second kernel)";
      break;
    case Order::OtherGrid:
      who =
          "a thread of another grid in flight at the same time (another stream, with no event "
          "or synchronisation between the two)";
      break;
    case Order::Ordered:
      break;
  }
  b.fault_code = cudaErrorLaunchFailure;
  b.fault_text = describe(g.site) + " block " + idx3(b.index) + " thread " + idx3(t.thread_idx) +
                 ": racecheck: " + (shared ? "__shared__" : "__global__") + " " + what +
                 " of size " + std::to_string(size) + " bytes at " + hex(addr) + " in " +
                 source_of(pc) + " races with the " + other_what + " in " + source_of(other.pc) +
                 " by " + who + " (a data race: compute-sanitizer's racecheck reports this)";
}

// A global-memory access against the copies and memsets on other streams that the grid is not
// ordered after (race_streams.cpp): reading or writing what one writes, or writing what one reads.
// Reported like a race between threads; true when it was one.
bool races_with_a_copy(BlockRun& b, const ThreadCtx& t, uintptr_t addr, uint32_t size, bool store,
                       uintptr_t pc) {
  const RaceCopies* copies = b.grid->race_copies.get();
  if (copies == nullptr) return false;
  for (const RaceCopy& c : copies->unordered) {
    const bool hits_dst = addr < c.dst_hi && addr + size > c.dst_lo;
    const bool hits_src = store && addr < c.src_hi && addr + size > c.src_lo;
    if (!hits_dst && !hits_src) continue;
    if (b.fault_code != cudaSuccess) return true;  // the first fault is the report
    const bool memset = c.src_hi == 0;
    const uintptr_t lo = hits_dst ? c.dst_lo : c.src_lo;
    const std::string place = device_place(std::max(addr, lo));
    b.fault_code = cudaErrorLaunchFailure;
    b.fault_text =
        describe(b.grid->site) + " block " + idx3(b.index) + " thread " + idx3(t.thread_idx) +
        ": racecheck: __global__ " + (store ? "write" : "read") + " of size " +
        std::to_string(size) + " bytes at " + hex(addr) + " in " + source_of(pc) +
        " races with the " + c.call + " of " + std::to_string(c.dst_hi - c.dst_lo) +
        " bytes queued in " + source_of(c.caller) + " on another stream, which " +
        (hits_dst ? (memset ? "sets" : "writes") : "reads") + " this memory" +
        (place.empty() ? std::string() : " (" + place + ")") +
        ": the launch is not ordered after it (no cudaStreamWaitEvent on an event recorded "
        "after it, and no synchronisation of its stream before the launch), so it may run while "
        "the copy does (a data race between streams; compute-sanitizer's racecheck checks shared "
        "memory only and does not report this)";
    return true;
  }
  return false;
}

bool in_shared(const BlockRun& b, uintptr_t a) {
  for (const SharedVar& v : b.shared) {
    const auto lo = reinterpret_cast<uintptr_t>(v.storage);
    if (a >= lo && a < lo + v.bytes) return true;
  }
  const auto lo = reinterpret_cast<uintptr_t>(b.dynamic_shared);
  return a >= lo && a < lo + b.grid->config.dynamic_smem;
}

void check(BlockRun& b, ThreadCtx& t, uintptr_t addr, uint32_t size, bool store, bool shared,
           uintptr_t pc);

}  // namespace

// Inside the check: its own accesses do not count (inline library code it calls, such as
// std::string's, may be the instantiation from an instrumented kernel file, which calls the hooks).
thread_local bool busy = false;
struct Busy {
  Busy() { busy = true; }
  ~Busy() { busy = false; }
};

__attribute__((no_sanitize_address)) void racecheck_access(uintptr_t addr, uint32_t size,
                                                           bool store, uintptr_t pc) {
  ThreadCtx* t = tls_thread.load(std::memory_order_relaxed);
  if (t == nullptr || in_atomic > 0 || size == 0 || busy) return;  // host code, an atomic
  Busy guard;
  BlockRun& b = *t->block;
  if (b.fibers[t->linear]->contains(addr)) return;  // the thread's own stack
  check(b, *t, addr, size, store, in_shared(b, addr), pc);
}

namespace {

__attribute__((no_sanitize_address)) void check(BlockRun& b, ThreadCtx& t_, uintptr_t addr,
                                                uint32_t size, bool store, bool shared,
                                                uintptr_t pc) {
  ThreadCtx* t = &t_;
  if (!shared && races_with_a_copy(b, *t, addr, size, store, pc)) return;
  Stamp now;
  now.grid = b.grid->race_serial;
  now.pc = pc;
  now.block =
      uint32_t(b.index.x + b.grid->config.grid.x * (b.index.y + b.grid->config.grid.y * b.index.z));
  now.thread = uint32_t(t->linear);
  now.barrier = b.barrier_generation;
  now.warp = b.warp_generation[t->linear / 32];
  // Words for accesses of 4 bytes and more, bytes (keys with the low bit set) for smaller ones.
  const bool bytes = size < 4;
  const uintptr_t step = bytes ? 1 : 4;
  const uintptr_t first = bytes ? addr : addr & ~uintptr_t(3);
  for (uintptr_t a = first; a < addr + size; a += step) {
    const uintptr_t key = bytes ? (a << 1) | 1 : a << 1;
    Shard& s = shards()[(key >> 3 ^ key >> 11) % kShards];
    std::lock_guard<std::mutex> lock(s.m);
    Cell& c = s.cells[key];
    Order how = order(c.write, now, shared);
    if (how != Order::Ordered) {
      report(b, *t, store ? "write" : "read", addr, size, shared, c.write, "earlier write", how,
             pc);
      return;
    }
    if (store) {
      for (const Stamp& r : c.read) {
        how = order(r, now, shared);
        if (how != Order::Ordered) {
          report(b, *t, "write", addr, size, shared, r, "earlier read", how, pc);
          return;
        }
      }
      c.write = now;
    } else {
      // Keep two unordered readers of different threads; replace one that is ordered or this one.
      Stamp* slot = nullptr;
      for (Stamp& r : c.read)
        if (slot == nullptr && (order(r, now, shared) == Order::Ordered || r.thread == now.thread))
          slot = &r;
      if (slot != nullptr) *slot = now;
    }
  }
}

}  // namespace

void racecheck_launch_begin(Grid& g) {
  std::lock_guard<std::mutex> lock(flight_mutex);
  g.race_serial = ++next_serial;
  in_flight().push_back(g.race_serial);
}

void racecheck_launch_end(const Grid& g) {
  {
    std::lock_guard<std::mutex> lock(flight_mutex);  // not held with a shard's (order() nests them)
    auto& v = in_flight();
    for (std::size_t i = 0; i < v.size(); ++i)
      if (v[i] == g.race_serial) {
        v.erase(v.begin() + long(i));
        break;
      }
    if (!v.empty()) return;
  }
  // No grid in flight: what the cells say orders nothing any more (forgetting one that a grid
  // started just now wrote only misses a race).
  for (int i = 0; i < kShards; ++i) {
    std::lock_guard<std::mutex> shard_lock(shards()[i].m);
    std::unordered_map<uintptr_t, Cell>().swap(shards()[i].cells);
  }
}

}  // namespace mtemu::detail

bool mtemu::racecheck_enable(bool on) {
  if (on && !MTEMU_ASAN) return false;
  if (on != detail::racecheck_on) detail::racecheck_forget_stream_order();
  detail::racecheck_on = on;
  detail::set_memory_hook(detail::kHookRacecheck, on);  // Note [one hook flag] (counters.h)
  return true;
}

namespace {
bool start_from_env() {
  const char* v = std::getenv("MINITRAIN_EMU_RACECHECK");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "0") == 0) return true;
  if (!mtemu::racecheck_enable(true)) {
    std::fprintf(stderr,
                 "cuda-emu: MINITRAIN_EMU_RACECHECK is ignored: the emulator sees kernel accesses "
                 "through AddressSanitizer, and this build has none (use the emu preset)\n");
  }
  return true;
}
[[maybe_unused]] const bool started_from_env = start_from_env();
}  // namespace
