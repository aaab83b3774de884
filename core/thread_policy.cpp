// CPU quota, affinity and the re-exec that picks passive waiting (Note [passive thread waiting]).

#include "core/thread_policy.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace minitrain {
namespace {

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The cgroup (v2: "0::/path"; v1: the cpu controller's) this process belongs to, "" if unknown.
std::string own_cgroup(bool v2) {
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    const std::size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    if (v2 ? controllers.empty() : controllers.find("cpu") != std::string::npos)
      return line.substr(b + 1);
  }
  return "";
}

// The smallest quota on the way from this process's cgroup up to the root (a parent's quota
// binds its children), in whole cores; 0 when none.
int cgroup_quota_cores() {
  int best = 0;
  const auto consider = [&best](int cores) {
    if (cores > 0 && (best == 0 || cores < best)) best = cores;
  };
  for (bool v2 : {true, false}) {
    std::string path = own_cgroup(v2);
    const std::string root = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/cpu";
    while (true) {
      if (v2) {
        consider(cores_from_cpu_max(first_line(root + path + "/cpu.max")));
      } else {
        const std::string quota = first_line(root + path + "/cpu.cfs_quota_us");
        const std::string period = first_line(root + path + "/cpu.cfs_period_us");
        if (!quota.empty() && !period.empty()) consider(cores_from_cpu_max(quota + " " + period));
      }
      if (path.empty() || path == "/") break;
      path = path.substr(0, path.find_last_of('/'));
    }
  }
  return best;
}

}  // namespace

int cores_from_cpu_max(const std::string& cpu_max) {
  std::istringstream in(cpu_max);
  long long quota = 0, period = 0;
  if (!(in >> quota >> period) || quota <= 0 || period <= 0) return 0;  // "max", "-1": none
  return static_cast<int>((quota + period - 1) / period);
}

int available_cores() {
  int cores = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) cores = CPU_COUNT(&set);
  if (cores <= 0) cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  const int quota = cgroup_quota_cores();
  if (quota > 0) cores = std::min(cores, quota);
  return std::max(cores, 1);
}

std::vector<std::pair<std::string, std::string>> thread_wait_environment() {
  return {{"OMP_WAIT_POLICY", "passive"}};
}

void use_passive_thread_waiting(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  const auto env = thread_wait_environment();
  for (const auto& [name, value] : env)
    if (setenv(name.c_str(), value.c_str(), 1) != 0) return;
  ::execv("/proc/self/exe", argv);
  for (const auto& [name, value] : env) unsetenv(name.c_str());  // exec failed: run on as it was
}

std::string thread_wait_policy() {
  const char* p = std::getenv("OMP_WAIT_POLICY");
  if (p == nullptr) return std::getenv("GOMP_SPINCOUNT") != nullptr ? "GOMP_SPINCOUNT" : "default";
  std::string s(p);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace minitrain
