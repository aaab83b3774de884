// runs.toml: split into [defaults] and [[run]] tables with toml++, then every key goes through
// apply_toml_config one at a time, so a key sets the config exactly as in `minitrain train
// --config` and a message names the key's own line in runs.toml.

#include "train/runs_config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/device.h"
#include "core/error.h"
#include "train/settings.h"
#include "train/config_toml_keys.h"

namespace minitrain {
namespace {

int line_of(const toml::node& node) { return static_cast<int>(node.source().begin.line); }

// `priority = N`: an integer in [-19, 19] (a niceness range, so that it can set one).
int read_priority(const toml::node& v, const std::string& source) {
  const std::optional<int64_t> p = v.value_exact<int64_t>();
  MT_CHECK_AS(ValueError, p.has_value() && *p >= -19 && *p <= 19, source, ":", line_of(v),
              ": priority must be an integer in [-19, 19] (higher starts first; negative also "
              "lowers the run's CPU priority)");
  return static_cast<int>(*p);
}

bool safe_name(const std::string& name) {
  if (name.empty() || name.size() > 100 || name[0] == '.') return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// Sets one key through apply_toml_config. That reads a one-key document, so its messages say
// "SOURCE:1: ..."; the line is replaced by the key's line in the real file.
// The keys a run writes: a relative path there names a file in the run's own directory
// (place_run_outputs), not beside runs.toml.
bool is_output_key(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  return key == "save" || key == "save-best" || key == "checkpoint-dir" || key == "log";
}

void apply_key(TrainConfig& config, const std::string& key, const toml::node& node,
               const std::string& source, const std::string& base_dir) {
  toml::table one;
  one.insert(key, node);
  std::ostringstream text;
  text << one;
  try {
    apply_toml_config(config, text.str(), source, is_output_key(key) ? "" : base_dir);
  } catch (const ValueError& e) {
    std::string what = e.what();
    const std::string prefix = source + ":1";
    if (what.rfind(prefix, 0) == 0)
      what = what.substr(prefix.size());
    else
      what = ": " + what;
    throw ValueError(source + ":" + std::to_string(line_of(node)) + what);
  }
}

// Keys are applied one at a time, so apply_toml_config cannot see that "batch-size" and
// "batch_size" in one table set the same key: each table is checked whole first (a run may still
// override [defaults]).
using config_detail::check_one_spelling_per_key;

// A run may be crossed with at most this many sweep points: a typo such as a list of 10,000
// learning rates should not start 10,000 processes.
constexpr std::size_t kMaxSweepRuns = 1000;

// One point of the [sweep] grid: a value per swept key, and the name suffix they make.
struct SweepPoint {
  std::vector<std::pair<std::string, const toml::node*>> values;
  std::string name;  ///< "lr-0.001-optimizer-sgd"; empty without a [sweep]
};

// A value as it reads in a run name: 0.001, sgd, 64; a list's items joined by '+'. Characters a
// directory name cannot hold become '_'.
std::string name_text(const toml::node& value) {
  std::string text;
  if (const auto* list = value.as_array()) {
    for (const toml::node& item : *list) text += (text.empty() ? "" : "+") + name_text(item);
    return text;
  }
  if (auto str = value.value_exact<std::string>()) {
    text = *str;
  } else if (auto f = value.value_exact<double>()) {
    // The fewest digits that read back as the same double: %g alone printed 1e-07 and
    // 1.00000001e-07 alike, and two runs got one name.
    char buf[40];
    for (int digits = 6; digits <= 17; ++digits) {
      std::snprintf(buf, sizeof buf, "%.*g", digits, *f);
      if (std::strtod(buf, nullptr) == *f) break;
    }
    text = buf;
  } else if (auto i = value.value_exact<int64_t>()) {
    text = std::to_string(*i);
  } else if (auto b = value.value_exact<bool>()) {
    text = *b ? "true" : "false";
  } else {
    text = "value";  // a table or a date: apply_key says what is wrong with it
  }
  for (char& c : text)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == '-' || c == '+'))
      c = '_';
  return text;
}

// A value as the file writes it, for messages: "a b", 0.001, [1, 2].
std::string value_text(const toml::node& value) {
  std::ostringstream os;
  value.visit([&os](const auto& v) { os << v; });
  return os.str();
}

// Every combination of the swept values, the first key varying slowest; one empty point without
// a [sweep].
std::vector<SweepPoint> sweep_grid(const toml::table* sweep) {
  std::vector<SweepPoint> grid(1);
  if (sweep == nullptr) return grid;
  for (const auto& [k, v] : *sweep) {
    const std::string key(k.str());
    std::vector<SweepPoint> next;
    for (const SweepPoint& point : grid) {
      for (const toml::node& value : *v.as_array()) {
        SweepPoint p = point;
        p.values.emplace_back(key, &value);
        p.name += (p.name.empty() ? "" : "-") + key + "-" + name_text(value);
        next.push_back(std::move(p));
      }
    }
    grid = std::move(next);
  }
  return grid;
}

std::vector<std::string*> input_paths(TrainConfig& c) {
  return {&c.data,     &c.targets,     &c.init,          &c.sample_weights,
          &c.val_data, &c.val_targets, &c.class_weights, &c.pos_weight};
}
std::vector<std::string*> output_paths(TrainConfig& c) {
  return {&c.save, &c.save_best, &c.checkpoint_dir, &c.log};
}

// Every "{name}" in the run's paths becomes its name, so that one [defaults] line serves all runs.
void expand_name(TrainConfig& c, const std::string& name) {
  const std::string token = "{name}";
  for (auto* paths : {input_paths, output_paths})
    for (std::string* p : paths(c))
      for (std::size_t at = 0; (at = p->find(token, at)) != std::string::npos; at += name.size())
        p->replace(at, token.size(), name);
}

void make_inputs_absolute(TrainConfig& c) {
  for (std::string* p : input_paths(c)) {
    // "auto" is --class-weights' word, not a file.
    if (p->empty() || *p == "synthetic" || p->rfind("synthetic:", 0) == 0 || *p == "auto") continue;
    *p = std::filesystem::absolute(*p).lexically_normal().string();
  }
}

// Checks a run can be one independent process on one device; ValueError otherwise.
void check_run(const TrainConfig& c) {
  validate(c);
  Device::parse(c.device);  // DeviceError for a name that is no device
  if (c.parallel != "none")
    MT_THROW(ValueError, "parallel = '", c.parallel,
             "': a pipelines run is one process on one device; drop the key (or use minitrain "
             "train --parallel)");
}

}  // namespace

RunsFile parse_runs_config(const std::string& toml_text, const std::string& source,
                           const std::string& base_dir) {
  toml::table table;
  try {
    table = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    MT_THROW(ValueError, source, ":", e.source().begin.line, ": invalid TOML: ", e.description());
  }

  TrainConfig defaults;
  int default_priority = 0;
  const toml::array* runs = nullptr;
  const toml::table* sweep = nullptr;
  int sweep_line = 0;
  std::size_t grid_size = 1;
  for (const auto& [key, node] : table) {
    const std::string name(key.str());
    if (name == "defaults") {
      const toml::table* d = node.as_table();
      MT_CHECK_AS(ValueError, d != nullptr, source, ":", line_of(node),
                  ": 'defaults' must be a table ([defaults] with training keys)");
      check_one_spelling_per_key(*d, source);
      for (const auto& [k, v] : *d) {
        const std::string kname(k.str());
        MT_CHECK_AS(ValueError, kname != "name", source, ":", line_of(v),
                    ": [defaults] cannot set 'name'; each [[run]] names itself");
        if (kname == "priority") {
          default_priority = read_priority(v, source);
          continue;
        }
        apply_key(defaults, kname, v, source, base_dir);
      }
    } else if (name == "sweep") {
      sweep = node.as_table();
      MT_CHECK_AS(ValueError, sweep != nullptr, source, ":", line_of(node),
                  ": 'sweep' must be a table ([sweep] with lists of values: lr = [1e-3, 3e-3])");
      check_one_spelling_per_key(*sweep, source);
      sweep_line = line_of(node);
      for (const auto& [k, v] : *sweep) {
        const std::string kname(k.str());
        const toml::array* values = v.as_array();
        MT_CHECK_AS(ValueError, kname != "name" && kname != "priority", source, ":", line_of(v),
                    ": [sweep] cannot vary '", kname, "'; set it in [[run]] or [defaults]");
        MT_CHECK_AS(ValueError, values != nullptr && !values->empty(), source, ":", line_of(v),
                    ": [sweep] ", kname, " must be a non-empty list of values (", kname,
                    " = [a, b])");
        grid_size *= values->size();
        MT_CHECK_AS(ValueError, grid_size <= kMaxSweepRuns, source, ":", line_of(v),
                    ": [sweep] makes more than ", kMaxSweepRuns, " runs per [[run]]");
      }
    } else if (name == "run") {
      runs = node.as_array();
      MT_CHECK_AS(ValueError, runs != nullptr && runs->is_array_of_tables(), source, ":",
                  line_of(node),
                  ": 'run' must be an array of tables: write each run as a [[run]] table");
    } else {
      MT_THROW(ValueError, source, ":", line_of(node), ": unknown top-level key '", excerpt(name),
               "'; runs.toml holds an optional [defaults] table, an optional [sweep] table and "
               "[[run]] tables (put training keys in them)");
    }
  }
  MT_CHECK_AS(ValueError, (runs != nullptr && !runs->empty()) || sweep != nullptr, source,
              ": no runs; add one [[run]] table per run with a name and training keys (name = "
              "\"a\", lr = 0.01), or a [sweep] table of values to try");

  RunsFile file;
  file.path = source;
  // The runs the file names ([[run]] tables), each crossed with every point of the [sweep] grid;
  // with a [sweep] and no [[run]], the grid alone.
  struct BaseRun {
    std::string name;
    int line = 0;
    const toml::table* keys = nullptr;
  };
  std::vector<BaseRun> bases;
  std::set<std::string> names;
  int index = 0;
  const toml::array no_runs;
  for (const toml::node& run_node : runs != nullptr ? *runs : no_runs) {  // both lvalues: no copy
    ++index;
    const toml::table& run = *run_node.as_table();
    const int line = line_of(run_node);
    const toml::node* name_node = run.get("name");
    MT_CHECK_AS(ValueError, name_node != nullptr, source, ":", line, ": [[run]] #", index,
                " has no name; give it name = \"...\" (its output directory)");
    const std::optional<std::string> name = name_node->value_exact<std::string>();
    MT_CHECK_AS(ValueError, name.has_value(), source, ":", line_of(*name_node), ": [[run]] #",
                index, ": name must be a string");
    MT_CHECK_AS(ValueError, safe_name(*name), source, ":", line_of(*name_node), ": run name '",
                excerpt(*name),
                "' is not a safe directory name; use letters, digits, '.', '_' and '-' (not "
                "starting with '.')");
    MT_CHECK_AS(ValueError, names.insert(*name).second, source, ":", line_of(*name_node),
                ": run name '", *name, "' is used twice; give each [[run]] its own name");
    bases.push_back({*name, line, &run});
  }
  if (bases.empty()) bases.push_back({"", sweep_line, nullptr});

  const std::vector<SweepPoint> grid = sweep_grid(sweep);
  file.run_tables = bases.size();
  file.sweep_points = grid.size();
  // run name -> the [[run]] and the sweep point that made it
  std::map<std::string, std::pair<const BaseRun*, const SweepPoint*>> made;
  for (const BaseRun& base : bases) {
    for (const SweepPoint& point : grid) {
      RunsFileEntry r;
      r.line = base.line;
      r.name = base.name.empty()    ? point.name
               : point.name.empty() ? base.name
                                    : base.name + "-" + point.name;
      MT_CHECK_AS(ValueError, safe_name(r.name), source, ":", r.line, ": run name '",
                  excerpt(r.name),
                  "' (from [sweep]) is not a safe directory name of at most 100 "
                  "characters; sweep fewer keys or shorter values");
      const auto [earlier, fresh] = made.emplace(r.name, std::make_pair(&base, &point));
      if (!fresh && earlier->second.first == &base) {
        // Two points of the grid read alike once a name's characters are replaced ("a b", "a?b").
        std::string first, second;
        for (std::size_t k = 0; k < point.values.size(); ++k) {
          const auto& [key, mine] = point.values[k];
          const toml::node* theirs = earlier->second.second->values[k].second;
          if (value_text(*theirs) == value_text(*mine)) continue;
          first += (first.empty() ? "" : ", ") + key + " = " + value_text(*theirs);
          second += (second.empty() ? "" : ", ") + key + " = " + value_text(*mine);
        }
        MT_THROW(ValueError, source, ":", sweep_line, ": [sweep] values ", first, " and ", second,
                 " both make the run name '", r.name,
                 "' (a run name keeps letters, digits, '.', '_', '-' and '+'; others become '_'); "
                 "make the values differ in those characters");
      }
      MT_CHECK_AS(ValueError, fresh, source, ":", r.line, ": run name '", r.name,
                  "' comes out twice: a [[run]] name and a [sweep] suffix make it again; rename "
                  "the [[run]]");
      r.config = defaults;
      r.priority = default_priority;
      try {
        for (const auto& [key, value] : point.values)
          apply_key(r.config, key, *value, source, base_dir);
        if (base.keys != nullptr) {
          check_one_spelling_per_key(*base.keys, source);
          for (const auto& [k, v] : *base.keys) {
            const std::string kname(k.str());
            if (kname == "name") continue;
            if (kname == "priority") {
              r.priority = read_priority(v, source);
              continue;
            }
            MT_CHECK_AS(ValueError, sweep == nullptr || !sweep->contains(kname), source, ":",
                        line_of(v), ": the run sets '", kname,
                        "', which [sweep] varies; drop one of the two");
            apply_key(r.config, kname, v, source, base_dir);
          }
        }
        check_run(r.config);
      } catch (const Error& e) {
        // Key errors already name their line; a combination that does not check names the run's.
        const std::string what = e.what();
        r.error = "run '" + r.name + "': " +
                  (what.rfind(source + ":", 0) == 0
                       ? what
                       : source + ":" + std::to_string(r.line) + ": " + what);
      }
      expand_name(r.config, r.name);
      make_inputs_absolute(r.config);
      file.runs.push_back(std::move(r));
    }
  }
  return file;
}

void check_run_count(const RunsFile& file, std::size_t max_runs) {
  MT_CHECK_AS(ValueError, file.runs.size() <= max_runs, file.path, " makes ", file.runs.size(),
              " runs (", file.run_tables, " [[run]] x ", file.sweep_points,
              " [sweep] points), more than --max-runs ", max_runs,
              "; raise --max-runs if you mean it (each run is a process and a directory)");
}

void place_run_outputs(RunsFile& file, const std::string& out_dir) {
  const std::string summary =
      (std::filesystem::absolute(out_dir) / "summary.json").lexically_normal().string();
  std::map<std::string, std::string> writer;  // output path -> "run 'a' (save)"
  writer.emplace(summary, "the summary of all runs");
  for (RunsFileEntry& run : file.runs) {
    // Even a run that never starts gets its directory (for its output.log).
    MT_CHECK_AS(ValueError, run.name != "summary.json", file.path, ": run '", run.name,
                "' would have its directory at ", summary,
                ", where minitrain pipelines writes its summary once every run has finished; "
                "rename the run");
    if (!run.error.empty()) continue;  // never started
    const std::filesystem::path dir = std::filesystem::absolute(out_dir) / run.name;
    TrainConfig& c = run.config;
    if (c.log.empty()) c.log = "metrics.jsonl";
    const std::pair<std::string*, const char*> outputs[] = {{&c.save, "save"},
                                                            {&c.save_best, "save-best"},
                                                            {&c.checkpoint_dir, "checkpoint-dir"},
                                                            {&c.log, "log"}};
    for (const auto& [p, key] : outputs) {
      if (p->empty()) continue;
      *p = (dir / *p).lexically_normal().string();  // an absolute *p stays as it is
      const std::string who = "run '" + run.name + "' (" + key + ")";
      const auto [it, fresh] = writer.emplace(*p, who);
      MT_CHECK_AS(ValueError, fresh, file.path, ": ", who, " and ", it->second,
                  " would both write ", *p,
                  "; give each run its own path: put {name} in it, or make it relative, which "
                  "places it in the run's own directory");
    }
  }
}

RunsFile read_runs_config(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  return parse_runs_config(read_file_bytes(path), path, dir);
}

std::string config_to_toml(const TrainConfig& config) {
  toml::table t;
  for (const auto& e : config_detail::key_table()) {
    const nlohmann::json v = e.get(config);
    const char* name = e.key.name;
    if (v.is_null()) continue;
    if (v.is_boolean()) {
      t.insert(name, v.get<bool>());
    } else if (v.is_number_integer()) {
      t.insert(name, v.get<int64_t>());
    } else if (v.is_number_float()) {
      t.insert(name, v.get<double>());
    } else if (v.is_string()) {
      t.insert(name, v.get<std::string>());
    } else if (v.is_array()) {
      toml::array a;
      for (const nlohmann::json& item : v) {
        if (item.is_string())
          a.push_back(item.get<std::string>());
        else
          a.push_back(item.get<double>());
      }
      t.insert(name, std::move(a));
    } else {
      MT_THROW(Error, "config_to_toml: key '", name, "' has a value of no TOML kind: ", v.dump());
    }
  }
  std::ostringstream os;
  os << "# The resolved training keys of this run (minitrain train --config this file).\n"
     << t << "\n";
  return os.str();
}

}  // namespace minitrain
