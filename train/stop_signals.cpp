#include "train/stop_signals.h"

#include <signal.h>

#include "core/error.h"

namespace minitrain {
namespace {

// Lock-free, so reading and writing it is async-signal-safe.
std::atomic<int> g_requested{0};
static_assert(std::atomic<int>::is_always_lock_free);

struct sigaction g_previous_int, g_previous_term;
std::atomic<bool> g_installed{false};

void handle_stop_signal(int sig) {  // internal linkage: runs_command has its own
  int none = 0;
  if (g_requested.compare_exchange_strong(none, sig)) return;  // the first: stop after this step
  // The second: the user means it. Default action, raised again: the process ends now.
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

StopOnSignals::StopOnSignals() {
  MT_CHECK(!g_installed.exchange(true), "StopOnSignals: one instance at a time");
  g_requested.store(0);
  struct sigaction sa {};
  sa.sa_handler = handle_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a read or write in progress carries on rather than failing EINTR
  ::sigaction(SIGINT, &sa, &g_previous_int);
  ::sigaction(SIGTERM, &sa, &g_previous_term);
}

StopOnSignals::~StopOnSignals() {
  ::sigaction(SIGINT, &g_previous_int, nullptr);
  ::sigaction(SIGTERM, &g_previous_term, nullptr);
  g_installed.store(false);
}

const std::atomic<int>& StopOnSignals::requested() noexcept { return g_requested; }

const char* stop_signal_name(int signal) noexcept {
  switch (signal) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    default:
      return "a signal";
  }
}

}  // namespace minitrain
