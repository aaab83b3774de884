#pragma once
// One rank of the DistributedDataParallel benchmarks (ddp_bench: ranks as threads; mpi_ddp_bench:
// ranks as processes under mpirun): mlp:256,1024,1024,1024,16 (about 2.4 M parameters, 9.5 MiB
// of gradients), local batch 128, SGD with momentum, the rank's own rows.

#include <cstdint>
#include <memory>
#include <vector>

#include "bench/bench_inputs.h"
#include "core/generator.h"
#include "nn/mlp.h"
#include "nn/mse_loss.h"
#include "optim/make_optimizer.h"
#include "parallel/distributed_data_parallel.h"

namespace minitrain::bench {

inline const std::vector<int64_t> kDdpSizes = {256, 1024, 1024, 1024, 16};
inline constexpr int64_t kDdpLocalBatch = 128;

/// One rank: its replica in a DDP with `options`, its optimizer and its rows.
struct DdpRank {
  DdpRank(Communicator& comm, DdpOptions options)
      : ddp(model(comm.rank()), comm, options),
        opt(make_optimizer(optimizer_config("sgd"), ddp.named_parameters())),
        x(filled(kDdpLocalBatch, kDdpSizes.front(), 1 + comm.rank())),
        y(filled(kDdpLocalBatch, kDdpSizes.back(), 11 + comm.rank())) {}

  /// The model seeded by `rank` (DDP broadcasts rank 0's parameters; one rank alone uses 0).
  static std::unique_ptr<Module> model(int rank) {
    Generator gen(rank);
    auto m = make_mlp(kDdpSizes, Activation::ReLU, gen);
    m->set_needs_input_grad(false);
    return m;
  }

  /// One training step; returns its loss.
  double step() {
    ddp.zero_grad();
    const double l = loss.forward(ddp.forward(x), y).item();
    ddp.backward(loss.backward());
    opt->step();
    return l;
  }

  DistributedDataParallel ddp;
  std::unique_ptr<Optimizer> opt;
  MSELoss loss;
  Tensor x, y;
};

}  // namespace minitrain::bench
