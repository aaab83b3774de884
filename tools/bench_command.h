#pragma once
// `minitrain bench [AREA...] [--list] [--out DIR] [--filter REGEX] [--quick]`: runs the Google
// Benchmark programs of bench/ (one binary per area), shows their console output, keeps each
// area's JSON as DIR/<area>.json and says how to draw them (scripts/plot_bench.py).
// `minitrain bench op [NAME [VARIANT...]] [--size N ...] [--device D]` lists, verifies and times
// the ops of the op-variant registry instead (tools/op_bench_command.h).
//
// The binaries are looked up in MINITRAIN_BENCH_DIR when it is set, else in the build tree this
// minitrain binary belongs to (<build>/tools/minitrain -> <build>/bench/), else in the bench
// folder of the build tree minitrain was compiled in.

#include <ostream>
#include <string>
#include <vector>

#include "tools/gemm_counters_command.h"
#include "tools/op_bench_command.h"

namespace CLI {
class App;
}  // namespace CLI

namespace minitrain::cli {

/// One benchmark area: the name `minitrain bench` takes, its program, what it measures.
struct BenchArea {
  std::string name;     ///< "train-step"
  std::string program;  ///< "minitrain_train_step_bench"
  std::string what;     ///< one line for --list
};

/// Every area, in the order `minitrain bench` runs them.
const std::vector<BenchArea>& bench_areas();

/// Where the bench programs are, and how that was decided (for messages).
struct BenchDir {
  std::string path;    ///< "" when no candidate exists
  std::string source;  ///< "MINITRAIN_BENCH_DIR", "beside this minitrain binary", ...
  std::string looked;  ///< the candidates tried, for the message when none exists
};
/// Throws ValueError when MINITRAIN_BENCH_DIR is set but is not a directory.
BenchDir find_bench_dir();

class BenchCommand {
 public:
  explicit BenchCommand(CLI::App& parent);
  bool parsed() const;
  /// Runs the areas; 0 when every one ran, 1 when one failed or was not built, 2 for an unknown
  /// area. Throws minitrain errors (an output directory that cannot be made, ...).
  int run(std::ostream& out, std::ostream& err);

 private:
  int list(std::ostream& out, const BenchDir& dir) const;

  CLI::App* app_;
  std::vector<std::string> areas_;
  bool list_ = false;
  std::string out_dir_ = "bench-results";
  std::string filter_;
  bool quick_ = false;
  OpBenchRequest op_;                     ///< `minitrain bench op ...`: --size, --device, --runs
  bool counters_ = false;                 ///< `minitrain bench gemm --counters` (emulated GPUs)
  GemmCountersRequest counters_request_;  ///< its --device-profile and --shape
};

}  // namespace minitrain::cli
