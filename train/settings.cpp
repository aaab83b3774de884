// The machinery of the settings table (train/settings.h): setting a key from command-line text,
// finding a key, the table's columns, and what is made from them (optimizer_config(),
// loss_options(), config_to_json()). The rows are in settings_table.cpp.

#include "train/settings.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "core/error.h"
#include "core/option_error.h"
#include "core/strings.h"
#include "optim/clip.h"

namespace minitrain {
namespace config_detail {

using K = ConfigValueKind;

std::string option_name(const std::string& flag) {
  std::string name = flag;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

KeyEntry& KeyEntry::optimizer(std::vector<std::string> names) {
  if (names.empty()) names.push_back(option_name(key.name));
  options = std::move(names);
  to_optimizer = true;
  return *this;
}

KeyEntry& KeyEntry::loss(std::vector<std::string> names,
                         std::function<void(const TrainConfig&, LossOptions&)> fill) {
  options = std::move(names);
  to_loss = std::move(fill);
  return *this;
}

KeyEntry& KeyEntry::library_option(std::vector<std::string> names) {
  options = std::move(names);
  return *this;
}

// Checks chain: each runs the one before it first.
KeyEntry& KeyEntry::one_of(std::vector<std::string> names) {
  check = [before = check, read = read, name = key.name,
           names = std::move(names)](const TrainConfig& c) {
    if (before) before(c);
    const std::string v = std::get<std::string>(read(c));
    if (std::find(names.begin(), names.end(), v) == names.end())
      MT_THROW(ValueError, "--", name, ": unknown value '", v,
               "' (choose one of: ", join(names, ", "), ")");
  };
  return *this;
}

// Bounds chain: each check runs the one before it first.
KeyEntry& KeyEntry::at_least(int64_t lo) {
  check = [before = check, read = read, name = key.name, lo](const TrainConfig& c) {
    if (before) before(c);
    const int64_t v = std::get<int64_t>(read(c));
    if (v < lo) MT_THROW(ValueError, "--", name, " must be >= ", lo, ", got ", v);
  };
  return *this;
}

KeyEntry& KeyEntry::at_most(int64_t hi) {
  check = [before = check, read = read, name = key.name, hi](const TrainConfig& c) {
    if (before) before(c);
    const int64_t v = std::get<int64_t>(read(c));
    if (v > hi) MT_THROW(ValueError, "--", name, " must be <= ", hi, ", got ", v);
  };
  return *this;
}

void with_setting_flags(const std::function<void()>& f) {
  try {
    f();
  } catch (const OptionError& e) {
    for (const KeyEntry& row : key_table())
      for (const std::string& option : row.options) {
        if (option != e.option()) continue;
        // "--betas (beta2) must be ...": which of the row's options, when it has several.
        const std::string which = row.options.size() > 1 ? " (" + option + ")" : "";
        MT_THROW(ValueError, "--", row.key.name, which, " ", e.detail());
      }
    throw;
  }
}

namespace {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string normalise(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

}  // namespace

const KeyEntry* find_key(const std::string& name) {
  const std::string n = normalise(name);
  for (const KeyEntry& e : key_table())
    if (n == e.key.name) return &e;
  return nullptr;
}

std::string closest_key(const std::string& name) {
  // Names people reach for first (torch's argument names, other trainers' flags) and the key
  // they mean; misspellings of them are caught by the edit distance too.
  static const std::vector<std::pair<std::string, std::string>> aliases = {
      {"learning-rate", "lr"},
      {"batch", "batch-size"},
      {"epoch", "epochs"},
      {"max-steps", "steps"},
      {"optim", "optimizer"},
      {"act", "activation"},
      {"max-grad-norm", "clip-grad-norm"},
      {"accumulate", "grad-accum"},
      {"weights", "init"},
      {"output", "save"},
      {"num-threads", "threads"},
      {"num-workers", "workers"},
      {"warmup", "warmup-steps"}};
  const std::string n = normalise(name);
  std::string best;
  std::size_t best_d = 3;  // farther than this is no hint
  for (const KeyEntry& e : key_table()) {
    const std::size_t d = edit_distance(n, e.key.name);
    if (d < best_d) best_d = d, best = e.key.name;
  }
  for (const auto& [alias, key] : aliases) {
    const std::size_t d = edit_distance(n, alias);
    if (d < best_d) best_d = d, best = key;
  }
  return best;
}

const char* kind_name(ConfigValueKind kind) {
  switch (kind) {
    case K::Bool:
      return "true or false";
    case K::Int:
      return "an integer";
    case K::Float:
      return "a number";
    case K::String:
      return "a string";
    case K::FloatPair:
      return "two numbers (B1,B2)";
    case K::StringList:
      return "a list of names";
  }
  return "?";
}

}  // namespace config_detail

namespace {

using config_detail::Value;

std::vector<std::string> split_commas(const std::string& text) {
  if (text.empty()) return {};
  return split(text, ',');
}

// A number as written: an underflow (1e-320, a subnormal, or 1e-400, which rounds to 0) is a
// number, as Python's float() takes it, and the key's own check then judges its value (--lr
// 1e-320 is a positive learning rate, as torch.optim accepts it); an overflow (1e400) is not.
bool parse_double(const std::string& s, double& out) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return false;
  return errno != ERANGE || std::fabs(out) != HUGE_VAL;
}

bool parse_int(const std::string& s, int64_t& out) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  out = v;
  return end == s.c_str() + s.size() && errno != ERANGE;
}

Value parse_text(const config_detail::KeyEntry& e, const std::string& text) {
  const auto bad = [&]() -> Value {
    MT_THROW(ValueError, "--", e.key.name, " expects ", config_detail::kind_name(e.key.kind),
             ", got '", text, "'");
  };
  switch (e.key.kind) {
    case ConfigValueKind::Bool:
      if (text == "true" || text == "1" || text == "on" || text.empty()) return true;
      if (text == "false" || text == "0" || text == "off") return false;
      return bad();
    case ConfigValueKind::Int: {
      int64_t v = 0;
      if (!parse_int(text, v)) return bad();
      return v;
    }
    case ConfigValueKind::Float: {
      double v = 0;
      if (!parse_double(text, v)) return bad();
      return v;
    }
    case ConfigValueKind::String:
      return text;
    case ConfigValueKind::FloatPair: {
      const std::vector<std::string> parts = split_commas(text);
      double a = 0, b = 0;
      if (parts.size() != 2 || !parse_double(parts[0], a) || !parse_double(parts[1], b))
        return bad();
      return std::make_pair(a, b);
    }
    case ConfigValueKind::StringList: {
      std::vector<std::string> parts = split_commas(text);
      for (const std::string& p : parts)
        if (p.empty())
          MT_THROW(ValueError, "--", e.key.name, ": empty name in '", text, "' (expected a,b,...)");
      return parts;
    }
  }
  return bad();
}

}  // namespace

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> keys = [] {
    std::vector<ConfigKey> k;
    for (const auto& e : config_detail::key_table()) k.push_back(e.key);
    return k;
  }();
  return keys;
}

bool find_config_key(const std::string& name) { return config_detail::find_key(name) != nullptr; }
std::string closest_config_key(const std::string& name) { return config_detail::closest_key(name); }

void set_config_value(TrainConfig& config, const std::string& key, const std::string& text) {
  const config_detail::KeyEntry* e = config_detail::find_key(key);
  if (e == nullptr) {
    const std::string hint = config_detail::closest_key(key);
    MT_THROW(ValueError, "unknown option --", key,
             hint.empty() ? "" : " (did you mean --" + hint + "?)");
  }
  e->set(config, parse_text(*e, text));
}

// The optimizer's settings are TrainConfig's base, handed over whole (no member-by-member copy);
// the loss's are made from the rows' loss columns.
OptimizerConfig optimizer_config(const TrainConfig& c) {
  OptimizerConfig o;
  static_cast<OptimizerOptions&>(o) = c;
  o.name = c.optimizer;
  return o;
}

LossOptions loss_options(const TrainConfig& c) {
  LossOptions o;
  for (const auto& e : config_detail::key_table())
    if (e.to_loss) e.to_loss(c, o);
  return o;
}

void config_detail::check_settings(const TrainConfig& c) {
  for (const auto& e : config_detail::key_table())
    if (e.check) e.check(c);
  config_detail::with_setting_flags([&] {
    // Built without parameters: the constructors check every value, the tables' settings
    // columns which optimizer and loss take which setting.
    (void)make_optimizer(optimizer_config(c), {});
    const LossOptions loss = loss_options(c);
    check_loss_settings_apply(loss.name, given_loss_settings(loss));
    (void)make_loss(loss);
    (void)clip_grad_norm_({}, c.clip_grad_norm);  // no gradients: its check of max_norm alone
  });
}

std::string config_to_json(const TrainConfig& config) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& e : config_detail::key_table()) j[e.key.name] = e.get(config);
  // Paths are bytes on Linux, not always UTF-8: a stray byte becomes U+FFFD in the checkpoint's
  // metadata instead of a JSON exception (saved and current configs are compared in this form).
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace minitrain
