// GraphStep (train/graph_step.h): a training loop fed by the DataLoader, its steps captured once
// as a CUDA graph and replayed, against the same loop stepped eagerly with the by-value
// optimizer: the same losses and weights bit for bit, over three epochs whose last batch is
// partial (those steps run eagerly between replays); a classifier's too, its labels checked and
// its rows counted on the device inside the graph.

#include "train/graph_step.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/generator.h"
#include "core/allocator.h"
#include "core/error.h"
#include "core/stream.h"
#include "data/data_loader.h"
#include "data/dataset.h"
#include "nn/cross_entropy_loss.h"
#include "nn/mlp.h"
#include "nn/mse_loss.h"
#include "nn/sequential.h"
#include "optim/schedule.h"
#include "tests/core/io_test_util.h"
#include "tests/support/test_util.h"
#include "train/class_metrics.h"

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
  // a classifier's per step: {top-1 rows, counted rows, the label check's flag}
  std::vector<std::vector<double>> counts;
  int64_t replays = 0, eager_steps = 0, replay_launches = -1;
};

// Class labels 0..2 for `rows` rows, as floats [rows].
Tensor labels(int64_t rows, uint64_t seed) {
  const std::vector<float> u = random_tensor({rows}, seed).to_vector<float>();
  std::vector<float> y;
  for (float v : u) y.push_back(static_cast<float>(static_cast<int>(std::fabs(v) * 3.0f) % 3));
  return Tensor::from_vector(y, {rows});
}

// 20 rows in batches of 8: two full batches and one of 4 an epoch; 9 steps = 3 epochs.
// `classifier`: mlp:4,16,16,3 with cross_entropy (label smoothing 0.1), else mlp:4,16,16,1 MSE.
LoopResult train_loop(bool use_graph, double clip, bool classifier = false) {
  const Device gpu = Device::cuda(0);
  Stream s = Stream::create(gpu);
  StreamGuard current(s);
  auto data = std::make_shared<TensorDataset>(
      random_tensor({20, 4}, 1), classifier ? labels(20, 2) : random_tensor({20, 1}, 2));
  DataLoaderOptions lo;
  lo.batch_size = 8;
  lo.seed = 3;
  lo.device = gpu;
  lo.workers = 1;
  DataLoader loader(data, lo);
  Generator gen(7);
  std::unique_ptr<Sequential> model =
      make_mlp({4, 16, 16, classifier ? 3 : 1}, Activation::Tanh, gen, gpu);
  LossOptions ce;
  ce.label_smoothing = 0.1;
  std::unique_ptr<Loss> loss_owned;
  if (classifier)
    loss_owned = std::make_unique<CrossEntropyLoss>(ce);
  else
    loss_owned = std::make_unique<MSELoss>();
  Loss& loss = *loss_owned;
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
      if (classifier) {
        EXPECT_TRUE(r.class_totals.defined());
        EXPECT_EQ(r.classes, 3);
        const std::vector<double> t = r.class_totals.to(Device::cpu()).to_vector<double>();
        out.counts.push_back({t[0], t[1], t[2]});
      }
      continue;
    }
    model->train();
    model->zero_grad();
    const Tensor pred = model->forward(batch.x);
    Tensor grad;
    const Tensor l = loss.forward_backward(pred, batch.y, grad);  // the labels read on the host
    if (classifier) {
      const ClassCounts c = count_correct(pred, batch.y, 1, ce.ignore_index);
      out.counts.push_back({c.correct, c.counted, 0.0});
    }
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

// A classifier (cross_entropy, label smoothing) checks its labels and counts its top-1 rows on the
// device inside the graph: the eager loop's losses and weights (whose loss reads its labels on the
// host) bit for bit, and the host's counts of every step, replayed or eager.
TEST(CudaGraphStepLoop, AClassifiersReplaysEqualItsEagerStepsAndCountItsRows) {
  MT_SKIP_UNLESS_CUDA_DEVICES(1);
  const LoopResult want = train_loop(false, 0.0, true);
  const LoopResult got = train_loop(true, 0.0, true);
  EXPECT_EQ(got.losses, want.losses);
  EXPECT_EQ(got.weights, want.weights);
  EXPECT_EQ(got.counts, want.counts);
  ASSERT_EQ(got.counts.size(), 9u);
  EXPECT_EQ(got.counts[2][1], 4.0);  // the partial batch counts its 4 rows, not the graph's 8
  EXPECT_EQ(got.replays, 4);
  EXPECT_EQ(got.eager_steps, 5);
#if MINITRAIN_CUDA_EMULATED
  EXPECT_EQ(got.replay_launches, 1) << "the label check and the counts are inside the graph";
#endif
}

// A bad label met in a replayed step gives its row a NaN loss and is recorded in the step's
// check, {1, row, label}, which the caller reads with the loss (the host check's words). The
// replayed step reads nothing, waits for nothing and allocates nothing.
TEST(CudaGraphStepLoop, ABadLabelInAReplayedStepIsRecordedWithItsRow) {
  MT_SKIP_UNLESS_CUDA_DEVICES(1);
  const Device gpu = Device::cuda(0);
  Generator gen(7);
  std::unique_ptr<Sequential> model = make_mlp({4, 8, 3}, Activation::Tanh, gen, gpu);
  CrossEntropyLoss loss;
  Adam opt(model->named_parameters(), AdamOptions{});
  GraphStep graph(*model, loss, opt, gpu, GraphStepOptions{});
  const Tensor x = random_tensor({4, 4}, 1).to(gpu);
  const Tensor good = Tensor::from_vector(std::vector<float>{0, 2, 1, 0}, {4}).to(gpu);
  const Tensor bad = Tensor::from_vector(std::vector<float>{1, 0, 2, 7}, {4}).to(gpu);
  for (int step = 1; step <= 4; ++step) {
#if MINITRAIN_CUDA_EMULATED
    const uint64_t allocations = memory_stats(gpu).allocations;
    const mtemu::ApiCounts before = mtemu::api_counts_of_this_thread();
#endif
    const GraphStep::Result r = graph.step(x, step == 4 ? bad : good);
#if MINITRAIN_CUDA_EMULATED
    if (step == 4) {  // a replay: no read, no sync, no allocation; the factors' store
      const mtemu::ApiCounts after = mtemu::api_counts_of_this_thread();
      EXPECT_EQ(memory_stats(gpu).allocations, allocations);
      EXPECT_EQ(after.device_to_host_copies, before.device_to_host_copies);
      EXPECT_EQ(after.host_syncs, before.host_syncs);
      EXPECT_EQ(after.launches - before.launches, 1u);
    }
#endif
    const std::vector<double> t = r.class_totals.to(Device::cpu()).to_vector<double>();
    EXPECT_EQ(t[1], 4.0) << "step " << step;  // a bad label is counted (and never correct)
    if (step < 4) {
      EXPECT_EQ(t[2], 0.0) << "step " << step;
      continue;
    }
    EXPECT_TRUE(r.replayed);
    EXPECT_TRUE(std::isnan(r.loss.item()));
    testing::expect_error<ValueError>(
        [&] { throw_bad_cross_entropy_target("cross_entropy_forward", t.data() + 2, 3, -100); },
        {"row 3", "has target 7", "C = 3"});
  }
  EXPECT_EQ(graph.replays(), 2);
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
  EXPECT_EQ(graph_step_unsupported(ce, adam, gpu, {}), "");  // checks its labels on the device
  LossOptions weighted;
  weighted.class_weights = {1.0, 2.0};
  CrossEntropyLoss ce_weighted(weighted);
  // Class weights are checked and summed on the device too (issue 35).
  EXPECT_EQ(graph_step_unsupported(ce_weighted, adam, gpu, {}), "");
  // A step that may count nothing is skipped on the optimizer's flag: it must have one.
  GraphStepOptions skips;
  skips.nothing_counted_skips = true;
  EXPECT_NE(graph_step_unsupported(ce_weighted, adam, gpu, skips)
                .find("a step that counts nothing is skipped on the optimizer's flag, and the "
                      "optimizer has none"),
            std::string::npos);
  EXPECT_NE(graph_step_unsupported(mse, adam, gpu, skips)
                .find("the loss mse cannot count its batches on the device"),
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
