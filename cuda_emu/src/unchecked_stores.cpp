// Note [stores GCC leaves unchecked] (unchecked_stores.h): the checkers' one entry for routed
// accesses, which reveals the stores whose check GCC dropped.

#include "unchecked_stores.h"

#include <atomic>
#include <mutex>

#include "counters.h"
#include "cuda_emu/counters.h"
#include "cuda_emu/device_api.h"
#include "initcheck.h"
#include "race.h"
#include "routed_memory.h"

namespace mtemu::detail {

thread_local int in_atomic = 0;

// The counters key requests by access site: a revealed store gets a site of its own, apart from
// the load at the same return address, so that each lane's n-th load and n-th hidden store of a
// read-modify-write form requests of one kind. User-space addresses stay below bit 63.
constexpr uintptr_t kHiddenStoreSite = uintptr_t(1) << 63;

// Every routed access of a checked kernel passes here: MTEMU_HOT (counters.h), as the counters'
// per-access path.

namespace {

// Eight: a read-modify-write's store follows its load within a few accesses (those of the
// right-hand side); a longer list costs every access of a checked kernel a longer comparison.
constexpr int kRemembered = 8;
constexpr uint32_t kMaxBytes = 16;  // the widest single access (float4)

struct Bits {
  uint64_t lo = 0, hi = 0;
  bool operator!=(const Bits& o) const { return lo != o.lo || hi != o.hi; }
};

struct Remembered {
  uintptr_t addr = 0, site = 0;
  uint32_t size = 0;  // 0: a free slot
  Bits bits;          // what it read or wrote (a write's: read at the thread's next access)
};

// Per host thread: its blocks' GPU threads take turns on it, and what one remembered is
// forgotten when it yields. Slots are reused round robin, so the one replaced is the oldest
// unless a later access freed another.
struct State {
  Remembered slot[kRemembered];
  int next = 0;                      // the slot replaced when none is free
  int unread = -1;                   // the slot of the last access, when it wrote
  bool any = false;                  // some slot is in use
  const ThreadCtx* owner = nullptr;  // the GPU thread they are of
  bool busy = false;                 // the checkers' own accesses are not the kernel's
};
thread_local State state;

// The words atomics of the running grids target: another block's atomic may change one at any
// moment, so a change seen there is not taken for a hidden store of this thread (a plain load of
// a counter that other blocks increment is common). A word is noted before its atomic runs, in a
// slot of its own hash (a later word may take the slot: that word's changes are then no longer
// excused); the table is cleared when a grid starts with no other running.
constexpr std::size_t kAtomicSlots = 4096;
std::atomic<uintptr_t> atomic_targets[kAtomicSlots];
std::atomic<bool> any_atomic_target{false};  // the table holds a word (else the clear is skipped)
std::mutex grids_mutex;
int grids_running = 0;  // guarded by grids_mutex

MTEMU_HOT std::size_t target_slot(uintptr_t word) {
  return std::size_t((word * 0x9e3779b97f4a7c15ull) >> 40) % kAtomicSlots;
}
void note_atomic_target(uintptr_t addr, std::size_t bytes) {
  any_atomic_target.store(true, std::memory_order_relaxed);
  for (uintptr_t w = addr & ~uintptr_t(3); w < addr + bytes; w += 4)
    atomic_targets[target_slot(w)].store(w, std::memory_order_release);
}
bool atomics_target(uintptr_t addr, uint32_t bytes) {
  for (uintptr_t w = addr & ~uintptr_t(3); w < addr + bytes; w += 4)
    if (atomic_targets[target_slot(w)].load(std::memory_order_acquire) == w) return true;
  return false;
}

// Device and shared memory are routed: read without ASan's check (MTEMU_HOT) or libasan's
// interceptors (the fixed-size copies compile to plain loads).
MTEMU_HOT Bits read_bits(uintptr_t from, uint32_t size) {
  const auto* p = reinterpret_cast<const unsigned char*>(from);
  Bits b;
  switch (size) {
    case 1:
      b.lo = *p;
      break;
    case 2: {
      uint16_t v;
      __builtin_memcpy(&v, p, 2);
      b.lo = v;
      break;
    }
    case 4: {
      uint32_t v;
      __builtin_memcpy(&v, p, 4);
      b.lo = v;
      break;
    }
    case 8:
      __builtin_memcpy(&b.lo, p, 8);
      break;
    case 16:
      __builtin_memcpy(&b.lo, p, 8);
      __builtin_memcpy(&b.hi, p + 8, 8);
      break;
    default: {
      unsigned char bytes[kMaxBytes] = {};
      const auto* v = reinterpret_cast<const volatile unsigned char*>(p);
      for (uint32_t i = 0; i < size; ++i) bytes[i] = v[i];
      __builtin_memcpy(&b.lo, bytes, 8);
      __builtin_memcpy(&b.hi, bytes + 8, 8);
    }
  }
  return b;
}

MTEMU_HOT void to_checkers(uintptr_t addr, uint32_t size, bool store, uintptr_t site, bool hidden) {
  if (counters_on) count_access(addr, size, store, hidden ? site | kHiddenStoreSite : site);
  if (initcheck_on) initcheck_access(addr, size, store, site);
  if (racecheck_on) racecheck_access(addr, size, store, site);
}

// The last access wrote (a store, an atomic): what it left is read now that it has run.
MTEMU_HOT void read_what_was_written() {
  if (state.unread < 0) return;
  Remembered& r = state.slot[state.unread];
  r.bits = read_bits(r.addr, r.size);
  state.unread = -1;
}

// A slot's range checked for a hidden store: changed bytes are one, which goes to the checkers.
MTEMU_HOT void reveal(Remembered& r) {
  const Bits now = read_bits(r.addr, r.size);
  if (now != r.bits) {
    if (!atomics_target(r.addr, r.size)) to_checkers(r.addr, r.size, true, r.site, true);
    r.bits = now;
  }
}

// Before the access to [addr, addr + size): the remembered ranges it overlaps are checked for a
// hidden store and forgotten (the access supersedes them). A hidden store is checked for when
// its range is accessed again, when it is about to be forgotten, and at the thread's yield, so
// that each comes before the next checked access there: the order in which it happened. Returns
// a free slot (-1: none).
MTEMU_HOT int before_access(uintptr_t addr, uint64_t size) {
  read_what_was_written();
  int free_slot = -1;
  for (int i = 0; i < kRemembered; ++i) {
    Remembered& r = state.slot[i];
    if (r.size != 0 && r.addr < addr + size && addr < r.addr + r.size) {
      reveal(r);
      r.size = 0;
    }
    if (r.size == 0) free_slot = i;
  }
  return free_slot;
}

MTEMU_HOT void remember(int free_slot, uintptr_t addr, uint32_t size, bool written,
                        uintptr_t site) {
  int i = free_slot;
  if (i < 0) {  // the oldest is checked, then replaced
    i = state.next;
    state.next = (state.next + 1) % kRemembered;
    reveal(state.slot[i]);
  }
  Remembered& r = state.slot[i];
  r.addr = addr;
  r.site = site;
  r.size = size;
  if (written)
    state.unread = i;
  else
    r.bits = read_bits(addr, size);
  state.any = true;
}

MTEMU_HOT void forget_all() {
  if (!state.any) return;
  for (Remembered& r : state.slot) r.size = 0;
  state.unread = -1;
  state.any = false;
}

struct Busy {
  Busy() { state.busy = true; }
  ~Busy() { state.busy = false; }
};

// The running GPU thread, or null in host code. What another thread remembered is dropped: it
// yields before another runs, but not when it faults.
MTEMU_HOT const ThreadCtx* gpu_thread() {
  const ThreadCtx* t = tls_thread.load(std::memory_order_relaxed);
  if (t != state.owner) {
    forget_all();
    state.owner = t;
  }
  return t;
}

}  // namespace

MTEMU_HOT void routed_access(uintptr_t addr, uint32_t size, bool store, uintptr_t site) {
  if (state.busy || gpu_thread() == nullptr) {  // host code: the checkers ignore it
    to_checkers(addr, size, store, site, false);
    return;
  }
  Busy guard;
  const int free_slot = before_access(addr, size);
  to_checkers(addr, size, store, site, false);
  // Wider than any one hidden store: only forgotten what it overlaps (above).
  if (size <= kMaxBytes) remember(free_slot, addr, size, store || in_atomic > 0, site);
}

MTEMU_HOT void routed_thread_yield() {
  if (state.busy || gpu_thread() == nullptr) return;
  Busy guard;
  read_what_was_written();
  for (Remembered& r : state.slot)
    if (r.size != 0) reveal(r);
  forget_all();
}

void routed_grid_begin() {
  std::lock_guard<std::mutex> lock(grids_mutex);
  if (grids_running++ == 0 && any_atomic_target.exchange(false, std::memory_order_relaxed))
    for (auto& w : atomic_targets) w.store(0, std::memory_order_relaxed);
}

void routed_grid_end() {
  std::lock_guard<std::mutex> lock(grids_mutex);
  --grids_running;
}

void atomic_scope_begin(const void* address, std::size_t bytes) {
  ++in_atomic;
  note_atomic_target(reinterpret_cast<uintptr_t>(address), bytes);
  if (state.busy || gpu_thread() == nullptr) return;
  Busy guard;
  // Before the atomic changes what they remember; its own change, read at the thread's next
  // access, is no hidden store (the site is never used unless a plain store hides behind the
  // atomic's check).
  const auto a = reinterpret_cast<uintptr_t>(address);
  remember(before_access(a, bytes), a, uint32_t(bytes), true, 0);
}

}  // namespace mtemu::detail
