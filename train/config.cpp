// The table of training keys, and setting them from command-line text.

#include "train/config.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "core/error.h"
#include "core/strings.h"
#include "kernels/activation.h"
#include "nn/loss.h"
#include "optim/make_optimizer.h"
#include "optim/schedule.h"
#include "train/config_keys.h"
#include "train/progress.h"

namespace minitrain {
namespace config_detail {
namespace {

using K = ConfigValueKind;

template <typename T>
KeyEntry member(const char* name, K kind, T TrainConfig::*field, const char* help) {
  return {{name, kind, help},
          [field, name](TrainConfig& c, const Value& v) {
            if constexpr (std::is_same_v<T, uint64_t>) {
              const int64_t i = std::get<int64_t>(v);
              if (i < 0) MT_THROW(ValueError, "--", name, " must be >= 0, got ", i);
              c.*field = static_cast<uint64_t>(i);
            } else {
              c.*field = std::get<T>(v);
            }
          },
          [field](const TrainConfig& c) { return nlohmann::json(c.*field); }};
}

template <typename T>
KeyEntry optional_member(const char* name, K kind, std::optional<T> TrainConfig::*field,
                         const char* help) {
  return {{name, kind, help},
          [field](TrainConfig& c, const Value& v) { c.*field = std::get<T>(v); },
          [field](const TrainConfig& c) {
            return (c.*field).has_value() ? nlohmann::json(*(c.*field)) : nlohmann::json(nullptr);
          }};
}

// "none | dp (replicas, one thread each) | ...": a table of choices as --help prints it.
template <std::size_t N>
std::string choices_help(const Choice (&table)[N], const char* sep) {
  std::vector<std::string> items;
  for (const Choice& c : table) items.push_back(std::string(c.name) + " (" + c.what + ")");
  return join(items, sep);
}

std::vector<KeyEntry> make_table() {
  std::vector<KeyEntry> t;
  t.push_back(member("model", K::String, &TrainConfig::model, "mlp:IN,H1,...,OUT"));
  // The lists of choices come from their tables; the strings live as long as the key table.
  static const std::string activation_help = join(activation_names(), " | ");
  static const std::string optimizer_help = join(optimizer_names(), " | ");
  static const std::string schedule_help = join(schedule_names(), " | ");
  static const std::string parallel_help = choices_help(kParallelModes, " | ");
  static const std::string all_reduce_help =
      choices_help(kAllReduceAlgorithms, " | ") + ": the all-reduce of --parallel dp/ddp";
  static const std::string backend_help =
      choices_help(kCommBackends, " | ") + ": the communicator of --parallel ddp";
  static const std::string progress_help =
      join(progress_mode_names(), " | ") + " (auto: a bar on a terminal, else lines)";
  static const std::string stages_help =
      "--parallel mp: pipeline stages (default " + std::to_string(kDefaultStages) +
      "); --parallel ddp: each rank a pipeline of that many stages (the hybrid)";
  static const std::string weight_decay_help =
      "L2 (sgd, adam) or decoupled (adamw) decay; default " +
      number_text(AdamOptions{}.weight_decay) + ", adamw " +
      number_text(adamw_defaults().weight_decay);
  static const std::string bucket_size_help =
      "--parallel ddp: gradient bucket size (default " + TrainConfig{}.bucket_size + ")";
  static const std::string comm_timeout_help =
      "seconds a collective waits for a peer before failing (default " +
      number_text(TrainConfig{}.comm_timeout) + ")";
  static const std::string micro_batches_help = "--parallel mp: micro-batches per batch (default " +
                                                std::to_string(kDefaultMicroBatches) + ")";
  t.push_back(member("activation", K::String, &TrainConfig::activation, activation_help.c_str()));
  t.push_back(member("data", K::String, &TrainConfig::data, "synthetic[:N] | X.npy | T.csv"));
  t.push_back(member("targets", K::String, &TrainConfig::targets, "Y.npy (with --data X.npy)"));
  t.push_back(member("target-columns", K::StringList, &TrainConfig::target_columns,
                     "a,b: target columns of a CSV (every other column is a feature)"));
  t.push_back(member("ignore-columns", K::StringList, &TrainConfig::ignore_columns,
                     "a,b: columns of a CSV that are neither feature nor target (an id); predict "
                     "and evaluate take the same flag"));
  t.push_back(member("data-on-disk", K::Bool, &TrainConfig::data_on_disk,
                     "read --data X.npy rows from disk as batches need them, not into memory "
                     "(data larger than memory; the targets stay in memory)"));
  t.push_back(member("standardize", K::Bool, &TrainConfig::standardize,
                     "scale each feature to mean 0, std 1 over the training rows (scikit-learn's "
                     "StandardScaler); kept with the weights, so predict, evaluate and export "
                     "take raw features"));
  t.push_back(member("optimizer", K::String, &TrainConfig::optimizer, optimizer_help.c_str()));
  t.push_back(member("lr", K::Float, &TrainConfig::lr, "learning rate"));
  // Which optimizers take a setting: their table's column (optim/make_optimizer.h).
  using S = OptimizerSetting;
  static const std::string momentum_help = optimizers_taking(S::Momentum) + ": momentum";
  static const std::string nesterov_help = optimizers_taking(S::Nesterov) + ": Nesterov momentum";
  static const std::string betas_help = "B1,B2 (" + optimizers_taking(S::Betas) + ")";
  static const std::string eps_help = optimizers_taking(S::Eps) +
                                      ": added to the square root (default " +
                                      number_text(AdamOptions{}.eps) + ")";
  static const std::string amsgrad_help = optimizers_taking(S::Amsgrad) + ": AMSGrad";
  static const std::string alpha_help = optimizers_taking(S::Alpha) +
                                        ": smoothing constant of the squared gradients (default " +
                                        number_text(RMSpropOptions{}.alpha) + ")";
  static const std::string centered_help =
      optimizers_taking(S::Centered) + ": divide by the gradient's estimated variance";
  t.push_back(member("momentum", K::Float, &TrainConfig::momentum, momentum_help.c_str()));
  t.push_back(member("nesterov", K::Bool, &TrainConfig::nesterov, nesterov_help.c_str()));
  t.push_back(optional_member("weight-decay", K::Float, &TrainConfig::weight_decay,
                              weight_decay_help.c_str()));
  t.push_back({{"betas", K::FloatPair, betas_help.c_str()},
               [](TrainConfig& c, const Value& v) {
                 std::tie(c.beta1, c.beta2) = std::get<std::pair<double, double>>(v);
               },
               [](const TrainConfig& c) {
                 return nlohmann::json::array({c.beta1, c.beta2});
               }});
  t.push_back(member("eps", K::Float, &TrainConfig::eps, eps_help.c_str()));
  t.push_back(member("amsgrad", K::Bool, &TrainConfig::amsgrad, amsgrad_help.c_str()));
  t.push_back(member("alpha", K::Float, &TrainConfig::alpha, alpha_help.c_str()));
  t.push_back(member("centered", K::Bool, &TrainConfig::centered, centered_help.c_str()));
  t.push_back(member("schedule", K::String, &TrainConfig::schedule, schedule_help.c_str()));
  t.push_back(member("warmup-steps", K::Int, &TrainConfig::warmup_steps, "linear lr warm-up"));
  t.push_back(
      member("step-size", K::Int, &TrainConfig::step_size, "step schedule: steps per decay"));
  t.push_back(member("gamma", K::Float, &TrainConfig::gamma, "step schedule: decay factor"));
  t.push_back(member("clip-grad-norm", K::Float, &TrainConfig::clip_grad_norm,
                     "clip the global gradient norm (0: off)"));
  t.push_back(member("grad-accum", K::Int, &TrainConfig::grad_accum, "batches per optimizer step"));
  t.push_back(member("batch-size", K::Int, &TrainConfig::batch_size, "rows per batch"));
  t.push_back(optional_member("epochs", K::Int, &TrainConfig::epochs, "passes over the data"));
  t.push_back(optional_member("steps", K::Int, &TrainConfig::steps,
                              "optimizer steps (instead of --epochs)"));
  t.push_back(member("shuffle", K::Bool, &TrainConfig::shuffle, "shuffle rows every epoch"));
  t.push_back(member("drop-last", K::Bool, &TrainConfig::drop_last,
                     "drop each epoch's last partial batch (torch's drop_last)"));
  t.push_back(member("seed", K::Int, &TrainConfig::seed, "seeds init, data and shuffling"));
  t.push_back(member("device", K::String, &TrainConfig::device, "auto | cpu | cuda | cuda:N"));
  t.push_back(member("threads", K::Int, &TrainConfig::threads, "CPU threads (0: all cores)"));
  t.push_back(member("workers", K::Int, &TrainConfig::workers,
                     "threads preparing batches ahead of the step, several at once (torch's "
                     "num_workers; 0: on the training thread; default 1); the same batches for "
                     "any count"));
  t.push_back(member("init", K::String, &TrainConfig::init, "initial weights (.safetensors)"));
  t.push_back(member("save", K::String, &TrainConfig::save, "final weights (.safetensors)"));
  t.push_back(member("checkpoint-dir", K::String, &TrainConfig::checkpoint_dir,
                     "where checkpoint.safetensors is kept"));
  t.push_back(member("checkpoint-every", K::Int, &TrainConfig::checkpoint_every,
                     "steps between checkpoints (0: only at the end)"));
  t.push_back(member("resume", K::Bool, &TrainConfig::resume, "continue from --checkpoint-dir"));
  t.push_back(member("log", K::String, &TrainConfig::log, "metrics.jsonl: one JSON line per step"));
  t.push_back(member("log-every", K::Int, &TrainConfig::log_every,
                     "steps per --log line (default 1): a line holds the means of its steps"));
  t.push_back(
      member("profile-kernels", K::String, &TrainConfig::profile_kernels,
             "FILE: every op's time in every step (JSON lines) and the top ops at the end"));
  t.push_back(member("progress", K::String, &TrainConfig::progress, progress_help.c_str()));
  t.push_back(member("parallel", K::String, &TrainConfig::parallel, parallel_help.c_str()));
  t.push_back(member("replicas", K::Int, &TrainConfig::replicas,
                     "--parallel dp: replicas (default: one per --devices entry)"));
  t.push_back(member(
      "devices", K::String, &TrainConfig::devices,
      "--parallel dp|mp, and ddp with --stages: devices, e.g. cpu,cpu or cuda:0,cuda:1 (default: "
      "--device repeated)"));
  t.push_back(member("stages", K::Int, &TrainConfig::stages, stages_help.c_str()));
  t.push_back(
      member("micro-batches", K::Int, &TrainConfig::micro_batches, micro_batches_help.c_str()));
  t.push_back(
      member("bucket-size", K::String, &TrainConfig::bucket_size, bucket_size_help.c_str()));
  t.push_back(member("no-overlap", K::Bool, &TrainConfig::no_overlap,
                     "--parallel ddp: all-reduce the gradient buckets after backward instead of "
                     "during it (the same sums; for when overlap does not pay)"));
  t.push_back(member("all-reduce", K::String, &TrainConfig::all_reduce, all_reduce_help.c_str()));
  t.push_back(member("backend", K::String, &TrainConfig::backend, backend_help.c_str()));
  t.push_back(
      member("comm-timeout", K::Float, &TrainConfig::comm_timeout, comm_timeout_help.c_str()));
  t.push_back(optional_member(
      "sync-every", K::Int, &TrainConfig::sync_every,
      "--parallel ddp: local SGD, each rank steps on its own and the parameters are averaged "
      "every K steps (not given: gradients all-reduced every step)"));
  t.push_back(member("sync-optimizer-state", K::Bool, &TrainConfig::sync_optimizer_state,
                     "--sync-every K > 1: average the optimizer moments too"));
  t.push_back(member("grad-reduce-dtype", K::String, &TrainConfig::grad_reduce_dtype,
                     "--parallel ddp: fp32 | bf16, the type gradients are all-reduced in (bf16 "
                     "halves the bytes, rounding each bucket and each addition)"));
  static const std::string loss_help = join(loss_names(), " | ");
  t.push_back(member("loss", K::String, &TrainConfig::loss, loss_help.c_str()));
  t.push_back(member("class-weights", K::String, &TrainConfig::class_weights,
                     "cross_entropy: auto (n / (classes x count), torch's balanced weights) | "
                     "W.npy (one weight per class)"));
  t.push_back(member("label-smoothing", K::Float, &TrainConfig::label_smoothing,
                     "cross_entropy: torch's label_smoothing, in [0, 1]"));
  t.push_back(member("ignore-index", K::Int, &TrainConfig::ignore_index,
                     "cross_entropy: rows with this label count for nothing (default -100)"));
  t.push_back(member("pos-weight", K::String, &TrainConfig::pos_weight,
                     "bce_with_logits: W.npy, the positive term's weight per output"));
  t.push_back(member("huber-delta", K::Float, &TrainConfig::huber_delta, "huber: delta"));
  t.push_back(member("smooth-l1-beta", K::Float, &TrainConfig::smooth_l1_beta, "smooth_l1: beta"));
  t.push_back(member("kl-log-target", K::Bool, &TrainConfig::kl_log_target,
                     "kl_div: the targets are log-probabilities (torch's log_target)"));
  t.push_back(member("val-data", K::String, &TrainConfig::val_data,
                     "held-out X.npy | T.csv, evaluated during training"));
  t.push_back(member("val-targets", K::String, &TrainConfig::val_targets,
                     "held-out Y.npy (with --val-data X.npy)"));
  t.push_back(member("val-split", K::Float, &TrainConfig::val_split,
                     "hold out this fraction of --data (by --seed; stratified for classes)"));
  t.push_back(member("eval-every", K::Int, &TrainConfig::eval_every,
                     "steps between evaluations (0: at each epoch's end only)"));
  t.push_back(member("save-best", K::String, &TrainConfig::save_best,
                     "weights at the evaluation with the lowest val_loss (.safetensors)"));
  t.push_back(member("early-stop", K::Int, &TrainConfig::early_stop,
                     "stop after this many evaluations without a lower val_loss (0: never)"));
  t.push_back(member("topk", K::Int, &TrainConfig::topk,
                     "classifiers: also report top-k accuracy (default 1: top-1 only)"));
  t.push_back(member("sample-weights", K::String, &TrainConfig::sample_weights,
                     "W.npy: a weight per row; rows drawn with replacement (imbalanced data)"));
  t.push_back(
      member("precision", K::String, &TrainConfig::precision,
             "fp32 | bf16 | fp16: mixed precision, float32 master weights (torch.autocast)"));
  t.push_back(optional_member("loss-scale", K::Float, &TrainConfig::loss_scale,
                              "fp16: initial dynamic loss scale (default 65536, GradScaler's)"));
  t.push_back(optional_member("loss-scale-growth-interval", K::Int,
                              &TrainConfig::loss_scale_growth_interval,
                              "fp16: finite steps before the loss scale doubles (default 2000)"));
  t.push_back(member("allow-tf32", K::Bool, &TrainConfig::allow_tf32,
                     "CUDA: float32 GEMMs on TF32 tensor cores (no effect on the CPU)"));
  t.push_back(member("save-dtype", K::String, &TrainConfig::save_dtype,
                     "fp32 | bf16 | fp16: dtype of --save and --save-best files"));
  t.push_back(member(
      "gemm", K::String, &TrainConfig::gemm,
      "GEMM backend of the Linear layers: auto | a registered name (minitrain bench --list)"));
  t.push_back(member("mlp-kernel", K::String, &TrainConfig::mlp_kernel,
                     "layers | fused: fused runs the whole MLP in one kernel forward and two "
                     "backward (float32, widths <= 128; docs/fused_mlp.md)"));
  t.push_back(member("memory-cap", K::String, &TrainConfig::memory_cap,
                     "cap on the device memory this run may hold, e.g. 4GiB"));
  return t;
}

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

const std::vector<KeyEntry>& key_table() {
  static const std::vector<KeyEntry> table = make_table();
  return table;
}

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

OptimizerConfig optimizer_config(const TrainConfig& c) {
  OptimizerConfig oc;
  oc.name = c.optimizer;
  oc.lr = c.lr;
  oc.momentum = c.momentum;
  oc.nesterov = c.nesterov;
  oc.weight_decay = c.weight_decay.value_or(-1.0);
  oc.beta1 = c.beta1;
  oc.beta2 = c.beta2;
  oc.eps = c.eps;
  oc.amsgrad = c.amsgrad;
  oc.alpha = c.alpha;
  oc.centered = c.centered;
  return oc;
}

std::string config_to_json(const TrainConfig& config) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& e : config_detail::key_table()) j[e.key.name] = e.get(config);
  // Paths are bytes on Linux, not always UTF-8: a stray byte becomes U+FFFD in the checkpoint's
  // metadata instead of a JSON exception (saved and current configs are compared in this form).
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace minitrain
