#pragma once
// racecheck for emulated GPUs (docs/emulator_checks.md): with MINITRAIN_EMU_RACECHECK=1 (ASan
// builds, which see every kernel access) every kernel load and store of global or shared memory
// is checked against the last write and the last read of the same word: an access by another
// thread that nothing orders (no __syncthreads() or __syncwarp() between them, or another block
// of the same grid, or a grid running at the same time on another stream) is reported as a device
// fault naming the kernel, the thread, both lines and the other thread. Atomics race with nothing.
// So is an access to memory that a copy or memset queued on another stream writes (or, for a
// store, reads) when no event wait or host synchronisation orders the launch after it.

namespace mtemu {
/// Turns racecheck on or off for grids launched afterwards (MINITRAIN_EMU_RACECHECK=1 turns it on
/// at start); false where the build has no AddressSanitizer (the check sees accesses through it).
bool racecheck_enable(bool on);
}  // namespace mtemu

namespace mtemu::detail {
extern bool racecheck_on;  // the memory hooks' one branch
}  // namespace mtemu::detail
