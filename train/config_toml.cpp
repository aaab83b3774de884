// `--config FILE`: a TOML table whose keys are the long flag names. Every value is checked
// against its key's type before any is set, so a bad file changes nothing.

#include <toml++/toml.h>

#include <filesystem>
#include <map>
#include <sstream>
#include <utility>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/strings.h"
#include "train/config.h"
#include "train/settings.h"
#include "train/config_toml_keys.h"

namespace minitrain {
namespace {

using config_detail::check_one_spelling_per_key;
using config_detail::KeyEntry;
using config_detail::Value;

std::string where(const std::string& source, const toml::node& node) {
  std::ostringstream os;
  os << source;
  if (node.source().begin.line > 0) os << ":" << node.source().begin.line;
  return os.str();
}

const char* toml_type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a floating-point number";
    case toml::node_type::boolean:
      return "a boolean";
    default:
      return "a date or time";
  }
}

bool number_of(const toml::node& node, double& out) {
  if (auto i = node.value_exact<int64_t>()) return out = static_cast<double>(*i), true;
  if (auto f = node.value_exact<double>()) return out = *f, true;
  return false;
}

bool split_pair(const std::string& s, double& a, double& b) {
  const auto comma = s.find(',');
  if (comma == std::string::npos) return false;
  try {
    std::size_t n1 = 0, n2 = 0;
    a = std::stod(s.substr(0, comma), &n1);
    b = std::stod(s.substr(comma + 1), &n2);
    return n1 == comma && n2 == s.size() - comma - 1;
  } catch (const std::exception&) {
    return false;
  }
}

// The node's value as the key's kind, or nullopt when its TOML type does not fit.
std::optional<Value> convert(const KeyEntry& e, const toml::node& node) {
  switch (e.key.kind) {
    case ConfigValueKind::Bool:
      if (auto b = node.value_exact<bool>()) return Value(*b);
      return std::nullopt;
    case ConfigValueKind::Int:
      if (auto i = node.value_exact<int64_t>()) return Value(*i);
      return std::nullopt;
    case ConfigValueKind::Float: {
      double d = 0;
      if (number_of(node, d)) return Value(d);
      return std::nullopt;
    }
    case ConfigValueKind::String:
      if (auto s = node.value_exact<std::string>()) return Value(*s);
      return std::nullopt;
    case ConfigValueKind::FloatPair: {
      double a = 0, b = 0;
      if (const toml::array* arr = node.as_array()) {
        if (arr->size() == 2 && number_of(*arr->get(0), a) && number_of(*arr->get(1), b))
          return Value(std::make_pair(a, b));
        return std::nullopt;
      }
      if (auto s = node.value_exact<std::string>(); s && split_pair(*s, a, b))
        return Value(std::make_pair(a, b));
      return std::nullopt;
    }
    case ConfigValueKind::StringList: {
      std::vector<std::string> names;
      if (const toml::array* arr = node.as_array()) {
        for (const toml::node& item : *arr) {
          auto s = item.value_exact<std::string>();
          if (!s || s->empty()) return std::nullopt;
          names.push_back(*s);
        }
        return Value(names);
      }
      if (auto s = node.value_exact<std::string>()) {
        std::stringstream ss(*s);
        std::string item;
        while (std::getline(ss, item, ',')) {
          if (item.empty()) return std::nullopt;
          names.push_back(item);
        }
        if (names.empty()) return std::nullopt;
        return Value(names);
      }
      return std::nullopt;
    }
  }
  return std::nullopt;
}

bool is_path_key(const std::string& name) {
  for (const char* k :
       {"data", "targets", "init", "save", "checkpoint-dir", "log", "sample-weights", "val-data",
        "val-targets", "save-best", "class-weights", "pos-weight", "profile-kernels"})
    if (name == k) return true;
  return false;
}

// `value` relative to `base_dir` when it is a relative path (and not "synthetic[:N]" data).
std::string relative_to(const std::string& base_dir, const std::string& value) {
  // "auto" is --class-weights' word, not a file.
  if (value.empty() || value == "auto" || value == "synthetic" || starts_with(value, "synthetic:"))
    return value;
  const std::filesystem::path p(value);
  if (p.is_absolute() || base_dir == ".") return value;
  return (std::filesystem::path(base_dir) / p).string();
}

}  // namespace

namespace config_detail {

// "batch-size" and "batch_size" are one key: both in a table is a mistake, not "the last wins".
void check_one_spelling_per_key(const toml::table& table, const std::string& source) {
  std::map<std::string, std::string> spelling_of;  // key -> how the table spelt it
  for (const auto& [k, node] : table) {
    const std::string name(k.str());
    const KeyEntry* e = find_key(name);
    if (e == nullptr) continue;
    const auto [earlier, first_time] = spelling_of.emplace(e->key.name, name);
    MT_CHECK_AS(ValueError, first_time, where(source, node), ": key '", name, "' sets '",
                e->key.name, "', which '", earlier->second,
                "' already set in this table; keep one of them");
  }
}

}  // namespace config_detail

void apply_toml_config(TrainConfig& config, const std::string& toml_text, const std::string& source,
                       const std::string& base_dir) {
  toml::table table;
  try {
    table = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    MT_THROW(ValueError, source, ":", e.source().begin.line, ": invalid TOML: ", e.description());
  }

  // Check everything first, then set: a bad file leaves `config` as it was.
  check_one_spelling_per_key(table, source);
  TrainConfig updated = config;
  for (const auto& [key, node] : table) {
    const std::string name = excerpt(key.str());
    const KeyEntry* e = config_detail::find_key(name);
    if (e == nullptr && node.is_table())
      MT_THROW(
          ValueError, where(source, node), ": table [", name,
          "] is not a training key; put the keys (lr = 0.01, ...) at the top level of the file");
    if (e == nullptr) {
      const std::string hint = config_detail::closest_key(name);
      MT_THROW(ValueError, where(source, node), ": unknown key '", name, "'",
               hint.empty()
                   ? std::string(" (keys are the long flags of minitrain train, e.g. batch-size)")
                   : " (did you mean '" + hint + "'?)");
    }
    const std::optional<Value> value = convert(*e, node);
    if (!value)
      MT_THROW(ValueError, where(source, node), ": key '", name, "' must be ",
               config_detail::kind_name(e->key.kind), ", got ", toml_type_name(node));
    std::optional<Value> v = value;
    if (!base_dir.empty() && is_path_key(e->key.name))
      v = Value(relative_to(base_dir, std::get<std::string>(*v)));
    try {
      e->set(updated, *v);
    } catch (const ValueError& err) {
      MT_THROW(ValueError, where(source, node), ": key '", name, "': ", err.what());
    }
  }
  config = std::move(updated);
}

void apply_toml_config_file(TrainConfig& config, const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  apply_toml_config(config, read_file_bytes(path), path, dir);
}

}  // namespace minitrain
