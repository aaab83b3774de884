// The terminal tables of `minitrain pipelines` (independent runs, parallel/runs/run_scheduler.h):
// the live status table redrawn in place on a terminal, and the end-of-run summary table. Text
// for a person's eyes lives here, above the scheduler, which hands over plain values.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "parallel/runs/run_scheduler.h"

namespace minitrain {

/// The end-of-run table, one row per run, then each failed run's reason and a count.
std::string runs_summary_table(const std::vector<RunResult>& results);

/// A RunsOptions::draw_status that writes a table of every run to `out` and, at each later
/// update, moves the cursor up over the previous table and clears it first (ANSI), so the table
/// stays in place. `out` must outlive the returned function.
std::function<void(const std::vector<RunStatus>&)> live_runs_table(std::ostream& out);

}  // namespace minitrain
