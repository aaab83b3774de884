#pragma once
// `minitrain train` as the tests call it: run_training on the CPU without a progress display,
// the info lines kept for checking; the small runs that several tests train and vary; and what
// they check afterwards (the log's lines, the saved weights bit for bit).

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/allocator.h"
#include "core/device.h"
#include "core/npy.h"
#include "core/safetensors.h"
#include "data/readers.h"
#include "tests/core/io_test_util.h"
#include "tests/support/test_util.h"
#include "train/run_training.h"

#if MINITRAIN_CUDA_EMULATED
#include "cuda_emu/api_counts.h"
#endif

/// Skips a test on a machine without a CUDA device (or driver), saying why.
#define SKIP_UNLESS_CUDA() \
  if (cuda_device_count() < 1) GTEST_SKIP() << "needs a CUDA device: " << cuda_unavailable_reason()

namespace minitrain::testing {

/// 45 rows of the synthetic regression in batches of 10 (a partial last batch of 5), 3 epochs of
/// Adam (lr 0.01, seed 3) on mlp:4,16,16,2: 15 steps on `device`, saved to `save` ("": not
/// saved), without a progress display. A test changes what it is about (shuffle, model, ...).
inline TrainConfig small_run(const std::string& device, const std::string& save) {
  TrainConfig c;
  c.model = "mlp:4,16,16,2";
  c.data = "synthetic:45";
  c.batch_size = 10;
  c.epochs = 3;
  c.optimizer = "adam";
  c.lr = 0.01;
  c.seed = 3;
  c.device = device;
  c.progress = "none";
  c.save = save;
  return c;
}

/// The step that the step-counting tests count: `model` (mlp:4,...,1) on 64 rows of the synthetic
/// regression in batches of 8, Adam (lr 0.01, seed 5) on cuda, no progress display, one epoch.
inline TrainConfig step_run(const std::string& model) {
  TrainConfig c;
  c.model = model;
  c.data = "synthetic:64";
  c.batch_size = 8;
  c.optimizer = "adam";
  c.lr = 0.01;
  c.seed = 5;
  c.device = "cuda";
  c.progress = "none";
  return c;
}

inline TrainReport train(TrainConfig c, std::string* info_text = nullptr) {
  c.progress = "none";
  c.device = "cpu";
  std::ostringstream info, progress;
  TrainReport r = run_training(c, info, progress);
  if (info_text != nullptr) *info_text = info.str();
  return r;
}

/// What a run on its own device printed, and (on the emulated GPUs) its kernel launches.
struct DeviceRun {
  std::string info;
  int64_t launches = -1;  ///< of the whole run; -1 where they are not counted (a real GPU, CPU)
};

/// run_training(c) as configured (device included), from an empty allocator cache on a GPU so
/// that each run starts alike.
inline DeviceRun run_on_device(const TrainConfig& c) {
  std::ostringstream info, progress;
  if (c.device != "cpu") empty_cache(Device::cuda(0));
  DeviceRun r;
#if MINITRAIN_CUDA_EMULATED
  const uint64_t before = mtemu::api_counts().launches;
#endif
  run_training(c, info, progress);
#if MINITRAIN_CUDA_EMULATED
  r.launches = static_cast<int64_t>(mtemu::api_counts().launches - before);
#endif
  r.info = info.str();
  return r;
}

/// The JSON objects of a metrics log (--log), one a line.
inline std::vector<nlohmann::json> log_lines(const std::string& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

/// The saved tensors of two weights files, bit for bit (their metadata may differ: it records
/// the config), and not all zero.
inline void expect_same_weights(const std::string& got_path, const std::string& want_path) {
  const SafetensorsFile got = read_safetensors(got_path), want = read_safetensors(want_path);
  ASSERT_EQ(got.tensors.size(), want.tensors.size());
  for (std::size_t i = 0; i < got.tensors.size(); ++i) {
    EXPECT_EQ(got.tensors[i].first, want.tensors[i].first);
    ASSERT_GT(host_max_abs(got.tensors[i].second), 0.0);  // not silently zero
    EXPECT_EQ(tensor_bytes(got.tensors[i].second), tensor_bytes(want.tensors[i].second))
        << got.tensors[i].first << " of " << got_path << " differs from " << want_path;
  }
}

/// n rows of 4 features from the synthetic regression (`seed`) and the class of each among 3:
/// the argmax of its 3 targets (the first of ties), so there is something to learn.
struct ClassRows {
  Tensor features;             ///< [n, 4]
  std::vector<double> labels;  ///< n class indices 0, 1 or 2
};
inline ClassRows three_class_rows(int64_t n, uint64_t seed) {
  const TensorDataset rows = make_synthetic_regression(n, 4, 3, seed);
  const std::vector<float> y = rows.targets().to_vector<float>();
  ClassRows r{rows.features(), {}};
  for (std::size_t i = 0; i < y.size(); i += 3)
    r.labels.push_back(
        static_cast<double>(std::max_element(y.begin() + i, y.begin() + i + 3) - (y.begin() + i)));
  return r;
}

/// `c` made a classifier of 64 three_class_rows (seed 21) written to dir's x.npy and y.npy
/// (labels as float64 [64]): model mlp:4,16,16,3, cross_entropy, a quarter held out.
inline TrainConfig three_class_run(TrainConfig c, const ScratchDir& dir) {
  const ClassRows rows = three_class_rows(64, 21);
  write_npy(dir.path("x.npy"), rows.features);
  write_npy(dir.path("y.npy"), Tensor::from_vector(rows.labels, {64}));
  c.model = "mlp:4,16,16,3";
  c.data = dir.path("x.npy");
  c.targets = dir.path("y.npy");
  c.loss = "cross_entropy";
  c.val_split = 0.25;
  return c;
}

}  // namespace minitrain::testing
