#pragma once
// SIGINT, SIGTERM and SIGHUP caught (not acted on) while a launcher or supervisor runs its
// children, so that it can forward them and then stop; the previous handlers return when the
// object goes. One instance at a time.

#include <signal.h>

#include <array>

namespace minitrain {

class ForwardedSignals {
 public:
  ForwardedSignals();   ///< installs the handlers (before the first child: no signal falls between)
  ~ForwardedSignals();  ///< restores the previous handlers
  ForwardedSignals(const ForwardedSignals&) = delete;
  ForwardedSignals& operator=(const ForwardedSignals&) = delete;
  /// The signal that arrived since the last call, 0 if none; clears it.
  static int take();

 private:
  std::array<struct sigaction, 3> old_{};
};

}  // namespace minitrain
