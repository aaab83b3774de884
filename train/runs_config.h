#pragma once
// The runs of `minitrain pipelines --config runs.toml`: an optional [defaults] table of training
// keys, then one [[run]] table per run with its `name` and any training key (device, memory-cap,
// lr, ...). Each run becomes a full TrainConfig: built-in defaults < [defaults] < the run's keys,
// with relative paths taken relative to the file's directory (made absolute, so the run's own
// config file can live anywhere).
//
//   [defaults]
//   data = "train.csv"
//   target-columns = ["y"]
//   steps = 200
//
//   [[run]]
//   name = "sgd"
//   device = "cpu"
//   optimizer = "sgd"
//
// [sweep]: a table of lists; every combination of their values (keys in name order, the first
// varying slowest) is crossed with each [[run]], or stands alone without [[run]] tables, and
// names its run: "NAME-lr-0.001-optimizer-sgd" ("lr-0.001-..." alone). A run that sets a swept key
// fails naming it; more than 1000 combinations is a ValueError.
//
// Paths: inputs (data, targets, init, sample-weights) relative to the file's directory; outputs
// (save, checkpoint-dir, log) relative to the run's own directory, OUT/NAME/ (place_run_outputs),
// so that a `save = "w.safetensors"` in [defaults] gives each run its own file. "{name}" in any
// path becomes the run's name.
//
// A file that cannot be read as a whole (TOML syntax, no runs, a run without a name or with a
// name used twice, a bad [defaults] key) is a ValueError naming file:line. A run whose own keys
// do not check (an unknown key, a bad value) is kept with its error: it is reported as failed
// and the other runs go on.

#include <string>
#include <vector>

#include "train/config.h"

namespace minitrain {

struct RunsFileEntry {
  std::string name;    ///< unique; a directory name ([A-Za-z0-9._-], not starting with '.')
  int line = 0;        ///< where its [[run]] table starts in the file
  TrainConfig config;  ///< defaults + its keys; `device` as written (cpu | cuda | cuda:N | auto)
  /// `priority` (in [[run]] or [defaults], an integer in [-19, 19], default 0): higher runs start
  /// first when runs wait for a slot; a negative one also makes the run's process that much nicer
  /// (CPU niceness), so urgent runs get the cores.
  int priority = 0;
  std::string error;  ///< non-empty: its keys did not check; the run fails with this message
};

struct RunsFile {
  std::string path;
  std::vector<RunsFileEntry> runs;  ///< in file order
  std::size_t run_tables = 1;       ///< [[run]] tables (1: the [sweep] grid alone)
  std::size_t sweep_points = 1;     ///< combinations of the [sweep] values (1 without one)
};

/// The default of `minitrain pipelines --max-runs`: 100 [[run]] tables crossed with 1000 sweep
/// points once spent an hour writing directories before the first run started.
constexpr std::size_t kDefaultMaxRuns = 1000;

/// ValueError when `file` makes more than `max_runs` runs, naming the count, how it comes about
/// ([[run]] tables x [sweep] points) and --max-runs.
void check_run_count(const RunsFile& file, std::size_t max_runs);

/// Puts each run's outputs in place: a relative save, checkpoint-dir or log (metrics.jsonl when
/// unset) under `out_dir`/NAME/, an absolute one kept. ValueError, before any run starts, when two
/// runs would write the same path (an absolute save in [defaults], say), naming both and the path.
/// Runs kept with an error are left out: they never start. Nothing may be, or be written at,
/// `out_dir`/summary.json, which the command writes once every run has finished.
void place_run_outputs(RunsFile& file, const std::string& out_dir);

/// Reads `path` (IoError when it cannot be read; ValueError for a file-level problem).
RunsFile read_runs_config(const std::string& path);
/// The same for text; `source` names it in messages, relative paths resolve against `base_dir`.
RunsFile parse_runs_config(const std::string& toml_text, const std::string& source,
                           const std::string& base_dir);

/// The config as a TOML document of every set key (unset optional keys left out), which
/// apply_toml_config reads back to the same config: the `config.toml` each run is started with.
std::string config_to_toml(const TrainConfig& config);

}  // namespace minitrain
