// Running one block: its threads take turns on the worker as fibers. A thread runs until it
// reaches a barrier or a warp collective it cannot finish alone, or returns; the round goes on
// until every thread has returned. When nobody can move, the block is deadlocked: a barrier that
// some threads skipped, or a collective whose mask names a lane that is elsewhere or gone. That is
// undefined behaviour on a GPU (a hang, or garbage), and a fault with an explanation here.

#include "block.h"
#include "counters.h"
#include "race.h"
#include "routed_memory.h"
#include "unchecked_stores.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "cuda_emu/device_api.h"
#include "mma.h"
#include "sanitizer.h"

namespace mtemu::detail {

thread_local std::atomic<ThreadCtx*> tls_thread{nullptr};

namespace {

constexpr int kWarp = 32;
constexpr std::size_t kStaticSharedLimit =
    48 * 1024;  // static shared memory per block, as ptxas enforces
constexpr unsigned char kUninitialisedByte = 0xff;  // shared memory starts as NaN floats: reads of
                                                    // unwritten values show

std::string idx3(uint3 v) {
  return "(" + std::to_string(v.x) + "," + std::to_string(v.y) + "," + std::to_string(v.z) + ")";
}
std::string hex(unsigned v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

// "file:line" of a __syncthreads().
std::string site_text(const BarrierSite* site) {
  std::string file = site->file;
  if (const auto slash = file.find_last_of('/'); slash != std::string::npos)
    file = file.substr(slash + 1);
  return file + ":" + std::to_string(site->line);
}

BlockRun& this_block(const char* what) { return *current(what).block; }
EmuThread& this_thread(BlockRun& b) { return b.threads[b.running]; }

std::string where(const BlockRun& b, int t) {
  return describe(b.grid->site) + " block " + idx3(b.index) + " thread " +
         idx3(b.threads[t].ctx.thread_idx);
}

// Thrown by fault_here through the faulting GPU thread's own frames (the kernel's, the
// emulator's), so that what they own is freed, up to thread_entry, which ends the fiber.
struct ThreadFaulted {};

// Records the first fault of the block and ends the running thread: the scheduler resumes no
// thread of a faulted block.
[[noreturn]] void fault_here(cudaError_t code, const std::string& what) {
  BlockRun* b;
  {
    san::IgnoreAll ignore;
    b = &this_block("a device fault");
    if (b->fault_code == cudaSuccess) {
      b->fault_code = code;
      b->fault_text = where(*b, b->running) + ": " + what;
    }
    this_thread(*b).wait = Wait::Done;
  }
  throw ThreadFaulted{};
}

void thread_entry(void* arg) {
  EmuThread* t = static_cast<EmuThread*>(arg);
  BlockRun& b = *t->ctx.block;
  san::acquire(const_cast<char*>(&b.grid->start_token));
  bool faulted = false;
  try {
    b.grid->body();
    if (memory_hooks != 0) routed_thread_yield();
  } catch (const ThreadFaulted&) {
    faulted = true;
  }
  san::release(const_cast<char*>(&b.grid->done_token));
  if (faulted) return;  // recorded in the block (and this thread marked Done); the block stops
  san::IgnoreAll ignore;
  t->wait = Wait::Done;
  ++b.exited;
}

const char* collective_name(const LaneOp& op) {
  switch (op.kind) {
    case CollectiveKind::SyncWarp:
      return "__syncwarp";
    case CollectiveKind::ActiveMask:
      return "__activemask";
    case CollectiveKind::Ballot:
      return "__ballot_sync";
    case CollectiveKind::Wmma:
      return op.op == int(WmmaOp::Load)    ? "wmma::load_matrix_sync"
             : op.op == int(WmmaOp::Store) ? "wmma::store_matrix_sync"
                                           : "wmma::mma_sync";
    case CollectiveKind::Shuffle:
      switch (Shfl(op.op)) {
        case Shfl::Idx:
          return "__shfl_sync";
        case Shfl::Up:
          return "__shfl_up_sync";
        case Shfl::Down:
          return "__shfl_down_sync";
        case Shfl::Xor:
          return "__shfl_xor_sync";
      }
  }
  return "a warp collective";
}

// The source lane of a shuffle for `lane`; returns `lane` itself where CUDA keeps the own value.
int shuffle_source(const LaneOp& op, int lane) {
  const int w = op.width, seg = lane / w * w;
  switch (Shfl(op.op)) {
    case Shfl::Idx:
      return seg + (op.arg % w + w) % w;
    case Shfl::Up:
      return lane - op.arg < seg ? lane : lane - op.arg;
    case Shfl::Down:
      return lane + op.arg >= seg + w ? lane : lane + op.arg;
    case Shfl::Xor: {
      const int src = lane ^ op.arg;
      return src >= seg + w ? lane : src;
    }
  }
  return lane;
}

// Called with every lane of `mask` arrived at the same collective: computes all their results.
// Returns an empty string, or why the collective is invalid.
std::string complete(BlockRun& b, int warp, const LaneOp& first) {
  const int base = warp * kWarp;
  const unsigned mask = first.mask;
  if (first.kind == CollectiveKind::Shuffle) {
    for (int lane = 0; lane < kWarp; ++lane) {
      if (!(mask >> lane & 1u)) continue;
      LaneOp& op = b.threads[base + lane].op;
      const int src = shuffle_source(op, lane);
      if (!(mask >> src & 1u))
        return "lane " + std::to_string(lane) + " reads lane " + std::to_string(src) +
               ", which is not in the mask " + hex(mask) + " (its value is undefined on a GPU)";
      std::memcpy(op.out, b.threads[base + src].op.in, op.size);
    }
  } else if (first.kind == CollectiveKind::Ballot) {
    unsigned bits = 0;
    for (int lane = 0; lane < kWarp; ++lane)
      if ((mask >> lane & 1u) && b.threads[base + lane].op.arg) bits |= 1u << lane;
    for (int lane = 0; lane < kWarp; ++lane)
      if (mask >> lane & 1u) std::memcpy(b.threads[base + lane].op.out, &bits, sizeof bits);
  } else if (first.kind == CollectiveKind::Wmma) {
    void* args[kWarp];
    for (int lane = 0; lane < kWarp; ++lane) {
      const LaneOp& op = b.threads[base + lane].op;
      if (op.check != first.check)
        return "lanes 0 and " + std::to_string(lane) + " passed different pointers or strides to " +
               collective_name(first) + " (every lane must pass the same)";
      args[lane] = op.lane_arg;
    }
    first.compute(args);
  }
  return {};
}

// Joins the running thread to a warp collective and returns when it is complete.
void warp_collective(LaneOp op) {
  BlockRun* b;
  EmuThread* me;
  int warp;
  // __syncwarp and WMMA order memory among the lanes; shuffles and ballots only exchange values.
  const bool orders_memory = op.kind == CollectiveKind::SyncWarp || op.kind == CollectiveKind::Wmma;
  PhaseSync* phase = nullptr;  // under ThreadSanitizer, where the collective orders memory
  unsigned generation = 0;
  if (memory_hooks != 0) routed_thread_yield();
  {
    san::IgnoreAll ignore;
    b = &this_block(collective_name(op));
    me = &this_thread(*b);
    const int lane = b->running % kWarp;
    warp = b->running / kWarp;
    const int base = warp * kWarp;
    if (!(op.mask >> lane & 1u))
      fault_here(cudaErrorIllegalInstruction,
                 std::string(collective_name(op)) + " with mask " + hex(op.mask) +
                     " called by lane " + std::to_string(lane) + ", which the mask does not name");
    const int lanes_here = std::min(kWarp, b->threads_count - base);
    if (lanes_here < kWarp && (op.mask >> lanes_here) != 0)
      fault_here(cudaErrorIllegalInstruction,
                 std::string(collective_name(op)) + " with mask " + hex(op.mask) +
                     " names lanes past the block's last thread (this warp has " +
                     std::to_string(lanes_here) + " lanes)");
    me->op = op;
    me->wait = Wait::Collective;
    if (MTEMU_TSAN && orders_memory) {
      phase = &b->sync->warps[{warp, op.mask}];
      generation = phase->generation;
    }
    bool all_here = true;
    for (int l = 0; l < kWarp && all_here; ++l) {
      if (!(op.mask >> l & 1u)) continue;
      const EmuThread& t = b->threads[base + l];
      if (t.wait == Wait::Done)
        fault_here(cudaErrorIllegalInstruction, std::string(collective_name(op)) + " with mask " +
                                                    hex(op.mask) + " waits for lane " +
                                                    std::to_string(l) + ", which has exited");
      all_here = t.wait == Wait::Collective && t.op.kind == op.kind && t.op.mask == op.mask &&
                 t.op.op == op.op;
    }
    if (all_here) {
      const std::string bad = complete(*b, warp, op);
      if (!bad.empty())
        fault_here(cudaErrorIllegalInstruction, std::string(collective_name(op)) + ": " + bad);
      for (int l = 0; l < kWarp; ++l)
        if (op.mask >> l & 1u) b->threads[base + l].wait = Wait::Runnable;
      if (phase) ++phase->generation;
      if (orders_memory) ++b->warp_generation[warp];
    }
  }
  if (phase) san::release(&phase->token[generation % 2]);
  bool waiting;
  {
    san::IgnoreAll ignore;
    waiting = me->wait == Wait::Collective;
  }
  if (waiting) b->fibers[b->running]->yield();
  if (phase) san::acquire(&phase->token[generation % 2]);
}

// Nobody can run: explain who waits for what.
std::string explain_deadlock(const BlockRun& b) {
  std::ostringstream s;
  if (b.at_barrier > 0) {
    int first_gone = -1, first_elsewhere = -1;
    for (int t = 0; t < b.threads_count; ++t) {
      if (b.threads[t].wait == Wait::Done && first_gone < 0) first_gone = t;
      if (b.threads[t].wait == Wait::Collective && first_elsewhere < 0) first_elsewhere = t;
    }
    s << "__syncthreads() at " << site_text(b.barrier_site) << " reached by " << b.at_barrier
      << " of " << b.threads_count << " threads";
    if (first_gone >= 0)
      s << "; " << b.exited << " had returned without reaching it (first: thread "
        << idx3(b.threads[first_gone].ctx.thread_idx) << ")";
    if (first_elsewhere >= 0)
      s << "; thread " << idx3(b.threads[first_elsewhere].ctx.thread_idx) << " waits in "
        << collective_name(b.threads[first_elsewhere].op);
    s << " (a barrier in code that not every thread of the block runs)";
    return s.str();
  }
  for (int t = 0; t < b.threads_count; ++t) {
    const EmuThread& me = b.threads[t];
    if (me.wait != Wait::Collective) continue;
    const int base = t / kWarp * kWarp;
    s << "thread " << idx3(me.ctx.thread_idx) << " (lane " << t % kWarp << ") waits in "
      << collective_name(me.op) << " with mask " << hex(me.op.mask);
    for (int l = 0; l < kWarp; ++l) {
      if (!(me.op.mask >> l & 1u)) continue;
      const EmuThread& other = b.threads[base + l];
      if (other.wait == Wait::Collective && other.op.kind == me.op.kind &&
          other.op.mask == me.op.mask)
        continue;
      s << ", but lane " << l
        << (other.wait == Wait::Done ? " has exited"
                                     : std::string(" is in ") + collective_name(other.op) +
                                           " with mask " + hex(other.op.mask));
      break;
    }
    return s.str();
  }
  return "no thread can make progress";
}

}  // namespace

void outside_kernel(const char* what) {
  std::fprintf(stderr, "cuda-emu: %s used outside a kernel (host code has no GPU thread)\n", what);
  std::abort();
}

void device_trap(const char* what) {
  fault_here(cudaErrorLaunchFailure, std::string(what) + " was executed");
}

void syncthreads(const BarrierSite* site) {
  BlockRun* b;
  EmuThread* me;
  unsigned generation;
  if (memory_hooks != 0) routed_thread_yield();
  {
    san::IgnoreAll ignore;
    b = &this_block("__syncthreads");
    me = &this_thread(*b);
    if (b->at_barrier == 0) {
      b->barrier_site = site;
      b->barrier_first = b->running;
    } else if (site != b->barrier_site) {
      fault_here(cudaErrorLaunchFailure,
                 "threads of the block wait at different __syncthreads(): thread " +
                     idx3(b->threads[b->barrier_first].ctx.thread_idx) + " at " +
                     site_text(b->barrier_site) + ", this thread at " + site_text(site) +
                     " (a barrier is one instruction that every thread of the block must reach; "
                     "compute-sanitizer's synccheck reports this)");
    }
    me->wait = Wait::Barrier;
    generation = b->barrier_generation;
    if (++b->at_barrier == b->threads_count) {
      for (int t = 0; t < b->threads_count; ++t) b->threads[t].wait = Wait::Runnable;
      b->at_barrier = 0;
      ++b->barrier_generation;
    }
  }
  // This generation's sync object (PhaseSync): the thread that completes the barrier runs on
  // and releases at the next one before the others have left this one.
  san::release(&b->sync->barrier[generation % 2]);
  bool waiting;
  {
    san::IgnoreAll ignore;
    waiting = me->wait == Wait::Barrier;
  }
  if (waiting) b->fibers[b->running]->yield();
  san::acquire(&b->sync->barrier[generation % 2]);
}

void syncwarp(unsigned mask) {
  LaneOp op{};
  op.kind = CollectiveKind::SyncWarp;
  op.mask = mask;
  warp_collective(op);
}

unsigned activemask(const void* site) {
  // The lanes that execute __activemask together: the caller waits until no lane of its warp can
  // run any more (each has exited, arrived here too, or waits elsewhere), and gets the set of
  // lanes that arrived at the same __activemask() (resolve_activemask). Like convergence on a
  // GPU, that is every lane that did not branch away: the two sides of an if/else get disjoint
  // masks.
  BlockRun* b;
  EmuThread* me;
  if (memory_hooks != 0) routed_thread_yield();
  {
    san::IgnoreAll ignore;
    b = &this_block("__activemask");
    me = &this_thread(*b);
    me->op = LaneOp{};
    me->op.kind = CollectiveKind::ActiveMask;
    me->op.check = site;
    me->wait = Wait::Collective;
  }
  b->fibers[b->running]->yield();
  san::IgnoreAll ignore;
  unsigned mask;
  std::memcpy(&mask, me->op.out, sizeof mask);
  return mask;
}

namespace {
bool waits_in_activemask(const EmuThread& t) {
  return t.wait == Wait::Collective && t.op.kind == CollectiveKind::ActiveMask;
}

// Called when no thread can run: completes the __activemask calls, each warp's lanes grouped by
// the __activemask() they wait at. True if any was waiting.
bool resolve_activemask(BlockRun& b) {
  bool any = false;
  for (int base = 0; base < b.threads_count; base += kWarp) {
    const int lanes = std::min(kWarp, b.threads_count - base);
    for (int first = 0; first < lanes; ++first) {
      const EmuThread& leader = b.threads[base + first];
      if (!waits_in_activemask(leader)) continue;
      const void* site = leader.op.check;
      unsigned mask = 0;
      for (int l = first; l < lanes; ++l) {
        const EmuThread& t = b.threads[base + l];
        if (waits_in_activemask(t) && t.op.check == site) mask |= 1u << l;
      }
      for (int l = first; l < lanes; ++l)
        if (mask >> l & 1u) {
          std::memcpy(b.threads[base + l].op.out, &mask, sizeof mask);
          b.threads[base + l].wait = Wait::Runnable;
        }
      any = true;
    }
  }
  return any;
}
}  // namespace

void shuffle(unsigned mask, Shfl kind, int arg, int width, const void* in, void* out,
             std::size_t size) {
  if (width <= 0 || width > kWarp || (width & (width - 1)) != 0)
    fault_here(cudaErrorIllegalInstruction,
               "shuffle width " + std::to_string(width) + " is not a power of two <= 32");
  LaneOp op{};
  op.kind = CollectiveKind::Shuffle;
  op.mask = mask;
  op.op = int(kind);
  op.arg = arg;
  op.width = width;
  op.size = size;
  std::memcpy(op.in, in, size);
  warp_collective(op);
  san::IgnoreAll ignore;
  BlockRun& b = this_block("a shuffle");
  std::memcpy(out, this_thread(b).op.out, size);
}

unsigned ballot(unsigned mask, bool predicate) {
  LaneOp op{};
  op.kind = CollectiveKind::Ballot;
  op.mask = mask;
  op.arg = predicate ? 1 : 0;
  warp_collective(op);
  san::IgnoreAll ignore;
  BlockRun& b = this_block("__ballot_sync");
  unsigned bits;
  std::memcpy(&bits, this_thread(b).op.out, sizeof bits);
  return bits;
}

void wmma_collective(WmmaOp wop, const void* check, void* arg,
                     void (*compute)(void* const* lane_args)) {
  LaneOp op{};
  op.kind = CollectiveKind::Wmma;
  op.mask = 0xffffffffu;
  op.op = int(wop);
  op.check = check;
  op.lane_arg = arg;
  op.compute = compute;
  warp_collective(op);
}

int lane_id() { return current("lane id").linear % kWarp; }

void* block_shared(const void* tag, std::size_t bytes, std::size_t align, const char* name) {
  san::IgnoreAll ignore;
  BlockRun& b = this_block("__shared__");
  for (const SharedVar& v : b.shared)
    if (v.tag == tag) return v.storage;
  if (b.static_shared_bytes + bytes > kStaticSharedLimit)
    fault_here(cudaErrorLaunchOutOfResources,
               "__shared__ " + std::string(name) + " brings the block's static shared memory to " +
                   std::to_string(b.static_shared_bytes + bytes) +
                   " bytes, over the 48 KiB limit (ptxas refuses " +
                   "this; use dynamic shared memory with cudaFuncSetAttribute)");
  // Static and dynamic together, as the GPU checks at the launch (the emulator learns the static
  // size here; later launches of the kernel are checked at the launch, see enqueue_launch).
  const std::size_t static_bytes = b.static_shared_bytes + bytes;
  note_static_shared(b.grid->kernel, static_bytes);
  const std::size_t optin = dynamic_shared_optin(b.grid->kernel);
  const std::size_t limit = optin > 0 ? shared_per_block_optin() : shared_per_block_default();
  if (static_bytes + b.grid->config.dynamic_smem > limit)
    fault_here(cudaErrorInvalidValue,
               "__shared__ " + std::string(name) + " brings the block's shared memory to " +
                   std::to_string(static_bytes) + " bytes of static and " +
                   std::to_string(b.grid->config.dynamic_smem) + " of dynamic, over the " +
                   std::to_string(limit) + " bytes a block has in all" +
                   (optin > 0 ? std::string(" (with the MaxDynamicSharedMemorySize opt-in)")
                              : std::string(" without cudaFuncSetAttribute(kernel, "
                                            "cudaFuncAttributeMaxDynamicSharedMemorySize, n)")) +
                   "; the GPU refuses this launch with cudaErrorInvalidValue");
  void* p = nullptr;
  if (posix_memalign(&p, align < 16 ? 16 : align, bytes == 0 ? 1 : bytes) != 0) {
    std::fprintf(stderr, "cuda-emu: out of host memory for __shared__ %s\n", name);
    std::abort();
  }
  std::memset(p, kUninitialisedByte, bytes);
  route_block_memory(p, bytes);  // Note [accesses routed to the checkers]
  b.shared.push_back(SharedVar{tag, p, bytes, name});
  b.static_shared_bytes += bytes;
  return p;
}

void* dynamic_shared(std::size_t align) {
  san::IgnoreAll ignore;
  BlockRun& b = this_block("extern __shared__");
  if (reinterpret_cast<uintptr_t>(b.dynamic_shared) % align != 0)
    fault_here(cudaErrorMisalignedAddress,
               "extern __shared__ asks for " + std::to_string(align) + "-byte alignment");
  return b.dynamic_shared;
}

void run_block(const Grid& g, uint64_t linear, WorkerSlots& slots, cudaError_t* fault_code,
               std::string* fault_text) {
  // All of this runs on the worker's own TSan state and is the emulator's bookkeeping (the fibers,
  // the threads' state, the shared arrays), never user memory: invisible to race detection. The
  // GPU threads run on their fibers' TSan states, which this does not cover. Synchronisation
  // still counts: a fiber created here inherits the launch's history.
  san::IgnoreAccesses bookkeeping;
  const dim3 bd = g.config.block;
  const int n = int(bd.x * bd.y * bd.z);
  BlockRun b;
  b.grid = &g;
  b.index = g.block_index(linear);
  b.threads_count = n;
  {
    san::IgnoreAll ignore;
    while (int(slots.fibers.size()) < n) {
      static const std::size_t stack_bytes = [] {
        const char* kb = std::getenv("MINITRAIN_EMU_STACK_KB");
        return std::size_t(kb && *kb ? std::atoi(kb) : 256) * 1024;
      }();
      slots.fibers.push_back(std::make_unique<Fiber>(stack_bytes));
    }
    if (int(slots.threads.size()) < n) slots.threads.resize(n);
  }
  std::vector<Fiber*> fibers(n);
  b.threads = slots.threads.data();
  b.fibers = fibers.data();
  if (posix_memalign(&b.dynamic_shared, 256,
                     g.config.dynamic_smem == 0 ? 1 : g.config.dynamic_smem) != 0)
    std::abort();
  std::memset(b.dynamic_shared, kUninitialisedByte, g.config.dynamic_smem);
  // With no dynamic shared memory, any access through extern __shared__ is out of bounds.
  if (g.config.dynamic_smem == 0) san::poison(b.dynamic_shared, 1);
  route_block_memory(b.dynamic_shared, g.config.dynamic_smem);
  for (int t = 0; t < n; ++t) {
    EmuThread& th = b.threads[t];
    th.ctx.thread_idx =
        uint3{unsigned(t) % bd.x, unsigned(t) / bd.x % bd.y, unsigned(t) / (bd.x * bd.y)};
    th.ctx.block_idx = b.index;
    th.ctx.block_dim = bd;
    th.ctx.grid_dim = g.config.grid;
    th.ctx.linear = t;
    th.ctx.block = &b;
    th.wait = Wait::Runnable;
    fibers[t] = slots.fibers[t].get();
    static thread_local std::string name;
    name = g.site.kernel + std::string(" block ") + idx3(b.index) + " thread " +
           idx3(th.ctx.thread_idx);
    fibers[t]->start(&thread_entry, &th, name.c_str());
  }

  counters_block_begin(b);
  for (;;) {
    bool ran = false, all_done = true;
    for (int t = 0; t < n && b.fault_code == cudaSuccess; ++t) {
      Wait w;
      {
        san::IgnoreAll ignore;
        w = b.threads[t].wait;
      }
      if (w != Wait::Done) all_done = false;
      if (w != Wait::Runnable) continue;
      b.running = t;
      tls_thread.store(&b.threads[t].ctx, std::memory_order_relaxed);
      fibers[t]->resume();
      tls_thread.store(nullptr, std::memory_order_relaxed);
      ran = true;
    }
    san::IgnoreAll ignore;
    if (b.fault_code != cudaSuccess || all_done) break;
    if (!ran && resolve_activemask(b)) continue;
    if (!ran) {
      b.fault_code = cudaErrorLaunchFailure;
      b.fault_text =
          describe(g.site) + " block " + idx3(b.index) + ": deadlock: " + explain_deadlock(b);
      break;
    }
  }

  counters_block_end(b);
  for (int t = 0; t < n; ++t)
    if (!fibers[t]->finished()) fibers[t]->release_as_if_finished(const_cast<char*>(&g.done_token));
  san::IgnoreAll ignore;
  for (const SharedVar& v : b.shared) {
    unroute_block_memory(v.storage, v.bytes);
    std::free(v.storage);
  }
  unroute_block_memory(b.dynamic_shared, g.config.dynamic_smem);
  if (g.config.dynamic_smem == 0) san::unpoison(b.dynamic_shared, 1);
  std::free(b.dynamic_shared);
  *fault_code = b.fault_code;
  *fault_text = b.fault_text;
}

}  // namespace mtemu::detail
