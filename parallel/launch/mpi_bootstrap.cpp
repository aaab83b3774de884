// The MPI side of init_process_group (Note [MPI as an opt-in library] in
// parallel/launch/mpi_backend.h): the world communicator of an mpirun job, and rank 0's NCCL id
// broadcast over MPI, with a deadline.

#include "parallel/launch/mpi_bootstrap.h"

#include <mpi.h>

#include <cstdio>
#include <thread>

#include "core/error.h"
#include "parallel/comm/mpi_communicator.h"
#include "parallel/launch/mpi_backend.h"
#include "parallel/launch/process_group.h"

namespace minitrain {
namespace {

std::string seconds(std::chrono::steady_clock::duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", std::chrono::duration<double>(d).count());
  return buf;
}

// Rank 0's id to every rank of MPI_COMM_WORLD, with a deadline (MPI_Bcast has none).
NcclUniqueId broadcast_id_over_mpi(const ProcessEnv& env, NcclUniqueId id,
                                   std::chrono::milliseconds timeout) {
  MpiRuntime::instance();
  // On a timeout the request stays pending in MPI and may still write into its buffer, so the
  // buffer lives on the heap and is deliberately not freed then.
  auto* buffer = new NcclUniqueId(id);
  MPI_Request request;
  MPI_Ibcast(buffer->data(), static_cast<int>(buffer->size()), MPI_BYTE, 0, MPI_COMM_WORLD,
             &request);
  const auto t0 = std::chrono::steady_clock::now();
  for (int done = 0;;) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) break;
    if (std::chrono::steady_clock::now() - t0 > timeout) {
      record_lost_peer();  // the broadcast stays pending: MPI_Finalize would wait for rank 0
      MT_THROW(CommError, "init_process_group: rank ", env.rank, " waited ",
               seconds(std::chrono::steady_clock::now() - t0),
               " s for the NCCL id from rank 0 (MPI broadcast); check that all ", env.world_size,
               " ranks call init_process_group");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  NcclUniqueId out = *buffer;
  delete buffer;
  return out;
}

std::unique_ptr<Communicator> init_world(const ProcessEnv& env, Device device,
                                         const ProcessGroupOptions& options) {
  auto comm = MpiCommunicator::world(options.comm, device);
  // mpirun and the environment must agree, or ranks would wait for partners that do not exist.
  MT_CHECK_AS(CommError, comm->size() == env.world_size && comm->rank() == env.rank,
              "init_process_group: MPI says rank ", comm->rank(), " of ", comm->size(),
              " but the environment (", env.source, ") says rank ", env.rank, " of ",
              env.world_size, "; do not mix mpirun with another launcher's RANK/WORLD_SIZE");
  return comm;
}

}  // namespace

void use_mpi_backend() {
  MpiBackend backend;
  backend.init_world = &init_world;
  backend.broadcast_nccl_id = &broadcast_id_over_mpi;
  backend.note_timeout = &MpiRuntime::note_timeout;
  register_mpi_backend(backend);
}

}  // namespace minitrain
