// The launcher's loop: wait (poll) on every rank's output pipe for up to kTick, print what came,
// act on a signal the launcher got, reap ranks that ended. The first rank to fail stops the rest:
// SIGTERM to each one's process group at once (with SIGCONT: a stopped rank acts on nothing else),
// SIGKILL to whatever still runs after the grace. The failed rank's group gets the same, so the
// processes it started go too. A job whose rank dies therefore ends within grace + kTick, however
// long the others would run. When launch returns, each rank's group is killed (the Subprocess
// destructor), so nothing a rank left behind outlives the launcher; if the launcher itself is
// killed, the kernel kills the ranks (Note [child lifetime] in subprocess.cpp).

#include "parallel/launch/launcher.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <cstdlib>
#include <optional>
#include <set>
#include <thread>

#include "core/error.h"
#include "core/strings.h"
#include "parallel/launch/forwarded_signals.h"
#include "parallel/launch/restart_policy.h"
#include "parallel/launch/subprocess.h"

namespace minitrain {
namespace {

constexpr std::chrono::milliseconds kTick{20};  // how often the loop looks at ranks without output
// After the last rank ended: how long to keep reading output that its own children may still write.
constexpr std::chrono::milliseconds kDrain{200};

struct Rank {
  int rank = 0;
  Subprocess process;
  std::optional<ExitStatus> status;
};

std::string rank_list(const std::vector<int>& ranks) {
  return join(std::vector<int64_t>(ranks.begin(), ranks.end()), ", ");
}

std::string fresh_job_id() {
  char host[256] = "host";
  ::gethostname(host, sizeof host - 1);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  return detail::concat("launch-", host, "-", ::getpid(), "-", ms);
}

int exit_code_of(const ExitStatus& s) { return s.signal != 0 ? 128 + s.signal : s.code; }

void print_lines(Rank& r, std::ostream& out) {
  for (const std::string& line : r.process.read_lines())
    out << "[rank " << r.rank << "] " << line << '\n';
}

}  // namespace

void check_launch_options(const LaunchOptions& o) {
  MT_CHECK_AS(ValueError, o.nproc >= 1, "launch: -n ", o.nproc,
              " is not a number of ranks; give -n 1 or more");
  MT_CHECK_AS(ValueError, !o.command.empty() && !o.command[0].empty(),
              "launch: no command given; put it after --, as in: minitrain launch -n 2 -- "
              "minitrain train ...");
  MT_CHECK_AS(ValueError, o.nnodes >= 1, "launch: --nnodes ", o.nnodes, " must be at least 1");
  MT_CHECK_AS(ValueError, o.node_rank >= 0 && o.node_rank < o.nnodes, "launch: --node-rank ",
              o.node_rank, " is not a node of --nnodes ", o.nnodes, " (nodes are 0 to ",
              o.nnodes - 1, ")");
  MT_CHECK_AS(ValueError, o.nnodes == 1 || !o.master_addr.empty(), "launch: --nnodes ", o.nnodes,
              " needs --master-addr HOST (an address of node 0 that every node can reach, the same "
              "on every node)");
  MT_CHECK_AS(ValueError, o.master_port >= 1 && o.master_port <= 65535, "launch: --master-port ",
              o.master_port, " is not a TCP port (1 to 65535)");
  MT_CHECK_AS(ValueError, o.grace.count() >= 0, "launch: --grace must be >= 0 seconds");
  check_restart_options(o.restarts, "launch");
  if (!o.devices.empty()) {
    MT_CHECK_AS(ValueError, static_cast<int>(o.devices.size()) == o.nproc,
                "launch: --devices lists ", o.devices.size(), " GPU(s) but -n ", o.nproc,
                " starts ", o.nproc,
                " rank(s); list one GPU per rank (e.g. --devices 0,1 for -n 2)");
    std::set<std::string> seen;
    for (const std::string& d : o.devices) {
      MT_CHECK_AS(ValueError, !d.empty() && d.find_first_of(", \t") == std::string::npos,
                  "launch: --devices has an empty or malformed entry '", d,
                  "'; give GPU indices like 0,1");
      MT_CHECK_AS(ValueError, seen.insert(d).second, "launch: --devices lists GPU ", d,
                  " twice; each rank needs a GPU of its own");
    }
  }
}

std::vector<std::pair<std::string, std::string>> rank_environment(const LaunchOptions& o,
                                                                  int local_rank,
                                                                  const std::string& job_id) {
  std::vector<std::pair<std::string, std::string>> env = {
      {"RANK", std::to_string(o.node_rank * o.nproc + local_rank)},
      {"WORLD_SIZE", std::to_string(o.nnodes * o.nproc)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(o.nproc)},
      {"MASTER_ADDR", o.master_addr.empty() ? std::string("127.0.0.1") : o.master_addr},
      {"MASTER_PORT", std::to_string(o.master_port)},
  };
  if (!job_id.empty()) env.emplace_back("MINITRAIN_JOB_ID", job_id);
  if (!o.devices.empty()) {
    env.emplace_back("CUDA_VISIBLE_DEVICES", join(o.devices, ","));
  }
  return env;
}

namespace {

// How one run of the job ended.
struct JobEnd {
  int code = 0;              // what launch returns for it
  bool interrupted = false;  // by a signal to the launcher
  std::string failure;  // "rank 1 (pid 42) was killed by signal 9 (SIGKILL)" when a rank failed
};

// One run of every rank, to its end. `restart` >= 0: the ranks get MINITRAIN_RESTART_COUNT.
JobEnd run_job(const LaunchOptions& o, const std::string& job_id, int restart, std::ostream& out,
               std::ostream& err) {
  std::vector<Rank> ranks;
  for (int local = 0; local < o.nproc; ++local) {
    SubprocessOptions so;
    so.argv = o.command;
    so.env = rank_environment(o, local, job_id);
    if (restart >= 0) so.env.emplace_back(kRestartCountVariable, std::to_string(restart));
    // A rank that cannot start: the ones already running are killed as `ranks` goes out of scope.
    ranks.push_back(Rank{o.node_rank * o.nproc + local, Subprocess::start(so), std::nullopt});
  }

  int failed = -1;      // index into ranks of the first rank that failed
  int interrupted = 0;  // the first signal the launcher got
  std::vector<int> stopped;
  std::optional<std::chrono::steady_clock::time_point> kill_at;
  bool killed = false;
  auto running = [&] {
    std::vector<int> r;
    for (size_t i = 0; i < ranks.size(); ++i)
      if (!ranks[i].status) r.push_back(static_cast<int>(i));
    return r;
  };

  for (;;) {
    std::vector<pollfd> fds;
    for (Rank& r : ranks)
      if (r.process.output_fd() >= 0) fds.push_back({r.process.output_fd(), POLLIN, 0});
    if (fds.empty())
      std::this_thread::sleep_for(kTick);
    else
      ::poll(fds.data(), fds.size(), static_cast<int>(kTick.count()));
    for (Rank& r : ranks) print_lines(r, out);
    out.flush();

    if (const int sig = ForwardedSignals::take()) {
      if (!interrupted) interrupted = sig;
      std::vector<int> to;
      for (int i : running()) {
        ranks[i].process.signal(sig);
        to.push_back(ranks[i].rank);
      }
      err << "minitrain launch: got signal " << sig << " (" << ::strsignal(sig)
          << "); forwarded it to rank(s) "
          << (to.empty() ? std::string("(none running)") : rank_list(to)) << std::endl;
      if (!kill_at) kill_at = std::chrono::steady_clock::now() + o.grace;
    }

    for (size_t i = 0; i < ranks.size(); ++i) {
      if (ranks[i].status) continue;
      ranks[i].status = ranks[i].process.poll();
      if (!ranks[i].status || ranks[i].status->ok() || failed >= 0 || interrupted) continue;
      failed = static_cast<int>(i);
      for (int j : running()) stopped.push_back(ranks[j].rank);
      for (Rank& r :
           ranks) {  // every group, the failed rank's too: what it started still runs there
        r.process.signal(SIGTERM);
        r.process.signal(SIGCONT);
      }
      kill_at = std::chrono::steady_clock::now() + o.grace;
    }

    if (running().empty()) break;
    if (kill_at && !killed && std::chrono::steady_clock::now() >= *kill_at) {
      for (Rank& r : ranks) r.process.signal(SIGKILL);
      killed = true;
    }
  }

  // Output still in the pipes (or written by a rank's own children) after the ranks ended.
  const auto drain_until = std::chrono::steady_clock::now() + kDrain;
  for (bool open = true; open && std::chrono::steady_clock::now() < drain_until;) {
    open = false;
    for (Rank& r : ranks) {
      print_lines(r, out);
      open = open || r.process.output_fd() >= 0;
    }
    if (open) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  out.flush();

  if (interrupted) return JobEnd{128 + interrupted, true, ""};
  if (failed < 0) return JobEnd{};
  const Rank& f = ranks[failed];
  err << "minitrain launch: rank " << f.rank << " (pid " << f.process.pid()
      << ") failed: " << f.status->str();
  if (stopped.empty())
    err << "; no other rank was running";
  else
    err << "; stopped rank" << (stopped.size() > 1 ? "s " : " ") << rank_list(stopped);
  err << std::endl;
  return JobEnd{
      exit_code_of(*f.status), false,
      detail::concat("rank ", f.rank, " (pid ", f.process.pid(), ") ", failure_clause(*f.status))};
}

}  // namespace

int launch(const LaunchOptions& o, std::ostream& out, std::ostream& err) {
  check_launch_options(o);
  std::string job_id = o.job_id;
  if (job_id.empty()) {
    const char* inherited = std::getenv("MINITRAIN_JOB_ID");
    if (inherited != nullptr && *inherited != '\0')
      job_id = inherited;
    else if (o.nnodes == 1)
      job_id = fresh_job_id();  // multi-node: a per-node id would differ between nodes, so none
  }

  ForwardedSignals signals;  // before the first child, so no signal falls between the two
  RestartPolicy policy(o.restarts);
  for (;;) {
    // A restarted job gets a job id of its own, so that no rank reads a rendezvous file that the
    // failed run left behind (Note [rendezvous files]); the same on every node.
    const int k = policy.restarts();
    const std::string id =
        k == 0 || job_id.empty() ? job_id : detail::concat(job_id, "-restart-", k);
    const JobEnd end = run_job(o, id, o.restarts.max_restarts > 0 ? k : -1, out, err);
    if (end.code == 0 || end.interrupted) return end.code;
    if (!policy.restart_after_failure(end.interrupted)) {
      const std::string line = policy.give_up_line(end.failure);
      if (!line.empty()) err << "minitrain launch: " << line << std::endl;
      return end.code;
    }
    err << "minitrain launch: " << policy.restart_line(end.failure) << std::endl;
    if (const int sig = wait_backoff(policy.backoff())) {
      err << "minitrain launch: got signal " << sig << " (" << signal_name(sig)
          << ") while waiting to restart; not restarting" << std::endl;
      return 128 + sig;
    }
  }
}

}  // namespace minitrain
