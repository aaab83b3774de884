#pragma once
// The files of one run, checked together before the first step: no output may be another output
// or an input under another spelling (`./w.safetensors`, `d/../w`, a symlink, a hard link), and a
// checkpoint directory or metrics log belongs to one run at a time (RunLock).

#include <string>
#include <vector>

namespace minitrain {

/// A file a command reads or writes, by the flag that names it ("--log", "--data").
struct RunFile {
  std::string flag;
  std::string path;
  bool output = false;
};

/// IoError when an output is the same file as another output or an input: the same resolved path
/// (std::filesystem::weakly_canonical, so "." and ".." and symlinked directories resolve), or,
/// where both exist, the same device and inode (a hard link). The message names both flags and
/// paths and the resolved file. Entries with an empty path are skipped; inputs are not compared
/// with each other (one file may well be read twice). Writes nothing.
void check_run_files(const std::vector<RunFile>& files);

/// An exclusive claim on a run's files for as long as it lives: flock(2) on a lock file, which the
/// kernel releases when the process ends however it ends (a crashed or killed run leaves the file,
/// never the lock). The lock file holds the holder's pid, for the message of the run it refuses,
/// and is removed when the claim ends. Move-only.
class RunLock {
 public:
  RunLock() = default;
  /// Claims `lock_path` (created if missing; its directory must exist) for the files that `what`
  /// names ("--checkpoint-dir runs/a"). IoError naming `what`, the holder's pid and the lock file
  /// when another open file description holds it (another process, or another run in this one).
  RunLock(const std::string& what, const std::string& lock_path);
  RunLock(RunLock&& other) noexcept;
  RunLock& operator=(RunLock&& other) noexcept;
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  ~RunLock();

 private:
  void release() noexcept;
  std::string path_;
  int fd_ = -1;
};

/// The lock file of a checkpoint directory: DIR/.minitrain.lock.
std::string checkpoint_dir_lock_path(const std::string& dir);
/// The lock file of a file written by one run (a metrics log): .NAME.lock beside it.
std::string file_lock_path(const std::string& path);

}  // namespace minitrain
