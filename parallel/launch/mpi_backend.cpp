#include "parallel/launch/mpi_backend.h"

#include <atomic>

#include "core/error.h"

namespace minitrain {
namespace {
// Set once, before any process group (use_mpi_backend), then only read.
std::atomic<const MpiBackend*> installed{nullptr};
}  // namespace

void register_mpi_backend(const MpiBackend& backend) {
  static const MpiBackend kept = backend;  // the first registration wins; they are all the same
  installed.store(&kept);
}

const MpiBackend& mpi_backend(const char* what) {
  const MpiBackend* backend = installed.load();
  MT_CHECK_AS(ValueError, backend != nullptr, what,
              " needs MPI, but this program was linked without minitrain's MPI backend: link "
              "minitrain::mpi (CMake) or -lminitrain_mpi with MPI (pkg-config mpi-cxx) and call "
              "minitrain::use_mpi_backend() before init_process_group; the minitrain command has "
              "it");
  return *backend;
}

}  // namespace minitrain
