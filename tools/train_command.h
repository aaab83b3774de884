#pragma once
// `minitrain train`: the flags of every training key (train/config.h), `--config FILE` (TOML with
// the same keys), flags over file over defaults, then train/run_training.h.

#include <map>
#include <ostream>
#include <string>

namespace CLI {
class App;
}  // namespace CLI

namespace minitrain::cli {

class TrainCommand {
 public:
  /// Registers the subcommand and its flags on `parent`.
  explicit TrainCommand(CLI::App& parent);
  bool parsed() const;
  /// Builds the config, trains; info lines to `out`, progress to `progress`. Throws minitrain
  /// errors.
  int run(std::ostream& out, std::ostream& progress);
  /// For a command line CLI11 refused: "unknown option --lerning-rate (did you mean --lr?)" for
  /// the first flag that is no training key, or "" when every flag is one.
  std::string unknown_flag_message(int argc, char** argv) const;

 private:
  CLI::App* app_;
  std::string config_path_;
  std::map<std::string, std::string> values_;  // option text, by key
  std::map<std::string, bool> flags_;          // boolean flags, by key
  bool no_shuffle_ = false;
};

}  // namespace minitrain::cli
