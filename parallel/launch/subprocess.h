#pragma once
// Child processes for `minitrain launch` (one per rank) and `minitrain pipelines` (one per run):
// start with extra environment variables, read their output line by line without blocking, see
// whether they ended and how, signal them, stop them. POSIX (fork/exec, process groups).
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace minitrain {

/// How a child ended: an exit code, or the signal that killed it.
struct ExitStatus {
  int code = 0;    ///< exit code when signal == 0
  int signal = 0;  ///< the terminating signal, 0 when the child exited
  bool ok() const noexcept { return signal == 0 && code == 0; }
  std::string str() const;  ///< "exit status 3", "signal 9 (Killed)"
};

struct SubprocessOptions {
  std::vector<std::string> argv;  ///< argv[0] looked up in PATH when it has no '/'
  std::vector<std::pair<std::string, std::string>>
      env;                  ///< set on top of this process's environment
  std::string working_dir;  ///< "": this process's
  /// "": stdout and stderr together through a pipe (read_lines); else both appended to this file.
  std::string output_path;
  // The child's standard input is /dev/null.
  /// The child leads a process group of its own, so signal() reaches the processes it starts too.
  bool new_process_group = true;
  /// The kernel kills the child (SIGKILL) when this process, or rather the thread that started the
  /// child, ends, however it ends; with new_process_group, a helper process then kills the rest of
  /// the child's group too (Note [child lifetime] in subprocess.cpp).
  bool die_with_parent = true;
  /// Added to the child's CPU niceness (0..19 higher is gentler): a less urgent run yields the
  /// cores to others. Lowering it (< 0) needs privileges and is then silently not done.
  int nice = 0;
};

/// A running (or ended) child. Move-only. The destructor kills (SIGKILL) the child if it still runs
/// and, with new_process_group, everything else in its group, then reaps it. An ended child stays
/// a zombie until then, so that its group id cannot be reused while this object may signal it.
class Subprocess {
 public:
  /// IoError when the program cannot be started, with the reason ("cannot run 'x': No such file or
  /// directory").
  static Subprocess start(const SubprocessOptions& options);
  Subprocess(Subprocess&& o) noexcept;
  Subprocess& operator=(Subprocess&& o) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  ~Subprocess();

  int pid() const noexcept { return pid_; }
  /// The pipe of captured output (for poll()), -1 when output goes to a file or the pipe is closed.
  int output_fd() const noexcept { return out_fd_; }
  /// Complete lines (without '\n') read so far, without blocking; a last line without '\n' comes
  /// once the child has closed its output.
  std::vector<std::string> read_lines();
  /// The exit status when the child has ended, without blocking (the destructor reaps it).
  std::optional<ExitStatus> poll();
  /// Blocks until the child ends, or `timeout` passes (nullopt then).
  std::optional<ExitStatus> wait_for(std::chrono::milliseconds timeout);
  ExitStatus wait();
  /// Sends `sig` to the child's process group with new_process_group, also after the child ended
  /// (what it left running); else to the child, nothing once it ended.
  void signal(int sig);
  /// SIGTERM (and SIGCONT, for a stopped child), then SIGKILL if it still runs after `grace`; with
  /// new_process_group, SIGKILL to the rest of its group once it ended. Returns how the child
  /// ended.
  ExitStatus terminate(std::chrono::milliseconds grace);

 private:
  Subprocess() = default;
  void forget_group();  // the group id can no longer be trusted: signal the child alone from now on

  int pid_ = -1;
  int out_fd_ = -1;
  bool group_ = false;
  bool reaped_ = false;  // the group reaper watches our group (Note [child lifetime])
  std::string partial_;  // output after the last '\n'
  std::optional<ExitStatus> status_;
};

/// The signal's name: "SIGKILL", "SIGTERM", ...; "signal N" for one without a standard name.
std::string signal_name(int sig);

/// This program's own path (/proc/self/exe), to start copies of minitrain.
std::string self_executable();
/// Resident set size of process `pid` in bytes (/proc/PID/status VmRSS); 0 when it is gone.
uint64_t process_rss_bytes(int pid);

}  // namespace minitrain
