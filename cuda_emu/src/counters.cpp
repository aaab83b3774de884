// Exact per-launch memory counters (docs/emulator_counters.md).
//
// Mechanism: Note [accesses routed to the checkers] (routed_memory.h). Emulated kernels keep
// AddressSanitizer's inline check; while a checker is on, device allocations and shared memory
// carry a shadow mark that fails it, so every access to them calls
// __asan_report_{load,store}N_noabort, which this file defines (a definition in the executable
// preempts libasan.so's): it records the access (address, size, and the return address as the
// access site) and returns. With every checker off there is no mark, and no call: a kernel costs
// what ASan's inline check costs.
//
// A block's threads run one after another, so warp-level requests are rebuilt: the n-th execution
// of an access site by each lane of a warp is one request. Each access goes straight into its
// request's slot for its lane (site -> per-thread execution count -> per-warp request index), and
// the requests are counted at the end of the block: no sort, no lock per access. The distinct
// sectors of a launch are gathered per worker thread without a lock and united at its end.

#include "counters.h"

#include "cuda_emu/kernel_registers.h"
#include "cuda_emu/occupancy.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "block.h"
#include "cuda_emu/counters.h"
#include "grid.h"
#include "initcheck.h"
#include "race.h"
#include "routed_memory.h"
#include "runtime.h"
#include "unchecked_stores.h"

namespace mtemu {
namespace detail {

bool counters_on = false;
unsigned char memory_hooks = 0;

void set_memory_hook(unsigned char bit, bool on) {
  if (on)
    __atomic_fetch_or(&memory_hooks, bit, __ATOMIC_RELAXED);
  else
    __atomic_fetch_and(&memory_hooks, static_cast<unsigned char>(~bit), __ATOMIC_RELAXED);
  update_routing();  // Note [accesses routed to the checkers]: routed while any checker is on
}

namespace {

constexpr int kWarp = 32;
constexpr uintptr_t kSector = 32;

enum Kind : uint8_t { GlobalLoad, GlobalStore, SharedLoad, SharedStore, GlobalAtomic };

// The per-access path (record) runs for every load and store of every GPU thread, so it and the
// per-request counting are written on raw arrays and left out of the sanitizers' instrumentation
// (MTEMU_HOT, counters.h); what allocates or looks up a region is in out-of-line functions that
// keep it.

// One lane's part in a request.
struct LaneAccess {
  uintptr_t addr;
  uint32_t size;
  uint8_t kind;
};

// One warp-level request: the same execution of one access site by the lanes of a warp.
struct Request {
  uint32_t lanes;  // a bit per lane that took part
  LaneAccess lane[kWarp];
};

// A growable array of request indices (one warp's requests of one site, by execution).
struct IndexList {
  std::vector<uint32_t> storage;
  uint32_t* data = nullptr;
  uint32_t size = 0, capacity = 0;
};

// An access site (the return address of the hook's call) within the running block.
struct Site {
  uintptr_t pc = 0;
  std::vector<uint32_t> executions_storage;
  uint32_t* executions = nullptr;   // per thread of the block: executions so far
  std::vector<IndexList> requests;  // per warp: request index, by execution
  IndexList* per_warp = nullptr;
};

// A set of sector numbers (address / 32): open addressing, linear probing. The distinct sectors
// one worker's blocks of one launch touched.
class SectorSet {
 public:
  SectorSet() : storage_(1024, kEmpty), slots_(storage_.data()), mask_(1023) {}
  MTEMU_HOT void insert(uintptr_t sector) {
    std::size_t i = hash(sector) & mask_;
    for (;; i = (i + 1) & mask_) {
      if (slots_[i] == sector) return;
      if (slots_[i] == kEmpty) break;
    }
    slots_[i] = sector;
    if (++size_ * 2 > mask_ + 1) grow();
  }
  std::size_t size() const { return size_; }
  void clear() {
    if (size_ == 0) return;
    std::fill(storage_.begin(), storage_.end(), kEmpty);
    size_ = 0;
  }
  template <class F>
  void for_each(F f) const {
    for (uintptr_t v : storage_)
      if (v != kEmpty) f(v);
  }

 private:
  static constexpr uintptr_t kEmpty = ~uintptr_t(0);  // no sector: addresses stop below
  MTEMU_HOT static std::size_t hash(uintptr_t v) {
    return std::size_t((v * 0x9e3779b97f4a7c15ull) >> 20);
  }
  __attribute__((noinline)) void grow() {
    std::vector<uintptr_t> old(storage_.size() * 2, kEmpty);
    old.swap(storage_);
    slots_ = storage_.data();
    mask_ = storage_.size() - 1;
    size_ = 0;
    for (uintptr_t v : old)
      if (v != kEmpty) insert(v);
  }
  std::vector<uintptr_t> storage_;
  uintptr_t* slots_;
  std::size_t mask_;
  std::size_t size_ = 0;
};

// The running block's requests: one worker runs one block at a time, its threads as fibers. The
// storage keeps its capacity from block to block.
struct BlockState {
  const BlockRun* block = nullptr;
  int threads = 0, warps = 0;

  std::vector<Site> sites;  // the first `site_count` are this block's
  int site_count = 0;
  std::vector<int32_t> site_index_storage;  // open addressing over pc: sites index + 1, 0 empty
  int32_t* site_index = nullptr;
  std::size_t site_mask = 0;

  std::vector<Request> requests_storage;  // the first `request_count` are this block's
  Request* requests = nullptr;
  std::size_t request_count = 0, request_capacity = 0;

  SectorSet* sectors = nullptr;  // this worker's distinct sectors of the block's launch
  SectorSet block_loads;         // the distinct sectors the running block's loads touched

  // Where an address lies, fastest first: the device allocations hit last (a kernel reads a few
  // buffers in turn), [lo, hi) each; the block's shared variables (refreshed when a __shared__
  // declaration adds one); the running thread's stack (its locals, the kernel's arguments).
  static constexpr int kCached = 4;
  uintptr_t dev_lo[kCached] = {}, dev_hi[kCached] = {};
  int dev_next = 0;
  static constexpr int kSharedCached = 16;
  uintptr_t shared_lo[kSharedCached + 1] = {}, shared_hi[kSharedCached + 1] = {};
  int shared_count = 0;          // ranges above, the dynamic shared memory's included
  bool shared_overflow = false;  // more variables than the cache holds: look them up in full
  std::size_t shared_bytes_seen = 0;
  const ThreadCtx* stack_owner = nullptr;
  uintptr_t stack_lo = 0, stack_hi = 0;

  int atomic_depth = 0;
  bool busy = false;  // inside a hook: the hook's own accesses do not count

  std::vector<uintptr_t> scratch;  // a request's sectors or words, where the fixed buffer is short

  void reset(const BlockRun& b);
  void refresh_shared();
  void refresh_stack(const ThreadCtx* t);
  Site& add_site(uintptr_t pc, std::size_t slot);
  uint32_t new_request(IndexList& list);

  MTEMU_HOT Site& site(uintptr_t pc) {
    std::size_t i = std::size_t((pc * 0x9e3779b97f4a7c15ull) >> 32) & site_mask;
    for (;; i = (i + 1) & site_mask) {
      const int32_t k = site_index[i];
      if (k == 0) return add_site(pc, i);
      Site& s = sites_data()[k - 1];
      if (s.pc == pc) return s;
    }
  }
  Site* sites_data_ = nullptr;
  MTEMU_HOT Site* sites_data() { return sites_data_; }

  // Records lane `thread % 32`'s access in the request its execution of `pc` belongs to.
  MTEMU_HOT void add(int thread, uintptr_t pc, uintptr_t addr, uint32_t size, uint8_t kind) {
    Site& s = site(pc);
    const uint32_t n = s.executions[thread]++;  // this lane's earlier executions of the site
    IndexList& list = s.per_warp[thread / kWarp];
    // The first lane of its warp to get this far opens the request.
    const uint32_t index = n == list.size ? new_request(list) : list.data[n];
    Request& r = requests[index];
    const int lane = thread % kWarp;
    r.lanes |= 1u << lane;
    r.lane[lane] = LaneAccess{addr, size, kind};
  }
};

void BlockState::reset(const BlockRun& b) {
  block = &b;
  threads = b.threads_count;
  warps = (threads + kWarp - 1) / kWarp;
  site_count = 0;
  site_index_storage.assign(256, 0);
  site_index = site_index_storage.data();
  site_mask = site_index_storage.size() - 1;
  request_count = 0;
  std::fill(std::begin(dev_lo), std::end(dev_lo), 0);
  std::fill(std::begin(dev_hi), std::end(dev_hi), 0);
  shared_bytes_seen = ~std::size_t(0);  // refreshed at the first access
  stack_owner = nullptr;
}

void BlockState::refresh_shared() {
  const BlockRun& b = *block;
  shared_bytes_seen = b.static_shared_bytes;
  shared_count = 0;
  const auto dyn = reinterpret_cast<uintptr_t>(b.dynamic_shared);
  shared_lo[shared_count] = dyn;
  shared_hi[shared_count++] = dyn + b.grid->config.dynamic_smem;
  shared_overflow = b.shared.size() > std::size_t(kSharedCached);
  if (shared_overflow) return;
  for (const SharedVar& v : b.shared) {
    const auto lo = reinterpret_cast<uintptr_t>(v.storage);
    shared_lo[shared_count] = lo;
    shared_hi[shared_count] = lo + v.bytes;
    ++shared_count;
  }
}

void BlockState::refresh_stack(const ThreadCtx* t) {
  const Fiber* f = block->fibers[t->linear];
  stack_owner = t;
  stack_lo = f->stack_begin();
  stack_hi = f->stack_end();
}

Site& BlockState::add_site(uintptr_t pc, std::size_t slot) {
  if (site_count == int(sites.size())) sites.emplace_back();
  sites_data_ = sites.data();
  Site& s = sites[std::size_t(site_count)];
  s.pc = pc;
  s.executions_storage.assign(std::size_t(threads), 0);
  s.executions = s.executions_storage.data();
  if (s.requests.size() < std::size_t(warps)) s.requests.resize(std::size_t(warps));
  for (IndexList& l : s.requests) l.size = 0;
  s.per_warp = s.requests.data();
  site_index[slot] = ++site_count;
  if (std::size_t(site_count) * 2 > site_mask + 1) {
    const std::size_t slots = (site_mask + 1) * 2;
    site_index_storage.assign(slots, 0);
    site_index = site_index_storage.data();
    site_mask = slots - 1;
    for (int k = 0; k < site_count; ++k) {
      std::size_t i =
          std::size_t((sites[std::size_t(k)].pc * 0x9e3779b97f4a7c15ull) >> 32) & site_mask;
      while (site_index[i] != 0) i = (i + 1) & site_mask;
      site_index[i] = k + 1;
    }
  }
  return s;
}

uint32_t BlockState::new_request(IndexList& list) {
  if (request_count == request_capacity) {
    requests_storage.resize(std::max<std::size_t>(1024, requests_storage.size() * 2));
    requests = requests_storage.data();
    request_capacity = requests_storage.size();
  }
  if (list.size == list.capacity) {
    list.storage.resize(std::max<std::size_t>(16, list.storage.size() * 2));
    list.data = list.storage.data();
    list.capacity = uint32_t(list.storage.size());
  }
  const auto index = uint32_t(request_count++);
  requests[index].lanes = 0;
  list.data[list.size++] = index;
  return index;
}

// Per worker thread: trivially constructed, so the per-access path reads it without a guard.
thread_local BlockState* tls_block = nullptr;
BlockState& block_state() {
  static thread_local std::unique_ptr<BlockState> owner;
  if (tls_block == nullptr) {
    owner = std::make_unique<BlockState>();
    tls_block = owner.get();
  }
  return *tls_block;
}

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
  // Per worker thread that ran blocks of the launch (keyed by its BlockState): its sectors.
  std::vector<std::pair<const BlockState*, std::unique_ptr<SectorSet>>> sectors;
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
  if (!file_path().empty()) {
    counters_on = true;
    set_memory_hook(kHookCounters, true);
  }
  return true;
}();

// The slow ends of the lookups below: every shared variable, and the device's region table.
__attribute__((noinline)) bool in_shared_full(const BlockRun& b, uintptr_t a) {
  for (const SharedVar& v : b.shared) {
    const auto lo = reinterpret_cast<uintptr_t>(v.storage);
    if (a >= lo && a < lo + v.bytes) return true;
  }
  const auto lo = reinterpret_cast<uintptr_t>(b.dynamic_shared);
  return a >= lo && a < lo + b.grid->config.dynamic_smem;
}
__attribute__((noinline)) bool in_device_region(BlockState& s, uintptr_t a) {
  const Region r = find_region(reinterpret_cast<const void*>(a));
  if (r.space != Space::Device) return false;
  const int i = s.dev_next++ % BlockState::kCached;
  s.dev_lo[i] = reinterpret_cast<uintptr_t>(r.base);
  s.dev_hi[i] = s.dev_lo[i] + r.bytes;
  return true;
}

MTEMU_HOT bool in_shared(BlockState& s, uintptr_t a) {
  if (s.block->static_shared_bytes != s.shared_bytes_seen) s.refresh_shared();
  if (s.shared_overflow) return in_shared_full(*s.block, a);
  for (int i = 0; i < s.shared_count; ++i)
    if (a >= s.shared_lo[i] && a < s.shared_hi[i]) return true;
  return false;
}

MTEMU_HOT bool in_device_cached(const BlockState& s, uintptr_t a) {
  for (int i = 0; i < BlockState::kCached; ++i)
    if (a >= s.dev_lo[i] && a < s.dev_hi[i]) return true;
  return false;
}

// Device memory: an allocation of the cache, else (not the running thread's stack, where most
// misses land) the region table, which takes a lock.
MTEMU_HOT bool in_device(BlockState& s, const ThreadCtx* t, uintptr_t a) {
  if (in_device_cached(s, a)) return true;
  if (t != s.stack_owner) s.refresh_stack(t);
  if (a >= s.stack_lo && a < s.stack_hi) return false;
  return in_device_region(s, a);
}

[[maybe_unused]] MTEMU_HOT void record(uintptr_t addr, uint32_t size, bool store, uintptr_t site) {
  BlockState* s = tls_block;
  if (s == nullptr || s->block == nullptr || s->busy) return;
  const ThreadCtx* t = tls_thread.load(std::memory_order_relaxed);
  if (t == nullptr || t->block != s->block) return;
  if (s->atomic_depth > 0) return;  // counted once, as an atomic
  s->busy = true;
  uint8_t kind;
  if (in_device_cached(*s, addr))
    kind = store ? GlobalStore : GlobalLoad;
  else if (in_shared(*s, addr))
    kind = store ? SharedStore : SharedLoad;
  else if (in_device(*s, t, addr))
    kind = store ? GlobalStore : GlobalLoad;
  else {
    s->busy = false;
    return;  // the thread's stack, or host memory
  }
  s->add(t->linear, site, addr, size, kind);
  s->busy = false;
}

// Sorts a short array (a request's sectors or words: nearly sorted, a few dozen) and drops
// repeats; returns the new length.
MTEMU_HOT std::size_t sort_unique(uintptr_t* v, std::size_t n) {
  for (std::size_t i = 1; i < n; ++i) {
    const uintptr_t x = v[i];
    std::size_t j = i;
    for (; j > 0 && v[j - 1] > x; --j) v[j] = v[j - 1];
    v[j] = x;
  }
  std::size_t m = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (m == 0 || v[m - 1] != v[i]) v[m++] = v[i];
  return m;
}

// How many 32-byte sectors (or 4-byte words) one lane's access spans.
MTEMU_HOT uintptr_t units(const LaneAccess& x, uintptr_t unit) {
  return (x.addr + x.size - 1) / unit - x.addr / unit + 1;
}

// The distinct sectors of a global request into `out` (sorted); their number.
constexpr std::size_t kFixed = 256;  // sectors or words a request fits in without the heap
MTEMU_HOT std::size_t request_sectors(const Request& r, uintptr_t* out) {
  std::size_t n = 0;
  for (uint32_t lanes = r.lanes; lanes != 0; lanes &= lanes - 1) {
    const LaneAccess& x = r.lane[__builtin_ctz(lanes)];
    for (uintptr_t q = x.addr / kSector; q <= (x.addr + x.size - 1) / kSector; ++q) out[n++] = q;
  }
  return sort_unique(out, n);
}

MTEMU_HOT std::size_t request_units(const Request& r, uint32_t lanes, uintptr_t unit) {
  std::size_t n = 0;
  for (; lanes != 0; lanes &= lanes - 1) n += units(r.lane[__builtin_ctz(lanes)], unit);
  return n;
}

// Shared memory wavefronts of one request: lanes are served in phases of 128 bytes (all 32 lanes
// for accesses up to 4 bytes, half-warps for 8 bytes, quarter-warps for 16); a phase takes as many
// wavefronts as the most distinct 4-byte words any of the 32 banks holds.
MTEMU_HOT void shared_phase(const Request& r, uint32_t lanes, uintptr_t* words,
                            uint64_t* wavefronts) {
  std::size_t n = 0;
  for (; lanes != 0; lanes &= lanes - 1) {
    const LaneAccess& x = r.lane[__builtin_ctz(lanes)];
    for (uintptr_t w = x.addr / 4; w <= (x.addr + x.size - 1) / 4; ++w) words[n++] = w;
  }
  n = sort_unique(words, n);
  uint32_t per_bank[32] = {};
  uint32_t most = 1;
  for (std::size_t i = 0; i < n; ++i) most = std::max(most, ++per_bank[words[i] % 32]);
  *wavefronts += most;
}

void shared_request(const Request& r, std::vector<uintptr_t>& scratch, uint64_t* wavefronts,
                    uint64_t* minimum) {
  const uint32_t size = r.lane[__builtin_ctz(r.lanes)].size;  // the lowest active lane's
  const int lanes_per_phase = size <= 4 ? 32 : size <= 8 ? 16 : 8;
  uintptr_t fixed[kFixed];
  for (int first = 0; first < kWarp; first += lanes_per_phase) {
    const uint32_t phase_mask =
        lanes_per_phase == 32 ? ~0u : ((1u << lanes_per_phase) - 1) << first;
    const uint32_t lanes = r.lanes & phase_mask;
    if (lanes == 0) continue;
    const std::size_t n = request_units(r, lanes, 4);
    if (n > kFixed) scratch.resize(n);
    shared_phase(r, lanes, n > kFixed ? scratch.data() : fixed, wavefronts);
    *minimum += 1;
  }
}

}  // namespace

MTEMU_HOT void count_access(uintptr_t addr, uint32_t size, bool store, uintptr_t site) {
  record(addr, size, store, site);
}

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
  BlockState& s = block_state();
  s.block = nullptr;
  if (!counters_on) return;
  {
    std::lock_guard<std::mutex> lock(acc_mutex);
    auto it = accs().find(b.grid);
    if (it == accs().end()) return;  // launched before counters were on
    auto& sets = it->second.sectors;
    auto mine =
        std::find_if(sets.begin(), sets.end(), [&](const auto& e) { return e.first == &s; });
    if (mine == sets.end()) {
      sets.emplace_back(&s, std::make_unique<SectorSet>());
      mine = sets.end() - 1;
    }
    s.sectors = mine->second.get();
  }
  s.reset(b);
}

void counters_block_end(const BlockRun& b) {
  BlockState& s = block_state();
  if (s.block != &b) return;
  s.block = nullptr;
  LaunchCounters c;
  uintptr_t fixed[kFixed];
  for (std::size_t i = 0; i < s.request_count; ++i) {
    const Request& r = s.requests[i];
    c.lanes += uint64_t(__builtin_popcount(r.lanes));
    const uint8_t kind = r.lane[__builtin_ctz(r.lanes)].kind;  // the lowest active lane's
    switch (kind) {
      case GlobalLoad:
      case GlobalStore: {
        const std::size_t most = request_units(r, r.lanes, kSector);
        if (most > kFixed) s.scratch.resize(most);
        uintptr_t* sectors = most > kFixed ? s.scratch.data() : fixed;
        const std::size_t n = request_sectors(r, sectors);
        for (std::size_t k = 0; k < n; ++k) s.sectors->insert(sectors[k]);
        if (kind == GlobalLoad) {
          ++c.global_load_requests;
          c.global_load_sectors += n;
          for (std::size_t k = 0; k < n; ++k) s.block_loads.insert(sectors[k]);
        } else {
          ++c.global_store_requests;
          c.global_store_sectors += n;
        }
        break;
      }
      case GlobalAtomic: {
        const std::size_t most = request_units(r, r.lanes, kSector);
        if (most > kFixed) s.scratch.resize(most);
        ++c.global_atomic_requests;
        c.global_atomic_sectors += request_sectors(r, most > kFixed ? s.scratch.data() : fixed);
        break;
      }
      case SharedLoad:
      case SharedStore: {
        uint64_t wavefronts = 0, minimum = 0;
        shared_request(r, s.scratch, &wavefronts, &minimum);
        c.shared_bank_conflicts += wavefronts - minimum;
        if (kind == SharedLoad) {
          ++c.shared_load_requests;
          c.shared_load_wavefronts += wavefronts;
        } else {
          ++c.shared_store_requests;
          c.shared_store_wavefronts += wavefronts;
        }
        break;
      }
    }
  }
  c.block_distinct_load_sectors = s.block_loads.size();
  s.block_loads.clear();
  const uint64_t warps = (uint64_t(b.threads_count) + kWarp - 1) / kWarp;
  c.warps_launched = warps;
  c.barriers = uint64_t(b.barrier_generation) * warps;
  s.request_count = 0;
  s.site_count = 0;

  std::lock_guard<std::mutex> lock(acc_mutex);
  auto it = accs().find(b.grid);
  if (it == accs().end()) return;
  LaunchCounters& t = it->second.c;
  t.global_load_requests += c.global_load_requests;
  t.global_load_sectors += c.global_load_sectors;
  t.global_store_requests += c.global_store_requests;
  t.global_store_sectors += c.global_store_sectors;
  t.global_atomic_requests += c.global_atomic_requests;
  t.global_atomic_sectors += c.global_atomic_sectors;
  t.block_distinct_load_sectors += c.block_distinct_load_sectors;
  t.max_block_load_bytes =
      std::max<uint64_t>(t.max_block_load_bytes, c.block_distinct_load_sectors * kSector);
  t.shared_load_requests += c.shared_load_requests;
  t.shared_load_wavefronts += c.shared_load_wavefronts;
  t.shared_store_requests += c.shared_store_requests;
  t.shared_store_wavefronts += c.shared_store_wavefronts;
  t.shared_bank_conflicts += c.shared_bank_conflicts;
  t.lanes += c.lanes;
  t.warps_launched += c.warps_launched;
  t.barriers += c.barriers;
}

void counters_launch_end(const Grid& g) {
  std::unique_lock<std::mutex> lock(acc_mutex);
  auto it = accs().find(&g);
  if (it == accs().end()) return;
  LaunchCounters c = std::move(it->second.c);
  // The distinct sectors: the union of what each worker saw.
  auto& sets = it->second.sectors;
  std::size_t distinct = 0;
  if (!sets.empty()) {
    SectorSet& all = *sets.front().second;
    for (std::size_t k = 1; k < sets.size(); ++k)
      sets[k].second->for_each([&](uintptr_t q) { all.insert(q); });
    distinct = all.size();
  }
  c.distinct_bytes_touched = distinct * kSector;
  accs().erase(it);
  c.bytes_moved = (c.global_load_sectors + c.global_store_sectors) * kSector;
  const uint64_t requests = c.memory_requests();
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
  BlockState& s = block_state();
  ++s.atomic_depth;
  const ThreadCtx* t = tls_thread.load(std::memory_order_relaxed);
  if (t == nullptr || s.block == nullptr || t->block != s.block || s.atomic_depth > 1) return;
  const auto a = reinterpret_cast<uintptr_t>(addr);
  if (!in_device(s, t, a)) return;  // shared-memory atomics are not global atomics
  const auto site = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  s.add(t->linear, site, a, uint32_t(bytes), GlobalAtomic);
}

void count_atomic_end() { --block_state().atomic_depth; }

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
      "\"global_atomic_requests\":%llu,\"global_atomic_sectors\":%llu,"
      "\"block_distinct_load_sectors\":%llu,\"max_block_load_bytes\":%llu,"
      "\"shared_load_requests\":%llu,"
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
      (unsigned long long)global_atomic_sectors, (unsigned long long)block_distinct_load_sectors,
      (unsigned long long)max_block_load_bytes, (unsigned long long)shared_load_requests,
      (unsigned long long)shared_load_wavefronts, (unsigned long long)shared_store_requests,
      (unsigned long long)shared_store_wavefronts, (unsigned long long)shared_bank_conflicts,
      active_lanes_mean, (unsigned long long)barriers, (unsigned long long)warps_launched,
      (unsigned long long)bytes_moved, (unsigned long long)distinct_bytes_touched,
      device_profile.c_str(), registers < 0 ? "null" : std::to_string(registers).c_str(),
      registers_min < 0 ? "null" : std::to_string(registers_min).c_str(),
      (unsigned long long)static_smem, blocks_per_sm, occupancy_pct, occupancy_limiter.c_str());
  return buf;
}

int dominant_launch(const std::vector<LaunchCounters>& launches) {
  int best = -1;
  for (std::size_t i = 0; i < launches.size(); ++i)
    if (best < 0 || launches[i].memory_requests() > launches[std::size_t(best)].memory_requests())
      best = int(i);
  return best;
}

void counters_collect(bool on) {
  std::lock_guard<std::mutex> lock(detail::acc_mutex);
  detail::collect_in_memory = on;
  detail::counters_on = on || !detail::file_path().empty();
  detail::set_memory_hook(detail::kHookCounters, detail::counters_on);
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
using Report = void (*)(uintptr_t);
using ReportN = void (*)(uintptr_t, uintptr_t);
template <class F>
F libasan_function(F* cache, const char* name) {
  F f = __atomic_load_n(cache, __ATOMIC_RELAXED);
  if (__builtin_expect(f == nullptr, 0)) {
    f = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
    if (f == nullptr) {
      std::fprintf(stderr, "cuda-emu: %s not found in libasan\n", name);
      std::abort();
    }
    __atomic_store_n(cache, f, __ATOMIC_RELAXED);
  }
  return f;
}
}  // namespace

// Note [accesses routed to the checkers] (routed_memory.h): an access whose inline check failed.
// Routed memory that is addressable once decoded goes to the checkers that are on (its site: the
// return address, the kernel's access), through routed_access (Note [stores GCC leaves
// unchecked], unchecked_stores.h); a genuine error goes to libasan's own report, with the routing
// lifted so that the report reads ASan's shadow. Host code reaches here too (every file of an
// emulated build recovers, so that an inline function one of them shares with a kernel file is
// built alike): the checkers ignore an access made outside a GPU thread.
#define MTEMU_ASAN_REPORT(name, bytes, store)                                                    \
  extern "C"                                                                                     \
      __attribute__((visibility("default"), noinline, no_sanitize("address", "undefined"))) void \
      name(uintptr_t a) {                                                                        \
    const auto site = reinterpret_cast<uintptr_t>(__builtin_return_address(0));                  \
    if (mtemu::detail::routed_access_is_valid(a, bytes)) {                                       \
      if (mtemu::detail::memory_hooks != 0) mtemu::detail::routed_access(a, bytes, store, site); \
      return;                                                                                    \
    }                                                                                            \
    static Report real = nullptr;                                                                \
    mtemu::detail::lift_routing_for_report();                                                    \
    libasan_function(&real, #name)(a);                                                           \
    mtemu::detail::restore_routing_after_report(); /* ASAN_OPTIONS=halt_on_error=0 */            \
  }
#define MTEMU_ASAN_REPORT_N(name, store)                                                         \
  extern "C"                                                                                     \
      __attribute__((visibility("default"), noinline, no_sanitize("address", "undefined"))) void \
      name(uintptr_t a, uintptr_t n) {                                                           \
    const auto site = reinterpret_cast<uintptr_t>(__builtin_return_address(0));                  \
    if (mtemu::detail::routed_access_is_valid(a, n)) {                                           \
      if (mtemu::detail::memory_hooks != 0)                                                      \
        mtemu::detail::routed_access(a, uint32_t(n), store, site);                               \
      return;                                                                                    \
    }                                                                                            \
    static ReportN real = nullptr;                                                               \
    mtemu::detail::lift_routing_for_report();                                                    \
    libasan_function(&real, #name)(a, n);                                                        \
    mtemu::detail::restore_routing_after_report();                                               \
  }
#if defined(__SANITIZE_ADDRESS__)
MTEMU_ASAN_REPORT(__asan_report_load1_noabort, 1, false)
MTEMU_ASAN_REPORT(__asan_report_load2_noabort, 2, false)
MTEMU_ASAN_REPORT(__asan_report_load4_noabort, 4, false)
MTEMU_ASAN_REPORT(__asan_report_load8_noabort, 8, false)
MTEMU_ASAN_REPORT(__asan_report_load16_noabort, 16, false)
MTEMU_ASAN_REPORT(__asan_report_store1_noabort, 1, true)
MTEMU_ASAN_REPORT(__asan_report_store2_noabort, 2, true)
MTEMU_ASAN_REPORT(__asan_report_store4_noabort, 4, true)
MTEMU_ASAN_REPORT(__asan_report_store8_noabort, 8, true)
MTEMU_ASAN_REPORT(__asan_report_store16_noabort, 16, true)
MTEMU_ASAN_REPORT_N(__asan_report_load_n_noabort, false)
MTEMU_ASAN_REPORT_N(__asan_report_store_n_noabort, true)
#endif
