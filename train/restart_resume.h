#pragma once
// A restarted run resumes by itself. `minitrain launch --max-restarts` and `minitrain supervise`
// start restart k of a failed job with MINITRAIN_RESTART_COUNT=k; `minitrain train` then acts as
// if --resume were given when its --checkpoint-dir holds a checkpoint, and starts afresh when it
// does not (the job died before the first one). A run with no restart count, or count 0, is
// untouched.

#include <string>

#include "train/config.h"

namespace minitrain {

/// MINITRAIN_RESTART_COUNT as a number; 0 when unset, empty or not a non-negative integer.
int restart_count_from_environment();

/// What a restart means for this run, decided before anything is read or written.
struct RestartResume {
  std::string note;     ///< for the first output line: "restart 1: resuming from D/checkpoint..."
  std::string warning;  ///< without --checkpoint-dir: the restart starts from scratch
};

/// For `restart` >= 1, sets config.resume when config.checkpoint_dir holds a checkpoint and says
/// what it did; nothing for restart 0 or a run that already has --resume.
RestartResume resume_after_restart(TrainConfig& config, int restart);

}  // namespace minitrain
