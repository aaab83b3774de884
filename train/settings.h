#pragma once
// Internal to train/: the declaration table of the training settings (docs/settings.md).
//
// Note [one home per setting]: each setting of `minitrain train` is one row of the table in
// train/settings_table.cpp: its name (the long flag without dashes, also the TOML key), its type,
// its --help line, its TrainConfig member (whose initializer is the default), and two optional
// columns:
//   - where it goes in the library: `.optimizer()` (the member is the optimizer's own: TrainConfig
//     derives from OptimizerOptions, Note [one options struct] in optim/optimizer.h) or
//     `.loss(&LossOptions::x)`. optimizer_config() and loss_options() are made from these, and
//     the library's constructor (Adam's, HuberLoss's; for --clip-grad-norm, clip_grad_norm_,
//     `.library_option({"max_norm"})`) is the one place that checks the value: validate() builds
//     the optimizer and the loss once without parameters, and an OptionError about option "x"
//     becomes an error naming the row's flag. Which optimizer or loss takes the setting is the
//     library table's column (optimizer_table(), loss_table()), not an if/else here.
//   - a check, for a setting no library object checks: its choices, `.one_of(schedule_names())`,
//     or its bounds, `.at_least(1).at_most(kMaxInt32)`.
// The command line (tools/train_command.cpp), the TOML reader (config_toml.cpp, runs_config.cpp),
// --help, config_to_json() and these checks all read the table.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "nn/loss.h"
#include "optim/make_optimizer.h"
#include "train/config.h"

namespace minitrain::config_detail {

using Value = std::variant<bool, int64_t, double, std::string, std::pair<double, double>,
                           std::vector<std::string>>;

// Upper bounds that keep every product of counts (rows x width, epochs x batches, ...) inside
// int64 and every count that becomes an int (threads, replicas, a GEMM dimension) inside int32.
inline constexpr int64_t kMaxInt32 =
    2147483647;  // batch rows are a GEMM dimension: an int in cuBLAS
inline constexpr int64_t kMaxSteps = int64_t{1}
                                     << 40;   // a trillion steps; keeps step arithmetic exact
inline constexpr int64_t kMaxWorkers = 4096;  // threads, replicas, stages

/// The library's name of the option a flag sets: "weight-decay" -> "weight_decay".
std::string option_name(const std::string& flag);

/// One row of the table.
struct KeyEntry {
  ConfigKey key;                                        ///< name, type, --help line
  std::function<void(TrainConfig&, const Value&)> set;  ///< Value holds the kind's alternative
  std::function<nlohmann::json(const TrainConfig&)> get;
  /// Library options it fills; empty functions for settings of the run itself.
  /// An optimizer setting: the member is OptimizerOptions' (TrainConfig's base), read in place.
  bool to_optimizer = false;
  std::function<void(const TrainConfig&, LossOptions&)> to_loss;
  /// The library's names of those options ("delta"; "beta1", "beta2"): an OptionError about one
  /// of them is reported under this row's flag.
  std::vector<std::string> options;
  /// The bound of a setting that no library constructor checks: ValueError naming the flag.
  std::function<void(const TrainConfig&)> check;

  /// The columns, chained on a row of the table.
  /// An optimizer setting; `names` default to the flag's ("weight-decay": "weight_decay").
  KeyEntry& optimizer(std::vector<std::string> names = {});
  template <typename T>
  KeyEntry& loss(T LossOptions::*to, std::vector<std::string> names = {});
  /// The same, for a value the member pointer cannot carry across (an optional, a pair, a file).
  KeyEntry& loss(std::vector<std::string> names,
                 std::function<void(const TrainConfig&, LossOptions&)> fill);
  /// The library's names of the option, for a setting a library function checks
  /// (check_settings() calls it): "max_norm" for --clip-grad-norm.
  KeyEntry& library_option(std::vector<std::string> names);
  /// A name's choices: "--optimizer: unknown value 'lion' (choose one of: sgd, adam, ...)".
  KeyEntry& one_of(std::vector<std::string> names);
  /// An integer's bounds: "--batch-size must be >= 1, got 0".
  KeyEntry& at_least(int64_t lo);
  KeyEntry& at_most(int64_t hi);

  // Set by the row builders (settings_table.cpp); the columns above read them.
  std::function<Value(const TrainConfig&)> read;  ///< the member's value, as set() takes it
};

/// The table, in the order --help lists it (settings_table.cpp).
const std::vector<KeyEntry>& key_table();
/// The entry for `name` ('_' read as '-'), or nullptr.
const KeyEntry* find_key(const std::string& name);
/// The known key closest to `name` in edit distance, for "did you mean" hints; empty if none is
/// close.
std::string closest_key(const std::string& name);
const char* kind_name(ConfigValueKind kind);  ///< "an integer", "a number", ...

/// Runs `f` (which builds a library object from the table's columns); an OptionError about one
/// of the rows' options becomes a ValueError naming the row's flag: "--huber-delta must be > 0
/// but is 0".
void with_setting_flags(const std::function<void()>& f);

/// Every row's check (choices, bounds), then the optimizer and the loss built once without
/// parameters from the rows' columns (their constructors check the values, their tables which
/// setting applies): the first problem is a ValueError naming the flag. Part of validate().
void check_settings(const TrainConfig& config);

// ---- the columns' templates ----

template <typename T>
KeyEntry& KeyEntry::loss(T LossOptions::*to, std::vector<std::string> names) {
  if (names.empty()) names.push_back(option_name(key.name));
  options = std::move(names);
  to_loss = [read = read, to](const TrainConfig& c, LossOptions& o) {
    o.*to = std::get<T>(read(c));
  };
  return *this;
}

}  // namespace minitrain::config_detail
