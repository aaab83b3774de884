#pragma once
// What the emulator's access checks (initcheck.cpp, race.cpp) put in a report: an address, a
// block or thread index, the source line of an access or of a runtime call, and where in device
// memory an address lies. One copy for both checks, so their reports read alike.

#include <cstdint>
#include <string>

#include "cuda_runtime_api.h"

namespace mtemu::detail {

/// "0x61a000000700".
std::string hex(uintptr_t v);
/// "(1,0,0)".
std::string idx3(uint3 v);
/// The index `i` of a linear count over `d` (x fastest), as a uint3.
uint3 unlinear(uint32_t i, dim3 d);
/// "accumulate_kernel(float*, float const*, int) at broken_kernels.cu:123", from a return address
/// (the emulated presets build with line tables). Where the code is inlined from the emulator's
/// own headers (an atomic's loop), the innermost frame of the user's code. "pc 0x..." without
/// AddressSanitizer's symbolizer.
std::string source_of(uintptr_t pc);
/// "byte 20 of the 400-byte allocation at 0x... (cudaMalloc on cuda:0)", from the runtime's table
/// of allocations (memory.cpp); "" where `a` is in no device allocation.
std::string device_place(uintptr_t a);

}  // namespace mtemu::detail
