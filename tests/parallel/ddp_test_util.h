#pragma once
// Shared by the DDP tests of every backend (threads, MPI, NCCL): the model, the global batches,
// one rank's DDP training loop and the one-device reference it must equal.
//
// The contract checked: N ranks with local batch b, rank r taking rows r*b..(r+1)*b-1 of the
// global batch, end with the weights of one device trained on the N*b rows (loss MSE mean).
// With M micro-batches per step (no_sync on all but the last), micro-batch m is rows
// m*N*b..(m+1)*N*b-1 of the step's M*N*b rows and each micro-batch loss's gradient is scaled by
// 1/M, as the Trainer does; the one-device run then takes the M*N*b rows at once.
//
// Tolerance: the one-device gradient is one GEMM over N*b rows; DDP's is the average of N
// partial GEMMs (and M partial sums), the same terms in another summation order: a few ulp per
// step, so rtol 1e-5 with atol 1e-6 for weights near zero, over a handful of steps.

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/generator.h"
#include "kernels/elementwise.h"
#include "nn/mlp.h"
#include "nn/mse_loss.h"
#include "optim/make_optimizer.h"
#include "parallel/distributed_data_parallel.h"
#include "parallel/model_parallel.h"
#include "tests/support/test_util.h"

namespace minitrain::testing::ddp {

constexpr double kAtol = 1e-6, kRtol = 1e-5;
const std::vector<int64_t> kSizes = {5, 16, 12, 3};  // Linear, Tanh, Linear, Tanh, Linear
constexpr int64_t kIn = 5, kOut = 3;
constexpr int64_t kLocalBatch = 3;  // odd: the GEMMs' tails
constexpr int kSteps = 4;

/// The reference seed; rank r > 0 builds its replica from another seed, so only DDP's broadcast
/// makes the ranks start alike.
constexpr uint64_t kSeed = 7;
inline uint64_t rank_seed(int rank) { return kSeed + 100 * static_cast<uint64_t>(rank); }

inline std::unique_ptr<Sequential> mlp(uint64_t seed, Device device = Device::cpu()) {
  Generator gen(seed);
  auto m = make_mlp(kSizes, Activation::Tanh, gen, device);
  m->set_needs_input_grad(false);  // the input is data, as in minitrain train
  return m;
}

/// A replica: the plain MLP, or (hybrid) the MLP cut into 2 GPipe stages with 2 micro-batches.
using ModelFactory = std::function<std::unique_ptr<Module>(uint64_t seed, Device device)>;
inline ModelFactory plain_mlp() {
  return [](uint64_t seed, Device d) -> std::unique_ptr<Module> { return mlp(seed, d); };
}
inline ModelFactory two_stage_mlp() {
  return [](uint64_t seed, Device d) -> std::unique_ptr<Module> {
    return std::make_unique<ModelParallel>(mlp(seed, d), /*stages=*/2, /*micro_batches=*/2,
                                           std::vector<Device>{d});
  };
}
/// The hybrid on several devices: stage s on stages[s] (the rank's communicator on stages[0]).
inline ModelFactory two_stage_mlp_over(std::vector<Device> stages) {
  return [stages](uint64_t seed, Device) -> std::unique_ptr<Module> {
    return std::make_unique<ModelParallel>(mlp(seed, stages.front()), /*stages=*/2,
                                           /*micro_batches=*/2, stages);
  };
}

inline OptimizerConfig sgd_momentum() {
  OptimizerConfig oc;
  oc.name = "sgd";
  oc.lr = 0.05;
  oc.momentum = 0.9;
  return oc;
}

inline OptimizerConfig adam() {
  OptimizerConfig oc;
  oc.name = "adam";
  oc.lr = 0.01;
  return oc;
}

/// Step s's global batch of `rows` rows (the same on every rank and process).
inline Tensor batch_x(int step, int64_t rows) { return random_tensor({rows, kIn}, 1000 + step); }
inline Tensor batch_y(int step, int64_t rows) { return random_tensor({rows, kOut}, 2000 + step); }

struct Case {
  DdpOptions ddp;
  OptimizerConfig opt = sgd_momentum();
  int micro_batches = 1;
  int steps = kSteps;
  ModelFactory model = plain_mlp();
  std::string str() const {
    return detail::concat(opt.name, " bucket_bytes=", ddp.bucket_bytes, " overlap=", ddp.overlap,
                          " micro_batches=", micro_batches);
  }
};

using Weights = std::vector<std::pair<std::string, std::vector<double>>>;

inline Weights weights(Module& m) {
  Weights out;
  for (auto& [name, p] : m.named_parameters()) out.emplace_back(name, host_values(p->value));
  return out;
}

/// One device (the plain MLP) trained on the whole global batches of `world` ranks.
inline Weights train_one_device(const Case& c, int world) {
  auto m = mlp(kSeed);
  auto opt = make_optimizer(c.opt, m->named_parameters());
  const int64_t rows = world * kLocalBatch * c.micro_batches;
  for (int s = 0; s < c.steps; ++s) {
    m->zero_grad();
    MSELoss loss;
    loss.forward(m->forward(batch_x(s, rows)), batch_y(s, rows));
    m->backward(loss.backward());
    opt->step();
  }
  return weights(*m);
}

/// This rank's training loop on its rows; returns its weights. `after_backward` (optional) sees
/// the DDP after each backward (micro-batch m of step s).
inline Weights train_rank(DistributedDataParallel& ddp, const Case& c,
                          const std::function<void(int s, int m)>& after_backward = {}) {
  Communicator& comm = ddp.communicator();
  const int world = comm.size(), rank = comm.rank();
  auto opt = make_optimizer(c.opt, ddp.named_parameters());
  const int64_t per_micro = world * kLocalBatch, rows = per_micro * c.micro_batches;
  const Device d = comm.device();
  for (int s = 0; s < c.steps; ++s) {
    ddp.zero_grad();
    const Tensor x = batch_x(s, rows), y = batch_y(s, rows);
    for (int m = 0; m < c.micro_batches; ++m) {
      const int64_t begin = m * per_micro + rank * kLocalBatch;
      MSELoss loss;
      // The output is on the last stage's device when the stages sit on several.
      const Tensor out = ddp.forward(x.narrow(begin, kLocalBatch).to(d));
      loss.forward(out, y.narrow(begin, kLocalBatch).to(out.device()));
      Tensor g = loss.backward();
      if (c.micro_batches > 1) g = scale(g, 1.0 / c.micro_batches);  // the Trainer's scaling
      if (m + 1 < c.micro_batches) {
        auto guard = ddp.no_sync();
        ddp.backward(g);
      } else {
        ddp.backward(g);
      }
      if (after_backward) after_backward(s, m);
    }
    opt->step();
  }
  return weights(ddp);
}

/// Builds this rank's replica (from its own seed) inside a DDP and trains it.
inline Weights train_ddp(Communicator& comm, const Case& c) {
  DistributedDataParallel ddp(c.model(rank_seed(comm.rank()), comm.device()), comm, c.ddp);
  return train_rank(ddp, c);
}

inline void expect_weights_close(const Weights& got, const Weights& want, const std::string& what,
                                 double atol = kAtol, double rtol = kRtol) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i].first) << what;
    EXPECT_TRUE(allclose(got[i].second, want[i].second, atol, rtol)) << what << " " << got[i].first;
  }
}

}  // namespace minitrain::testing::ddp
