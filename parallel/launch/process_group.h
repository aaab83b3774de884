#pragma once
// The communicator of a multi-process job (one rank per process), set up from ProcessEnv:
//   backend "mpi":  the job must run under mpirun (MpiCommunicator::world); CPU tensors, or GPU
//                   tensors on the rank's GPU staged through pinned host memory (no NCCL needed).
//   backend "nccl": GPU tensors, rank r on its GPU; rank 0 makes the NCCL unique id and it travels
//                   by MPI broadcast under mpirun, otherwise through a shared-file rendezvous
//                   (parallel/launch/file_rendezvous.h) in ProcessGroupOptions::rendezvous_dir.
//   backend "auto": nccl for a CUDA device, mpi for the CPU.
// No home-made network transport: the bytes of the id go through MPI or a shared file system.
#include <chrono>
#include <memory>
#include <string>

#include "core/device.h"
#include "parallel/comm/communicator.h"
#include "parallel/launch/process_env.h"

namespace minitrain {

struct ProcessGroupOptions {
  std::string backend = "auto";  ///< auto | mpi | nccl
  CommOptions comm;              ///< timeout and all-reduce algorithm of the communicator
  /// Where the rendezvous file goes (shared by all nodes for multi-node runs); "": the
  /// MINITRAIN_RENDEZVOUS_DIR variable, else the system's temporary directory.
  std::string rendezvous_dir;
  std::chrono::milliseconds init_timeout{std::chrono::seconds(120)};  ///< for the rendezvous
};

/// This process's device for `requested`: "cuda" (no index) becomes cuda:LOCAL_RANK; anything else
/// is kept. DeviceError when LOCAL_RANK names a GPU that does not exist.
Device rank_device(const Device& requested, const ProcessEnv& env);

/// The job's communicator for this rank, on `device`. ValueError for an unknown backend or one that
/// does not fit the device (nccl with cpu); ValueError when the CPU
/// backend is asked for with WORLD_SIZE > 1 outside mpirun (run the job with mpirun); DeviceError
/// for nccl in a CPU-only build; CommError when the rendezvous times out.
std::unique_ptr<Communicator> init_process_group(const ProcessEnv& env, Device device,
                                                 const ProcessGroupOptions& options = {});

}  // namespace minitrain
