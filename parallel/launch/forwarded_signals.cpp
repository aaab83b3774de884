// The handler only records the signal: the launcher's loop reads it (take) between polls.

#include "parallel/launch/forwarded_signals.h"

#include <csignal>

namespace minitrain {
namespace {

constexpr std::array<int, 3> kSignals{SIGINT, SIGTERM, SIGHUP};
volatile std::sig_atomic_t g_forwarded_signal = 0;
extern "C" void remember_signal(int sig) { g_forwarded_signal = sig; }

}  // namespace

ForwardedSignals::ForwardedSignals() {
  g_forwarded_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = remember_signal;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &sa, &old_[i]);
}

ForwardedSignals::~ForwardedSignals() {
  for (size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
}

int ForwardedSignals::take() {
  const int sig = g_forwarded_signal;
  g_forwarded_signal = 0;
  return sig;
}

}  // namespace minitrain
