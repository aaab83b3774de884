// GraphStep (train/graph_step.h): a training loop fed by the DataLoader, its steps captured once
// as a CUDA graph and replayed, against the same loop stepped eagerly with the by-value
// optimizer: the same losses and weights bit for bit, over three epochs whose last batch is
// partial (those steps run eagerly between replays).

#include "train/graph_step.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/generator.h"
#include "core/stream.h"
#include "data/data_loader.h"
#include "data/dataset.h"
#include "nn/cross_entropy_loss.h"
#include "nn/mlp.h"
#include "nn/mse_loss.h"
#include "nn/sequential.h"
#include "optim/schedule.h"
#include "tests/support/test_util.h"

#if MINITRAIN_CUDA_EMULATED
#include "cuda_emu/api_counts.h"
#endif

namespace minitrain {
namespace {

using testing::random_tensor;

std::vector<uint32_t> bits(const Tensor& t) {
  const std::vector<float> v = t.to(Device::cpu()).to_vector<float>();
  std::vector<uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
  return b;
}

struct LoopResult {
  std::vector<std::vector<uint32_t>> losses, weights;
  int64_t replays = 0, eager_steps = 0, replay_launches = -1;
};

// 20 rows in batches of 8: two full batches and one of 4 an epoch; 9 steps = 3 epochs.
LoopResult train_loop(bool use_graph, double clip) {
  const Device gpu = Device::cuda(0);
  Stream s = Stream::create(gpu);
  StreamGuard current(s);
  auto data = std::make_shared<TensorDataset>(random_tensor({20, 4}, 1), random_tensor({20, 1}, 2));
  DataLoaderOptions lo;
  lo.batch_size = 8;
  lo.seed = 3;
  lo.device = gpu;
  lo.workers = 1;
  DataLoader loader(data, lo);
  Generator gen(7);
  std::unique_ptr<Sequential> model = make_mlp({4, 16, 16, 1}, Activation::Tanh, gen, gpu);
  MSELoss loss;
  AdamOptions o;
  o.lr = 0.01;
  Adam opt(model->named_parameters(), o);
  const std::unique_ptr<LRSchedule> schedule = linear_warmup(cosine_lr(9, 1e-2), 2);
  GraphStepOptions go;
  go.clip_grad_norm = clip;
  std::optional<GraphStep> graph;
  if (use_graph) graph.emplace(*model, loss, opt, gpu, go);

  LoopResult out;
  for (int step = 1; step <= 9; ++step) {
    const Batch batch = loader.next();
    opt.set_lr_factor(schedule->factor_at(step));
    if (graph) {
#if MINITRAIN_CUDA_EMULATED
      const mtemu::ApiCounts before = mtemu::api_counts_of_this_thread();
#endif
      const GraphStep::Result r = graph->step(batch.x, batch.y);
#if MINITRAIN_CUDA_EMULATED
      if (r.replayed)
        out.replay_launches =
            int64_t(mtemu::api_counts_of_this_thread().launches - before.launches);
#endif
      out.losses.push_back(bits(r.loss));
      continue;
    }
    model->train();
    model->zero_grad();
    const Tensor pred = model->forward(batch.x);
    Tensor grad;
    const Tensor l = loss.forward_backward(pred, batch.y, grad);
    model->backward(grad);
    if (clip > 0) (void)clip_grad_norm_deferred_(model->named_parameters(), clip);
    opt.step();
    out.losses.push_back(bits(l));
  }
  for (const auto& [name, p] : model->named_parameters()) out.weights.push_back(bits(p->value));
  if (graph) {
    out.replays = graph->replays();
    out.eager_steps = graph->eager_steps();
  }
  return out;
}

TEST(CudaGraphStepLoop, ReplaysEqualEagerStepsAcrossEpochsWithAPartialLastBatch) {
  MT_SKIP_UNLESS_CUDA_DEVICES(1);
  for (double clip : {0.0, 0.05}) {
    const LoopResult want = train_loop(false, clip);
    const LoopResult got = train_loop(true, clip);
    EXPECT_EQ(got.losses, want.losses) << "clip " << clip;
    EXPECT_EQ(got.weights, want.weights) << "clip " << clip;
    // Epoch 1: two warm-up steps and the partial batch; epochs 2 and 3: two replays (the first
    // captures) and the partial batch, eager.
    EXPECT_EQ(got.replays, 4);
    EXPECT_EQ(got.eager_steps, 5);
#if MINITRAIN_CUDA_EMULATED
    EXPECT_EQ(got.replay_launches, 1) << "a replayed step: the factors' store, and the graph";
#endif
  }
}

TEST(GraphStepUnsupported, NamesWhatCannotBeCaptured) {
  MSELoss mse;
  CrossEntropyLoss ce;
  Parameter p;
  p.value = Tensor::zeros({2}, DType::Float32, Device::cpu());
  NamedParameters params{{"w", &p}};
  Adam adam(params, AdamOptions{});
  const Device gpu = Device::cuda(0);
  EXPECT_EQ(graph_step_unsupported(mse, adam, gpu, {}), "");
  EXPECT_EQ(graph_step_unsupported(mse, adam, Device::cpu(), {}),
            "a CUDA graph needs a CUDA device, not cpu");
  EXPECT_NE(graph_step_unsupported(ce, adam, gpu, {}).find("cross_entropy checks its class"),
            std::string::npos);
  GraphStepOptions none;
  none.warmup_steps = 0;
  EXPECT_NE(graph_step_unsupported(mse, adam, gpu, none).find("warmup_steps is 0"),
            std::string::npos);
  Sequential model;
  const std::string msg = testing::error_message(
      [&] { GraphStep g(model, mse, adam, Device::cpu(), GraphStepOptions{}); });
  EXPECT_NE(msg.find("GraphStep: the step cannot be captured: a CUDA graph needs a CUDA device"),
            std::string::npos)
      << msg;
}

}  // namespace
}  // namespace minitrain
