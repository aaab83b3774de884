#pragma once
// The emulator's side of the memory counters (cuda_emu/counters.h): hooks the block scheduler
// and the worker pool call around a launch and a block.

#include <cstdint>

// The checkers' per-access path (every load and store of every GPU thread while one is on): kept
// out of the sanitizers' instrumentation, on raw arrays (counters.cpp, unchecked_stores.cpp).
#define MTEMU_HOT __attribute__((no_sanitize("address", "undefined")))

namespace mtemu::detail {

struct Grid;
struct BlockRun;

void counters_launch_begin(const Grid& g);
void counters_launch_end(const Grid& g);
void counters_block_begin(const BlockRun& b);
void counters_block_end(const BlockRun& b);
/// A kernel's load or store of `size` bytes at `addr` (a device or shared-memory access of the
/// running GPU thread); `site` keys its warp-level request.
void count_access(uintptr_t addr, uint32_t size, bool store, uintptr_t site);

// Note [one hook flag]: three checkers want every load and store of an emulated kernel (the
// counters, initcheck, racecheck); each owns a bit here, set where it is turned on or off. While
// any bit is set, device and shared memory are routed to the report functions at the end of
// counters.cpp (Note [accesses routed to the checkers], routed_memory.h); with none, kernels run
// on ASan's inline check alone (bench/emu_hook_cost_bench.cpp measures both).
enum : unsigned char { kHookCounters = 1, kHookInitcheck = 2, kHookRacecheck = 4 };
extern unsigned char memory_hooks;
void set_memory_hook(unsigned char bit, bool on);

}  // namespace mtemu::detail
