#pragma once
// `minitrain info`: the devices this process can use, their memory, and the CUDA runtime,
// driver, cuBLAS, cuDNN and NCCL versions (or that this is a CPU-only build).

#include <ostream>

namespace minitrain::cli {
int run_info(std::ostream& out);
}  // namespace minitrain::cli
