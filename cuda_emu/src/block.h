#pragma once
// One block of a grid, run to completion by one worker: its threads as fibers, its barrier, its
// warps' collectives, its shared memory, and the first fault any of its threads hit.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cuda_emu/device_api.h"
#include "fiber.h"
#include "grid.h"

namespace mtemu::detail {

enum class Wait : uint8_t { Runnable, Barrier, Collective, Done };
enum class CollectiveKind : uint8_t { SyncWarp, Shuffle, Ballot, Wmma, ActiveMask };

/// A lane's part in a warp collective: what it brings, and (once all named lanes came) its result.
struct LaneOp {
  CollectiveKind kind;
  unsigned mask;
  int op;  // Shfl kind or WmmaOp
  int arg, width;
  unsigned char in[16], out[16];
  std::size_t size;
  const void* check;  // must agree across lanes (WMMA pointers)
  void* lane_arg;     // WMMA: this lane's fragment pointers
  void (*compute)(void* const* lane_args);
};

struct EmuThread {
  ThreadCtx ctx;
  Wait wait = Wait::Runnable;
  LaneOp op{};
};

/// ThreadSanitizer sync objects of a barrier or a memory-ordering warp collective (__syncwarp,
/// WMMA), one per parity of its generation: a thread releases at arrival and acquires on leaving
/// the one of the generation it arrived in. With one object for all generations, the thread that
/// completes a barrier and runs on to the next one releases its accesses after the barrier into
/// the object that the others acquire on leaving the barrier before: a race before a barrier
/// looked ordered. A generation's object is released again only two generations later, when every
/// thread has left it.
struct PhaseSync {
  unsigned generation = 0;  // completed so far
  char token[2] = {};
};
/// On the heap, fresh per block: a sync object at a reused address would carry what an earlier
/// block's threads released.
struct SyncTokens {
  char barrier[2] = {};
  std::map<std::pair<int, unsigned>, PhaseSync> warps;  // by (warp, mask): one per lane group
};

struct SharedVar {
  const void* tag;
  void* storage;
  std::size_t bytes;
  const char* name;
};

/// The per-worker state that outlives one block: fibers and thread records, reused.
struct WorkerSlots {
  std::vector<std::unique_ptr<Fiber>> fibers;
  std::vector<EmuThread> threads;
};

struct BlockRun {
  const Grid* grid = nullptr;
  uint3 index{};
  int threads_count = 0;
  EmuThread* threads = nullptr;
  Fiber** fibers = nullptr;
  int running = -1;  // the thread whose fiber runs now

  int at_barrier = 0, exited = 0;
  const BarrierSite* barrier_site = nullptr;  // where the threads at the barrier wait
  int barrier_first = -1;                     // the first of them
  unsigned barrier_generation = 0;            // barriers the block has completed
  unsigned warp_generation[32] = {};  // per warp: __syncwarp/WMMA collectives completed (racecheck)
  std::unique_ptr<SyncTokens> sync = std::make_unique<SyncTokens>();

  std::vector<SharedVar> shared;
  std::size_t static_shared_bytes = 0;
  void* dynamic_shared = nullptr;

  cudaError_t fault_code = cudaSuccess;
  std::string fault_text;
};

/// Runs block `linear` of `g` on the calling worker; a fault is left in the returned text/code.
void run_block(const Grid& g, uint64_t linear, WorkerSlots& slots, cudaError_t* fault_code,
               std::string* fault_text);

}  // namespace mtemu::detail
