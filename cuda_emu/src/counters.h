#pragma once
// The emulator's side of the memory counters (cuda_emu/counters.h): hooks the block scheduler
// and the worker pool call around a launch and a block.

namespace mtemu::detail {

struct Grid;
struct BlockRun;

void counters_launch_begin(const Grid& g);
void counters_launch_end(const Grid& g);
void counters_block_begin(const BlockRun& b);
void counters_block_end(const BlockRun& b);

}  // namespace mtemu::detail
