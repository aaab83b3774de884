#pragma once
// The emulator's side of initcheck (cuda_emu/initcheck.h): the runtime's memory calls tell it
// what was allocated and written, the AddressSanitizer access hooks what kernels load and store.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "cuda_emu/initcheck.h"

namespace mtemu::detail {

struct Provenance;
/// The launch's parameter words noted by note_launch_args on this thread, for its Grid (null when
/// the provenance check is off).
std::shared_ptr<Provenance> take_launch_provenance();

/// A new device allocation: every byte uninitialised. `how` names the call ("cudaMalloc").
void initcheck_allocated(const void* base, std::size_t bytes, int device, const char* how);
void initcheck_freed(const void* base);
/// [p, p + bytes) written by a copy or memset (in stream order: called where the write runs).
void initcheck_written(const void* p, std::size_t bytes);
/// A device-to-device copy: the destination's bytes take the source's state.
void initcheck_copied(void* dst, const void* src, std::size_t bytes);
/// The caching allocator hands a block out again: its bytes count as unwritten.
void initcheck_reissued(const void* base, std::size_t bytes);
/// A copy to the host from [src, src + bytes): "" or the report of its first uninitialised byte.
std::string initcheck_copy_source(const void* src, std::size_t bytes, const char* call);
/// A kernel's load or store of `size` bytes at `addr`; `pc` is the access's return address.
void initcheck_access(uintptr_t addr, uint32_t size, bool store, uintptr_t pc);

}  // namespace mtemu::detail
