// A test-only LD_PRELOAD library that holds a process inside rename(2), through which every file
// minitrain writes is put in place (core/atomic_file.cpp), so that a test can signal it at a known
// point instead of racing it (interrupt_check.py's "twice" case: a second SIGINT must arrive while
// the first one's orderly stop is still writing). Once the file named by MINITRAIN_TEST_HOLD_ARMED
// exists, the next rename creates the file named by MINITRAIN_TEST_HOLD_HELD and waits, for at
// most MINITRAIN_TEST_HOLD_SECONDS (default 60), before renaming: a signal ends it there, or the
// wait ends and the rename goes on (the test then sees a process that was not ended by it).
// Nothing of the library knows about it.

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

namespace {

bool exists(const char* path) { return path != nullptr && ::access(path, F_OK) == 0; }

void hold_if_armed() {
  static bool held = false;  // one hold per process: later renames go straight through
  const char* armed = std::getenv("MINITRAIN_TEST_HOLD_ARMED");
  const char* marker = std::getenv("MINITRAIN_TEST_HOLD_HELD");
  if (held || marker == nullptr || !exists(armed)) return;
  held = true;
  const int fd = ::open(marker, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) ::close(fd);
  const char* seconds = std::getenv("MINITRAIN_TEST_HOLD_SECONDS");
  const int limit_ms = (seconds != nullptr ? std::atoi(seconds) : 60) * 1000;
  for (int waited = 0; waited < limit_ms; waited += 10) ::usleep(10 * 1000);
}

}  // namespace

extern "C" int rename(const char* from, const char* to) {
  using Rename = int (*)(const char*, const char*);
  static const Rename real = reinterpret_cast<Rename>(::dlsym(RTLD_NEXT, "rename"));
  hold_if_armed();
  return real(from, to);
}
