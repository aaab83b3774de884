#pragma once
// Note [MPI as an opt-in library]: MPI lives in its own library, minitrain::mpi (the MPI
// communicator and the MPI side of init_process_group), so that a program linking minitrain (or
// any layer of it) links no MPI unless it asks to. init_process_group reaches MPI through this
// table, which a program fills by linking minitrain::mpi and calling use_mpi_backend()
// (parallel/launch/mpi_bootstrap.h) before its first process group; the minitrain command does.
// A program that did not gets a ValueError saying so when a job asks for MPI.

#include <chrono>
#include <memory>

#include "parallel/comm/communicator.h"
#include "parallel/comm/nccl_communicator.h"
#include "parallel/launch/process_env.h"

namespace minitrain {

struct ProcessGroupOptions;

struct MpiBackend {
  /// The communicator over MPI_COMM_WORLD of a job started by mpirun, checked against `env`,
  /// exchanging tensors on `device` (the CPU, or this rank's GPU).
  std::unique_ptr<Communicator> (*init_world)(const ProcessEnv& env, Device device,
                                              const ProcessGroupOptions& options) = nullptr;
  /// Rank 0's `id` to every rank of MPI_COMM_WORLD; CommError after `timeout`.
  NcclUniqueId (*broadcast_nccl_id)(const ProcessEnv& env, NcclUniqueId id,
                                    std::chrono::milliseconds timeout) = nullptr;
  /// The deadline for leaving the MPI job after a failure (MpiRuntime::note_timeout).
  void (*note_timeout)(std::chrono::milliseconds timeout) = nullptr;
};

/// Installs the MPI entry points (called by use_mpi_backend()).
void register_mpi_backend(const MpiBackend& backend);

/// The installed entry points; ValueError naming `what` asked for MPI and what to link otherwise.
const MpiBackend& mpi_backend(const char* what);

}  // namespace minitrain
