// A training step captured once as a CUDA graph and replayed: forward, loss, backward, clipping
// and the optimizer of a small Sequential, warmed up eagerly, captured with CudaGraph, then
// replayed for several steps with each step's batch copied into fixed input buffers. The weights
// and each step's loss must equal, bit for bit, those of the same steps taken eagerly with the
// ordinary (by-value) optimizer: Adam with a learning-rate schedule, SGD with momentum, RMSprop.
// Also: a capturable optimizer alone gives the bits of the by-value one (Note [capturable step] in
// optim/optimizer.h), and the capture's memory stays the graph's (Note [graph memory pool]).

#include <gtest/gtest.h>

#include <cstring>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "core/allocator.h"
#include "core/cuda_graph.h"
#include "core/generator.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "kernels/optim/amp_math.h"
#include "nn/mlp.h"
#include "nn/mse_loss.h"
#include "nn/sequential.h"
#include "optim/clip.h"
#include "optim/grad_scaler.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "tests/support/test_util.h"

#if MINITRAIN_CUDA_EMULATED
#include "cuda_emu/api_counts.h"
#endif

namespace minitrain {
namespace {

using testing::random_tensor;

constexpr int64_t kBatch = 8, kIn = 4, kOut = 1;
constexpr int kWarmup = 2, kReplays = 5;

enum class Opt { AdamCosine, AdamWAmsgrad, SgdNesterov, RmspropCentered };

struct TrainRun {
  std::unique_ptr<Sequential> model;
  std::unique_ptr<Optimizer> opt;
  std::unique_ptr<LRSchedule> schedule;
  MSELoss loss;
  bool clip = false;
  std::vector<float> losses;  // each step's loss, read after the run
};

TrainRun make_run(Opt kind, bool clip, Device gpu) {
  TrainRun r;
  Generator gen(7);
  r.model = make_mlp({kIn, 16, 16, kOut}, Activation::Tanh, gen, gpu);
  NamedParameters params = r.model->named_parameters();
  switch (kind) {
    case Opt::AdamCosine: {
      AdamOptions o;
      o.lr = 0.01;
      r.opt = std::make_unique<Adam>(params, o);
      r.schedule = linear_warmup(cosine_lr(9, 1e-2), 3);
      break;
    }
    case Opt::AdamWAmsgrad: {
      AdamOptions o = adamw_defaults();
      o.lr = 0.02, o.amsgrad = true, o.weight_decay = 0.1;
      r.opt = std::make_unique<Adam>(params, o, /*decoupled_weight_decay=*/true);
      r.schedule = step_lr(2, 0.5);
      break;
    }
    case Opt::RmspropCentered: {
      RMSpropOptions o;
      o.lr = 0.01, o.centered = true, o.momentum = 0.5, o.weight_decay = 0.01;
      r.opt = std::make_unique<RMSprop>(params, o);
      r.schedule = cosine_lr(7, 0.1);
      break;
    }
    case Opt::SgdNesterov: {
      SGDOptions o;
      o.lr = 0.05, o.momentum = 0.9, o.nesterov = true, o.weight_decay = 0.01;
      r.opt = std::make_unique<SGD>(params, o);
      r.schedule = step_lr(3, 0.3);
      break;
    }
  }
  r.clip = clip;
  return r;
}

// Forward, loss, backward and clipping of one step on the current stream; no host read.
Tensor forward_backward(TrainRun& r, const Tensor& x, const Tensor& y) {
  r.model->train();
  r.model->zero_grad();
  const Tensor out = r.model->forward(x);
  Tensor grad;
  Tensor loss = r.loss.forward_backward(out, y, grad);
  r.model->backward(grad);
  if (r.clip) (void)clip_grad_norm_deferred_(r.model->named_parameters(), 0.05);
  return loss;
}

std::vector<Tensor> batches(int n, uint32_t seed) {
  std::vector<Tensor> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(random_tensor({kBatch, kIn}, seed + 2u * uint32_t(i)));
    out.push_back(random_tensor({kBatch, kOut}, seed + 2u * uint32_t(i) + 1u));
  }
  return out;
}

std::vector<std::vector<float>> weights_of(Sequential& model) {
  std::vector<std::vector<float>> out;
  for (const auto& [name, p] : model.named_parameters())
    out.push_back(p->value.to(Device::cpu()).to_vector<float>());
  return out;
}

// Bit patterns, so that -0 and 0 differ and NaNs compare.
std::vector<uint32_t> bits(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
  return b;
}

void copy_on(const Stream& s, const Tensor& dst, const Tensor& src) {
  copy_bytes_async(dst.raw_data(), dst.device(), src.raw_data(), src.device(), src.nbytes(), s);
}

// The reference: every step eager, the optimizer's factors passed by value (as before graphs).
TrainRun eager_run(Opt kind, bool clip, const std::vector<Tensor>& data, const Stream& s) {
  const Device gpu = s.device();
  StreamGuard current(s);
  TrainRun r = make_run(kind, clip, gpu);
  std::vector<Tensor> step_losses;
  for (int step = 1; step <= kWarmup + kReplays; ++step) {
    const Tensor x = data[2 * (step - 1)].to(gpu), y = data[2 * (step - 1) + 1].to(gpu);
    r.opt->set_lr_factor(r.schedule->factor_at(step));
    step_losses.push_back(forward_backward(r, x, y));
    r.opt->step();
  }
  for (const Tensor& l : step_losses) r.losses.push_back(l.to(Device::cpu()).to_vector<float>()[0]);
  return r;
}

struct GraphRun {
  TrainRun run;
  int64_t replay_launches = -1;  // kernel launches of one replayed step (emulated GPUs)
  int64_t replay_allocations = -1;
  int64_t eager_launches = -1;  // the same of the last warm-up step, eager
  int64_t eager_allocations = -1;
  uint64_t pool_bytes = 0;
};

// Warm-up steps eager (capturable optimizer), then one capture, then every step a replay. The
// warm-up steps already read the fixed input buffers and keep nothing of theirs alive, so the
// capture needs no block the caching allocator does not hold by then (a capture may not
// cudaMalloc: Note [graph memory pool]).
GraphRun graph_run(Opt kind, bool clip, const std::vector<Tensor>& data, const Stream& s) {
  const Device gpu = s.device();
  StreamGuard current(s);
  GraphRun g{make_run(kind, clip, gpu)};
  TrainRun& r = g.run;
  r.opt->set_capturable(true);
  // The fixed input buffers that every step reads; each step's batch is copied into them.
  Tensor x_in = Tensor::empty({kBatch, kIn}, DType::Float32, gpu);
  Tensor y_in = Tensor::empty({kBatch, kOut}, DType::Float32, gpu);
  Tensor loss;  // after the capture, written by every replay (its block is the graph's)
  std::vector<int64_t> plan;
  std::unique_ptr<CudaGraph> graph;
  for (int step = 1; step <= kWarmup + kReplays; ++step) {
    const Tensor x = data[2 * (step - 1)].to(gpu), y = data[2 * (step - 1) + 1].to(gpu);
    copy_on(s, x_in, x);
    copy_on(s, y_in, y);
    r.opt->set_lr_factor(r.schedule->factor_at(step));
    if (step <= kWarmup) {
#if MINITRAIN_CUDA_EMULATED
      const mtemu::ApiCounts before = mtemu::api_counts_of_this_thread();
      const uint64_t allocations_before = memory_stats(gpu).allocations;
#endif
      loss = forward_backward(r, x_in, y_in);
      r.opt->step();
#if MINITRAIN_CUDA_EMULATED
      g.eager_launches = int64_t(mtemu::api_counts_of_this_thread().launches - before.launches);
      g.eager_allocations = int64_t(memory_stats(gpu).allocations - allocations_before);
#endif
      r.losses.push_back(loss.to(Device::cpu()).to_vector<float>()[0]);
      loss = Tensor();
      continue;
    }
#if MINITRAIN_CUDA_EMULATED
    const mtemu::ApiCounts before = mtemu::api_counts_of_this_thread();
    const uint64_t allocations_before = memory_stats(gpu).allocations;
#endif
    r.opt->prepare_step();  // the host half: this step's factors, one small launch
    if (!graph) {
      plan = r.opt->step_plan();
      graph = std::make_unique<CudaGraph>(CudaGraph::capture(s, [&] {
        loss = forward_backward(r, x_in, y_in);
        r.opt->queue_step();
      }));
      g.pool_bytes = graph->pool_bytes();
    } else {
      EXPECT_EQ(r.opt->step_plan(), plan) << "step " << step << " would launch other kernels";
    }
    graph->replay(s);
#if MINITRAIN_CUDA_EMULATED
    if (step == kWarmup + kReplays) {
      const mtemu::ApiCounts after = mtemu::api_counts_of_this_thread();
      g.replay_launches = int64_t(after.launches - before.launches);
      g.replay_allocations = int64_t(memory_stats(gpu).allocations - allocations_before);
    }
#endif
    // The loss of this replay, read before the next replay overwrites it.
    r.losses.push_back(loss.to(Device::cpu()).to_vector<float>()[0]);
  }
  s.synchronize();
  return g;
}

void expect_same_bits(const TrainRun& want, const TrainRun& got) {
  ASSERT_EQ(want.losses.size(), got.losses.size());
  EXPECT_EQ(bits(want.losses), bits(got.losses)) << "the losses of the replayed steps differ";
  auto w = weights_of(*want.model), h = weights_of(*got.model);
  ASSERT_EQ(w.size(), h.size());
  for (std::size_t i = 0; i < w.size(); ++i) {
    ASSERT_GT(testing::host_max_abs(got.model->named_parameters()[i].second->value), 0.0);
    EXPECT_EQ(bits(w[i]), bits(h[i])) << "parameter " << got.model->named_parameters()[i].first;
  }
}

struct Case {
  Opt opt;
  bool clip;
  const char* name;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class CudaGraphStep : public ::testing::TestWithParam<Case> {};

TEST_P(CudaGraphStep, ReplayedStepsEqualEagerStepsBitForBit) {
  MT_SKIP_UNLESS_CUDA_DEVICES(1);
  const Device gpu = Device::cuda(0);
  Stream s = Stream::create(gpu);
  const std::vector<Tensor> data = batches(kWarmup + kReplays, 100);
  const TrainRun want = eager_run(GetParam().opt, GetParam().clip, data, s);
  const GraphRun got = graph_run(GetParam().opt, GetParam().clip, data, s);
  // The learning rate changes at every step of each schedule here: a replay that repeated the
  // captured step's factors would differ from the eager steps after the capture.
  expect_same_bits(want, got.run);
  // What the captured step allocates lives in the graph's pool (Note [graph memory pool]). The
  // layers' outputs and gradients and the loss's are theirs, kept across steps (Note [buffers
  // that live across steps], core/buffer_slot.h): only clipping's temporaries are new.
  if (GetParam().clip)
    EXPECT_GT(got.pool_bytes, 0u) << "the capture took no memory into its pool";
  else
    EXPECT_EQ(got.pool_bytes, 0u) << "the captured step allocated";
#if MINITRAIN_CUDA_EMULATED
  // One replayed step: the factors' store and the graph launch; no allocation.
  EXPECT_EQ(got.replay_launches, 1) << "kernel launches besides the graph's";
  EXPECT_EQ(got.replay_allocations, 0);
  EXPECT_GT(got.eager_launches, 10);
  std::cout << GetParam().name << ": eager step " << got.eager_launches << " kernel launches, "
            << got.eager_allocations << " allocations; replayed step " << got.replay_launches
            << " kernel launch + 1 graph launch, " << got.replay_allocations << " allocations\n";
#endif
}

INSTANTIATE_TEST_SUITE_P(Optimizers, CudaGraphStep,
                         ::testing::Values(Case{Opt::AdamCosine, false, "AdamCosine"},
                                           Case{Opt::AdamCosine, true, "AdamCosineClip"},
                                           Case{Opt::AdamWAmsgrad, true, "AdamWAmsgradClip"},
                                           Case{Opt::SgdNesterov, false, "SgdNesterov"},
                                           Case{Opt::SgdNesterov, true, "SgdNesterovClip"},
                                           Case{Opt::RmspropCentered, true, "RmspropCenteredClip"}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

// Without the capturable step, the replays repeat the captured step's learning rate and bias
// corrections: the failure this work removes, shown here so that the test above means something.
TEST(CudaGraphStepByValue, ReplaysRepeatTheCapturedFactors) {
  MT_SKIP_UNLESS_CUDA_DEVICES(1);
  const Device gpu = Device::cuda(0);
  Stream s = Stream::create(gpu);
  StreamGuard current(s);
  const std::vector<Tensor> data = batches(kWarmup + kReplays, 100);
  const TrainRun want = eager_run(Opt::AdamCosine, false, data, s);
  TrainRun r = make_run(Opt::AdamCosine, false, gpu);
  for (int step = 1; step <= kWarmup; ++step) {
    r.opt->set_lr_factor(r.schedule->factor_at(step));
    (void)forward_backward(r, data[2 * (step - 1)].to(gpu), data[2 * (step - 1) + 1].to(gpu));
    r.opt->step();
  }
  Tensor x_in = Tensor::empty({kBatch, kIn}, DType::Float32, gpu);
  Tensor y_in = Tensor::empty({kBatch, kOut}, DType::Float32, gpu);
  std::unique_ptr<CudaGraph> graph;
  for (int step = kWarmup + 1; step <= kWarmup + kReplays; ++step) {
    copy_on(s, x_in, data[2 * (step - 1)].to(gpu));
    copy_on(s, y_in, data[2 * (step - 1) + 1].to(gpu));
    r.opt->set_lr_factor(r.schedule->factor_at(step));
    if (!graph)
      graph = std::make_unique<CudaGraph>(CudaGraph::capture(s, [&] {
        (void)forward_backward(r, x_in, y_in);
        r.opt->step();
      }));
    graph->replay(s);
  }
  s.synchronize();
  EXPECT_NE(bits(weights_of(*want.model)[0]), bits(weights_of(*r.model)[0]));
}

// The capturable optimizer alone, eager, against the by-value one: several steps with a changing
// learning rate, float32 and float64, one parameter skipping a step (Adam then keeps two groups
// of step counts, each with its own factors in the buffer).
TEST(CudaCapturableOptimizer, GivesTheBitsOfTheByValueStep) {
  MT_SKIP_UNLESS_CUDA_DEVICES(1);
  const Device gpu = Device::cuda(0);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (int which = 0; which < 4; ++which) {
      std::vector<std::unique_ptr<Parameter>> owned[2];
      NamedParameters named[2];
      for (int k = 0; k < 2; ++k)
        for (int i = 0; i < 5; ++i) {
          auto p = std::make_unique<Parameter>();
          p->value = random_tensor({int64_t(3 + 37 * i)}, 10u + uint32_t(i), gpu, dtype);
          named[k].emplace_back(std::to_string(i) + ".weight", p.get());
          owned[k].push_back(std::move(p));
        }
      std::unique_ptr<Optimizer> opt[2];
      for (int k = 0; k < 2; ++k) {
        if (which == 0) {
          AdamOptions o;
          o.weight_decay = 0.05;
          opt[k] = std::make_unique<Adam>(named[k], o);
        } else if (which == 1) {
          AdamOptions o = adamw_defaults();
          o.amsgrad = true;
          opt[k] = std::make_unique<Adam>(named[k], o, true);
        } else if (which == 2) {
          SGDOptions o;
          o.momentum = 0.8, o.dampening = 0.25, o.weight_decay = 0.01;
          opt[k] = std::make_unique<SGD>(named[k], o);
        } else {
          RMSpropOptions o;
          o.centered = true, o.momentum = 0.3, o.weight_decay = 0.02;
          opt[k] = std::make_unique<RMSprop>(named[k], o);
        }
      }
      opt[1]->set_capturable(true);
      for (int step = 0; step < 4; ++step)
        for (int k = 0; k < 2; ++k) {
          for (int i = 0; i < 5; ++i)
            owned[k][i]->grad = (step == 0 && i == 2)
                                    ? Tensor()
                                    : random_tensor(owned[k][i]->value.shape(),
                                                    500u + 7u * uint32_t(step) + uint32_t(i), gpu,
                                                    dtype, -0.5, 0.5);
          opt[k]->set_lr(0.01 / (1 + step));
          opt[k]->step();
        }
      for (int i = 0; i < 5; ++i)
        EXPECT_EQ(testing::host_values(owned[0][i]->value),
                  testing::host_values(owned[1][i]->value))
            << opt[0]->name() << " " << dtype << " parameter " << i;
    }
  }
}

// float16's dynamic loss scaling inside a captured step (Note [a captured skippable step] in
// optim/optimizer.cpp): the loss gradient times the device's scale, the unscale that writes the
// inf flag, the optimizer that skips on it, and the scale's update, captured once and replayed.
// The true gradients of each step (copied into the fixed gradient buffer before it) overflow at
// steps 1, 4 and 7 (inf, NaN, inf); step 1 is the eager warm-up, so SGD's momentum buffer takes
// its first step in a replay, and the learning rate changes every step. The replayed steps give
// the eager skipping steps' records (scale used, flag, scale and tracker after), weights, state
// and counts bit for bit (the eager path is held against torch by
// CudaStepCounts.AnInfGradientSkipsTheStepAndBacksTheScaleOffAsTorch).
struct ScaledRun {
  std::vector<double> records;
  std::vector<float> weights;
  std::vector<std::pair<std::string, Tensor>> state;
  std::map<std::string, std::string> scalars;
  int64_t replays = 0;
};

const float kInfGrad = std::numeric_limits<float>::infinity();
const float kNaNGrad = std::numeric_limits<float>::quiet_NaN();
const std::vector<std::vector<float>> kScaledGrads = {
    {kInfGrad, 2.0f}, {0.5f, 0.25f},  {0.25f, 0.5f},        {kNaNGrad, 0.0f},
    {0.125f, 0.5f},   {0.25f, 0.25f}, {kInfGrad, kInfGrad}, {0.5f, 0.125f}};

std::unique_ptr<Optimizer> scaled_optimizer(const std::string& name, Parameter& p) {
  NamedParameters params{{"w", &p}};
  OptimizerOptions o;
  o.lr = 0.5;
  o.weight_decay = 0.0;
  if (name == "sgd") {
    o.momentum = 0.5, o.dampening = 0.5;
    return std::make_unique<SGD>(params, o);
  }
  if (name == "rmsprop") {
    o.momentum = 0.5;
    return std::make_unique<RMSprop>(params, o);
  }
  return std::make_unique<Adam>(params, AdamOptions{}, /*decoupled_weight_decay=*/name == "adamw");
}

ScaledRun scaled_run(const std::string& name, bool graph, const Stream& s) {
  const Device gpu = s.device();
  StreamGuard current(s);
  Parameter p;
  p.value = Tensor::from_vector(std::vector<float>{1.0f, 1.0f}, {2}, gpu);
  p.grad = Tensor::zeros({2}, DType::Float32, gpu);
  std::unique_ptr<Optimizer> opt = scaled_optimizer(name, p);
  GradScalerOptions so;
  so.init_scale = 4.0;
  so.growth_interval = 2;
  GradScaler scaler(so);
  scaler.keep_on_device(gpu);
  opt->set_found_inf(scaler.found_inf());
  if (graph) opt->set_capturable(true);
  Tensor record = Tensor::zeros({kAmpRecordSize}, DType::Float64, gpu);
  const NamedParameters params{{"w", &p}};
  auto queued = [&] {  // the step after backward, as the trainer queues it
    scaler.scale_loss_gradient(p.grad, 1.0);
    scaler.unscale_queued(params);
    if (graph)
      opt->queue_step();
    else
      opt->step();
    scaler.update_queued(&record);
  };
  ScaledRun r;
  std::unique_ptr<CudaGraph> captured;
  std::vector<int64_t> plan;
  for (std::size_t step = 0; step < kScaledGrads.size(); ++step) {
    copy_on(s, p.grad, Tensor::from_vector(kScaledGrads[step], {2}, gpu));
    opt->set_lr(0.5 / static_cast<double>(step + 1));
    if (!graph) {
      queued();
    } else if (step == 0) {
      opt->prepare_step();
      queued();  // eager warm-up: creates the state and seeds the counts
    } else {
      opt->prepare_step();
      if (!captured) {
        plan = opt->step_plan();
        captured = std::make_unique<CudaGraph>(CudaGraph::capture(s, queued));
      }
      EXPECT_EQ(opt->step_plan(), plan) << "step " << step + 1 << " would launch other kernels";
      captured->replay(s);
      ++r.replays;
    }
    for (double v : record.to(Device::cpu()).to_vector<double>()) r.records.push_back(v);
  }
  r.weights = p.value.to(Device::cpu()).to_vector<float>();
  r.state = opt->state_tensors();
  r.scalars = opt->state_scalars();
  return r;
}

TEST(CudaCapturableOptimizer, SkipsOnTheScalersFlagInAReplayedStepAsTheEagerStep) {
  MT_SKIP_UNLESS_CUDA_DEVICES(1);
  const Stream s = Stream::create(Device::cuda(0));
  for (const char* name : {"sgd", "adam", "adamw", "rmsprop"}) {
    SCOPED_TRACE(name);
    const ScaledRun eager = scaled_run(name, false, s);
    const ScaledRun replayed = scaled_run(name, true, s);
    EXPECT_EQ(replayed.replays, static_cast<int64_t>(kScaledGrads.size()) - 1);
    // torch's flags: steps 1, 4 and 7 overflowed; the scale backs off and grows back.
    std::vector<double> flags;
    for (std::size_t k = 0; k < kScaledGrads.size(); ++k)
      flags.push_back(eager.records[k * kAmpRecordSize + 1]);
    EXPECT_EQ(flags, (std::vector<double>{1, 0, 0, 1, 0, 0, 1, 0}));
    EXPECT_EQ(replayed.records, eager.records);
    EXPECT_EQ(bits(replayed.weights), bits(eager.weights));
    EXPECT_NE(eager.weights, (std::vector<float>{1.0f, 1.0f}));  // the finite steps were taken
    ASSERT_EQ(replayed.state.size(), eager.state.size());
    for (std::size_t i = 0; i < eager.state.size(); ++i) {
      EXPECT_EQ(replayed.state[i].first, eager.state[i].first);
      EXPECT_EQ(testing::host_values(replayed.state[i].second),
                testing::host_values(eager.state[i].second))
          << eager.state[i].first;
    }
    if (std::string(name) == "adam" || std::string(name) == "adamw")
      EXPECT_EQ(replayed.scalars.at("w.step"), "5");  // the steps taken, skipped ones not counted
  }
}

// A checkpoint loaded into a scaler kept on the device writes its state in place: a graph that
// captured the loss gradient's scaling reads the loaded scale at its next replay.
TEST(CudaCapturableOptimizer, AScalerLoadedAfterTheCaptureIsTheOneReplayed) {
  MT_SKIP_UNLESS_CUDA_DEVICES(1);
  const Stream s = Stream::create(Device::cuda(0));
  StreamGuard current(s);
  GradScalerOptions so;
  so.init_scale = 4.0;
  GradScaler scaler(so);
  scaler.keep_on_device(s.device());
  Tensor grad = Tensor::from_vector(std::vector<float>{1.0f, 0.5f}, {2}, s.device());
  const Tensor ones = grad.clone();
  scaler.scale_loss_gradient(grad, 1.0);  // warm-up
  CudaGraph graph = CudaGraph::capture(s, [&] { scaler.scale_loss_gradient(grad, 1.0); });
  copy_on(s, grad, ones);
  graph.replay(s);
  EXPECT_EQ(grad.to(Device::cpu()).to_vector<float>(), (std::vector<float>{4.0f, 2.0f}));
  scaler.load_state({{"scale", "32"}, {"growth_tracker", "0"}});
  copy_on(s, grad, ones);
  graph.replay(s);
  EXPECT_EQ(grad.to(Device::cpu()).to_vector<float>(), (std::vector<float>{32.0f, 16.0f}));
}

// An optimizer with step() only: the base class's capturable halves refuse.
class ByValueOnly final : public Optimizer {
 public:
  explicit ByValueOnly(NamedParameters p) : Optimizer(std::move(p)) { set_lr_factor({}); }
  void step() override {}
  std::string name() const override { return "by_value_only"; }
  double base_lr() const noexcept override { return 0.1; }
  std::vector<std::pair<std::string, Tensor>> state_tensors() const override { return {}; }
  void load_state(const std::vector<std::pair<std::string, Tensor>>&,
                  const std::map<std::string, std::string>&) override {}
};

TEST(CapturableOptimizer, RefusesAnOptimizerWithoutHalvesAndCpuParameters) {
  ByValueOnly plain({});
  const std::string msg = testing::error_message([&] { plain.set_capturable(true); });
  EXPECT_NE(msg.find("by_value_only: this optimizer has no capturable step"), std::string::npos)
      << msg;
  Parameter p;
  p.value = Tensor::zeros({3}, DType::Float32, Device::cpu());
  p.grad = Tensor::zeros({3}, DType::Float32, Device::cpu());
  SGD sgd({{"w", &p}}, SGDOptions{});
  sgd.set_capturable(true);
  const std::string cpu = testing::error_message([&] { sgd.step(); });
  EXPECT_NE(cpu.find("keeps its factors on a CUDA device, but the parameters are on cpu"),
            std::string::npos)
      << cpu;
  sgd.set_capturable(false);
  const std::string queue = testing::error_message([&] { sgd.queue_step(); });
  EXPECT_NE(queue.find("queue_step needs a capturable optimizer"), std::string::npos) << queue;
}

}  // namespace
}  // namespace minitrain
