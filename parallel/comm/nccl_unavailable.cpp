// CPU-only and emulated builds: the NCCL entry points that code compiled in every build may name
// (parallel/launch/process_group.cpp), each a DeviceError that says why. Compiled only when
// MINITRAIN_WITH_CUDA_LIBS is off (parallel/CMakeLists.txt), in place of nccl_communicator.cpp.

#include "core/device.h"
#include "core/error.h"
#include "parallel/comm/nccl_communicator.h"

namespace minitrain {
namespace {

[[noreturn]] void cpu_only_build(const char* what) {
  if (cuda_emulated())
    MT_THROW(DeviceError, what,
             ": NCCL needs real GPUs and is absent on minitrain's emulated GPUs; use the mpi "
             "backend under mpirun (--backend mpi), which exchanges GPU tensors through host "
             "memory");
  MT_THROW(
      DeviceError, what,
      ": NCCL is not available in a CPU-only build of minitrain (no CUDA compiler was "
      "found at build time); rebuild with CUDA, or use the mpi backend under mpirun for CPU ranks");
}

}  // namespace

NcclUniqueId nccl_unique_id() { cpu_only_build("nccl_unique_id"); }

std::unique_ptr<NcclCommunicator> NcclCommunicator::from_unique_id(const NcclUniqueId&, int, int,
                                                                   Device, CommOptions) {
  cpu_only_build("NcclCommunicator::from_unique_id");
}

}  // namespace minitrain
