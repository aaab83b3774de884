// The decision reads only whether the checkpoint file exists: every rank of a DDP job sees the
// same directory, and no rank of the failed run is left to write it, so all ranks decide alike.
// The checks of --resume itself (the settings of the original run) follow in run_training.

#include "train/restart_resume.h"

#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "parallel/launch/restart_policy.h"
#include "train/checkpoint.h"

namespace minitrain {

int restart_count_from_environment() {
  const char* value = std::getenv(kRestartCountVariable);
  if (value == nullptr || *value == '\0') return 0;
  char* end = nullptr;
  const long n = std::strtol(value, &end, 10);
  return *end == '\0' && n >= 0 && n <= 1000000 ? static_cast<int>(n) : 0;
}

RestartResume resume_after_restart(TrainConfig& c, int restart) {
  RestartResume r;
  if (restart < 1 || c.resume) return r;
  if (c.checkpoint_dir.empty()) {
    r.warning = detail::concat("restart ", restart,
                               " of a run without --checkpoint-dir starts from scratch; give "
                               "--checkpoint-dir D --checkpoint-every N to resume instead");
    return r;
  }
  const std::string path = checkpoint_path(c.checkpoint_dir);
  if (std::filesystem::exists(path)) {
    c.resume = true;
    r.note = detail::concat("restart ", restart, ": resuming from ", path);
  } else {
    r.note = detail::concat("restart ", restart, ": no checkpoint in ", c.checkpoint_dir,
                            " yet; starting afresh");
  }
  return r;
}

}  // namespace minitrain
