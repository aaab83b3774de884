#pragma once
// Where this process stands in a multi-process job, read from the environment the way the usual
// launchers set it:
//   torchrun / `minitrain launch`: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
//                                 MASTER_PORT (and TORCHELASTIC_RUN_ID / MINITRAIN_JOB_ID)
//   mpirun (Open MPI):             OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE,
//   OMPI_COMM_WORLD_LOCAL_RANK,
//                                 OMPI_COMM_WORLD_LOCAL_SIZE (PMI_RANK / PMI_SIZE for other MPIs)
//   Slurm (srun):                  SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
//   SLURM_NTASKS_PER_NODE, SLURM_JOB_ID
// checked in that order; none of them: a single process (rank 0 of 1).
#include <functional>
#include <string>

namespace minitrain {

struct ProcessEnv {
  int rank = 0, world_size = 1;
  int local_rank = 0, local_world_size = 1;
  std::string master_addr;  ///< torchrun-style launches only
  int master_port = 0;
  std::string job_id;  ///< identifies this job's rendezvous files ("" when unknown)
  std::string source;  ///< "torchrun", "mpi", "slurm" or "none"
  bool under_mpi() const noexcept { return source == "mpi"; }
};

/// Reads the variables above. ValueError naming the variable and its text for a malformed value
/// or an inconsistent set (RANK >= WORLD_SIZE, LOCAL_RANK >= LOCAL_WORLD_SIZE, RANK without
/// WORLD_SIZE).
ProcessEnv detect_process_env();
/// The same with another source of variables (tests): `get(name)` returns nullptr when unset.
ProcessEnv detect_process_env(const std::function<const char*(const char*)>& get);

}  // namespace minitrain
