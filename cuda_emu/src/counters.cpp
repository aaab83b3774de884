// Exact per-launch memory counters (docs/emulator_counters.md).
//
// Mechanism: in emulated ASan builds the kernels (.cu files) are compiled with
// --param asan-instrumentation-with-call-threshold=0, so every load and store of a kernel calls
// __asan_load<N>/__asan_store<N>(addr) instead of checking inline. This file defines those
// functions (a definition in the executable preempts libasan.so's): while a GPU thread runs and
// counters are on, it records the access (address, size, and the return address as the access
// site), then it forwards to libasan's function (dlsym RTLD_NEXT), so the memory checks still run.
// Off, the cost is one predictable branch and the forward.
//
// A block's threads run one after another, so warp-level requests are rebuilt at the end of the
// block: the n-th execution of an access site by each lane of a warp is one request.

#include "counters.h"

#include "cuda_emu/kernel_registers.h"
#include "cuda_emu/occupancy.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "block.h"
#include "cuda_emu/counters.h"
#include "grid.h"
#include "initcheck.h"
#include "race.h"
#include "runtime.h"

namespace mtemu {
namespace detail {

bool counters_on = false;

namespace {

constexpr int kWarp = 32;
constexpr uintptr_t kSector = 32;

enum Kind : uint8_t { GlobalLoad, GlobalStore, SharedLoad, SharedStore, GlobalAtomic };

struct Access {
  uint32_t warp;
  uint32_t count;  // this lane's execution number of the site
  uintptr_t site;
  uintptr_t addr;
  uint32_t size;
  uint8_t lane;
  uint8_t kind;
};

// The running block's accesses: one worker runs one block at a time, its threads as fibers.
struct BlockState {
  const BlockRun* block = nullptr;
  std::vector<Access> accesses;
  // Per thread: (site, executions so far); kernels have few sites, so a short linear search.
  std::vector<std::vector<std::pair<uintptr_t, uint32_t>>> executions;
  // The device allocations hit last (a kernel reads a few buffers in turn): [lo, hi) each.
  static constexpr int kCached = 4;
  uintptr_t dev_lo[kCached] = {}, dev_hi[kCached] = {};
  int dev_next = 0;
  int atomic_depth = 0;
  bool busy = false;  // inside a hook: the hook's own accesses do not count
};
thread_local BlockState tls_block;

std::string path_from_env() {
  const char* p = std::getenv("MINITRAIN_EMU_COUNTERS");
  return p && *p ? p : "";
}
const std::string& file_path() {
  static const std::string p = path_from_env();
  return p;
}
bool collect_in_memory = false;

struct Acc {
  LaunchCounters c;
  std::unordered_set<uintptr_t> sectors;
};
std::mutex acc_mutex;
std::map<const Grid*, Acc>& accs() {
  static auto* m = new std::map<const Grid*, Acc>();
  return *m;
}
std::vector<LaunchCounters>& taken() {
  static auto* v = new std::vector<LaunchCounters>();
  return *v;
}

[[maybe_unused]] const bool init_from_env = [] {
  if (!file_path().empty()) counters_on = true;
  return true;
}();

bool in_shared(const BlockRun& b, uintptr_t a) {
  for (const SharedVar& v : b.shared) {
    const auto lo = reinterpret_cast<uintptr_t>(v.storage);
    if (a >= lo && a < lo + v.bytes) return true;
  }
  const auto lo = reinterpret_cast<uintptr_t>(b.dynamic_shared);
  return a >= lo && a < lo + b.grid->config.dynamic_smem;
}

bool in_device(BlockState& s, uintptr_t a) {
  for (int i = 0; i < BlockState::kCached; ++i)
    if (a >= s.dev_lo[i] && a < s.dev_hi[i]) return true;
  const Region r = find_region(reinterpret_cast<const void*>(a));
  if (r.space != Space::Device) return false;
  const int i = s.dev_next++ % BlockState::kCached;
  s.dev_lo[i] = reinterpret_cast<uintptr_t>(r.base);
  s.dev_hi[i] = s.dev_lo[i] + r.bytes;
  return true;
}

uint32_t next_execution(BlockState& s, int thread, uintptr_t site) {
  if (int(s.executions.size()) <= thread) s.executions.resize(thread + 1);
  for (auto& e : s.executions[thread])
    if (e.first == site) return ++e.second;
  s.executions[thread].emplace_back(site, 1);
  return 1;
}

void record(uintptr_t addr, uint32_t size, bool store, uintptr_t site) {
  BlockState& s = tls_block;
  ThreadCtx* t = tls_thread.load(std::memory_order_relaxed);
  if (t == nullptr || s.busy || s.block == nullptr || t->block != s.block) return;
  s.busy = true;
  uint8_t kind;
  if (s.atomic_depth > 0) {
    s.busy = false;
    return;  // counted once, as an atomic
  }
  if (in_shared(*s.block, addr))
    kind = store ? SharedStore : SharedLoad;
  else if (in_device(s, addr))
    kind = store ? GlobalStore : GlobalLoad;
  else {
    s.busy = false;
    return;  // the thread's stack, or host memory
  }
  const uint32_t count = next_execution(s, t->linear, site);
  s.accesses.push_back(Access{uint32_t(t->linear / kWarp), count, site, addr, size,
                              uint8_t(t->linear % kWarp), kind});
  s.busy = false;
}

// Shared memory wavefronts of one request: lanes are served in phases of 128 bytes (all 32 lanes
// for accesses up to 4 bytes, half-warps for 8 bytes, quarter-warps for 16); a phase takes as many
// wavefronts as the most distinct 4-byte words any of the 32 banks holds.
void shared_request(const Access* a, std::size_t n, uint64_t* wavefronts, uint64_t* minimum) {
  const uint32_t size = a[0].size;
  const int lanes_per_phase = size <= 4 ? 32 : size <= 8 ? 16 : 8;
  std::map<int, std::vector<const Access*>> phases;
  for (std::size_t i = 0; i < n; ++i) phases[a[i].lane / lanes_per_phase].push_back(&a[i]);
  for (auto& [phase, lanes] : phases) {
    std::unordered_set<uintptr_t> words[32];
    for (const Access* x : lanes)
      for (uintptr_t w = x->addr / 4; w <= (x->addr + x->size - 1) / 4; ++w)
        words[w % 32].insert(w);
    std::size_t most = 1;
    for (auto& b : words) most = std::max(most, b.size());
    *wavefronts += most;
    *minimum += 1;
  }
}

}  // namespace

void counters_launch_begin(const Grid& g) {
  if (!counters_on) return;
  std::lock_guard<std::mutex> lock(acc_mutex);
  Acc& acc = accs()[&g];
  LaunchCounters& c = acc.c;
  c.kernel = g.site.kernel;
  c.file = g.site.file;
  c.line = g.site.line;
  const dim3 gd = g.config.grid, bd = g.config.block;
  c.grid[0] = gd.x, c.grid[1] = gd.y, c.grid[2] = gd.z;
  c.block[0] = bd.x, c.block[1] = bd.y, c.block[2] = bd.z;
  c.dynamic_smem = g.config.dynamic_smem;
  const DeviceProfile& profile = current_device_profile();
  c.device_profile = profile.key;
  const KernelRegisters* r = kernel_registers(c.file, c.kernel);
  c.registers = r != nullptr ? r->registers_max : -1;
  c.registers_min = r != nullptr ? r->registers_min : -1;
  c.static_smem = r != nullptr ? r->static_smem_max : 0;
  const Occupancy o = theoretical_occupancy(profile, int(bd.x * bd.y * bd.z), c.registers,
                                            c.static_smem + c.dynamic_smem);
  c.blocks_per_sm = o.blocks_per_sm;
  c.occupancy_pct = o.occupancy_pct;
  c.occupancy_limiter = o.limiter;
}

void counters_block_begin(const BlockRun& b) {
  BlockState& s = tls_block;
  s.block = nullptr;
  if (!counters_on) return;
  {
    std::lock_guard<std::mutex> lock(acc_mutex);
    if (accs().count(b.grid) == 0) return;  // launched before counters were on
  }
  s.block = &b;
  s.accesses.clear();
  for (auto& e : s.executions) e.clear();
  std::fill(std::begin(s.dev_lo), std::end(s.dev_lo), 0);
  std::fill(std::begin(s.dev_hi), std::end(s.dev_hi), 0);
}

void counters_block_end(const BlockRun& b) {
  BlockState& s = tls_block;
  if (s.block != &b) return;
  s.block = nullptr;
  std::vector<Access>& v = s.accesses;
  std::sort(v.begin(), v.end(), [](const Access& x, const Access& y) {
    if (x.warp != y.warp) return x.warp < y.warp;
    if (x.site != y.site) return x.site < y.site;
    if (x.count != y.count) return x.count < y.count;
    return x.lane < y.lane;
  });
  LaunchCounters c;
  std::vector<uintptr_t> sectors_seen, scratch;
  for (std::size_t i = 0; i < v.size();) {
    std::size_t j = i;
    while (j < v.size() && v[j].warp == v[i].warp && v[j].site == v[i].site &&
           v[j].count == v[i].count)
      ++j;
    // One request: lanes i..j.
    uint32_t lanes = 0;  // a bit per active lane
    for (std::size_t k = i; k < j; ++k) lanes |= 1u << v[k].lane;
    c.lanes += uint64_t(__builtin_popcount(lanes));
    switch (v[i].kind) {
      case GlobalLoad:
      case GlobalStore: {
        std::vector<uintptr_t>& sectors = scratch;
        sectors.clear();
        for (std::size_t k = i; k < j; ++k)
          for (uintptr_t q = v[k].addr / kSector; q <= (v[k].addr + v[k].size - 1) / kSector; ++q)
            sectors.push_back(q);
        std::sort(sectors.begin(), sectors.end());
        sectors.erase(std::unique(sectors.begin(), sectors.end()), sectors.end());
        sectors_seen.insert(sectors_seen.end(), sectors.begin(), sectors.end());
        if (v[i].kind == GlobalLoad) {
          ++c.global_load_requests;
          c.global_load_sectors += sectors.size();
        } else {
          ++c.global_store_requests;
          c.global_store_sectors += sectors.size();
        }
        break;
      }
      case GlobalAtomic:
        ++c.global_atomic_requests;
        break;
      case SharedLoad:
      case SharedStore: {
        uint64_t wavefronts = 0, minimum = 0;
        shared_request(&v[i], j - i, &wavefronts, &minimum);
        c.shared_bank_conflicts += wavefronts - minimum;
        if (v[i].kind == SharedLoad) {
          ++c.shared_load_requests;
          c.shared_load_wavefronts += wavefronts;
        } else {
          ++c.shared_store_requests;
          c.shared_store_wavefronts += wavefronts;
        }
        break;
      }
    }
    i = j;
  }
  const uint64_t warps = (uint64_t(b.threads_count) + kWarp - 1) / kWarp;
  c.warps_launched = warps;
  c.barriers = uint64_t(b.barrier_generation) * warps;
  v.clear();
  for (auto& e : s.executions) e.clear();

  std::lock_guard<std::mutex> lock(acc_mutex);
  auto it = accs().find(b.grid);
  if (it == accs().end()) return;
  LaunchCounters& t = it->second.c;
  t.global_load_requests += c.global_load_requests;
  t.global_load_sectors += c.global_load_sectors;
  t.global_store_requests += c.global_store_requests;
  t.global_store_sectors += c.global_store_sectors;
  t.global_atomic_requests += c.global_atomic_requests;
  t.shared_load_requests += c.shared_load_requests;
  t.shared_load_wavefronts += c.shared_load_wavefronts;
  t.shared_store_requests += c.shared_store_requests;
  t.shared_store_wavefronts += c.shared_store_wavefronts;
  t.shared_bank_conflicts += c.shared_bank_conflicts;
  t.lanes += c.lanes;
  t.warps_launched += c.warps_launched;
  t.barriers += c.barriers;
  it->second.sectors.insert(sectors_seen.begin(), sectors_seen.end());
}

void counters_launch_end(const Grid& g) {
  std::unique_lock<std::mutex> lock(acc_mutex);
  auto it = accs().find(&g);
  if (it == accs().end()) return;
  LaunchCounters c = std::move(it->second.c);
  c.distinct_bytes_touched = it->second.sectors.size() * kSector;
  accs().erase(it);
  c.bytes_moved = (c.global_load_sectors + c.global_store_sectors) * kSector;
  const uint64_t requests = c.global_load_requests + c.global_store_requests +
                            c.global_atomic_requests + c.shared_load_requests +
                            c.shared_store_requests;
  c.active_lanes_mean = requests ? double(c.lanes) / double(requests) : 0.0;
  if (collect_in_memory) taken().push_back(c);
  if (!file_path().empty()) {
    // Appended and flushed per launch, so a crash later keeps what ran.
    if (FILE* f = std::fopen(file_path().c_str(), "a")) {
      const std::string line = c.json() + "\n";
      std::fwrite(line.data(), 1, line.size(), f);
      std::fclose(f);
    }
  }
}

void count_atomic_begin(const void* addr, std::size_t bytes) {
  BlockState& s = tls_block;
  ++s.atomic_depth;
  ThreadCtx* t = tls_thread.load(std::memory_order_relaxed);
  if (t == nullptr || s.block == nullptr || t->block != s.block || s.atomic_depth > 1) return;
  const auto a = reinterpret_cast<uintptr_t>(addr);
  if (!in_device(s, a)) return;  // shared-memory atomics are not global atomics
  const auto site = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  const uint32_t count = next_execution(s, t->linear, site);
  s.accesses.push_back(Access{uint32_t(t->linear / kWarp), count, site, a, uint32_t(bytes),
                              uint8_t(t->linear % kWarp), GlobalAtomic});
}

void count_atomic_end() { --tls_block.atomic_depth; }

}  // namespace detail

std::string LaunchCounters::json() const {
  std::string k;
  for (char ch : kernel) {
    if (ch == '"' || ch == '\\') k += '\\';
    k += ch;
  }
  std::string f;
  for (char ch : file) {
    if (ch == '"' || ch == '\\') f += '\\';
    f += ch;
  }
  char buf[2048];
  std::snprintf(
      buf, sizeof buf,
      "{\"kernel\":\"%s\",\"file\":\"%s\",\"line\":%d,\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],"
      "\"dynamic_smem\":%llu,\"global_load_requests\":%llu,\"global_load_sectors\":%llu,"
      "\"global_store_requests\":%llu,\"global_store_sectors\":%llu,"
      "\"global_atomic_requests\":%llu,\"shared_load_requests\":%llu,"
      "\"shared_load_wavefronts\":%llu,\"shared_store_requests\":%llu,"
      "\"shared_store_wavefronts\":%llu,\"shared_bank_conflicts\":%llu,"
      "\"active_lanes_mean\":%.4f,\"barriers\":%llu,\"warps_launched\":%llu,"
      "\"bytes_moved\":%llu,\"distinct_bytes_touched\":%llu,\"device_profile\":\"%s\","
      "\"registers\":%s,\"registers_min\":%s,\"static_smem\":%llu,\"blocks_per_sm\":%d,"
      "\"occupancy_pct\":%.2f,\"occupancy_limiter\":\"%s\"}",
      k.c_str(), f.c_str(), line, grid[0], grid[1], grid[2], block[0], block[1], block[2],
      (unsigned long long)dynamic_smem, (unsigned long long)global_load_requests,
      (unsigned long long)global_load_sectors, (unsigned long long)global_store_requests,
      (unsigned long long)global_store_sectors, (unsigned long long)global_atomic_requests,
      (unsigned long long)shared_load_requests, (unsigned long long)shared_load_wavefronts,
      (unsigned long long)shared_store_requests, (unsigned long long)shared_store_wavefronts,
      (unsigned long long)shared_bank_conflicts, active_lanes_mean, (unsigned long long)barriers,
      (unsigned long long)warps_launched, (unsigned long long)bytes_moved,
      (unsigned long long)distinct_bytes_touched, device_profile.c_str(),
      registers < 0 ? "null" : std::to_string(registers).c_str(),
      registers_min < 0 ? "null" : std::to_string(registers_min).c_str(),
      (unsigned long long)static_smem, blocks_per_sm, occupancy_pct, occupancy_limiter.c_str());
  return buf;
}

void counters_collect(bool on) {
  std::lock_guard<std::mutex> lock(detail::acc_mutex);
  detail::collect_in_memory = on;
  detail::counters_on = on || !detail::file_path().empty();
}

std::vector<LaunchCounters> counters_take() {
  std::lock_guard<std::mutex> lock(detail::acc_mutex);
  std::vector<LaunchCounters> out;
  out.swap(detail::taken());
  return out;
}

}  // namespace mtemu

// ---- the AddressSanitizer entry points (see the top of this file) ----
namespace {
using Check = void (*)(uintptr_t);
using CheckN = void (*)(uintptr_t, uintptr_t);
template <class F>
F resolve(F* cache, const char* name) {
  F f = __atomic_load_n(cache, __ATOMIC_RELAXED);
  if (__builtin_expect(f == nullptr, 0)) {
    f = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
    if (f == nullptr) {
      std::fprintf(stderr, "cuda-emu counters: %s not found in libasan\n", name);
      std::abort();
    }
    __atomic_store_n(cache, f, __ATOMIC_RELAXED);
  }
  return f;
}
}  // namespace

// ASan's own inline check, as the compiler emits it without the call threshold (x86-64 Linux
// shadow: one byte per 8 bytes at (addr >> 3) + 0x7fff8000; 0: all 8 addressable, k > 0: the first
// k). Where it passes, libasan's function would return at once; where not, it runs, to report.
__attribute__((no_sanitize_address, always_inline)) inline bool shadow_clean(uintptr_t a,
                                                                             unsigned bytes) {
  constexpr uintptr_t kShadowOffset = 0x7fff8000;
  const auto* shadow = reinterpret_cast<const int8_t*>((a >> 3) + kShadowOffset);
  if (bytes == 16) return shadow[0] == 0 && shadow[1] == 0;
  const int8_t s = shadow[0];
  if (__builtin_expect(s == 0, 1)) return true;
  return bytes < 8 && int8_t((a & 7) + bytes - 1) < s;
}

#define MTEMU_ASAN_HOOK(name, bytes, store)                                                       \
  extern "C" __attribute__((visibility("default"), no_sanitize_address)) void name(uintptr_t a) { \
    static Check real = nullptr;                                                                  \
    if (__builtin_expect(mtemu::detail::counters_on, 0))                                          \
      mtemu::detail::record(a, bytes, store,                                                      \
                            reinterpret_cast<uintptr_t>(__builtin_return_address(0)));            \
    if (__builtin_expect(mtemu::detail::initcheck_on, 0))                                         \
      mtemu::detail::initcheck_access(a, bytes, store,                                            \
                                      reinterpret_cast<uintptr_t>(__builtin_return_address(0)));  \
    if (__builtin_expect(mtemu::detail::racecheck_on, 0))                                         \
      mtemu::detail::racecheck_access(a, bytes, store,                                            \
                                      reinterpret_cast<uintptr_t>(__builtin_return_address(0)));  \
    if (__builtin_expect(shadow_clean(a, bytes), 1)) return;                                      \
    resolve(&real, #name)(a);                                                                     \
  }
#define MTEMU_ASAN_HOOK_N(name, store)                                                           \
  extern "C" __attribute__((visibility("default"))) void name(uintptr_t a, uintptr_t n) {        \
    static CheckN real = nullptr;                                                                \
    if (__builtin_expect(mtemu::detail::counters_on, 0))                                         \
      mtemu::detail::record(a, uint32_t(n), store,                                               \
                            reinterpret_cast<uintptr_t>(__builtin_return_address(0)));           \
    if (__builtin_expect(mtemu::detail::initcheck_on, 0))                                        \
      mtemu::detail::initcheck_access(a, uint32_t(n), store,                                     \
                                      reinterpret_cast<uintptr_t>(__builtin_return_address(0))); \
    if (__builtin_expect(mtemu::detail::racecheck_on, 0))                                        \
      mtemu::detail::racecheck_access(a, uint32_t(n), store,                                     \
                                      reinterpret_cast<uintptr_t>(__builtin_return_address(0))); \
    resolve(&real, #name)(a, n);                                                                 \
  }
#if defined(__SANITIZE_ADDRESS__)
MTEMU_ASAN_HOOK(__asan_load1, 1, false)
MTEMU_ASAN_HOOK(__asan_load2, 2, false)
MTEMU_ASAN_HOOK(__asan_load4, 4, false)
MTEMU_ASAN_HOOK(__asan_load8, 8, false)
MTEMU_ASAN_HOOK(__asan_load16, 16, false)
MTEMU_ASAN_HOOK(__asan_store1, 1, true)
MTEMU_ASAN_HOOK(__asan_store2, 2, true)
MTEMU_ASAN_HOOK(__asan_store4, 4, true)
MTEMU_ASAN_HOOK(__asan_store8, 8, true)
MTEMU_ASAN_HOOK(__asan_store16, 16, true)
MTEMU_ASAN_HOOK_N(__asan_loadN, false)
MTEMU_ASAN_HOOK_N(__asan_storeN, true)
#endif
