// CLOCK_PROCESS_CPUTIME_ID rather than getrusage or /proc/self/stat: the same sum over the
// process's threads, but the kernel adds the running threads' time since their last scheduler
// tick, where getrusage and /proc count only up to it (1-4 ms ago), so a step of a millisecond
// would read as zero or as a whole tick.

#include "core/process_cpu.h"

#include <time.h>

namespace minitrain {

double process_cpu_seconds() noexcept {
  timespec t{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t) != 0) return 0;
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

}  // namespace minitrain
