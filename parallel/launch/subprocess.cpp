// Child processes with fork + execvpe. Everything the child needs (argv, envp, the output file) is
// prepared before fork, because between fork and exec a child of a multi-threaded parent may only
// call async-signal-safe functions. An exec failure travels back to the parent as an errno through
// a close-on-exec pipe: end-of-file on that pipe means exec succeeded.
//
// Note [child lifetime]: no child outlives the one who started it.
//  - Its own process group (setpgid): signal(), terminate() and the destructor reach the processes
//    the child starts too, even after the child itself has ended.
//  - The ended child stays a zombie (waitid with WNOWAIT) until this object reaps it in its
//    destructor: while the zombie exists its pid, which is also the group's id, cannot be reused,
//    so signalling the group can never hit a stranger's processes.
//  - PR_SET_PDEATHSIG(SIGKILL): the kernel kills the child when its parent dies, SIGKILL included,
//    where no destructor runs. The parent's pid is taken before fork and compared with getppid()
//    after the prctl, in case the parent died in between (the child would then already belong to
//    init and never get the signal). The signal follows the parent *thread* that forked, so the
//    thread that starts a child must outlive it (the launcher and the pipelines scheduler start
//    and wait for theirs on one thread).
//  - The group reaper, for the child's own children, which PR_SET_PDEATHSIG does not reach (they
//    would go on under init after a SIGKILL of this process): the first child started with a
//    group of its own and die_with_parent also starts one small helper process, forked (no exec)
//    and left running for this process's life. It is told the id of every such group while the
//    group may hold processes, over a socket whose other end only this process holds; when this
//    process dies, however it dies, the helper reads end-of-file, SIGKILLs every group it was
//    told of, and exits. A group is struck off before its leader is reaped (the destructor), so
//    the helper never signals a reused id. Between fork and exit the helper makes only
//    async-signal-safe calls, since this process may have other threads.

#include "parallel/launch/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <cstdint>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "core/strings.h"

extern char** environ;

namespace minitrain {
namespace {

// What the child reports through the exec-error pipe before it gives up.
enum class ChildStage : int { Chdir = 1, Exec = 2 };
struct ChildFailure {
  int stage;
  int error;
};

// Closes a descriptor, keeping errno (the callers report the errno of what failed before).
void close_quietly(int fd) {
  if (fd < 0) return;
  const int saved = errno;
  ::close(fd);
  errno = saved;
}

ExitStatus decode(const siginfo_t& info) {
  ExitStatus s;
  if (info.si_code == CLD_EXITED)
    s.code = info.si_status;
  else  // CLD_KILLED, CLD_DUMPED
    s.signal = info.si_status;
  return s;
}

// The child's exit status without reaping it (Note [child lifetime]); nullopt while it runs.
// `block`: wait for it. ECHILD (someone else reaped it: SIGCHLD set to SIG_IGN) gives code -1.
std::optional<ExitStatus> peek_exit(pid_t pid, bool block) {
  for (;;) {
    siginfo_t info{};
    const int r =
        ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT | (block ? 0 : WNOHANG));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return ExitStatus{-1, 0};
    if (info.si_pid == 0) return std::nullopt;  // WNOHANG and still running
    return decode(info);
  }
}

// ---- the group reaper (Note [child lifetime]) ----

constexpr int kReaperGroups =
    4096;  // groups it can hold at once; beyond that, PR_SET_PDEATHSIG only

// The helper process: async-signal-safe calls only (it is a fork of a possibly threaded process).
[[noreturn]] void group_reaper_main(int fd, int max_fd) {
  ::setpgid(
      0, 0);  // out of this process's group: a Ctrl-C or a kill of that group must not end it first
  ::prctl(PR_SET_NAME, "mt-group-reaper");  // what ps shows (15 characters at most)
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) ::sigaction(sig, &ignore, nullptr);
  // Hold none of the parent's files: a reader of its output or of a rank's pipe must see
  // end-of-file when they end, not when this helper does.
  const int devnull = ::open("/dev/null", O_RDWR);
  for (int std_fd = 0; std_fd <= 2; ++std_fd)
    if (devnull >= 0 && devnull != std_fd && std_fd != fd) ::dup2(devnull, std_fd);
  for (int f = 3; f < max_fd; ++f)
    if (f != fd) ::close(f);
  static pid_t groups[kReaperGroups];
  int n = 0;
  for (;;) {
    int32_t message = 0;  // +pgid: a group to watch; -pgid: strike it off
    const ssize_t got = ::recv(fd, &message, sizeof message, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got != static_cast<ssize_t>(sizeof message)) break;  // 0: the parent is gone (or an error)
    if (message > 0) {
      if (n < kReaperGroups) groups[n++] = message;
    } else {
      for (int i = 0; i < n; ++i)
        if (groups[i] == -message) {
          groups[i] = groups[--n];
          break;
        }
    }
  }
  for (int i = 0; i < n; ++i) ::kill(-groups[i], SIGKILL);
  ::_exit(0);
}

class GroupReaper {
 public:
  static GroupReaper& instance() {
    static GroupReaper* reaper = new GroupReaper();  // never destroyed: its socket closes at exit
    return *reaper;
  }
  void watch(pid_t pgid) { tell(static_cast<int32_t>(pgid)); }
  void forget(pid_t pgid) { tell(-static_cast<int32_t>(pgid)); }

 private:
  GroupReaper() {
    int fds[2];
    // SEQPACKET: one message per send, and end-of-file when this process's end closes.
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) return;
    struct rlimit limit {};
    const int max_fd = ::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < 65536
                           ? static_cast<int>(limit.rlim_cur)
                           : 65536;
    const pid_t pid = ::fork();
    if (pid == 0) group_reaper_main(fds[1], max_fd);
    ::close(fds[1]);
    if (pid < 0) {
      ::close(fds[0]);
      return;  // no helper: children still die with us (PR_SET_PDEATHSIG), their own children may
               // not
    }
    fd_ = fds[0];
  }
  void tell(int32_t message) {
    if (fd_ < 0) return;
    std::lock_guard<std::mutex> lock(
        mu_);  // Subprocesses may be started and ended on several threads
    ssize_t r;
    do {
      r = ::send(fd_, &message, sizeof message, MSG_NOSIGNAL);  // a dead helper: EPIPE, not SIGPIPE
    } while (r < 0 && errno == EINTR);
  }

  int fd_ = -1;
  std::mutex mu_;
};

void reap(pid_t pid) {
  int ignored;
  while (::waitpid(pid, &ignored, 0) < 0 && errno == EINTR) {
  }
}

// Runs in the child between fork and exec: async-signal-safe calls only.
[[noreturn]] void child_exec(const SubprocessOptions& o, char* const* argv, char* const* envp,
                             int out_fd, int err_fd, const char* dir, pid_t parent) {
  if (o.new_process_group) ::setpgid(0, 0);
  if (o.nice != 0) (void)::nice(o.nice);  // a failure (no privilege to go lower) leaves it as is
  if (o.die_with_parent) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent)
      ::_exit(127);  // the parent died before the prctl: nobody waits for us
  }
  // A parent's ignored or blocked signals survive exec; the child starts with the defaults.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) ::signal(sig, SIG_DFL);
  // No input: a child in a process group of its own that read from the terminal would be stopped
  // (SIGTTIN) and hang the job.
  const int devnull = ::open("/dev/null", O_RDONLY);
  if (devnull >= 0 && devnull != STDIN_FILENO) {
    ::dup2(devnull, STDIN_FILENO);
    ::close(devnull);
  }
  if (out_fd >= 0) {
    ::dup2(out_fd, STDOUT_FILENO);  // dup2 clears close-on-exec on the copies
    ::dup2(out_fd, STDERR_FILENO);
  }
  ChildFailure f{0, 0};
  if (dir != nullptr && ::chdir(dir) != 0) {
    f = {static_cast<int>(ChildStage::Chdir), errno};
  } else {
    ::execvpe(argv[0], argv, envp);
    f = {static_cast<int>(ChildStage::Exec), errno};
  }
  ssize_t ignored = ::write(err_fd, &f, sizeof f);
  (void)ignored;
  ::_exit(127);
}

}  // namespace

std::string ExitStatus::str() const {
  if (signal != 0) {
    const char* name = ::strsignal(signal);
    return detail::concat("signal ", signal, " (", name ? name : "unknown", ")");
  }
  return detail::concat("exit status ", code);
}

Subprocess Subprocess::start(const SubprocessOptions& options) {
  MT_CHECK_AS(ValueError, !options.argv.empty() && !options.argv[0].empty(),
              "subprocess: no program given (argv is empty)");
  const std::string& program = options.argv[0];

  // argv and envp as C arrays, built before fork.
  std::vector<char*> argv;
  for (const std::string& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::set<std::string> overridden;
  std::vector<std::string> env_strings;
  for (const auto& [name, value] : options.env) {
    MT_CHECK_AS(ValueError, !name.empty() && name.find('=') == std::string::npos,
                "subprocess: environment variable name '", name, "' is empty or contains '='");
    overridden.insert(name);
  }
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    const std::string name = eq ? std::string(*e, static_cast<size_t>(eq - *e)) : std::string(*e);
    if (!overridden.count(name)) env_strings.emplace_back(*e);
  }
  // Later entries of options.env win over earlier ones with the same name.
  std::set<std::string> placed;
  for (auto it = options.env.rbegin(); it != options.env.rend(); ++it)
    if (placed.insert(it->first).second) env_strings.push_back(it->first + "=" + it->second);
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  int out_read = -1, out_write = -1;
  if (options.output_path.empty()) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
      MT_THROW(IoError, "cannot run '", program,
               "': cannot create an output pipe: ", std::strerror(errno));
    out_read = fds[0];
    out_write = fds[1];
  } else {
    out_write =
        ::open(options.output_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (out_write < 0)
      MT_THROW(IoError, "cannot run '", program, "': cannot open its output file '",
               options.output_path, "': ", std::strerror(errno));
  }
  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    close_quietly(out_read);
    close_quietly(out_write);
    MT_THROW(IoError, "cannot run '", program, "': cannot create a pipe: ", std::strerror(errno));
  }

  const char* dir = options.working_dir.empty() ? nullptr : options.working_dir.c_str();
  // Started before the child, so that the helper holds none of the child's descriptors.
  const bool reaped = options.new_process_group && options.die_with_parent;
  if (reaped) GroupReaper::instance();
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) child_exec(options, argv.data(), envp.data(), out_write, err_pipe[1], dir, parent);
  const int fork_errno = errno;
  ::close(err_pipe[1]);
  ::close(out_write);
  if (pid < 0) {
    close_quietly(out_read);
    ::close(err_pipe[0]);
    MT_THROW(IoError, "cannot run '", program, "': fork failed: ", std::strerror(fork_errno));
  }
  // Also set here: whichever of parent and child runs first, the group exists before signal().
  if (options.new_process_group) ::setpgid(pid, pid);
  if (reaped) GroupReaper::instance().watch(pid);

  ChildFailure failure{0, 0};
  ssize_t got;
  do {
    got = ::read(err_pipe[0], &failure, sizeof failure);
  } while (got < 0 && errno == EINTR);
  ::close(err_pipe[0]);
  if (got == static_cast<ssize_t>(sizeof failure)) {
    if (reaped) GroupReaper::instance().forget(pid);
    int ignored;
    while (::waitpid(pid, &ignored, 0) < 0 && errno == EINTR) {
    }
    close_quietly(out_read);
    if (failure.stage == static_cast<int>(ChildStage::Chdir))
      MT_THROW(IoError, "cannot run '", program, "': cannot enter the working directory '",
               options.working_dir, "': ", std::strerror(failure.error));
    MT_THROW(IoError, "cannot run '", program, "': ", std::strerror(failure.error),
             (failure.error == ENOENT && program.find('/') == std::string::npos
                  ? " (not found in PATH; give its full path)"
                  : ""),
             " (command: ", join(options.argv, " "), ")");
  }

  if (out_read >= 0) ::fcntl(out_read, F_SETFL, ::fcntl(out_read, F_GETFL) | O_NONBLOCK);
  Subprocess p;
  p.pid_ = pid;
  p.out_fd_ = out_read;
  p.group_ = options.new_process_group;
  p.reaped_ = reaped;
  return p;
}

Subprocess::Subprocess(Subprocess&& o) noexcept
    : pid_(o.pid_),
      out_fd_(o.out_fd_),
      group_(o.group_),
      reaped_(o.reaped_),
      partial_(std::move(o.partial_)),
      status_(o.status_) {
  o.pid_ = -1;
  o.out_fd_ = -1;
  o.status_.reset();
}

Subprocess& Subprocess::operator=(Subprocess&& o) noexcept {
  if (this != &o) {
    // The child this object held (if any) moves into `old`, whose destructor kills and reaps it.
    Subprocess old(std::move(*this));
    pid_ = o.pid_;
    out_fd_ = o.out_fd_;
    group_ = o.group_;
    reaped_ = o.reaped_;
    partial_ = std::move(o.partial_);
    status_ = o.status_;
    o.pid_ = -1;
    o.out_fd_ = -1;
    o.status_.reset();
  }
  return *this;
}

Subprocess::~Subprocess() {
  if (pid_ > 0) {
    // The child if it still runs, and with a group whatever it left running (Note [child
    // lifetime]).
    if (group_ || !status_) ::kill(group_ ? -pid_ : pid_, SIGKILL);
    if (reaped_) GroupReaper::instance().forget(pid_);  // before the reap frees the id
    reap(pid_);
  }
  if (out_fd_ >= 0) ::close(out_fd_);
  pid_ = -1;
  out_fd_ = -1;
}

std::vector<std::string> Subprocess::read_lines() {
  std::vector<std::string> lines;
  if (out_fd_ < 0) return lines;
  char buf[4096];
  bool closed = false;
  for (;;) {
    const ssize_t n = ::read(out_fd_, buf, sizeof buf);
    if (n > 0) {
      partial_.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) {
      closed = true;  // every writer (the child and anything it started) has closed the pipe
      break;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    closed = true;  // an unexpected read error: treat the output as ended rather than spin on it
    break;
  }
  size_t start = 0;
  for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1)
    lines.push_back(partial_.substr(start, nl - start));
  partial_.erase(0, start);
  if (closed) {
    ::close(out_fd_);
    out_fd_ = -1;
    if (!partial_.empty()) lines.push_back(std::move(partial_));
    partial_.clear();
  }
  return lines;
}

std::optional<ExitStatus> Subprocess::poll() {
  if (status_ || pid_ <= 0) return status_;
  status_ = peek_exit(pid_, /*block=*/false);
  if (status_ && status_->code == -1)
    forget_group();  // reaped by someone else: the group id may be reused
  return status_;
}

std::optional<ExitStatus> Subprocess::wait_for(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Polling with a short, growing sleep: waitpid has no timeout, and a SIGCHLD handler would be
  // process-wide state that a library must not take over.
  auto nap = std::chrono::microseconds(200);
  for (;;) {
    if (auto s = poll()) return s;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(nap, deadline - now));
    nap = std::min(nap * 2, std::chrono::microseconds(10000));
  }
}

ExitStatus Subprocess::wait() {
  if (status_ || pid_ <= 0) return status_.value_or(ExitStatus{});
  status_ = peek_exit(pid_, /*block=*/true);
  if (status_->code == -1) forget_group();  // as in poll()
  return *status_;
}

void Subprocess::forget_group() {
  if (reaped_) GroupReaper::instance().forget(pid_);
  reaped_ = false;
  group_ = false;
}

void Subprocess::signal(int sig) {
  if (pid_ <= 0) return;
  if (group_)
    ::kill(-pid_, sig);  // safe after the child ended: its zombie holds the group's id
  else if (!status_)
    ::kill(pid_, sig);
}

ExitStatus Subprocess::terminate(std::chrono::milliseconds grace) {
  if (!poll()) {
    signal(SIGTERM);
    signal(SIGCONT);  // a stopped child acts on SIGTERM only once it runs again
    if (!wait_for(grace)) {
      signal(SIGKILL);
      wait();
    }
  }
  if (group_) signal(SIGKILL);  // what the child left running in its group
  return *status_;
}

std::string signal_name(int sig) {
  switch (sig) {
// A table, four signals a line (clang-format would stagger it).
// clang-format off
#define MT_SIGNAL_NAME(s) \
  case s:                 \
    return #s;
    MT_SIGNAL_NAME(SIGHUP) MT_SIGNAL_NAME(SIGINT) MT_SIGNAL_NAME(SIGQUIT) MT_SIGNAL_NAME(SIGILL)
    MT_SIGNAL_NAME(SIGTRAP) MT_SIGNAL_NAME(SIGABRT) MT_SIGNAL_NAME(SIGBUS) MT_SIGNAL_NAME(SIGFPE)
    MT_SIGNAL_NAME(SIGKILL) MT_SIGNAL_NAME(SIGUSR1) MT_SIGNAL_NAME(SIGSEGV) MT_SIGNAL_NAME(SIGUSR2)
    MT_SIGNAL_NAME(SIGPIPE) MT_SIGNAL_NAME(SIGALRM) MT_SIGNAL_NAME(SIGTERM) MT_SIGNAL_NAME(SIGCHLD)
    MT_SIGNAL_NAME(SIGCONT) MT_SIGNAL_NAME(SIGSTOP) MT_SIGNAL_NAME(SIGTSTP) MT_SIGNAL_NAME(SIGTTIN)
    MT_SIGNAL_NAME(SIGTTOU) MT_SIGNAL_NAME(SIGURG) MT_SIGNAL_NAME(SIGXCPU) MT_SIGNAL_NAME(SIGXFSZ)
    MT_SIGNAL_NAME(SIGVTALRM) MT_SIGNAL_NAME(SIGPROF) MT_SIGNAL_NAME(SIGSYS)
#undef MT_SIGNAL_NAME
    // clang-format on
  }
  return detail::concat("signal ", sig);
}

std::string self_executable() {
  std::vector<char> buf(PATH_MAX + 1);
  const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n < 0)
    MT_THROW(IoError, "cannot read /proc/self/exe (this program's path): ", std::strerror(errno));
  return std::string(buf.data(), static_cast<size_t>(n));
}

uint64_t process_rss_bytes(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (!starts_with(line, "VmRSS:")) continue;
    std::istringstream fields(line.substr(6));
    uint64_t kib = 0;
    fields >> kib;  // the kernel always reports it in kB
    return kib * 1024;
  }
  return 0;  // gone, or a zombie (no VmRSS line)
}

}  // namespace minitrain
