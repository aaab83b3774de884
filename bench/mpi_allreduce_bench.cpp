// All-reduce on the MPI backend, run under mpirun, float32 sum, every power of two from 1 KiB to
// 256 MiB: minitrain's native all-reduce (MPI point-to-point on recursive doubling or the ring,
// each message polled against the deadline: Note [the MPI all-reduce]) and minitrain's generic
// ring over send_recv, each against a plain blocking MPI_Allreduce measured in the same run, in
// the same rounds. Prints nccl-tests' figures from rank 0: algbw = bytes / time, busbw = algbw *
// 2(n-1)/n, in GB/s, and busbw as a ratio of MPI_Allreduce's (>= 1: as fast or faster).
//
// Not a Google Benchmark program: every rank of a collective must run the same number of
// iterations. Each size runs `--rounds` rounds; a round times each method in turn (MPI_Allreduce,
// native, ring) over a fixed number of iterations between barriers, the slowest rank's time
// counting (as nccl-tests does). The median round of each method gives its figure, so a burst of
// load on the machine during one round moves neither the figures nor their ratios much. The load
// average before and after is printed with the table.
//
//   mpirun -n 2 build/cpu/bench/minitrain_mpi_allreduce_bench [--min-bytes=1KiB]
//       [--max-bytes=256MiB] [--rounds=7]

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench/mpi_rounds.h"
#include "core/bytes.h"
#include "core/tensor.h"
#include "parallel/comm/mpi_communicator.h"
#include "parallel/comm/ring.h"

namespace {

using namespace minitrain;

// Iterations per round: about 64 MiB moved per round and method, between 1 and 1000 calls, so a
// 1 KiB round is not all timer and barrier and a 256 MiB round is a single call.
int iterations_for(uint64_t bytes) {
  return static_cast<int>(std::clamp<uint64_t>((uint64_t(64) << 20) / bytes, 1, 1000));
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t min_bytes = 1024, max_bytes = uint64_t(256) << 20;
  int rounds = 7;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--min-bytes=", 12) == 0)
      min_bytes = parse_bytes(argv[i] + 12);
    else if (std::strncmp(argv[i], "--max-bytes=", 12) == 0)
      max_bytes = parse_bytes(argv[i] + 12);
    else if (std::strncmp(argv[i], "--rounds=", 9) == 0)
      rounds = std::max(1, std::atoi(argv[i] + 9));
    else {
      std::fprintf(stderr,
                   "mpi_allreduce_bench: unknown argument '%s' (--min-bytes=, --max-bytes=, "
                   "--rounds=)\n",
                   argv[i]);
      return 2;
    }
  }
  try {
    auto comm = MpiCommunicator::world(CommOptions{});
    // The reference's own communicator, so that its traffic and minitrain's never meet.
    MPI_Comm reference = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &reference);
    const int n = comm->size();
    const double bus = n > 1 ? 2.0 * (n - 1) / n : 0.0;
    if (comm->rank() == 0) {
      std::printf(
          "all-reduce, MPI backend, %d ranks, float32 sum in place, median of %d rounds; "
          "load average %s\n\n",
          n, rounds, bench::load_average().c_str());
      std::printf(
          "| size | MPI_Allreduce busbw GB/s | native busbw GB/s | native / MPI_Allreduce | "
          "ring busbw GB/s | ring / MPI_Allreduce |\n");
      std::printf("|---|---|---|---|---|---|\n");
    }
    double worst_native = 1e9;
    for (uint64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
      Tensor t = Tensor::zeros({int64_t(bytes / 4)});
      float* data = t.data<float>();
      const int count = static_cast<int>(t.numel());
      const std::vector<std::function<void()>> methods = {
          [&] { MPI_Allreduce(MPI_IN_PLACE, data, count, MPI_FLOAT, MPI_SUM, reference); },
          [&] { comm->native_all_reduce(t, ReduceOp::Sum); },
          [&] { ring_all_reduce(*comm, t, ReduceOp::Sum); }};
      const int iters = iterations_for(bytes);
      for (const auto& run : methods)
        bench::slowest_seconds_per_call(run, 2);  // first touch of every buffer
      std::vector<std::vector<double>> times(methods.size());
      for (int r = 0; r < rounds; ++r)
        for (std::size_t m = 0; m < methods.size(); ++m)
          times[m].push_back(bench::slowest_seconds_per_call(methods[m], iters));
      const double mpi = bench::median(times[0]), native = bench::median(times[1]),
                   ring = bench::median(times[2]);
      worst_native = std::min(worst_native, mpi / native);
      if (comm->rank() == 0)
        std::printf("| %s | %.2f | %.2f | %.2f | %.2f | %.2f |\n", format_bytes(bytes).c_str(),
                    bytes / mpi / 1e9 * bus, bytes / native / 1e9 * bus, mpi / native,
                    bytes / ring / 1e9 * bus, mpi / ring);
    }
    if (comm->rank() == 0)
      std::printf("\nnative / MPI_Allreduce at its lowest: %.2f; load average after: %s\n",
                  worst_native, bench::load_average().c_str());
    MPI_Comm_free(&reference);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpi_allreduce_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
