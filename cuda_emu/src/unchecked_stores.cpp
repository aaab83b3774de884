// Note [stores GCC leaves unchecked] (unchecked_stores.h): the checkers' one entry for routed
// accesses, which reveals the stores whose check GCC dropped.

#include "unchecked_stores.h"

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

// Every routed access of a checked kernel passes here: kept out of the sanitizers'
// instrumentation, as the counters' per-access path is.
#define MTEMU_HOT __attribute__((no_sanitize("address", "undefined")))

namespace {

// Eight: a read-modify-write's store follows its load within a few accesses (those of the
// right-hand side); a longer list costs every access of a checked kernel a longer comparison.
constexpr int kRemembered = 8;
constexpr uint32_t kMaxBytes = 16;  // the widest single access (float4)

struct Remembered {
  uintptr_t addr, site;
  uint32_t size;
  bool unread;  // a store or an atomic: its bytes are read at the thread's next access
  unsigned char bytes[kMaxBytes];
};

// Per host thread, oldest first: its blocks' GPU threads take turns on it, and what one
// remembered is forgotten when it yields.
thread_local Remembered remembered[kRemembered];
thread_local int remembered_count = 0;
thread_local const ThreadCtx* owner = nullptr;  // the GPU thread they are of
thread_local bool busy = false;                 // the checkers' own accesses are not the kernel's

// Device and shared memory are routed: read without ASan's check (MTEMU_HOT) or libasan's
// interceptors.
MTEMU_HOT void read_bytes(unsigned char* to, uintptr_t from, uint32_t size) {
  const auto* p = reinterpret_cast<const volatile unsigned char*>(from);
  for (uint32_t i = 0; i < size; ++i) to[i] = p[i];
}
MTEMU_HOT bool same_bytes(const unsigned char* seen, uintptr_t at, uint32_t size) {
  const auto* p = reinterpret_cast<const volatile unsigned char*>(at);
  for (uint32_t i = 0; i < size; ++i)
    if (p[i] != seen[i]) return false;
  return true;
}

MTEMU_HOT void to_checkers(uintptr_t addr, uint32_t size, bool store, uintptr_t site, bool hidden) {
  if (counters_on) count_access(addr, size, store, hidden ? site | kHiddenStoreSite : site);
  if (initcheck_on) initcheck_access(addr, size, store, site);
  if (racecheck_on) racecheck_access(addr, size, store, site);
}

// The hidden stores since the thread's last access: each remembered range whose bytes changed.
MTEMU_HOT void reveal_hidden_stores() {
  for (int i = 0; i < remembered_count; ++i) {
    Remembered& r = remembered[i];
    if (r.unread) {
      read_bytes(r.bytes, r.addr, r.size);
      r.unread = false;
    } else if (!same_bytes(r.bytes, r.addr, r.size)) {
      to_checkers(r.addr, r.size, true, r.site, true);
      read_bytes(r.bytes, r.addr, r.size);
    }
  }
}

// What overlaps [addr, addr + size) is forgotten: a later access there supersedes it.
MTEMU_HOT void forget_overlapping(uintptr_t addr, uint64_t size) {
  int kept = 0;
  for (int i = 0; i < remembered_count; ++i)
    if (!(remembered[i].addr < addr + size && addr < remembered[i].addr + remembered[i].size))
      remembered[kept++] = remembered[i];
  remembered_count = kept;
}

MTEMU_HOT void remember(uintptr_t addr, uint32_t size, bool unread, uintptr_t site) {
  forget_overlapping(addr, size);
  if (remembered_count == kRemembered) {  // the oldest goes
    for (int i = 1; i < kRemembered; ++i) remembered[i - 1] = remembered[i];
    --remembered_count;
  }
  Remembered& r = remembered[remembered_count++];
  r.addr = addr;
  r.site = site;
  r.size = size;
  r.unread = unread;
  if (!unread) read_bytes(r.bytes, addr, size);
}

struct Busy {
  Busy() { busy = true; }
  ~Busy() { busy = false; }
};

// The running GPU thread, or null in host code. What another thread remembered is dropped: it
// yields before another runs, but not when it faults.
MTEMU_HOT const ThreadCtx* gpu_thread() {
  const ThreadCtx* t = tls_thread.load(std::memory_order_relaxed);
  if (t != owner) {
    remembered_count = 0;
    owner = t;
  }
  return t;
}

}  // namespace

MTEMU_HOT void routed_access(uintptr_t addr, uint32_t size, bool store, uintptr_t site) {
  if (busy || gpu_thread() == nullptr) {  // host code: the checkers ignore it
    to_checkers(addr, size, store, site, false);
    return;
  }
  Busy guard;
  reveal_hidden_stores();
  to_checkers(addr, size, store, site, false);
  if (size <= kMaxBytes)
    remember(addr, size, store || in_atomic > 0, site);
  else
    forget_overlapping(addr, size);  // wider than any one hidden store
}

MTEMU_HOT void routed_thread_yield() {
  if (busy || gpu_thread() == nullptr) return;
  Busy guard;
  reveal_hidden_stores();
  remembered_count = 0;
}

void atomic_scope_begin(const void* address, std::size_t bytes) {
  ++in_atomic;
  if (busy || gpu_thread() == nullptr) return;
  Busy guard;
  reveal_hidden_stores();  // before the atomic changes what they remember
  // Its own change, read at the thread's next access, is no hidden store; the site is never used
  // unless a plain store hides behind the atomic's check.
  remember(reinterpret_cast<uintptr_t>(address), uint32_t(bytes), true, 0);
}

}  // namespace mtemu::detail
