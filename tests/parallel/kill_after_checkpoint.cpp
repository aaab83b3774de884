// A test-only LD_PRELOAD library that makes one rank die mid-run, deterministically: it wraps
// rename(2), through which every checkpoint is put in place (core/atomic_file.cpp), and after the
// MINITRAIN_TEST_KILL_AFTER-th checkpoint of the rank named by MINITRAIN_TEST_KILL_RANK (RANK
// under minitrain launch, OMPI_COMM_WORLD_RANK under mpirun) it SIGKILLs its own process, but only
// on a job's first run (MINITRAIN_RESTART_COUNT unset or 0), so the restarted run goes to its end;
// with MINITRAIN_TEST_KILL_ALWAYS=1 on every run (a job that fails every time).
// Nothing of the library knows about it.

#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

bool is(const char* name, const char* want) {
  const char* v = std::getenv(name);
  return v != nullptr && want != nullptr && std::strcmp(v, want) == 0;
}

bool armed() {
  const char* restart = std::getenv("MINITRAIN_RESTART_COUNT");
  if (restart != nullptr && std::strcmp(restart, "0") != 0 &&
      !is("MINITRAIN_TEST_KILL_ALWAYS", "1"))
    return false;
  const char* rank = std::getenv("MINITRAIN_TEST_KILL_RANK");
  return is("RANK", rank) || is("OMPI_COMM_WORLD_RANK", rank);
}

int checkpoints = 0;

}  // namespace

extern "C" int rename(const char* from, const char* to) {
  using Rename = int (*)(const char*, const char*);
  static const Rename real = reinterpret_cast<Rename>(::dlsym(RTLD_NEXT, "rename"));
  const int result = real(from, to);
  if (result == 0 && std::strstr(to, "checkpoint.safetensors") != nullptr && armed()) {
    const char* after = std::getenv("MINITRAIN_TEST_KILL_AFTER");
    if (after != nullptr && ++checkpoints == std::atoi(after)) ::kill(::getpid(), SIGKILL);
  }
  return result;
}
