// All-reduce on the MPI backend, run under mpirun: MPI_Allreduce (native) against minitrain's ring
// over MPI send/recv, float32 sum, 4 KiB to --max-bytes (default 64 MiB, up to 1 GiB). Prints
// nccl-tests' figures from rank 0: algbw = bytes / time, busbw = algbw * 2(n-1)/n, in GB/s.
//
// Not a Google Benchmark program: it picks iteration counts per process, and every rank of a
// collective must run the same number. Here each size runs a fixed warm-up and a fixed number of
// timed iterations, bracketed by barriers, and the slowest rank's time counts (as nccl-tests does).
//
//   mpirun -n 4 build/release/bench/minitrain_mpi_allreduce_bench [--max-bytes=1GiB] [--iters=20]

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/bytes.h"
#include "core/tensor.h"
#include "parallel/comm/mpi_communicator.h"
#include "parallel/comm/ring.h"

namespace {

using namespace minitrain;

double seconds_per_all_reduce(Communicator& comm, Tensor& t, bool ring, int iters) {
  auto run = [&] {
    if (ring)
      ring_all_reduce(comm, t, ReduceOp::Sum);
    else
      comm.native_all_reduce(t, ReduceOp::Sum);
  };
  for (int i = 0; i < 3; ++i) run();  // warm-up: first touch of pages and buffers
  comm.barrier();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) run();
  double mine =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iters;
  double slowest = 0;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t max_bytes = uint64_t(64) << 20;
  int iters = 20;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--max-bytes=", 12) == 0)
      max_bytes = parse_bytes(argv[i] + 12);
    else if (std::strncmp(argv[i], "--iters=", 8) == 0)
      iters = std::atoi(argv[i] + 8);
  }
  try {
    auto comm = MpiCommunicator::world(CommOptions{});
    const int n = comm->size();
    if (comm->rank() == 0) {
      std::printf("all-reduce, MPI backend, %d ranks, float32 sum, %d iterations per size\n\n", n,
                  iters);
      std::printf(
          "| size | native algbw GB/s | native busbw GB/s | ring algbw GB/s | ring busbw GB/s | "
          "ring / native time |\n");
      std::printf("|---|---|---|---|---|---|\n");
    }
    for (uint64_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
      Tensor t = Tensor::zeros({int64_t(bytes / 4)});
      const double native = seconds_per_all_reduce(*comm, t, false, iters);
      const double ring = seconds_per_all_reduce(*comm, t, true, iters);
      const double bus = n > 1 ? 2.0 * (n - 1) / n : 0.0;
      if (comm->rank() == 0)
        std::printf("| %s | %.2f | %.2f | %.2f | %.2f | %.2f |\n", format_bytes(bytes).c_str(),
                    bytes / native / 1e9, bytes / native / 1e9 * bus, bytes / ring / 1e9,
                    bytes / ring / 1e9 * bus, ring / native);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpi_allreduce_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
