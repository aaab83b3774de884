#pragma once
// `minitrain train` as the tests call it: run_training on the CPU without a progress display,
// the info lines kept for checking; and the small run that several tests train and vary.

#include <sstream>
#include <string>

#include "train/run_training.h"

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

inline TrainReport train(TrainConfig c, std::string* info_text = nullptr) {
  c.progress = "none";
  c.device = "cpu";
  std::ostringstream info, progress;
  TrainReport r = run_training(c, info, progress);
  if (info_text != nullptr) *info_text = info.str();
  return r;
}

}  // namespace minitrain::testing
