#pragma once
// Whether a process is still running, for the tests that check nothing outlives a job: a
// launcher's ranks, their children, a Subprocess's group.

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

namespace minitrain::testing {

/// True when `pid` no longer runs: gone, or a zombie (a parent that is not us, or this
/// container's init, may not have reaped it yet).
inline bool process_gone(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return true;
  const auto close_paren = text.rfind(')');  // the state follows the command name in parentheses
  return close_paren != std::string::npos && close_paren + 2 < text.size() &&
         text[close_paren + 2] == 'Z';
}

/// Waits up to `within` for process_gone(pid).
inline bool becomes_gone(int pid, std::chrono::milliseconds within = std::chrono::seconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (!process_gone(pid)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace minitrain::testing
