// main() of minitrain_mpi_tests, run under mpirun: every rank runs every test. MPI is initialised
// before the tests (MpiRuntime) and finalised at exit. Rank 0 prints gtest's usual output; the
// other ranks print only their failures, prefixed with their rank. The exit code is the same on
// every rank (non-zero when any rank failed), so mpirun exits non-zero on a failure anywhere.

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#include "parallel/comm/mpi_communicator.h"
#include "parallel/launch/mpi_bootstrap.h"

namespace {

class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  minitrain::MpiRuntime::instance();
  minitrain::use_mpi_backend();  // init_process_group's mpi backend (process_group_mpi_test.cpp)
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = failed;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && any_failed && !failed) std::fprintf(stderr, "a test failed on another rank\n");
  return any_failed;
}
