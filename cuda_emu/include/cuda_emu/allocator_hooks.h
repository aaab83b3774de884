#pragma once
// For a caching allocator on emulated GPUs: which bytes of a cached cudaMalloc block the current
// tensor may touch. A block is handed out rounded up (512 B, 2 MiB steps), so a kernel that runs
// past its tensor's end lands in the block's slack, where AddressSanitizer would see nothing; and
// a freed block waits in the cache, where a late access would read another tensor's data. Both
// are marked here, in stream order (the block's earlier users may still be queued on it).

#include <cstddef>

#include "cuda_runtime_api.h"

namespace mtemu {
/// Queued on `stream`: from there on only [block, block + usable) may be accessed; the rest of
/// the allocation that starts at `block` is poisoned (reported by AddressSanitizer, naming the
/// kernel). usable = 0 marks a block that went back to the cache. cudaErrorInvalidValue when
/// `block` is not the start of a live device allocation. A `stream` that no longer exists has
/// drained (minitrain's Stream waits for its queue when destroyed): then the marks apply at once.
/// A no-op without AddressSanitizer.
cudaError_t limit_access(void* block, std::size_t usable, cudaStream_t stream);
}  // namespace mtemu
