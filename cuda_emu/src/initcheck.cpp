// initcheck (cuda_emu/initcheck.h): a shadow byte per byte of device memory, 1 once written.
//
// The runtime's calls (memory.cpp) create and drop the shadows and mark what copies and memsets
// write, in stream order; kernel loads and stores arrive through AddressSanitizer's access calls
// (counters.cpp), one call per access of every instrumented kernel. An access is first sorted
// out cheaply: outside any GPU thread, outside the span of live allocations, or in a page known
// to hold none (a fiber's stack, shared memory); then a per-thread cache of the allocations hit
// last; then the table. A stale cache is noticed by a generation count that every allocation,
// free and switch on or off advances.
//
// A load of an unwritten byte records a device fault in the running block (block.cpp stops the
// block when the thread next yields: the hook is called from kernel code that cannot unwind).

#include "initcheck.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "block.h"
#include "check_report.h"
#include "counters.h"
#include "cuda_emu/initcheck.h"
#include "grid.h"
#include "sanitizer.h"

namespace mtemu::detail {

bool initcheck_on = false;  // tracking: either check below is on

namespace {

bool report_unwritten = false;  // initcheck
bool check_provenance = false;  // the provenance check

struct Shadow {
  uintptr_t lo = 0, hi = 0;
  int device = 0;
  const char* how = "";
  bool reissued = false;  // handed out again by the caching allocator
  std::unique_ptr<uint8_t[]> written;
};

}  // namespace

// What a launch's pointers reach: the allocations its parameter words point into (one past the
// end included), and those whose address it loaded from device memory.
struct Provenance {
  std::vector<uintptr_t> args;
  std::mutex m;
  std::vector<uintptr_t> reached;  // allocation bases
};

namespace {

std::shared_mutex table_mutex;
std::map<uintptr_t, std::unique_ptr<Shadow>>& table() {
  static auto* t = new std::map<uintptr_t, std::unique_ptr<Shadow>>();
  return *t;
}
std::atomic<uint64_t> generation{1};
std::atomic<uintptr_t> span_lo{~uintptr_t(0)}, span_hi{0};

constexpr uintptr_t kPage = 4096;
struct Cache {
  uint64_t generation = 0;
  static constexpr int kShadows = 4, kPages = 8;
  Shadow* shadows[kShadows] = {};
  int next_shadow = 0;
  uintptr_t empty_pages[kPages] = {};  // page numbers + 1 that no allocation touches
  int next_page = 0;
};
thread_local Cache tls_cache;

// Under the table lock: the allocation holding `a`, or null.
Shadow* lookup(uintptr_t a) {
  auto it = table().upper_bound(a);
  if (it == table().begin()) return nullptr;
  --it;
  return a < it->second->hi ? it->second.get() : nullptr;
}

// The hot path (every kernel access): not instrumented by AddressSanitizer itself, which halves
// initcheck's cost; it touches only the emulator's own tables.
__attribute__((no_sanitize_address)) Shadow* find(uintptr_t a) {
  Cache& c = tls_cache;
  const uint64_t g = generation.load(std::memory_order_acquire);
  if (c.generation != g) c = Cache{}, c.generation = g;
  for (Shadow* s : c.shadows)
    if (s != nullptr && a >= s->lo && a < s->hi) return s;
  const uintptr_t page = a / kPage + 1;
  for (uintptr_t p : c.empty_pages)
    if (p == page) return nullptr;
  std::shared_lock<std::shared_mutex> lock(table_mutex);
  if (Shadow* s = lookup(a)) {
    c.shadows[c.next_shadow++ % Cache::kShadows] = s;
    return s;
  }
  // Remember the page if no allocation overlaps it.
  const uintptr_t first = a / kPage * kPage;
  auto it = table().lower_bound(first);
  const bool next_clear = it == table().end() || it->first >= first + kPage;
  const bool prev_clear = it == table().begin() || std::prev(it)->second->hi <= first;
  if (next_clear && prev_clear) c.empty_pages[c.next_page++ % Cache::kPages] = page;
  return nullptr;
}

// "byte 20 of the 400-byte allocation at 0x... (cudaMalloc on cuda:0)".
std::string place(const Shadow& s, uintptr_t a) {
  return "byte " + std::to_string(a - s.lo) + " of the " + std::to_string(s.hi - s.lo) +
         "-byte allocation at " + hex(s.lo) + " (" + s.how +
         " on cuda:" + std::to_string(s.device) + ")";
}
std::string why(const Shadow& s) {
  return s.reissued ? "which nothing has written since the caching allocator handed the block out "
                      "again (what the block's earlier tensor wrote does not count)"
                    : "which nothing has written since it was allocated";
}

void report_load(const Shadow& s, uintptr_t addr, uint32_t size, uintptr_t first_bad,
                 uintptr_t pc) {
  ThreadCtx* t = tls_thread.load(std::memory_order_relaxed);
  BlockRun& b = *t->block;
  if (b.fault_code != cudaSuccess || !report_unwritten) return;  // the first fault is the report
  b.fault_code = cudaErrorLaunchFailure;
  b.fault_text = describe(b.grid->site) + " block " + idx3(b.index) + " thread " +
                 idx3(t->thread_idx) + ": uninitialized __global__ memory read of size " +
                 std::to_string(size) + " bytes at " + hex(addr) + " in " + source_of(pc) + ": " +
                 place(s, first_bad) + ", " + why(s) +
                 " (compute-sanitizer's initcheck reports this)";
}

thread_local std::vector<uintptr_t> tls_launch_args;

// Per thread: the grid whose reachable allocations are cached, and those found reachable.
struct ReachCache {
  const Grid* grid = nullptr;
  uint64_t generation = 0;
  static constexpr int kShadows = 4;
  const Shadow* reachable[kShadows] = {};
  int next = 0;
};
thread_local ReachCache tls_reach;

__attribute__((no_sanitize_address)) bool reaches(const Grid& g, const Shadow& s) {
  ReachCache& c = tls_reach;
  const uint64_t gen = generation.load(std::memory_order_acquire);
  if (c.grid != &g || c.generation != gen) c = ReachCache{}, c.grid = &g, c.generation = gen;
  for (const Shadow* r : c.reachable)
    if (r == &s) return true;
  Provenance* p = g.provenance.get();
  bool found = p == nullptr;  // launched while the check was off
  if (!found)
    for (uintptr_t w : p->args)
      if (w >= s.lo && w <= s.hi) found = true;
  if (!found) {
    std::lock_guard<std::mutex> lock(p->m);
    found = std::find(p->reached.begin(), p->reached.end(), s.lo) != p->reached.end();
  }
  if (found) c.reachable[c.next++ % ReachCache::kShadows] = &s;
  return found;
}

// A value a kernel loaded from device memory: if it points into an allocation, the kernel may
// use it as a pointer.
__attribute__((no_sanitize_address)) void note_loaded(const Grid& g, uintptr_t value) {
  if (value < span_lo.load(std::memory_order_relaxed) ||
      value > span_hi.load(std::memory_order_relaxed))
    return;
  Shadow* r = find(value);
  if (r == nullptr || g.provenance == nullptr || reaches(g, *r)) return;
  std::lock_guard<std::mutex> lock(g.provenance->m);
  g.provenance->reached.push_back(r->lo);
}

void report_wild(const Shadow& s, uintptr_t addr, uint32_t size, bool store, uintptr_t pc) {
  ThreadCtx* t = tls_thread.load(std::memory_order_relaxed);
  BlockRun& b = *t->block;
  if (b.fault_code != cudaSuccess) return;
  b.fault_code = cudaErrorIllegalAddress;
  b.fault_text = describe(b.grid->site) + " block " + idx3(b.index) + " thread " +
                 idx3(t->thread_idx) + ": __global__ " + (store ? "write" : "read") + " of size " +
                 std::to_string(size) + " bytes at " + hex(addr) + " in " + source_of(pc) +
                 " lands in " + place(s, addr) +
                 ", which none of the kernel's pointers reaches (no argument points into it and "
                 "the kernel loaded no pointer to it): an index that wrapped or ran past its "
                 "array into another buffer (memcheck does not see this: the address is valid)";
}

}  // namespace

void note_launch_args(const void* params, std::size_t bytes) {
  if (!check_provenance) return;
  tls_launch_args.clear();
  const auto* p = static_cast<const unsigned char*>(params);
  for (std::size_t i = 0; i + sizeof(uintptr_t) <= bytes; i += alignof(uintptr_t)) {
    uintptr_t w;
    std::memcpy(&w, p + i, sizeof w);
    tls_launch_args.push_back(w);
  }
}

std::shared_ptr<Provenance> take_launch_provenance() {
  if (!check_provenance) return nullptr;
  auto p = std::make_shared<Provenance>();
  p->args.swap(tls_launch_args);
  return p;
}

void initcheck_allocated(const void* base, std::size_t bytes, int device, const char* how) {
  if (!initcheck_on || bytes == 0) return;
  auto s = std::make_unique<Shadow>();
  s->lo = reinterpret_cast<uintptr_t>(base);
  s->hi = s->lo + bytes;
  s->device = device;
  s->how = how;
  s->written = std::make_unique<uint8_t[]>(bytes);  // zeros: nothing written
  uintptr_t lo = span_lo.load(), hi = span_hi.load();
  while (s->lo < lo && !span_lo.compare_exchange_weak(lo, s->lo)) {
  }
  while (s->hi > hi && !span_hi.compare_exchange_weak(hi, s->hi)) {
  }
  std::unique_lock<std::shared_mutex> lock(table_mutex);
  table()[s->lo] = std::move(s);
  generation.fetch_add(1, std::memory_order_release);  // a page cached as empty may hold it now
}

void initcheck_freed(const void* base) {
  std::unique_lock<std::shared_mutex> lock(table_mutex);
  if (table().erase(reinterpret_cast<uintptr_t>(base)) > 0)
    generation.fetch_add(1, std::memory_order_release);
}

void initcheck_written(const void* p, std::size_t bytes) {
  if (!initcheck_on) return;
  const auto a = reinterpret_cast<uintptr_t>(p);
  std::shared_lock<std::shared_mutex> lock(table_mutex);
  if (Shadow* s = lookup(a)) std::memset(&s->written[a - s->lo], 1, std::min(bytes, s->hi - a));
}

void initcheck_copied(void* dst, const void* src, std::size_t bytes) {
  if (!initcheck_on) return;
  const auto d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
  std::shared_lock<std::shared_mutex> lock(table_mutex);
  Shadow* to = lookup(d);
  if (to == nullptr) return;
  const std::size_t n = std::min(bytes, to->hi - d);
  if (Shadow* from = lookup(s))
    std::memmove(&to->written[d - to->lo], &from->written[s - from->lo], std::min(n, from->hi - s));
  else
    std::memset(&to->written[d - to->lo], 1, n);  // from memory initcheck does not track
}

void initcheck_reissued(const void* base, std::size_t bytes) {
  if (!initcheck_on) return;
  const auto a = reinterpret_cast<uintptr_t>(base);
  std::shared_lock<std::shared_mutex> lock(table_mutex);
  Shadow* s = lookup(a);
  if (s == nullptr) return;
  uint8_t* w = &s->written[a - s->lo];
  const std::size_t n = std::min(bytes, s->hi - a);
  // A block's first handout follows its cudaMalloc: only a later one is a reissue.
  if (std::find(w, w + n, uint8_t{1}) != w + n) s->reissued = true;
  std::memset(w, 0, n);
}

std::string initcheck_copy_source(const void* src, std::size_t bytes, const char* call) {
  if (!report_unwritten) return {};
  const auto a = reinterpret_cast<uintptr_t>(src);
  std::shared_lock<std::shared_mutex> lock(table_mutex);
  const Shadow* s = lookup(a);
  if (s == nullptr) return {};
  const std::size_t n = std::min(bytes, s->hi - a);
  const uint8_t* w = &s->written[a - s->lo];
  const uint8_t* bad = std::find(w, w + n, uint8_t{0});
  if (bad == w + n) return {};
  const std::size_t unwritten = std::size_t(std::count(w, w + n, uint8_t{0}));
  return std::string(call) +
         ": a copy to the host reads uninitialized device memory: " + std::to_string(unwritten) +
         " of its " + std::to_string(n) + " source bytes at " + hex(a) +
         " were never written, the first at " + place(*s, a + (bad - w)) + ", " + why(*s) +
         " (compute-sanitizer's initcheck reports this as an uninitialized access by the "
         "cudaMemcpy source)";
}

__attribute__((no_sanitize_address)) void initcheck_access(uintptr_t addr, uint32_t size,
                                                           bool store, uintptr_t pc) {
  ThreadCtx* t = tls_thread.load(std::memory_order_relaxed);
  if (t == nullptr) return;  // host code
  if (addr < span_lo.load(std::memory_order_relaxed) ||
      addr >= span_hi.load(std::memory_order_relaxed))
    return;
  Shadow* s = find(addr);
  if (s == nullptr) return;
  if (check_provenance) {
    const Grid& g = *t->block->grid;
    if (!reaches(g, *s)) {
      report_wild(*s, addr, size, store, pc);
      return;
    }
    if (!store)  // the words it loads may be pointers it uses next
      for (uintptr_t w = (addr + 7) / 8 * 8; w + 8 <= addr + size && w + 8 <= s->hi; w += 8)
        note_loaded(g, *reinterpret_cast<const uintptr_t*>(w));
  }
  // An access that runs past the allocation's end is AddressSanitizer's to report.
  const std::size_t n = std::min<std::size_t>(size, s->hi - addr);
  uint8_t* w = &s->written[addr - s->lo];
  if (store) {
    for (std::size_t i = 0; i < n; ++i) __atomic_store_n(&w[i], uint8_t{1}, __ATOMIC_RELAXED);
    return;
  }
  if (!report_unwritten) return;
  for (std::size_t i = 0; i < n; ++i)
    if (__atomic_load_n(&w[i], __ATOMIC_RELAXED) == 0) {
      report_load(*s, addr, size, addr + i, pc);
      return;
    }
}

__attribute__((noinline)) void initcheck_atomic(const void* addr, std::size_t bytes, bool reads) {
  const auto pc = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  const auto a = reinterpret_cast<uintptr_t>(addr);
  if (reads) initcheck_access(a, uint32_t(bytes), false, pc);
  initcheck_access(a, uint32_t(bytes), true, pc);
}

}  // namespace mtemu::detail

namespace {
bool env_on(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}
bool start_from_env() {
  const std::pair<const char*, bool (*)(bool)> checks[] = {
      {"MINITRAIN_EMU_INITCHECK", mtemu::initcheck_enable},
      {"MINITRAIN_EMU_PROVENANCE", mtemu::provenance_enable}};
  for (const auto& [name, enable] : checks)
    if (env_on(name) && !enable(true))
      std::fprintf(stderr,
                   "cuda-emu: %s is ignored: the emulator sees kernel accesses through "
                   "AddressSanitizer, and this build has none (use the emu preset)\n",
                   name);
  return true;
}
[[maybe_unused]] const bool started_from_env = start_from_env();

// Turns one check on or off; tracking runs while either is on, and stopping it forgets every
// allocation (their state would go stale).
bool set_check(bool* check, bool on) {
  using namespace mtemu::detail;
  if (on && !MTEMU_ASAN) return false;
  std::unique_lock<std::shared_mutex> lock(table_mutex);
  *check = on;
  initcheck_on = report_unwritten || check_provenance;
  set_memory_hook(kHookInitcheck, initcheck_on);  // Note [one hook flag] (counters.h)
  if (!initcheck_on) table().clear();
  generation.fetch_add(1, std::memory_order_release);
  return true;
}
}  // namespace

bool mtemu::initcheck_enable(bool on) { return set_check(&detail::report_unwritten, on); }
bool mtemu::initcheck_enabled() { return mtemu::detail::report_unwritten; }
bool mtemu::provenance_enable(bool on) { return set_check(&detail::check_provenance, on); }
