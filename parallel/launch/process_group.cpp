// init_process_group: one communicator per process, from the environment the launcher set.
// The only bytes that must travel before NCCL can connect are rank 0's unique id; they go by MPI
// when mpirun started the job, else through the shared-file rendezvous. NCCL then opens its own
// connections (sockets or InfiniBand) from that id. MPI itself is reached through mpi_backend()
// (Note [MPI as an opt-in library] in parallel/launch/mpi_backend.h).

#include "parallel/launch/process_group.h"

#include <cstring>

#include "core/error.h"
#include "parallel/comm/nccl_communicator.h"
#include "parallel/launch/file_rendezvous.h"
#include "parallel/launch/mpi_backend.h"

namespace minitrain {
namespace {

std::unique_ptr<Communicator> init_mpi(const ProcessEnv& env, Device device,
                                       const ProcessGroupOptions& options) {
  MT_CHECK_AS(ValueError, env.world_size == 1 || env.under_mpi(), "init_process_group: rank ",
              env.rank, " of WORLD_SIZE=", env.world_size, " (from ", env.source,
              " variables) asks for the CPU backend (mpi), which needs the job started by mpirun: "
              "run `mpirun -n ",
              env.world_size,
              " <command>` for CPU ranks (minitrain has no network transport of its own), "
              "or give each rank a GPU (--device cuda) for the nccl backend");
  return mpi_backend("init_process_group's mpi backend").init_world(env, device, options);
}

std::unique_ptr<Communicator> init_nccl(const ProcessEnv& env, Device device,
                                        const ProcessGroupOptions& options) {
  MT_CHECK_AS(DeviceError, cuda_compiled(),
              "init_process_group: the nccl backend needs GPUs, but this is a "
              "CPU-only build of minitrain (no CUDA compiler was found at build time); rebuild "
              "with CUDA, or run "
              "CPU ranks with --device cpu under mpirun");
  check_available(device);
  NcclUniqueId id{};
  if (env.rank == 0) id = nccl_unique_id();
  std::unique_ptr<FileRendezvous> rendezvous;
  if (env.world_size > 1) {
    if (env.under_mpi()) {
      const MpiBackend& mpi =
          mpi_backend("init_process_group under mpirun (the NCCL id's broadcast)");
      mpi.note_timeout(options.comm.timeout);  // the NCCL ranks' deadline, for leaving the MPI job
      id = mpi.broadcast_nccl_id(env, id, options.init_timeout);
    } else {
      RendezvousOptions r;
      r.dir = options.rendezvous_dir;
      r.timeout = options.init_timeout;
      rendezvous = std::make_unique<FileRendezvous>(env, r);
      const std::string bytes = rendezvous->share(std::string(id.data(), id.size()));
      MT_CHECK_AS(CommError, bytes.size() == id.size(), "init_process_group: the rendezvous file '",
                  rendezvous->path(), "' holds ", bytes.size(), " bytes, not the ", id.size(),
                  " of an NCCL id");
      std::memcpy(id.data(), bytes.data(), id.size());
    }
  }
  CommOptions comm_options = options.comm;
  auto comm = NcclCommunicator::from_unique_id(id, env.rank, env.world_size, device, comm_options);
  // Every rank has joined, so every rank has read the file: it would only mislead a later job.
  if (rendezvous && env.rank == 0) rendezvous->remove();
  return comm;
}

}  // namespace

Device rank_device(const Device& requested, const ProcessEnv& env) {
  // Device::parse gives cuda:0 for "cuda" (and for "auto" on a GPU machine): that is the request
  // that each rank takes its own GPU. An explicit cuda:N with N > 0 is kept.
  if (!requested.is_cuda() || requested.index() != 0) return requested;
  const Device d = Device::cuda(env.local_rank);
  const int count = cuda_device_count();
  if (count == 0) check_available(d);  // names the reason: CPU-only build, no driver, no GPU
  MT_CHECK_AS(DeviceError, env.local_rank < count, "rank ", env.rank,
              ": LOCAL_RANK=", env.local_rank, " asks for ", d, " but this machine has ", count,
              " GPU(s) (cuda:0 to cuda:", count - 1, "); start at most ", count,
              " ranks per machine, or list the GPUs with minitrain launch --devices");
  return d;
}

std::unique_ptr<Communicator> init_process_group(const ProcessEnv& env, Device device,
                                                 const ProcessGroupOptions& options) {
  std::string backend = options.backend;
  if (backend == "auto") backend = device.is_cuda() ? "nccl" : "mpi";
  if (backend == "mpi") {
    // GPU ranks too: the MPI communicator stages CUDA tensors through pinned host memory.
    return init_mpi(env, device, options);
  }
  if (backend == "nccl") {
    MT_CHECK_AS(ValueError, device.is_cuda(),
                "init_process_group: the nccl backend works on GPU tensors, but the device is ",
                device,
                "; use --device cuda for GPU ranks, or --backend mpi (or auto) under mpirun for "
                "CPU ranks");
    return init_nccl(env, device, options);
  }
  MT_THROW(ValueError, "init_process_group: unknown backend '", options.backend,
           "' (expected auto, mpi or nccl)");
}

}  // namespace minitrain
