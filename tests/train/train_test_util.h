#pragma once
// `minitrain train` as the tests call it: run_training on the CPU without a progress display,
// the info lines kept for checking.

#include <sstream>
#include <string>

#include "train/run_training.h"

namespace minitrain::testing {

inline TrainReport train(TrainConfig c, std::string* info_text = nullptr) {
  c.progress = "none";
  c.device = "cpu";
  std::ostringstream info, progress;
  TrainReport r = run_training(c, info, progress);
  if (info_text != nullptr) *info_text = info.str();
  return r;
}

}  // namespace minitrain::testing
