#pragma once
// `minitrain info`: the devices this process can use, their memory, and the CUDA runtime,
// driver, cuBLAS, cuDNN and NCCL versions (or that this is a CPU-only build).

#include <ostream>

namespace minitrain::cli {
/// `open_libraries` (--libraries): open cuBLAS, cuDNN and NCCL even without a GPU, to check an
/// installation (on a login node, say); returns 1 when one of them cannot be opened.
int run_info(std::ostream& out, bool open_libraries = false);
}  // namespace minitrain::cli
