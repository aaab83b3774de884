#pragma once
// This process's CPU use: the CPU time of all its threads, user and system. Over an interval of
// wall time, CPU seconds / wall seconds is the cores it kept busy on average (the metrics log's
// cpu_utilization): 1.0 is one core busy throughout; a run with T compute threads and W loader
// workers stays below T + W, and far below it when it waits (on data, on a GPU, on other ranks).

namespace minitrain {

/// Seconds of CPU time the process has used, all threads (ended ones included), user and
/// system; 0 where the system does not say.
double process_cpu_seconds() noexcept;

}  // namespace minitrain
