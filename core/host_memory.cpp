#include "core/host_memory.h"

#include <sys/resource.h>

namespace minitrain {

uint64_t host_memory_peak_bytes() noexcept {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0 || usage.ru_maxrss < 0) return 0;
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;  // Linux reports kilobytes
}

}  // namespace minitrain
