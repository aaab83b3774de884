#pragma once
// The emulator's side of racecheck (cuda_emu/racecheck.h): the AddressSanitizer access hooks
// (counters.cpp) pass it every kernel load and store, the worker pool every grid's start and end.

#include <cstdint>

#include "cuda_emu/racecheck.h"

namespace mtemu::detail {

struct Grid;

/// A kernel's load or store of `size` bytes at `addr`; `pc` is the access's return address.
void racecheck_access(uintptr_t addr, uint32_t size, bool store, uintptr_t pc);
/// The running GPU thread is about to yield (a barrier, a warp collective, its end).
void racecheck_yield();
/// Around a grid's run: a grid gets a serial number; grids in flight together are unordered.
void racecheck_launch_begin(Grid& g);
void racecheck_launch_end(const Grid& g);

}  // namespace mtemu::detail
