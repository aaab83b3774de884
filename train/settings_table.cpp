// The table of training settings: one row per setting (Note [one home per setting] in
// train/settings.h; how to add one: docs/settings.md). Rows go by concept, in --help's order.

#include <deque>
#include <string>

#include "core/error.h"
#include "core/strings.h"
#include "data/data_loader.h"
#include "kernels/activation.h"
#include "nn/loss.h"
#include "optim/make_optimizer.h"
#include "optim/schedule.h"
#include "train/progress.h"
#include "train/settings.h"

namespace minitrain::config_detail {
namespace {

using K = ConfigValueKind;

// `field` is TrainConfig's or its base's (OptimizerOptions: the optimizer's own settings).
template <typename T, typename C>
KeyEntry member(const char* name, K kind, T C::*field, const char* help) {
  static_assert(std::is_base_of_v<C, TrainConfig>);
  KeyEntry e;
  e.key = {name, kind, help};
  e.set = [field, name](TrainConfig& c, const Value& v) {
    if constexpr (std::is_same_v<T, uint64_t>) {
      const int64_t i = std::get<int64_t>(v);
      if (i < 0) MT_THROW(ValueError, "--", name, " must be >= 0, got ", i);
      c.*field = static_cast<uint64_t>(i);
    } else {
      c.*field = std::get<T>(v);
    }
  };
  e.get = [field](const TrainConfig& c) { return nlohmann::json(c.*field); };
  if constexpr (std::is_same_v<T, uint64_t>)
    e.read = [field](const TrainConfig& c) { return Value(static_cast<int64_t>(c.*field)); };
  else
    e.read = [field](const TrainConfig& c) { return Value(c.*field); };
  return e;
}

template <typename T, typename C>
KeyEntry optional_member(const char* name, K kind, std::optional<T> C::*field, const char* help) {
  static_assert(std::is_base_of_v<C, TrainConfig>);
  KeyEntry e;
  e.key = {name, kind, help};
  e.set = [field](TrainConfig& c, const Value& v) { c.*field = std::get<T>(v); };
  e.get = [field](const TrainConfig& c) {
    return (c.*field).has_value() ? nlohmann::json(*(c.*field)) : nlohmann::json(nullptr);
  };
  return e;
}

// A loss setting declared once, in LossOptions (nn/loss.h): the row points into the config's
// LossOptions (TrainConfig::loss_settings), with no member of its own; the loss's constructor
// checks the value, its table which loss takes it (the flag and the help's "which losses" come
// from MT_LOSS_SETTINGS and loss_table()).
const char* taking(const std::string& who, const std::string& what);

template <typename T>
KeyEntry loss_member(LossSetting s, K kind, T LossOptions::*field, const std::string& what) {
  KeyEntry e;
  e.key = {loss_setting_flag(s), kind, taking(losses_taking(s), what)};
  e.set = [field](TrainConfig& c, const Value& v) { c.loss_settings.*field = std::get<T>(v); };
  e.get = [field](const TrainConfig& c) { return nlohmann::json(c.loss_settings.*field); };
  e.read = [field](const TrainConfig& c) { return Value(c.loss_settings.*field); };
  return e.loss(field, {loss_setting_option(s)});
}

// "none | dp (replicas, one thread each) | ...": a table of choices as --help prints it.
template <std::size_t N>
std::string choices_help(const Choice (&table)[N], const char* sep) {
  std::vector<std::string> items;
  for (const Choice& c : table) items.push_back(std::string(c.name) + " (" + c.what + ")");
  return join(items, sep);
}

// "adam, adamw: AMSGrad": which optimizers (or losses) take a setting, from their table's
// column, then what it is. The text lives as long as the table.
const char* taking(const std::string& who, const std::string& what) {
  static std::deque<std::string> texts;
  texts.push_back(who + ": " + what);
  return texts.back().c_str();
}

template <std::size_t N>
std::vector<std::string> names_of(const Choice (&table)[N]) {
  std::vector<std::string> names;
  for (const Choice& c : table) names.push_back(c.name);
  return names;
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
      number_text(*AdamOptions{}.weight_decay) + ", adamw " +
      number_text(*adamw_defaults().weight_decay);
  static const std::string bucket_size_help =
      "--parallel ddp: gradient bucket size (default " + TrainConfig{}.bucket_size + ")";
  static const std::string comm_timeout_help =
      "seconds a collective waits for a peer before failing (default " +
      number_text(TrainConfig{}.comm_timeout) + ")";
  static const std::string micro_batches_help = "--parallel mp: micro-batches per batch (default " +
                                                std::to_string(kDefaultMicroBatches) + ")";
  t.push_back(member("activation", K::String, &TrainConfig::activation, activation_help.c_str())
                  .one_of(activation_names()));
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
  t.push_back(member("optimizer", K::String, &TrainConfig::optimizer, optimizer_help.c_str())
                  .one_of(optimizer_names()));
  t.push_back(member("lr", K::Float, &TrainConfig::lr, "learning rate").optimizer());
  // The settings some optimizers take: the flag and which optimizers take it are the columns of
  // optimizer_table() (optim/make_optimizer.h); the library's constructors check the values.
  using S = OptimizerSetting;
  const auto flag = optimizer_setting_flag;
  t.push_back(member(flag(S::Momentum), K::Float, &TrainConfig::momentum,
                     taking(optimizers_taking(S::Momentum), "momentum"))
                  .optimizer());
  t.push_back(member(flag(S::Nesterov), K::Bool, &TrainConfig::nesterov,
                     taking(optimizers_taking(S::Nesterov), "Nesterov momentum"))
                  .optimizer());
  // Not given: the optimizer's own default (0; adamw 0.01).
  t.push_back(optional_member("weight-decay", K::Float, &TrainConfig::weight_decay,
                              weight_decay_help.c_str())
                  .optimizer());
  static const std::string betas_help = "B1,B2 (" + optimizers_taking(S::Betas) + ")";
  KeyEntry betas;
  betas.key = {flag(S::Betas), K::FloatPair, betas_help.c_str()};
  betas.set = [](TrainConfig& c, const Value& v) {
    std::tie(c.beta1, c.beta2) = std::get<std::pair<double, double>>(v);
  };
  betas.get = [](const TrainConfig& c) { return nlohmann::json::array({c.beta1, c.beta2}); };
  t.push_back(betas.optimizer({"beta1", "beta2"}));
  t.push_back(member(flag(S::Eps), K::Float, &TrainConfig::eps,
                     taking(optimizers_taking(S::Eps), "added to the square root (default " +
                                                           number_text(AdamOptions{}.eps) + ")"))
                  .optimizer());
  t.push_back(member(flag(S::Amsgrad), K::Bool, &TrainConfig::amsgrad,
                     taking(optimizers_taking(S::Amsgrad), "AMSGrad"))
                  .optimizer());
  t.push_back(member(flag(S::Alpha), K::Float, &TrainConfig::alpha,
                     taking(optimizers_taking(S::Alpha),
                            "smoothing constant of the squared gradients (default " +
                                number_text(OptimizerOptions{}.alpha) + ")"))
                  .optimizer());
  t.push_back(
      member(flag(S::Centered), K::Bool, &TrainConfig::centered,
             taking(optimizers_taking(S::Centered), "divide by the gradient's estimated variance"))
          .optimizer());
  t.push_back(member("schedule", K::String, &TrainConfig::schedule, schedule_help.c_str())
                  .one_of(schedule_names()));
  t.push_back(member("warmup-steps", K::Int, &TrainConfig::warmup_steps, "linear lr warm-up")
                  .at_least(0)
                  .at_most(kMaxSteps));
  t.push_back(
      member("step-size", K::Int, &TrainConfig::step_size, "step schedule: steps per decay"));
  t.push_back(member("gamma", K::Float, &TrainConfig::gamma, "step schedule: decay factor"));
  // Checked by clip_grad_norm_ itself (0: off there too), as check_settings() calls it.
  t.push_back(member("clip-grad-norm", K::Float, &TrainConfig::clip_grad_norm,
                     "clip the global gradient norm (0: off)")
                  .library_option({"max_norm"}));
  t.push_back(member("grad-accum", K::Int, &TrainConfig::grad_accum, "batches per optimizer step")
                  .at_least(1)
                  .at_most(kMaxInt32));
  t.push_back(member("batch-size", K::Int, &TrainConfig::batch_size, "rows per batch")
                  .at_least(1)
                  .at_most(kMaxInt32));
  t.push_back(optional_member("epochs", K::Int, &TrainConfig::epochs, "passes over the data"));
  t.push_back(optional_member("steps", K::Int, &TrainConfig::steps,
                              "optimizer steps (instead of --epochs)"));
  t.push_back(member("shuffle", K::Bool, &TrainConfig::shuffle, "shuffle rows every epoch"));
  t.push_back(member("drop-last", K::Bool, &TrainConfig::drop_last,
                     "drop each epoch's last partial batch (torch's drop_last)"));
  t.push_back(member("seed", K::Int, &TrainConfig::seed, "seeds init, data and shuffling"));
  t.push_back(member("device", K::String, &TrainConfig::device, "auto | cpu | cuda | cuda:N"));
  t.push_back(member("threads", K::Int, &TrainConfig::threads, "CPU threads (0: all cores)")
                  .at_least(0)
                  .at_most(kMaxWorkers));
  t.push_back(member("workers", K::Int, &TrainConfig::workers,
                     "threads preparing batches ahead of the step, several at once (torch's "
                     "num_workers; 0: on the training thread; default 1); the same batches for "
                     "any count")
                  .at_least(0)
                  .at_most(kMaxLoaderWorkers));
  t.push_back(member("init", K::String, &TrainConfig::init, "initial weights (.safetensors)"));
  t.push_back(member("save", K::String, &TrainConfig::save, "final weights (.safetensors)"));
  t.push_back(member("checkpoint-dir", K::String, &TrainConfig::checkpoint_dir,
                     "where checkpoint.safetensors is kept"));
  t.push_back(member("checkpoint-every", K::Int, &TrainConfig::checkpoint_every,
                     "steps between checkpoints (0: only at the end)")
                  .at_least(0)
                  .at_most(kMaxSteps));
  t.push_back(member("resume", K::Bool, &TrainConfig::resume, "continue from --checkpoint-dir"));
  t.push_back(member("log", K::String, &TrainConfig::log, "metrics.jsonl: one JSON line per step"));
  t.push_back(member("log-every", K::Int, &TrainConfig::log_every,
                     "steps per --log line (default 1): a line holds the means of its steps")
                  .at_least(1)
                  .at_most(kMaxSteps));
  t.push_back(
      member("profile-kernels", K::String, &TrainConfig::profile_kernels,
             "FILE: every op's time in every step (JSON lines) and the top ops at the end"));
  t.push_back(member("progress", K::String, &TrainConfig::progress, progress_help.c_str())
                  .one_of(progress_mode_names()));
  t.push_back(member("parallel", K::String, &TrainConfig::parallel, parallel_help.c_str())
                  .one_of(names_of(kParallelModes)));
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
  t.push_back(member("all-reduce", K::String, &TrainConfig::all_reduce, all_reduce_help.c_str())
                  .one_of(names_of(kAllReduceAlgorithms)));
  t.push_back(member("backend", K::String, &TrainConfig::backend, backend_help.c_str())
                  .one_of(names_of(kCommBackends)));
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
  t.push_back(member("loss", K::String, &TrainConfig::loss, loss_help.c_str())
                  .one_of(loss_names())
                  .loss(&LossOptions::name));
  // The settings some losses take: the flag and which losses take it are the columns of
  // loss_table() (nn/loss.h); the losses' constructors check the values.
  using L = LossSetting;
  const auto loss_flag = loss_setting_flag;
  // The weights files are read once the data says how many weights there are (run_training.cpp
  // replaces these): until then one placeholder weight says the setting is given, for the
  // loss's settings column to judge.
  t.push_back(member(loss_flag(L::ClassWeights), K::String, &TrainConfig::class_weights,
                     taking(losses_taking(L::ClassWeights),
                            "auto (n / (classes x count), torch's balanced weights) | W.npy (one "
                            "weight per class)"))
                  .loss({"class_weights"}, [](const TrainConfig& c, LossOptions& o) {
                    if (!c.class_weights.empty()) o.class_weights = {1.0};
                  }));
  t.push_back(loss_member(L::LabelSmoothing, K::Float, &LossOptions::label_smoothing,
                          "torch's label_smoothing, in [0, 1]"));
  t.push_back(member(loss_flag(L::IgnoreIndex), K::Int, &TrainConfig::ignore_index,
                     taking(losses_taking(L::IgnoreIndex),
                            "rows with this label count for nothing (default -100)"))
                  .loss(&LossOptions::ignore_index));
  t.push_back(
      member(loss_flag(L::PosWeight), K::String, &TrainConfig::pos_weight,
             taking(losses_taking(L::PosWeight), "W.npy, the positive term's weight per output"))
          .loss({"pos_weight"}, [](const TrainConfig& c, LossOptions& o) {
            if (!c.pos_weight.empty()) o.pos_weight = {1.0};
          }));
  t.push_back(loss_member(L::Delta, K::Float, &LossOptions::delta, "delta"));
  t.push_back(loss_member(L::Beta, K::Float, &LossOptions::beta, "beta"));
  t.push_back(loss_member(L::LogTarget, K::Bool, &LossOptions::log_target,
                          "the targets are log-probabilities (torch's log_target)"));
  t.push_back(loss_member(L::LogInput, K::Bool, &LossOptions::log_input,
                          "pred is the log of the rate (torch's log_input, default true; "
                          "=false: the rate itself)"));
  t.push_back(member("val-data", K::String, &TrainConfig::val_data,
                     "held-out X.npy | T.csv, evaluated during training"));
  t.push_back(member("val-targets", K::String, &TrainConfig::val_targets,
                     "held-out Y.npy (with --val-data X.npy)"));
  t.push_back(member("val-split", K::Float, &TrainConfig::val_split,
                     "hold out this fraction of --data (by --seed; stratified for classes)"));
  t.push_back(member("eval-every", K::Int, &TrainConfig::eval_every,
                     "steps between evaluations (0: at each epoch's end only)")
                  .at_least(0)
                  .at_most(kMaxSteps));
  t.push_back(member("save-best", K::String, &TrainConfig::save_best,
                     "weights at the evaluation with the lowest val_loss (.safetensors)"));
  t.push_back(member("early-stop", K::Int, &TrainConfig::early_stop,
                     "stop after this many evaluations without a lower val_loss (0: never)")
                  .at_least(0)
                  .at_most(kMaxSteps));
  t.push_back(member("topk", K::Int, &TrainConfig::topk,
                     "classifiers: also report top-k accuracy (default 1: top-1 only)")
                  .at_least(1));
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
  t.push_back(
      member("cuda-graph", K::Bool, &TrainConfig::cuda_graph,
             "CUDA: each step (forward, loss, backward, clipping, update) captured once and "
             "replayed as one CUDA graph, the same bits; where it cannot be, a note and "
             "eager steps (docs/cuda_graph.md)"));
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

}  // namespace

const std::vector<KeyEntry>& key_table() {
  static const std::vector<KeyEntry> table = make_table();
  return table;
}

}  // namespace minitrain::config_detail
