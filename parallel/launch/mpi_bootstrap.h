#pragma once
// The MPI side of init_process_group, in the minitrain::mpi library (Note [MPI as an opt-in
// library] in parallel/launch/mpi_backend.h).

namespace minitrain {

/// Lets init_process_group use MPI in this program: the mpi backend for CPU ranks under mpirun,
/// and the NCCL id's broadcast over MPI for GPU ranks under mpirun. Call once, before the first
/// process group; more calls do nothing.
void use_mpi_backend();

}  // namespace minitrain
