#pragma once
// Internal to train/: the table behind config_keys(), shared by the command-line and TOML
// readers so both set a key the same way.

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/config.h"

namespace minitrain::config_detail {

using Value = std::variant<bool, int64_t, double, std::string, std::pair<double, double>,
                           std::vector<std::string>>;

struct KeyEntry {
  ConfigKey key;
  std::function<void(TrainConfig&, const Value&)> set;  ///< Value holds the kind's alternative
  std::function<nlohmann::json(const TrainConfig&)> get;
};

const std::vector<KeyEntry>& key_table();
/// The entry for `name` ('_' read as '-'), or nullptr.
const KeyEntry* find_key(const std::string& name);
/// The known key closest to `name` in edit distance, for "did you mean" hints; empty if none is
/// close.
std::string closest_key(const std::string& name);
const char* kind_name(ConfigValueKind kind);  ///< "an integer", "a number", ...

}  // namespace minitrain::config_detail
