#pragma once
// initcheck on emulated GPUs: reads of device memory that nothing wrote since it was allocated,
// as compute-sanitizer's initcheck reports them on a GPU (docs/emulator_checks.md).
//
// MINITRAIN_EMU_INITCHECK=1 turns it on for the whole run. Every byte of device memory from
// cudaMalloc is uninitialised until a kernel stores to it, or cudaMemcpy* / cudaMemset* writes
// it; a block the caching allocator hands out again (mtemu::limit_access) is uninitialised anew.
// A kernel load of an uninitialised byte is a device fault (cudaErrorLaunchFailure, sticky, as
// the emulator's barrier checks raise theirs) naming the kernel, block, thread, the load's
// file:line, the address, and the allocation and offset; so is a copy to the host whose source
// holds uninitialised bytes. A device-to-device copy carries the bytes' state along.
//
// Kernel loads and stores are seen through AddressSanitizer's access calls
// (cuda_emu/src/counters.cpp), so initcheck works in emulated ASan builds (the emu preset) only;
// elsewhere MINITRAIN_EMU_INITCHECK prints a warning and stays off.

#include <cstddef>

namespace mtemu {
/// For tests: turns initcheck on or off. Allocations made while it is off are not tracked (their
/// bytes count as written); turning it off forgets every allocation's state. Returns false (and
/// stays off) in a build without AddressSanitizer.
bool initcheck_enable(bool on);
bool initcheck_enabled();

/// The provenance check (MINITRAIN_EMU_PROVENANCE=1, ASan builds; docs/emulator_checks.md): a
/// kernel access that lands in a device allocation no pointer of the kernel's reaches (its
/// arguments, scanned word by word, and the pointers it loads from device memory) is a device
/// fault: an index that wrapped or ran far enough to land in another buffer, past the redzones.
/// Returns false (and stays off) in a build without AddressSanitizer.
bool provenance_enable(bool on);

namespace detail {
/// Device memory is tracked (initcheck or the provenance check on): the access hooks' branch.
extern bool initcheck_on;
/// At a launch, while tracking: the kernel's parameters, whose 8-byte words may be pointers.
void note_launch_args(const void* params, std::size_t bytes);
/// An atomic of `bytes` at `addr` by the running GPU thread: a read (where `reads`: all but an
/// exchange), then a write. The caller's return address names the atomic's site.
void initcheck_atomic(const void* addr, std::size_t bytes, bool reads);
}  // namespace detail
}  // namespace mtemu
