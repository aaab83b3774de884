#pragma once
// This process's host memory: the peak resident set size since it started (getrusage's
// ru_maxrss), what a metrics line and `minitrain pipelines` report as a run's host memory.

#include <cstdint>

namespace minitrain {

/// Bytes; 0 where the system does not say.
uint64_t host_memory_peak_bytes() noexcept;

}  // namespace minitrain
