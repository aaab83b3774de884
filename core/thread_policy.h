#pragma once
// How many CPU threads minitrain may use, and how they wait.
//
// Note [passive thread waiting]: between parallel regions libgomp's threads spin (by default for
// about 300000 iterations) before they sleep. On a machine whose cores are all busy, the spinning
// threads take the cores the working ones need: a 256-1024-1024-1 MLP step measured on this
// project's 2-core machine under load took 14.4 s for 40 steps with the default and 1.9 s with
// OMP_WAIT_POLICY=passive. libgomp reads the policy once, when it is loaded, so it cannot be set
// from the program; the minitrain command therefore re-executes itself once with
// OMP_WAIT_POLICY=passive when the environment chooses no policy (use_passive_thread_waiting). A
// user's own program can do the same, or set the variable in its environment.

#include <string>
#include <utility>
#include <vector>

namespace minitrain {

/// The CPUs this process may run on: its affinity mask (taskset, a container's cpuset), capped by
/// a cgroup CPU quota (v2 cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us) rounded up; >= 1.
int available_cores();

/// A cgroup v2 cpu.max ("QUOTA PERIOD", or "max PERIOD" for none) as whole cores, rounded up;
/// 0 for no quota or text that is not a quota.
int cores_from_cpu_max(const std::string& cpu_max);

/// Re-executes this program (argv as given) with OMP_WAIT_POLICY=passive when neither
/// OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set (the user's choice wins); returns when it does not
/// (the policy was chosen, or exec failed: the program then runs with libgomp's default).
void use_passive_thread_waiting(char** argv);

/// The variables use_passive_thread_waiting sets before it re-executes the program:
/// {{"OMP_WAIT_POLICY", "passive"}} (bench/thread_policy_bench.cpp runs a child with them).
std::vector<std::pair<std::string, std::string>> thread_wait_environment();

/// The wait policy this process runs with, as libgomp read it: "passive", "active" or "default".
std::string thread_wait_policy();

}  // namespace minitrain
