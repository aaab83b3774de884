// What one training step of `minitrain train --device cuda` asks of the CUDA runtime, counted on
// the emulated GPUs (cuda_emu/api_counts.h) and by the caching allocator: kernel launches,
// memsets, blocking host syncs, device-to-host copies, cudaMalloc/cudaFree and allocations. The
// counts are of calls, not time, so they are exact and the same on every machine; a real GPU
// pays ~3 us per launch and ~15 us per blocking read, which sets a small MLP's step time
// (docs/gpu_step.md, issue 35).
//
// A step's counts are those of a run of n+1 steps minus those of a run of n steps, through
// run_training (the `minitrain train` command's library call): everything before the first step
// and after the last (set-up, the final evaluation, the save) is the same in both, so the
// difference is step n+1 with its log line, progress and evaluations.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/allocator.h"
#include "core/device.h"
#include "core/npy.h"
#include "core/safetensors.h"
#include "data/readers.h"
#include "kernels/loss/cross_entropy.h"
#include "kernels/optim/amp_math.h"
#include "optim/clip.h"
#include "optim/grad_scaler.h"
#include "optim/optimizer.h"
#include "tests/core/io_test_util.h"
#include "tests/support/test_util.h"
#include "tests/train/train_test_util.h"
#include "optim/make_optimizer.h"
#include "train/device_totals.h"
#include "train/run_training.h"
#include "train/class_metrics.h"
#include "train/validation.h"
#include "nn/mlp.h"

#if MINITRAIN_CUDA_EMULATED
#include "cuda_emu/api_counts.h"
#endif

namespace minitrain {
namespace {

using testing::log_lines;
using testing::ScratchDir;

struct StepCounts {
  // Signed: a difference of two runs' counts can be negative where thread timing moves a call
  // (a data loader worker's cudaMalloc for a batch prepared ahead).
  int64_t launches = 0, memsets = 0, host_syncs = 0, d2h_copies = 0, mallocs = 0, frees = 0;
  int64_t allocations = 0;                           // the caching allocator's handouts
  int64_t loop_host_syncs = 0, loop_d2h_copies = 0;  // the training loop's thread's own
  int64_t loop_mallocs = 0;
};

#if MINITRAIN_CUDA_EMULATED
StepCounts counts_now() {
  const mtemu::ApiCounts a = mtemu::api_counts();
  const mtemu::ApiCounts mine = mtemu::api_counts_of_this_thread();
  auto i = [](uint64_t n) { return static_cast<int64_t>(n); };
  StepCounts c;
  c.launches = i(a.launches);
  c.memsets = i(a.memsets);
  c.host_syncs = i(a.host_syncs);
  c.d2h_copies = i(a.device_to_host_copies);
  c.mallocs = i(a.mallocs);
  c.frees = i(a.frees);
  c.allocations = i(memory_stats(Device::cuda(0)).allocations);
  c.loop_host_syncs = i(mine.host_syncs);
  c.loop_d2h_copies = i(mine.device_to_host_copies);
  c.loop_mallocs = i(mine.mallocs);
  return c;
}

StepCounts operator-(const StepCounts& a, const StepCounts& b) {
  return {a.launches - b.launches,
          a.memsets - b.memsets,
          a.host_syncs - b.host_syncs,
          a.d2h_copies - b.d2h_copies,
          a.mallocs - b.mallocs,
          a.frees - b.frees,
          a.allocations - b.allocations,
          a.loop_host_syncs - b.loop_host_syncs,
          a.loop_d2h_copies - b.loop_d2h_copies,
          a.loop_mallocs - b.loop_mallocs};
}

// The runtime calls of a whole run of `steps` steps of `c`.
StepCounts run_counts(TrainConfig c, int64_t steps) {
  c.steps = steps;
  c.epochs.reset();
  std::ostringstream info, progress;
  empty_cache(Device::cuda(0));  // each run starts with the allocator's cache empty
  const StepCounts before = counts_now();
  run_training(c, info, progress);
  return counts_now() - before;
}

// The counts of steps first+1 .. first+n, each alone.
std::vector<StepCounts> per_step_counts(const TrainConfig& c, int64_t first, int64_t n) {
  std::vector<StepCounts> steps;
  StepCounts prev = run_counts(c, first);
  for (int64_t s = first + 1; s <= first + n; ++s) {
    const StepCounts now = run_counts(c, s);
    steps.push_back(now - prev);
    prev = now;
  }
  return steps;
}

// "22" when every step counts the same, "21-23" otherwise.
std::string range(const std::vector<StepCounts>& steps, int64_t StepCounts::*field) {
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const StepCounts& s : steps) {
    lo = std::min(lo, s.*field);
    hi = std::max(hi, s.*field);
  }
  return lo == hi ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(hi);
}
#endif

#define SKIP_UNLESS_EMULATED_CUDA()                                                           \
  if (cuda_device_count() < 1)                                                                \
    GTEST_SKIP() << "needs a CUDA device: " << cuda_unavailable_reason();                     \
  if (!MINITRAIN_CUDA_EMULATED)                                                               \
  GTEST_SKIP() << "runtime calls are counted on the emulated GPUs (a real GPU's are seen by " \
                  "nsys)"

// mlp:4,16,16,1 on synthetic data in batches of 8: three Linear layers, so 8 GEMMs a step (3
// forward, 3 weight gradients, 2 input gradients). The counts do not depend on the width.
TrainConfig regression(const ScratchDir& dir) {
  (void)dir;
  return testing::step_run("mlp:4,16,16,1");
}

// Three classes (the argmax of a 3-output synthetic regression), a quarter held out.
TrainConfig classifier(const ScratchDir& dir) {
  return testing::three_class_run(regression(dir), dir);
}

struct Column {
  const char* name;
  TrainConfig config;
};

#if MINITRAIN_CUDA_EMULATED
// The four configurations: the default, a classifier, clipping, fp16.
std::vector<Column> four_configurations(const ScratchDir& dir) {
  std::vector<Column> columns{{"MSE + Adam (default)", regression(dir)},
                              {"cross_entropy + --val-split", classifier(dir)},
                              {"+ --clip-grad-norm", regression(dir)},
                              {"+ --precision fp16", regression(dir)}};
  columns[2].config.clip_grad_norm = 1.0;
  columns[3].config.precision = "fp16";
  return columns;
}

// The docs/gpu_step.md table: one row per count, one column per configuration.
std::string markdown_table(const std::vector<Column>& columns,
                           const std::vector<std::vector<StepCounts>>& steps) {
  struct Row {
    const char* name;
    int64_t StepCounts::*field;
  };
  const Row rows[] = {{"kernel launches", &StepCounts::launches},
                      {"memsets", &StepCounts::memsets},
                      {"device-to-host copies", &StepCounts::d2h_copies},
                      {"  of which the training loop's", &StepCounts::loop_d2h_copies},
                      {"blocking host syncs (calls)", &StepCounts::host_syncs},
                      {"  of which the training loop's", &StepCounts::loop_host_syncs},
                      {"cudaMalloc", &StepCounts::mallocs},
                      {"  of which the training loop's", &StepCounts::loop_mallocs},
                      {"cudaFree", &StepCounts::frees},
                      {"caching-allocator allocations", &StepCounts::allocations}};
  std::ostringstream table;
  table << "| per step |";
  for (const Column& col : columns) table << " " << col.name << " |";
  table << "\n|---|";
  for (std::size_t i = 0; i < columns.size(); ++i) table << "---|";
  table << "\n";
  for (const Row& row : rows) {
    table << "| " << row.name << " |";
    for (const auto& s : steps) table << " " << range(s, row.field) << " |";
    table << "\n";
  }
  return table.str();
}
#endif

// The issue-35 table: per step, steps 4 to 9 (the allocator's cache is warm after step 1; 48
// training rows in batches of 8 are 6 steps an epoch, so the classifier's epoch end, with its
// evaluation, is among them).
TEST(CudaStepCounts, ReportsThePerStepRuntimeCallsOfTheFourConfigurations) {
  SKIP_UNLESS_EMULATED_CUDA();
#if MINITRAIN_CUDA_EMULATED
  ScratchDir dir;
  std::vector<Column> columns = four_configurations(dir);
  std::vector<std::vector<StepCounts>> steps;
  for (const Column& col : columns) steps.push_back(per_step_counts(col.config, 3, 6));

  const std::string table = markdown_table(columns, steps);
  std::cout << table;
  RecordProperty("table", table);

  for (std::size_t i = 0; i < columns.size(); ++i) {
    SCOPED_TRACE(columns[i].name);
    for (const StepCounts& s : steps[i]) {
      EXPECT_GT(s.launches, 8);  // at least the GEMMs: the counting sees the step
      // Without a memory cap the caching allocator never gives a block back during a run.
      EXPECT_EQ(s.frees, 0);
      // The training loop blocks only to read a value it needs (the loss, the clipping norm, the
      // inf flag): each read is a copy into pageable memory and the stream synchronize of
      // Tensor::to after it. No bare synchronize ends the step. (The classifier's held-out
      // evaluation synchronizes besides.)
      if (i != 1) {
        EXPECT_EQ(s.loop_host_syncs, 2 * s.loop_d2h_copies);
      }
    }
  }
#endif
}

// The loss stays on the device (issue 35): with a log line every 100 steps nothing in steps 4 to 9
// needs a value on the host, so the training loop neither copies to the host nor waits for the
// device there: the losses (and clipping norms) wait in train/device_totals.h for the run's
// last step, which reads them all at once. (The data loader's worker waits for its own pinned
// buffers on its own thread: that blocks no step.)
TEST(CudaStepCounts, NoHostReadInsideAStepWhenTheLogIsEveryFewSteps) {
  SKIP_UNLESS_EMULATED_CUDA();
#if MINITRAIN_CUDA_EMULATED
  ScratchDir dir;
  std::vector<Column> columns = four_configurations(dir);
  columns.push_back({"cross_entropy + --class-weights", classifier(dir)});
  write_npy(dir.path("weights.npy"),
            Tensor::from_vector(std::vector<float>{0.3f, 1.7f, 0.9f}, {3}));
  columns[4].config.class_weights = dir.path("weights.npy");
  std::vector<std::vector<StepCounts>> steps;
  for (Column& col : columns) {
    col.config.log = dir.path("log.jsonl");
    col.config.log_every = 100;
    steps.push_back(per_step_counts(col.config, 3, 6));
  }
  const std::string table = markdown_table(columns, steps);
  std::cout << "--log-every 100:\n" << table;
  RecordProperty("table", table);
  // fp16's inf flag stays on the device (the optimizer skips on it there); the classifier's labels
  // are checked and its rows counted there (Note [cross_entropy's targets on the device]), read
  // with the loss. Of the classifier's steps one reads: the epoch end's held-out evaluation (it
  // shows at step 7: the 6-step run ends at its epoch end, whose evaluation is then the final
  // one that both runs make).
  for (std::size_t i = 0; i < columns.size(); ++i) {
    SCOPED_TRACE(columns[i].name);
    int64_t reading_steps = 0;
    for (std::size_t k = 0; k < steps[i].size(); ++k) {
      const StepCounts& s = steps[i][k];
      EXPECT_GT(s.launches, 8);  // the counting sees the step
      // (cudaMalloc moves by a few between the two runs: the loader's worker allocates the
      // batches it prepares ahead at a time set by thread timing.)
      EXPECT_EQ(s.frees, 0);
      const bool classifier_column = i == 1 || i == 4;
      if (classifier_column && s.loop_d2h_copies > 0) {
        // The evaluation's step reads twice: the steps' totals (an evaluation is a read point)
        // and the evaluation's own sums, once (train/validation.h); each a copy and an event wait.
        EXPECT_EQ(s.loop_d2h_copies, 2) << "step " << k + 4;
        EXPECT_EQ(s.loop_host_syncs, 2) << "step " << k + 4;
        ++reading_steps;
        continue;
      }
      EXPECT_EQ(s.loop_d2h_copies, 0) << "step " << k + 4;
      EXPECT_EQ(s.loop_host_syncs, 0) << "step " << k + 4;
      EXPECT_EQ(s.d2h_copies, 0) << "step " << k + 4;
    }
    EXPECT_EQ(reading_steps, i == 1 || i == 4 ? 1 : 0) << "the classifier's evaluation reads, once";
  }
  // Clipping as multi-tensor launches (issue 35, kernels/multi_tensor_norm.h): the norm's two
  // launches (every tensor's partials, one fold), the scale's one and the norm's add into the
  // step's totals, whatever the number of parameter tensors; its partials and total are the
  // Trainer's ClipWorkspace's, so no allocation. Per tensor it was 4-5 launches and 3
  // allocations each (49 and 30 for these 6 tensors); as one list without the workspace, 2.
  for (std::size_t k = 0; k < steps[2].size(); ++k) {
    EXPECT_EQ(steps[2][k].launches, steps[0][k].launches + 4) << "step " << k + 4;
    EXPECT_EQ(steps[2][k].allocations, steps[0][k].allocations) << "step " << k + 4;
  }
  // fp16's GEMMs take 16-bit operands (issue 35, Note [16-bit GEMM operands] in nn/linear.cpp):
  // per Linear the forward's widening cast, bias add and narrowing cast, and the backward's
  // widening casts of dy and x and narrowing cast of dx, are gone (46 launches a step before).
  for (std::size_t k = 0; k < steps[3].size(); ++k)
    EXPECT_EQ(steps[3][k].launches, 29) << "step " << k + 4;
#endif
}

// No allocation after warm-up (issue 35, Note [buffers that live across steps] in
// core/buffer_slot.h): the layers' outputs, kept pre-activations and input gradients, the loss's
// value, gradient and reduction scratch, the fp16 casts, the loader's device batches and
// clipping's sum of squares and partials (the Trainer's ClipWorkspace, optim/clip.h) are
// rewritten step after step, so steps 4 to 9 ask the caching allocator for nothing and the device
// for no memory (the loader's worker too: its device buffers exist before the first step). The
// held-out evaluation at the classifier's epoch end too: its rows stay on the device, its loss
// and sums are kept by the Validator (train/validation.h), so the evaluation the 7-step run adds
// (the first of both runs is the same) allocates nothing either.
TEST(CudaStepCounts, NoAllocationAfterWarmUp) {
  SKIP_UNLESS_EMULATED_CUDA();
#if MINITRAIN_CUDA_EMULATED
  ScratchDir dir;
  std::vector<Column> columns = four_configurations(dir);
  columns.push_back({"MSE + --val-split", regression(dir)});
  columns.push_back({"fp16 + --clip-grad-norm + --val-split", regression(dir)});
  columns[4].config.val_split = 0.25;
  columns[5].config.precision = "fp16";
  columns[5].config.clip_grad_norm = 1.0;
  columns[5].config.val_split = 0.25;
  std::vector<std::vector<StepCounts>> steps;
  for (std::size_t i = 0; i < columns.size(); ++i) {
    SCOPED_TRACE(columns[i].name);
    TrainConfig c = columns[i].config;
    c.log = dir.path("log.jsonl");
    c.log_every = 100;
    steps.push_back(per_step_counts(c, 3, 6));
    int64_t evaluations = 0;
    for (std::size_t k = 0; k < steps.back().size(); ++k) {
      const StepCounts& s = steps.back()[k];
      EXPECT_GT(s.launches, 8) << "step " << k + 4;  // the counting sees the step
      EXPECT_EQ(s.frees, 0) << "step " << k + 4;
      EXPECT_EQ(s.allocations, 0) << "step " << k + 4;
      EXPECT_EQ(s.mallocs, 0) << "step " << k + 4;
      if (s.loop_d2h_copies > 0) ++evaluations;  // the held-out evaluation reads
    }
    const bool validates = columns[i].config.val_split > 0;
    EXPECT_EQ(evaluations, validates ? 1 : 0);
  }
  const std::string table = markdown_table(columns, steps);
  std::cout << "--log-every 100:\n" << table;
  RecordProperty("table", table);
#endif
}

// Targets in (0, 1) for the pointwise losses (kl_div's probabilities, bce's labels): the sigmoid
// of mlp's synthetic regression targets, 64 rows of 4 features and 1 target.
TrainConfig pointwise(const ScratchDir& dir, const char* loss) {
  const TensorDataset rows = make_synthetic_regression(64, 4, 1, 21);
  std::vector<float> y = rows.targets().to_vector<float>();
  for (float& v : y) v = 1.0f / (1.0f + std::exp(-v));
  write_npy(dir.path("px.npy"), rows.features());
  write_npy(dir.path("py.npy"), Tensor::from_vector(y, {64, 1}));
  TrainConfig c = regression(dir);
  c.data = dir.path("px.npy");
  c.targets = dir.path("py.npy");
  c.loss = loss;
  return c;
}

// The pointwise losses (kernels/loss/pointwise_loss.h) take their reduction scratch from the
// loss's slot as MSE does: no allocation after warm-up with any of them, nor in the held-out
// evaluation after the first (its loss is the Validator's own, forward with reduction sum).
TEST(CudaStepCounts, PointwiseLossesAllocateNothingAfterWarmUp) {
  SKIP_UNLESS_EMULATED_CUDA();
#if MINITRAIN_CUDA_EMULATED
  ScratchDir dir;
  std::vector<Column> columns;
  for (const char* loss : {"l1", "smooth_l1", "huber", "bce_with_logits", "kl_div", "poisson_nll"})
    columns.push_back({loss, pointwise(dir, loss)});
  columns.push_back({"huber + --val-split", pointwise(dir, "huber")});
  columns.back().config.val_split = 0.25;
  std::vector<std::vector<StepCounts>> steps;
  for (const Column& col : columns) {
    SCOPED_TRACE(col.name);
    TrainConfig c = col.config;
    c.log = dir.path("log.jsonl");
    c.log_every = 100;
    steps.push_back(per_step_counts(c, 3, 6));
    for (std::size_t k = 0; k < steps.back().size(); ++k) {
      const StepCounts& s = steps.back()[k];
      EXPECT_GT(s.launches, 8) << "step " << k + 4;
      EXPECT_EQ(s.allocations, 0) << "step " << k + 4;
      EXPECT_EQ(s.mallocs, 0) << "step " << k + 4;
      EXPECT_EQ(s.frees, 0) << "step " << k + 4;
    }
  }
  const std::string table = markdown_table(columns, steps);
  std::cout << "--log-every 100:\n" << table;
  RecordProperty("table", table);
#endif
}

// ---- the held-out evaluation on the device (issue 35) ----

// n rows of 3 classes (the argmax of a synthetic regression), every `ignore_every`-th labelled
// ignore_index (0: none); with `bad_row` >= 0 that row's label is 5, not a class.
std::shared_ptr<TensorDataset> classes_of(int64_t n, uint64_t seed, int64_t ignore_every,
                                          int64_t bad_row = -1) {
  const testing::ClassRows rows = testing::three_class_rows(n, seed);
  std::vector<float> labels(rows.labels.begin(), rows.labels.end());
  for (int64_t i = ignore_every - 1; ignore_every > 0 && i < n; i += ignore_every)
    labels[static_cast<std::size_t>(i)] = -100.0f;
  if (bad_row >= 0) labels[static_cast<std::size_t>(bad_row)] = 5.0f;
  return std::make_shared<TensorDataset>(rows.features, Tensor::from_vector(labels, {n, 1}));
}

// 37 held-out rows, every 7th labelled ignore_index.
std::shared_ptr<TensorDataset> held_out_classes(int64_t bad_row = -1) {
  return classes_of(37, 9, 7, bad_row);
}

// The evaluation as it was before issue 35, batch by batch with a read each: the reference.
ValMetrics evaluation_reading_each_batch(Module& model, const TensorDataset& data,
                                         const ValidatorOptions& o) {
  LossOptions sum = o.loss;
  sum.reduction = Reduction::Sum;
  const std::unique_ptr<Loss> loss = make_loss(sum);
  double loss_sum = 0, divisor = 0, correct = 0, topk_correct = 0, counted = 0;
  model.eval();
  for (int64_t begin = 0; begin < data.size(); begin += o.batch_size) {
    const int64_t k = std::min(o.batch_size, data.size() - begin);
    std::vector<int64_t> idx(static_cast<std::size_t>(k));
    for (int64_t i = 0; i < k; ++i) idx[static_cast<std::size_t>(i)] = begin + i;
    Tensor x = Tensor::empty({k, data.feature_dim()}), y = Tensor::empty({k, 1});
    data.gather(idx, x, y);
    const Tensor pred = model.forward(x.to(o.device));
    loss_sum += loss->forward(pred, y.to(o.device)).item();
    divisor += mean_divisor(y, o.loss, TargetKind::ClassIndices);
    const ClassCounts c = count_correct(pred, y, o.topk, o.loss.ignore_index);
    correct += c.correct;
    topk_correct += c.topk_correct;
    counted += c.counted;
  }
  model.train();
  ValMetrics m;
  m.rows = data.size();
  m.loss = loss_sum / divisor;
  m.accuracy = correct / counted;
  if (o.topk > 1) m.topk_accuracy = topk_correct / counted;
  return m;
}

// The held-out evaluation on cuda:0 keeps its sums on the device and reads them once (one copy
// and one event wait an evaluation; the rows were copied there by the first), with the bits of
// the loop that read each batch: the float32 losses widened and added in batch order, the counts
// whole numbers; with class weights the labels are checked there too (their weighted divisor in
// row order, Note [cross_entropy's targets on the device]). Held-out sets too large to keep there
// are copied batch by batch, the same bits.
TEST(CudaClassifierStep, TheHeldOutEvaluationReadsOnceWithTheBitsOfAReadPerBatch) {
  SKIP_UNLESS_EMULATED_CUDA();
#if MINITRAIN_CUDA_EMULATED
  const Device gpu = Device::cuda(0);
  const std::shared_ptr<TensorDataset> data = held_out_classes();
  Generator gen(17);
  const std::unique_ptr<Sequential> model = make_mlp({4, 16, 3}, Activation::ReLU, gen, gpu);
  struct Case {
    const char* name;
    int64_t topk, resident_bytes;
    std::vector<double> class_weights;
  };
  for (const Case& k :
       {Case{"top-1", 1, int64_t{1} << 20, {}}, Case{"top-2", 2, int64_t{1} << 20, {}},
        Case{"top-2, copied batch by batch", 2, 0, {}},
        Case{"class weights, top-2", 2, int64_t{1} << 20, {0.3, 1.7, 0.9}}}) {
    SCOPED_TRACE(k.name);
    ValidatorOptions o;
    o.loss.name = "cross_entropy";
    o.loss.class_weights = k.class_weights;
    o.batch_size = 8;  // 5 batches, the last of 5 rows
    o.device = gpu;
    o.topk = k.topk;
    o.resident_bytes = k.resident_bytes;
    Validator v(data, o);
    const ValMetrics want = evaluation_reading_each_batch(*model, *data, o);
    const ValMetrics first = v.evaluate(*model);
    const mtemu::ApiCounts before = mtemu::api_counts_of_this_thread();
    const ValMetrics got = v.evaluate(*model);
    const mtemu::ApiCounts after = mtemu::api_counts_of_this_thread();
    for (const ValMetrics* m : {&first, &got}) {
      EXPECT_EQ(m->rows, 37);
      EXPECT_GT(m->loss, 0.0);
      EXPECT_EQ(m->loss, want.loss);  // bit for bit
      EXPECT_EQ(m->accuracy, want.accuracy);
      if (k.topk > 1) {
        EXPECT_EQ(m->topk_accuracy, want.topk_accuracy);
        EXPECT_GE(m->topk_accuracy, m->accuracy);
      }
    }
    EXPECT_GT(after.launches, before.launches);
    if (k.resident_bytes > 0) {  // the one read
      EXPECT_EQ(after.device_to_host_copies - before.device_to_host_copies, 1u);
      EXPECT_EQ(after.host_syncs - before.host_syncs, 1u);
    } else {  // and the 5 batches' two copies to the device, each waited for
      EXPECT_EQ(after.device_to_host_copies - before.device_to_host_copies, 1u);
      EXPECT_EQ(after.host_syncs - before.host_syncs, 11u);
    }
  }
#endif
}

// An evaluation after the first asks the allocator for nothing (issue 35): the rows stay on the
// device (or, past resident_bytes, are copied into the Validator's kept batch buffers), the
// model's outputs are its layers' slots, the loss's value and scratch the loss's, a 16-bit
// prediction is widened into a kept buffer, and the sums are the Validator's. Regression and
// classification losses, float32 and float16 models, the last batch partial (37 rows by 8) or
// one batch (by 64: the loss kept the last evaluation's prediction, a buffer of the last layer,
// until Loss::release_inputs let go of it at the end of the evaluation).
TEST(CudaHeldOutEvaluation, AnEvaluationAfterTheFirstAllocatesNothing) {
  SKIP_UNLESS_EMULATED_CUDA();
#if MINITRAIN_CUDA_EMULATED
  const Device gpu = Device::cuda(0);
  const TensorDataset values = make_synthetic_regression(37, 4, 2, 13);
  const auto regression_rows = std::make_shared<TensorDataset>(values.features(), values.targets());
  const std::shared_ptr<TensorDataset> class_rows = held_out_classes();
  for (const char* loss : {"mse", "huber", "cross_entropy"}) {
    for (DType precision : {DType::Float32, DType::Float16}) {
      for (int64_t resident_bytes : {int64_t{1} << 20, int64_t{0}}) {
        for (int64_t batch_size : {8, 64}) {
          SCOPED_TRACE(loss);
          SCOPED_TRACE("batch size " + std::to_string(batch_size));
          SCOPED_TRACE(dtype_name(precision));
          SCOPED_TRACE(resident_bytes > 0 ? "resident" : "copied batch by batch");
          const bool classes = std::string(loss) == "cross_entropy";
          Generator gen(17);
          const std::unique_ptr<Sequential> model =
              make_mlp({4, 16, classes ? 3 : 2}, Activation::ReLU, gen, gpu);
          model->set_precision(precision);
          ValidatorOptions o;
          o.loss.name = loss;
          o.batch_size = batch_size;  // 5 batches, the last of 5 rows; or one
          o.device = gpu;
          o.resident_bytes = resident_bytes;
          Validator v(classes ? class_rows : regression_rows, o);
          const ValMetrics first = v.evaluate(*model);
          const int64_t allocations = int64_t(memory_stats(gpu).allocations);
          const uint64_t mallocs = mtemu::api_counts().mallocs;
          const ValMetrics second = v.evaluate(*model);
          EXPECT_EQ(int64_t(memory_stats(gpu).allocations) - allocations, 0);
          EXPECT_EQ(mtemu::api_counts().mallocs - mallocs, 0u);
          EXPECT_GT(first.loss, 0.0);
          EXPECT_EQ(second.loss, first.loss);  // the same model: the same bits
          if (classes) {
            EXPECT_EQ(second.accuracy, first.accuracy);
          }
        }
      }
    }
  }
#endif
}

// A label the held-out evaluation's device check refuses is named at its read, in the words of
// the check that read each batch (its row in the batch, its value, C and ignore_index).
TEST(CudaClassifierStep, AHeldOutLabelCheckedOnTheDeviceIsNamedAtTheRead) {
  SKIP_UNLESS_EMULATED_CUDA();
  const Device gpu = Device::cuda(0);
  const std::shared_ptr<TensorDataset> data = held_out_classes(/*bad_row=*/11);  // batch 2, row 3
  Generator gen(17);
  const std::unique_ptr<Sequential> model = make_mlp({4, 16, 3}, Activation::ReLU, gen, gpu);
  ValidatorOptions o;
  o.loss.name = "cross_entropy";
  o.batch_size = 8;
  o.device = gpu;
  Validator v(data, o);
  const std::string want =
      testing::error_message([&] { evaluation_reading_each_batch(*model, *data, o); });
  EXPECT_THAT(want, ::testing::HasSubstr("row 3 has target 5"));
  EXPECT_EQ(testing::error_message([&] { v.evaluate(*model); }), want);
  // The next evaluation starts afresh: the same error, not a sum over two evaluations.
  EXPECT_EQ(testing::error_message([&] { v.evaluate(*model); }), want);
}

// A classifier trained on cuda:0 through Trainer. TrainerOptions::labels_on_host picks the path
// (false: the labels checked, the divisor formed, the rows and the batches that count counted on
// the device, read with the loss; true: the host reads the labels and logits each step, as before
// issue 35). 48 training rows in batches of 8 (6 steps an epoch), the 37 held-out ones evaluated
// every 3 steps (with `evaluate`).
struct ClassifierSetup {
  LossOptions loss;
  bool labels_on_host = false;
  bool every_row_counts = true;
  std::vector<float> labels;  // the 48 training labels; empty: classes_of(48, 21, 0)'s
  bool fp16 = false;          // float16 mixed precision with dynamic loss scaling
  double clip_grad_norm = 0.0;
  int64_t grad_accum = 1;
  bool cuda_graph = false;
  bool evaluate = true;
  bool record_steps = true;  // on_step (which reads every step's values)
  int64_t steps = 8;
};

struct ClassifierRun {
  std::vector<StepStats> steps;
  std::vector<std::string> weights;            // each parameter's bytes
  std::vector<std::string> state;              // the optimizer's state tensors' names and bytes
  std::map<std::string, std::string> scalars;  // its state scalars (per-parameter steps taken)
  int64_t replays = 0;
};

// The labels of classes_of(48, 21, 0).
std::vector<float> training_labels() {
  return classes_of(48, 21, /*ignore_every=*/0)->targets().to_vector<float>();
}

ClassifierRun train_classifier(const ClassifierSetup& c) {
  const Device gpu = Device::cuda(0);
  Generator gen(5);
  const std::unique_ptr<Sequential> model = make_mlp({4, 16, 16, 3}, Activation::ReLU, gen, gpu);
  if (c.fp16) model->set_precision(DType::Float16);
  OptimizerConfig oc;
  oc.name = "adam";
  oc.lr = 0.01;
  const std::unique_ptr<Optimizer> opt = make_optimizer(oc, model->named_parameters());
  DataLoaderOptions lo;
  lo.batch_size = 8;
  lo.shuffle = false;
  lo.device = gpu;
  std::shared_ptr<TensorDataset> rows = classes_of(48, 21, /*ignore_every=*/0);
  if (!c.labels.empty())
    rows =
        std::make_shared<TensorDataset>(rows->features(), Tensor::from_vector(c.labels, {48, 1}));
  DataLoader loader(rows, lo);
  ValidatorOptions vo;
  vo.loss = c.loss;
  vo.batch_size = 16;
  vo.device = gpu;
  Validator validator(classes_of(37, 9, /*ignore_every=*/7), vo);
  TrainerOptions to;
  to.total_steps = c.steps;
  to.loss = std::shared_ptr<Loss>(make_loss(c.loss));
  to.every_row_counts = c.every_row_counts;
  to.labels_on_host = c.labels_on_host;
  to.clip_grad_norm = c.clip_grad_norm;
  to.grad_accum = c.grad_accum;
  to.cuda_graph = c.cuda_graph;
  if (c.fp16) {
    GradScalerOptions so;
    so.init_scale = 1024;
    so.growth_interval = 2;  // the tracker's steps show: a step that counted nothing holds it
    to.loss_scaling = so;
  }
  if (c.evaluate) {
    to.validate = [&] { return validator.evaluate(*model); };
    to.eval_every = 3;
  }
  ClassifierRun r;
  if (c.record_steps) to.on_step = [&](const StepStats& s) { r.steps.push_back(s); };
  Trainer trainer(*model, *opt, loader, to);
  trainer.run();
  r.replays = trainer.graph_replays();
  for (const auto& [name, p] : model->named_parameters())
    r.weights.push_back(testing::tensor_bytes(p->value.to(Device::cpu())));
  for (const auto& [name, t] : opt->state_tensors())
    r.state.push_back(name + ": " + testing::tensor_bytes(t.to(Device::cpu())));
  r.scalars = opt->state_scalars();
  return r;
}

// Every step's loss, accuracy, nothing_counted, loss scale, skip and grad norm, every held-out
// loss and accuracy, the weights and the optimizer's state: bit for bit (NaN as NaN).
void expect_same_run(const ClassifierRun& got, const ClassifierRun& want) {
  auto same = [](double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; };
  ASSERT_EQ(got.steps.size(), want.steps.size());
  for (std::size_t i = 0; i < want.steps.size(); ++i) {
    SCOPED_TRACE("step " + std::to_string(i + 1));
    const StepStats &d = got.steps[i], &h = want.steps[i];
    EXPECT_PRED2(same, d.loss, h.loss);
    EXPECT_PRED2(same, d.accuracy, h.accuracy);
    EXPECT_EQ(d.nothing_counted, h.nothing_counted);
    EXPECT_PRED2(same, d.loss_scale, h.loss_scale);
    EXPECT_EQ(d.skipped, h.skipped);
    EXPECT_EQ(d.skipped_steps, h.skipped_steps);
    EXPECT_PRED2(same, d.grad_norm, h.grad_norm);
    ASSERT_EQ(d.val.has_value(), h.val.has_value());
    if (d.val) {
      EXPECT_EQ(d.val->loss, h.val->loss);
      EXPECT_EQ(d.val->accuracy, h.val->accuracy);
    }
  }
  EXPECT_EQ(got.weights, want.weights);
  EXPECT_EQ(got.state, want.state);
  // "steps" counts the steps queued on the device path (a skipped one included) and those
  // taken on the host path (docs/gpu_step.md); each parameter's count of steps taken (Adam's
  // bias corrections) is the same.
  std::map<std::string, std::string> g = got.scalars, w = want.scalars;
  g.erase("steps");
  w.erase("steps");
  EXPECT_EQ(g, w);
}

// The classifier's counts on the device are the host's, with and without class weights: every
// step's loss and accuracy, every held-out loss and accuracy, and the weights, bit for bit.
TEST(CudaClassifierStep, CountsAndLossOnTheDeviceEqualTheHostPathsBitForBit) {
  SKIP_UNLESS_EMULATED_CUDA();
  for (const std::vector<double>& weights : {std::vector<double>{}, {0.3, 1.7, 0.9}}) {
    SCOPED_TRACE(weights.empty() ? "unweighted" : "class weights");
    ClassifierSetup c;
    c.loss.name = "cross_entropy";
    c.loss.class_weights = weights;
    c.labels_on_host = true;
    const ClassifierRun host = train_classifier(c);
    c.labels_on_host = false;
    const ClassifierRun device = train_classifier(c);
    ASSERT_EQ(host.steps.size(), 8u);
    int64_t evaluations = 0;
    for (const StepStats& d : device.steps) {
      EXPECT_GT(d.loss, 0.0);
      evaluations += d.val.has_value() ? 1 : 0;
    }
    EXPECT_EQ(evaluations, 3);  // steps 3, 6 (also the epoch's end) and 8 (the last)
    expect_same_run(device, host);
  }
}

// Training labels with batches that count nothing (Note [a batch that counts nothing, on the
// device]): batch 3 (rows 16-23, step 3) all ignore_index, and rows 1, 10 and 42 too; with
// `zero_weight_class` >= 0 batch 5 (rows 32-39, step 5) all of that class. The first step counts,
// so that both paths create the optimizer's state at step 1.
std::vector<float> labels_with_empty_batches(int zero_weight_class) {
  std::vector<float> y = training_labels();
  for (std::size_t i = 16; i < 24; ++i) y[i] = -100.0f;
  for (std::size_t i : {1, 10, 42}) y[i] = -100.0f;
  if (zero_weight_class >= 0)
    for (std::size_t i = 32; i < 40; ++i) y[i] = static_cast<float>(zero_weight_class);
  return y;
}

// Issue 35: rows labelled ignore_index and class weights with a 0 among them no longer take the
// host path. Each configuration trains 10 steps (with one batch a step, two epochs: steps 3 and 9,
// and with a 0 weight step 5, count nothing; with two, steps 2 and 3 each have a batch that counts
// nothing beside one that counts, whose zero gradient keeps the update the host's) with the
// labels on the host and on the device: the same bits.
TEST(CudaClassifierStep, ABatchThatCountsNothingIsDecidedOnTheDeviceWithTheHostPathsBits) {
  SKIP_UNLESS_EMULATED_CUDA();
  struct Config {
    const char* name;
    std::vector<double> weights;
    int zero_weight_class;
    bool fp16;
    double clip;
    int64_t grad_accum;
    int64_t nothing_counted;  // steps of the 10
  };
  const Config configs[] = {
      {"ignore_index rows", {}, -1, false, 0.0, 1, 2},
      {"ignore_index rows, class weights", {0.3, 1.7, 0.9}, -1, false, 0.0, 1, 2},
      {"a class weighted 0", {0.3, 0.0, 0.9}, 1, false, 0.5, 1, 3},
      {"a class weighted 0, fp16", {0.3, 0.0, 0.9}, 1, true, 0.0, 1, 3},
      {"ignore_index rows, fp16, clipping", {}, -1, true, 0.5, 1, 2},
      {"a class weighted 0, 2 batches a step", {0.3, 0.0, 0.9}, 1, false, 0.0, 2, 0},
      {"a class weighted 0, 2 batches a step, fp16", {0.3, 0.0, 0.9}, 1, true, 0.5, 2, 0},
  };
  for (const Config& k : configs) {
    SCOPED_TRACE(k.name);
    ClassifierSetup c;
    c.loss.name = "cross_entropy";
    c.loss.class_weights = k.weights;
    c.labels = labels_with_empty_batches(k.zero_weight_class);
    c.every_row_counts = false;
    c.fp16 = k.fp16;
    c.clip_grad_norm = k.clip;
    c.grad_accum = k.grad_accum;
    c.steps = 10;
    c.labels_on_host = true;
    const ClassifierRun host = train_classifier(c);
    c.labels_on_host = false;
    const ClassifierRun device = train_classifier(c);
    int64_t nothing = 0;
    for (const StepStats& h : host.steps) nothing += h.nothing_counted ? 1 : 0;
    EXPECT_EQ(nothing, k.nothing_counted);
    expect_same_run(device, host);
    if (k.grad_accum != 1) continue;  // a graph runs one batch a step
    // And replayed as a CUDA graph (after 2 eager steps): the same bits again.
    c.cuda_graph = true;
    const ClassifierRun replayed = train_classifier(c);
    EXPECT_EQ(replayed.replays, 8);
    expect_same_run(replayed, host);
  }
}

#if MINITRAIN_CUDA_EMULATED
// The counts of steps first+1 .. first+n of a classifier run (no evaluation, no per-step callback:
// the values are read at the last step only), each as a run of k+1 steps minus one of k.
std::vector<StepCounts> classifier_step_counts(ClassifierSetup c, int64_t first, int64_t n) {
  c.evaluate = false;
  c.record_steps = false;
  auto run = [&](int64_t steps) {
    c.steps = steps;
    empty_cache(Device::cuda(0));
    const StepCounts before = counts_now();
    train_classifier(c);
    return counts_now() - before;
  };
  std::vector<StepCounts> steps;
  StepCounts prev = run(first);
  for (int64_t k = first + 1; k <= first + n; ++k) {
    const StepCounts now = run(k);
    steps.push_back(now - prev);
    prev = now;
  }
  return steps;
}
#endif

// Issue 35: a classifier whose batches may count nothing (rows labelled ignore_index, a class
// weighted 0, under fp16 too) reads nothing on the host inside a step: steps 4 to 9 (step 5 of a
// class weighted 0 counts nothing) make no device-to-host copy and no blocking call. The host
// path's columns (labels_on_host, the path before) are printed beside them.
TEST(CudaStepCounts, AClassifierThatMayCountNothingReadsNothingInsideAStep) {
  SKIP_UNLESS_EMULATED_CUDA();
#if MINITRAIN_CUDA_EMULATED
  struct Config {
    const char* name;
    std::vector<double> weights;
    int zero_weight_class;
    bool fp16;
  };
  const Config configs[] = {{"ignore_index rows", {}, -1, false},
                            {"a class weighted 0", {0.3, 0.0, 0.9}, 1, false},
                            {"ignore_index rows, fp16", {}, -1, true}};
  std::vector<Column> columns;  // names only: the runs are Trainer's, not run_training's
  std::vector<std::vector<StepCounts>> steps;
  std::vector<std::string> names;
  for (const Config& k : configs) {
    for (bool on_host : {true, false}) {
      ClassifierSetup c;
      c.loss.name = "cross_entropy";
      c.loss.class_weights = k.weights;
      c.labels = labels_with_empty_batches(k.zero_weight_class);
      c.every_row_counts = false;
      c.fp16 = k.fp16;
      c.labels_on_host = on_host;
      names.push_back(std::string(k.name) + (on_host ? " (host path)" : " (device)"));
      steps.push_back(classifier_step_counts(c, 3, 6));
    }
  }
  for (const std::string& n : names) columns.push_back({n.c_str(), TrainConfig{}});
  const std::string table = markdown_table(columns, steps);
  std::cout << table;
  RecordProperty("table", table);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    SCOPED_TRACE(names[i]);
    for (std::size_t k = 0; k < steps[i].size(); ++k) {
      const StepCounts& s = steps[i][k];
      EXPECT_GT(s.launches, 8) << "step " << k + 4;  // the counting sees the step
      if (i % 2 == 0) {  // the host path reads the labels (and logits) every step
        EXPECT_GT(s.loop_d2h_copies, 0) << "step " << k + 4;
        continue;
      }
      EXPECT_EQ(s.d2h_copies, 0) << "step " << k + 4;
      EXPECT_EQ(s.loop_d2h_copies, 0) << "step " << k + 4;
      EXPECT_EQ(s.loop_host_syncs, 0) << "step " << k + 4;
      EXPECT_EQ(s.frees, 0) << "step " << k + 4;
    }
  }
#endif
}

// A label the device's check refuses is named when the step's totals are read, with the host
// check's words: its row and value, C and ignore_index.
TEST(CudaClassifierStep, ABadLabelCheckedOnTheDeviceIsNamedWhenRead) {
  SKIP_UNLESS_EMULATED_CUDA();
  const Device gpu = Device::cuda(0);
  DeviceTotals totals(gpu);
  CrossEntropySpec spec;
  Tensor logits = Tensor::zeros({4, 3}, DType::Float32, gpu);
  for (const std::vector<float>& y : {std::vector<float>{0, 2, 1, 0}, {1, 0, 5, 2}}) {
    totals.begin_step(1);
    spec.target_check = totals.target_check();
    Tensor classes = Tensor::from_vector(y, {4}).to(gpu);
    Tensor counts = totals.class_counts();
    totals.add_loss(cross_entropy_forward(logits, classes, spec));  // nothing read here
    cross_entropy_count_correct(counts, logits, classes, -100);
  }
  const std::vector<StepTotals> t = totals.read();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].target_check[0], 0.0);
  EXPECT_EQ(t[0].correct, 2.0);  // all ties: class 0 is every row's argmax
  EXPECT_EQ(t[0].counted, 4.0);
  EXPECT_TRUE(std::isnan(t[1].loss));
  testing::expect_error<ValueError>(
      [&] { throw_bad_cross_entropy_target("cross_entropy_forward", t[1].target_check, 3, -100); },
      {"row 2", "has target 5", "C = 3", "ignore_index (-100)"});
}

// Read late, the same numbers: a log line for 3 steps on cuda:0 (their losses and norms read
// together at its step) holds the means of the lines of a run that reads every step.
TEST(CudaStepCounts, LossesReadTogetherAreThoseReadStepByStep) {
  SKIP_UNLESS_EMULATED_CUDA();
  ScratchDir dir;
  TrainConfig each = regression(dir);
  each.clip_grad_norm = 0.5;
  each.steps = 7;
  each.epochs.reset();
  each.log = dir.path("each.jsonl");
  TrainConfig grouped = each;
  grouped.log = dir.path("grouped.jsonl");
  grouped.log_every = 3;
  std::ostringstream info, progress;
  run_training(each, info, progress);
  run_training(grouped, info, progress);
  const std::vector<nlohmann::json> one = log_lines(each.log), three = log_lines(grouped.log);
  ASSERT_EQ(one.size(), 7u);
  ASSERT_EQ(three.size(), 3u);  // steps 1-3, 4-6, 7
  for (std::size_t line = 0; line < three.size(); ++line) {
    SCOPED_TRACE("line " + std::to_string(line));
    double loss = 0, norm = 0;
    const std::size_t first = line * 3, last = std::min<std::size_t>(first + 3, one.size());
    for (std::size_t i = first; i < last; ++i) {
      loss += one[i]["loss"].get<double>();
      norm += one[i]["grad_norm"].get<double>();
    }
    const double n = static_cast<double>(last - first);
    EXPECT_EQ(three[line]["step"].get<int64_t>(), static_cast<int64_t>(last));
    EXPECT_GT(three[line]["loss"].get<double>(), 0.0);
    EXPECT_EQ(three[line]["loss"].get<double>(), loss / n);
    EXPECT_EQ(three[line]["grad_norm"].get<double>(), norm / n);
  }
}

// The divergence check moves to the read (docs/gpu_step.md): a run whose loss becomes infinite
// stops at the same step, named in the same error, whether it reads every step or every 100.
TEST(CudaStepCounts, ANonFiniteLossReadLateStopsAtTheSameStep) {
  SKIP_UNLESS_EMULATED_CUDA();
  ScratchDir dir;
  std::vector<std::string> messages;
  for (const int64_t every : {int64_t{1}, int64_t{100}}) {
    TrainConfig c = regression(dir);
    c.optimizer = "sgd";
    c.lr = 1e4;
    c.steps = 30;
    c.epochs.reset();
    c.log = dir.path("log" + std::to_string(every) + ".jsonl");
    c.log_every = every;
    std::ostringstream info, progress;
    try {
      run_training(c, info, progress);
    } catch (const Error& e) {
      messages.emplace_back(e.what());
    }
  }
  ASSERT_EQ(messages.size(), 2u) << "a run did not stop";
  EXPECT_NE(messages[0].find("the loss is"), std::string::npos) << messages[0];
  // "step N: the loss is ..." up to the lr, alike
  EXPECT_EQ(messages[0].substr(0, messages[0].find(';')),
            messages[1].substr(0, messages[1].find(';')));
}

// Clipping decides on the device (issue 35): clip_grad_norm_deferred_ queues the norm and the
// scale without a copy to the host or a wait, and gives the host path's bits (the CPU twin's, and
// clip_grad_norm_, which reads the norm first) whether it scales, leaves alone or spreads a NaN.
TEST(CudaStepCounts, ClippingScalesOnTheDeviceWithoutAHostRead) {
  SKIP_UNLESS_EMULATED_CUDA();
#if MINITRAIN_CUDA_EMULATED
  const std::vector<float> a{0.5f, -1.25f, 3.0f, 0.125f, -2.0f, 1.0f};
  const std::vector<float> b{4.0f, -0.75f, 0.3f};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    const char* name;
    double max_norm;
    float b0;
  };
  for (const Case& k : {Case{"scales", 1.0, b[0]}, Case{"leaves alone", 100.0, b[0]},
                        Case{"spreads a NaN", 1.0, nan}}) {
    SCOPED_TRACE(k.name);
    std::vector<float> bk = b;
    bk[0] = k.b0;
    // The same gradients on the CPU (the host path) and on cuda:0 (the deferred one).
    Parameter cpu_a, cpu_b, gpu_a, gpu_b;
    cpu_a.grad = Tensor::from_vector(a, {2, 3});
    cpu_b.grad = Tensor::from_vector(bk, {3});
    gpu_a.grad = cpu_a.grad.to(Device::cuda(0));
    gpu_b.grad = cpu_b.grad.to(Device::cuda(0));
    const double want = clip_grad_norm_({{"a", &cpu_a}, {"b", &cpu_b}}, k.max_norm);

    const mtemu::ApiCounts before = mtemu::api_counts_of_this_thread();
    const PendingGradNorm pending =
        clip_grad_norm_deferred_({{"a", &gpu_a}, {"b", &gpu_b}}, k.max_norm);
    const mtemu::ApiCounts after = mtemu::api_counts_of_this_thread();
    EXPECT_EQ(after.device_to_host_copies, before.device_to_host_copies);
    EXPECT_EQ(after.host_syncs, before.host_syncs);
    EXPECT_GT(after.launches, before.launches);

    const double got = pending.read();
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got));
    } else {
      EXPECT_EQ(got, want);
    }
    EXPECT_EQ(testing::tensor_bytes(gpu_a.grad.to(Device::cpu())),
              testing::tensor_bytes(cpu_a.grad));
    EXPECT_EQ(testing::tensor_bytes(gpu_b.grad.to(Device::cpu())),
              testing::tensor_bytes(cpu_b.grad));
  }
#endif
}

// The GradScaler's skip on the device (issue 35): the optimizer reads the inf flag where
// unscale_queued left it and does nothing when it is set, and the scale backs off (and grows)
// there, as torch.cuda.amp.GradScaler with a fused optimizer (found_inf). Four steps with
// init_scale 4, growth_interval 2: step 1 overflows (skipped, scale 4 -> 2), steps 2 and 3 are
// finite (the second grows it back to 4), step 4 has a NaN (skipped, 4 -> 2).
//
// torch by hand for SGD(lr=0.5, momentum=0.5, dampening=0.5), p = [1, 1], every number exact in
// float32: step 1 skipped, so no momentum buffer; step 2 (g = [0.5, 0.25]) is the buffer's first
// step, buf = g (no dampening), p = [0.75, 0.875]; step 3 (g = [0.25, 0.5]): buf = 0.5 buf + 0.5 g
// = [0.375, 0.375], p = [0.5625, 0.6875]; step 4 skipped.
struct SkipRun {
  std::vector<float> weights;
  std::vector<double> record;  // per step: the scale used, the flag, the scale and tracker after
  std::vector<std::pair<std::string, Tensor>> state;
  std::map<std::string, std::string> scalars;
};

// The true (unscaled) gradients of steps 1-4; the scaled ones are these times the step's scale.
const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const std::vector<std::vector<float>> kSkipGrads = {
    {kInf, 2.0f}, {0.5f, 0.25f}, {0.25f, 0.5f}, {kNaN, 0.0f}};

// lr 0.5 (SGD and RMSprop: momentum 0.5; SGD: dampening 0.5) over the one parameter "w".
std::unique_ptr<Optimizer> skip_test_optimizer(const std::string& optimizer, Parameter& p) {
  OptimizerConfig oc;
  oc.name = optimizer;
  oc.lr = 0.5;
  if (optimizer == "sgd" || optimizer == "rmsprop") oc.momentum = 0.5;
  if (optimizer == "sgd") oc.dampening = 0.5;
  return make_optimizer(oc, {{"w", &p}});
}

GradScaler skip_test_scaler() {
  GradScalerOptions so;
  so.init_scale = 4.0;
  so.growth_interval = 2;
  return GradScaler(so);
}

SkipRun run_skipping(const std::string& optimizer, Device device) {
  Parameter p;
  p.value = Tensor::from_vector(std::vector<float>{1.0f, 1.0f}, {2}, device);
  auto opt = skip_test_optimizer(optimizer, p);
  GradScaler scaler = skip_test_scaler();
  scaler.keep_on_device(device);
  opt->set_found_inf(scaler.found_inf());
  Tensor record = Tensor::zeros({4 * kAmpRecordSize}, DType::Float64, device);
  for (std::size_t step = 0; step < kSkipGrads.size(); ++step) {
    p.grad = Tensor::from_vector(kSkipGrads[step], {2}, device);
    scaler.scale_loss_gradient(p.grad, 1.0);  // as backward would give them
    scaler.unscale_queued({{"w", &p}});
    opt->step();
    Tensor slot = record.narrow(static_cast<int64_t>(step) * kAmpRecordSize, kAmpRecordSize);
    scaler.update_queued(&slot);
  }
  return {p.value.to(Device::cpu()).to_vector<float>(),
          record.to(Device::cpu()).to_vector<double>(), opt->state_tensors(), opt->state_scalars()};
}

// What torch's non-fused path does: unscale, read the flag, step only when finite.
std::vector<float> run_reading(const std::string& optimizer) {
  Parameter p;
  p.value = Tensor::from_vector(std::vector<float>{1.0f, 1.0f}, {2});
  auto opt = skip_test_optimizer(optimizer, p);
  GradScaler scaler = skip_test_scaler();
  for (const std::vector<float>& g : kSkipGrads) {
    p.grad = Tensor::from_vector(g, {2});
    scaler.scale_loss_gradient(p.grad, 1.0);
    const bool finite = scaler.unscale({{"w", &p}});
    if (finite) opt->step();
    scaler.update(!finite);
  }
  return p.value.to_vector<float>();
}

TEST(CudaStepCounts, AnInfGradientSkipsTheStepAndBacksTheScaleOffAsTorch) {
  if (cuda_device_count() < 1) GTEST_SKIP() << "needs a CUDA device: " << cuda_unavailable_reason();
  // torch's scales, flags and trackers, step by step (GradScaler._amp_update_scale_).
  const std::vector<double> want_record = {4, 1, 2, 0,   // overflow: backoff, tracker restarts
                                           2, 0, 2, 1,   // finite: tracker 1
                                           2, 0, 4, 0,   // finite: tracker 2 = interval, grows
                                           4, 1, 2, 0};  // NaN: backoff
  const SkipRun sgd_cpu = run_skipping("sgd", Device::cpu());
  EXPECT_EQ(sgd_cpu.record, want_record);
  EXPECT_EQ(sgd_cpu.weights, (std::vector<float>{0.5625f, 0.6875f}));  // torch, by hand above
  EXPECT_EQ(run_reading("sgd"), sgd_cpu.weights);  // the host's decision, the same
  ASSERT_EQ(sgd_cpu.state.size(), 1u);
  EXPECT_EQ(sgd_cpu.state[0].second.to_vector<float>(), (std::vector<float>{0.375f, 0.375f}));

  for (const char* name : {"sgd", "adam", "adamw", "rmsprop"}) {
    SCOPED_TRACE(name);
    const SkipRun cpu = run_skipping(name, Device::cpu());
    const SkipRun gpu = run_skipping(name, Device::cuda(0));
    EXPECT_EQ(gpu.record, want_record);
    // The device's decision: the bits of the host reading the flag and not stepping (for Adam,
    // the skipped steps do not advance the bias corrections: t = 1, 2 at steps 2, 3).
    EXPECT_EQ(cpu.weights, run_reading(name));
    EXPECT_EQ(testing::tensor_bytes(Tensor::from_vector(gpu.weights, {2})),
              testing::tensor_bytes(Tensor::from_vector(cpu.weights, {2})));
    EXPECT_NE(cpu.weights, (std::vector<float>{1.0f, 1.0f}));  // the finite steps were taken
    // Adam's checkpointed step count is the steps taken (2 of 4), read back from the device.
    if (std::string(name) != "sgd" && std::string(name) != "rmsprop") {
      EXPECT_EQ(cpu.scalars.at("w.step"), "2");
      EXPECT_EQ(gpu.scalars.at("w.step"), "2");
    }
  }
}

// What skipping on the device cannot serve is refused by name, not run wrong.
TEST(CudaStepCounts, SkippingOnTheDeviceRefusesWhatItCannotServe) {
  if (cuda_device_count() < 1) GTEST_SKIP() << "needs a CUDA device: " << cuda_unavailable_reason();
  const Device gpu = Device::cuda(0);
  GradScaler scaler;
  scaler.keep_on_device(gpu);
  Parameter p;
  p.value = Tensor::zeros({2}, DType::Float32, gpu);
  p.grad = Tensor::zeros({2}, DType::Float32, gpu);
  EXPECT_THAT(testing::error_message([&] {
                scaler.unscale({{"w", &p}});
              }),
              ::testing::HasSubstr("use unscale_queued"));
  EXPECT_THAT(testing::error_message([&] { scaler.update(false); }),
              ::testing::HasSubstr("use update_queued"));
  // A capturable step skips on the flag too (a float16 step as one CUDA graph): no refusal there.
  Adam capturable({{"w", &p}}, AdamOptions{});
  capturable.set_capturable(true);
  capturable.set_found_inf(scaler.found_inf());
  EXPECT_EQ(capturable.found_inf().raw_data(), scaler.found_inf().raw_data());
  // The flag on cuda:0, a parameter on the CPU: the step names it and changes nothing.
  Parameter host;
  host.value = Tensor::zeros({2});
  host.grad = Tensor::from_vector(std::vector<float>{1.0f, 1.0f}, {2});
  Adam adam({{"w", &host}}, AdamOptions{});
  adam.set_found_inf(scaler.found_inf());
  EXPECT_THAT(testing::error_message([&] { adam.step(); }), ::testing::HasSubstr("'w' is on cpu"));
  // Turned off, the counts come back to the host and the step is the plain one.
  adam.set_found_inf(Tensor());
  adam.step();
  EXPECT_EQ(adam.state_scalars().at("w.step"), "1");
}

// Note [gpu step reference weights]: tests/fixtures/gpu_step/ holds the weights that 9 steps of
// each configuration saved on the emulated GPUs with the step as it was before issue 35 (a loss
// read and a device synchronize every step). Changes that move host reads out of the step must
// keep them bit for bit: they change when the host looks, never what the device computes. The
// kernels reduce without float atomics, so their results do not depend on the order the emulator
// runs blocks in (the same bits under other MINITRAIN_EMU_SEED values) nor on the machine.
// MINITRAIN_WRITE_GPU_STEP_REFERENCE=1 rewrites them (only for a change meant to alter the bits).
TEST(CudaStepCounts, EveryConfigurationSavesItsReferenceWeightsBitForBit) {
  SKIP_UNLESS_EMULATED_CUDA();
  ScratchDir dir;
  std::vector<std::pair<std::string, TrainConfig>> runs{{"mse_adam", regression(dir)},
                                                        {"cross_entropy_val", classifier(dir)},
                                                        {"clip", regression(dir)},
                                                        {"fp16", regression(dir)},
                                                        {"fp16_clip_log5", regression(dir)}};
  runs[2].second.clip_grad_norm = 1.0;
  runs[3].second.precision = "fp16";
  runs[4].second.precision = "fp16";
  runs[4].second.clip_grad_norm = 0.5;
  runs[4].second.log_every = 5;
  runs[4].second.log = dir.path("log.jsonl");
  const char* write = std::getenv("MINITRAIN_WRITE_GPU_STEP_REFERENCE");
  const bool rewrite = write != nullptr && std::string(write) == "1";
  for (auto& [name, c] : runs) {
    SCOPED_TRACE(name);
    c.steps = 9;
    c.epochs.reset();
    c.save = dir.path(name + ".safetensors");
    std::ostringstream info, progress;
    run_training(c, info, progress);
    const std::string reference = testing::test_data_dir() + "/gpu_step/" + name + ".safetensors";
    if (rewrite) {
      std::filesystem::create_directories(testing::test_data_dir() + "/gpu_step");
      std::filesystem::copy_file(c.save, reference,
                                 std::filesystem::copy_options::overwrite_existing);
      continue;
    }
    testing::expect_same_weights(c.save, reference);
  }
  if (rewrite) GTEST_SKIP() << "wrote the reference weights into " << testing::test_data_dir();
}

}  // namespace
}  // namespace minitrain
