// `minitrain train` as a library call: settings -> data, model, optimizer -> Trainer -> weights.

#include "train/run_training.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/allocator.h"
#include "core/atomic_file.h"
#include "core/bytes.h"
#include "core/device.h"
#include "core/gpu_monitor.h"
#include "core/npy.h"
#include "core/parallel_for.h"
#include "core/strings.h"
#include "core/thread_policy.h"
#include "data/class_labels.h"
#include "data/holdout_split.h"
#include "data/standard_scaler.h"
#include "data/npy_file_dataset.h"
#include "data/readers.h"
#include "data/sampler.h"
#include "kernels/gemm/gemm_registry.h"
#include "nn/gemm_backend.h"
#include "nn/mlp.h"
#include "nn/state_dict.h"
#include "optim/make_optimizer.h"
#include "optim/schedule.h"
#include "parallel/data_parallel.h"
#include "parallel/distributed_data_parallel.h"
#include "parallel/model_parallel.h"
#include "parallel/launch/process_env.h"
#include "parallel/launch/process_group.h"
#include "train/flag_context.h"
#include "train/gemm_flag.h"
#include "train/kernel_profile.h"
#include "train/run_files.h"
#include "train/validation.h"

namespace minitrain {
namespace {

namespace fs = std::filesystem;

// What a weights file or checkpoint says of its model, so that `minitrain predict` needs no flags
// to rebuild it: the spec, the activation, and for a table the target columns (the columns that
// are not features, and the names of the outputs).
// `classes`: the names of a CSV label column's classes, in index order (empty: numbered).
// `features`: a table's feature columns in the model's input order (empty for .npy data), so that
// predict and evaluate read a table by column name.
// `scaler`: --standardize's statistics of the training rows, as JSON lists of float32 values.
std::map<std::string, std::string> model_metadata(const TrainConfig& c,
                                                  const std::vector<std::string>& classes,
                                                  const std::vector<std::string>& features,
                                                  const StandardScaler& scaler) {
  std::map<std::string, std::string> m{
      {"model", c.model}, {"activation", c.activation}, {"loss", c.loss}};
  // JSON lists: a column's or a class's name may hold a comma.
  if (!c.target_columns.empty()) m["target_columns"] = nlohmann::json(c.target_columns).dump();
  if (!features.empty())
    m["feature_columns"] =
        nlohmann::json(features).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (!scaler.empty()) {
    m["standardize_mean"] = nlohmann::json(scaler.mean).dump();
    m["standardize_scale"] = nlohmann::json(scaler.scale).dump();
  }
  if (!classes.empty())
    m["classes"] =
        nlohmann::json(classes).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return m;
}

// The synthetic data's seed, apart from the init's: the same Philox seed would make the first
// inputs and the first weights the same numbers.
constexpr uint64_t kDataSeedMix = 0x9E3779B97F4A7C15ull;

// A table or a pair of .npy files; a classifier's CSV label column is read as class labels.
// `features`: empty, set to the table's feature columns; given (--val-data), read by those names.
TensorDataset load_table(const std::string& data, const std::string& targets, const TrainConfig& c,
                         CsvClassLabels* labels, CsvFeatureColumns* features) {
  if (ends_with(data, ".npy")) return load_npy_dataset(data, targets);
  CsvFeatureColumns none;
  if (features == nullptr) features = &none;  // --ignore-columns applies all the same
  features->ignored = c.ignore_columns;
  return load_csv_dataset(data, c.target_columns, labels, features);
}

void check_data_fits_model(const Dataset& d, const std::string& source, const TrainConfig& c,
                           const std::vector<int64_t>& sizes, bool classifier) {
  if (d.feature_dim() != sizes.front()) {
    std::vector<int64_t> fixed = sizes;
    fixed.front() = d.feature_dim();
    MT_THROW(ShapeError, source, " has ", d.feature_dim(),
             " feature column(s) per row but --model ", c.model, " expects ", sizes.front(),
             " inputs; use --model mlp:", join(fixed, ","));
  }
  if (classifier) {
    MT_CHECK_AS(ShapeError, d.target_dim() == 1, source, " has ", d.target_dim(),
                " target columns per row, but --loss ", c.loss,
                " takes one class label per row (for one-hot targets, save their argmax)");
    return;
  }
  if (d.target_dim() != sizes.back()) {
    std::vector<int64_t> fixed = sizes;
    fixed.back() = d.target_dim();
    MT_THROW(ShapeError, source, " has ", d.target_dim(), " target(s) per row but --model ",
             c.model, " has ", sizes.back(), " outputs; use --model mlp:", join(fixed, ","));
  }
}

// A regression whose one target column holds a few whole numbers, 0 or more: perhaps class ids,
// which a regression treats as quantities (class 2 "between" 1 and 3). A note, not a refusal: a
// count or a rating is a fine regression target. The bound of 20 distinct values is a heuristic
// (scikit-learn's type_of_target calls any whole-number column 'multiclass').
std::string class_id_note(const TrainConfig& c, const Tensor& targets,
                          const std::vector<int64_t>& sizes) {
  if (!ends_with(c.data, ".csv") || targets.size(1) != 1) return "";
  constexpr std::size_t kMaxDistinct = 20;
  std::vector<float> distinct;
  const float* y = targets.data<float>();
  for (int64_t i = 0; i < targets.size(0); ++i) {
    if (y[i] < 0 || y[i] != std::floor(y[i])) return "";
    if (std::find(distinct.begin(), distinct.end(), y[i]) == distinct.end()) {
      if (distinct.size() == kMaxDistinct) return "";
      distinct.push_back(y[i]);
    }
  }
  if (distinct.size() < 2) return "";
  std::sort(distinct.begin(), distinct.end());
  std::vector<int64_t> shown(distinct.begin(), distinct.end());
  std::vector<int64_t> classifier = sizes;
  classifier.back() = shown.back() + 1;
  return "target column '" + c.target_columns.front() + "' holds only whole numbers (" +
         join(shown, ", ") + "); --loss " + c.loss +
         " trains a regression on them as quantities. If they are class ids, train a "
         "classifier: --loss cross_entropy --model mlp:" +
         join(classifier, ",") + " (one output per class)";
}

// Text class labels name the classes: the model needs one output per class.
void check_classes_fit_model(const std::vector<std::string>& classes, const TrainConfig& c,
                             const std::vector<int64_t>& sizes) {
  if (classes.empty() || static_cast<int64_t>(classes.size()) == sizes.back()) return;
  std::vector<int64_t> fixed = sizes;
  fixed.back() = static_cast<int64_t>(classes.size());
  MT_THROW(ShapeError, "--data ", c.data, " has ", classes.size(), " classes in column '",
           c.target_columns.front(), "' but --model ", c.model, " has ", sizes.back(),
           " outputs; a classifier has one output per class: use --model mlp:", join(fixed, ","));
}

// A weight per class (--class-weights W.npy) or per output (--pos-weight W.npy): a 1-D array of
// `count` finite weights >= 0.
std::vector<double> read_weights_file(const char* flag, const std::string& path, int64_t count,
                                      const char* per) {
  const Tensor w = read_npy(path);
  MT_CHECK_AS(ShapeError, w.ndim() == 1 && w.numel() == count, "--", flag, " ", path,
              " holds an array of shape ", w.shape(), " but the model has ", count, " ", per,
              "; give one weight per ", per == std::string("classes") ? "class" : "output",
              " (shape [", count, "])");
  const std::vector<double> values = w.to_double_vector();
  for (int64_t i = 0; i < count; ++i) {
    const double v = values[static_cast<std::size_t>(i)];
    MT_CHECK_AS(ValueError, std::isfinite(v) && v >= 0, "--", flag, " ", path, ": weight ", i,
                " is ", v, "; weights must be finite and >= 0");
  }
  return values;
}

// --class-weights: auto (balanced, from the training rows) or one weight per class from a file.
std::vector<double> read_class_weights(const TrainConfig& c,
                                       const std::vector<int64_t>& train_labels, int64_t classes) {
  if (c.class_weights.empty()) return {};
  if (c.class_weights == "auto") {
    std::vector<int64_t> counts(static_cast<std::size_t>(classes), 0);
    for (int64_t y : train_labels)
      if (y != c.ignore_index) ++counts[static_cast<std::size_t>(y)];
    return balanced_class_weights(counts);
  }
  return read_weights_file("class-weights", c.class_weights, classes, "classes");
}

// Issue 30: a table whose every training row is ignored (--ignore-index) or has class weight 0
// has no loss to learn from (torch's mean over zero weight is nan): refused up front, naming the
// values, rather than stopping the run later with advice about the learning rate.
void check_some_row_counts(const std::vector<int64_t>& labels, int64_t ignore_index,
                           const std::vector<double>& class_weights) {
  int64_t kept = 0, weighted = 0;
  for (int64_t y : labels) {
    if (y == ignore_index) continue;
    ++kept;
    weighted += class_weights.empty() || class_weights[static_cast<std::size_t>(y)] != 0;
  }
  MT_CHECK_AS(ValueError, kept > 0, "every one of the ", labels.size(), " training rows has label ",
              ignore_index, ", the --ignore-index: there is nothing to train on");
  if (weighted > 0) return;
  std::vector<std::string> w;
  for (double v : class_weights) w.push_back(number_text(v));
  MT_THROW(ValueError, "every one of the ", kept,
           " counted training rows has a class whose --class-weights weight is 0 (weights [",
           join(w, ", "), "]): there is nothing to train on");
}

// A file the run writes must be writable now, found out before the first step rather than after
// an hour of training (its directory is created); temporaries that killed writes of it left
// behind are removed.
void prepare_output(const char* flag, const std::string& path, std::ostream& info) {
  // Its directory is made, as --checkpoint-dir's is: `--log runs/a/metrics.jsonl` just works.
  const fs::path dir = fs::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty()) fs::create_directories(dir, ec);  // a failure is reported just below
  try {
    check_can_write(path);
  } catch (const IoError& e) {
    MT_THROW(IoError, "--", flag, ": ", e.what());
  }
  if (const int removed = remove_stale_temporaries(path))
    info << "removed " << removed << " temporary file(s) of " << path
         << " left by an interrupted write\n";
}

std::shared_ptr<const LRSchedule> make_schedule(const TrainConfig& c, int64_t total_steps) {
  ScheduleSettings settings;
  settings.lr = c.lr;
  settings.total_steps = total_steps;
  settings.step_size = c.step_size;
  settings.gamma = c.gamma;
  std::unique_ptr<LRSchedule> s = make_named_schedule(c.schedule, settings);
  if (c.warmup_steps > 0) s = linear_warmup(std::move(s), c.warmup_steps);
  return std::shared_ptr<const LRSchedule>(std::move(s));
}

// A resumed run continues bit-identically only with the data order and model of the original.
// Under ddp what must stay is the global batch (ranks x --batch-size), not --batch-size: a run of
// 2 ranks x 32 resumes on 1 rank x 64 (the Trainer finds the same global sample).
void check_resume_config(const std::string& path, const TrainConfig& c, int world_size) {
  const auto meta = read_checkpoint_metadata(path);
  const auto it = meta.find("config");
  if (it == meta.end()) return;
  const nlohmann::json saved = nlohmann::json::parse(it->second, nullptr, false);
  if (!saved.is_object()) return;
  const nlohmann::json now = nlohmann::json::parse(config_to_json(c));
  if (saved.contains("batch-size") && saved["batch-size"].is_number_integer()) {
    int64_t saved_world = 1;  // checkpoints from before ddp: one process
    const auto w = meta.find("world_size");
    if (w != meta.end()) {
      try {
        saved_world = std::max<int64_t>(1, std::stoll(w->second));
      } catch (const std::exception&) {
        MT_THROW(IoError, "--resume: checkpoint ", path, ": metadata 'world_size' is '", w->second,
                 "', not a number of ranks");
      }
    }
    const int64_t saved_batch = saved["batch-size"].get<int64_t>();
    const int64_t saved_global = saved_batch * saved_world, global = c.batch_size * world_size;
    if (saved_world == 1 && world_size == 1 && saved_batch != c.batch_size)
      MT_THROW(ValueError, "--resume: the checkpoint in ", c.checkpoint_dir,
               " was written with batch-size ", saved_batch, ", this run has ", c.batch_size,
               "; resume with the settings of the original run (or start a new --checkpoint-dir)");
    if (saved_global != global) {
      std::ostringstream fix;
      if (saved_global % world_size == 0)
        fix << "use --batch-size " << saved_global / world_size << " on " << world_size
            << " rank(s)";
      else
        fix << "use a number of ranks that divides " << saved_global;
      MT_THROW(ValueError, "--resume: the checkpoint in ", c.checkpoint_dir, " was written by ",
               saved_world, " rank(s) x --batch-size ", saved_batch, " (global batch ",
               saved_global, "), this run has ", world_size, " rank(s) x --batch-size ",
               c.batch_size, " (global batch ", global,
               "); the global batch (ranks x --batch-size) must stay the same: ", fix.str(),
               " (or start a new --checkpoint-dir)");
    }
  }
  for (const char* key : {"model", "activation", "data", "targets", "target-columns", "optimizer",
                          "shuffle", "drop-last", "seed", "grad-accum", "loss", "val-split",
                          "class-weights", "standardize", "ignore-columns"}) {
    if (saved.contains(key) && saved[key] != now[key])
      MT_THROW(ValueError, "--resume: the checkpoint in ", c.checkpoint_dir, " was written with ",
               key, " ", saved[key].dump(), ", this run has ", now[key].dump(),
               "; resume with the settings of the original run (or start a new --checkpoint-dir)");
  }
}

// --parallel dp|mp|ddp with --stages: the devices of the replicas or stages (--devices, else
// --device repeated; under ddp --device is already this rank's device).
std::vector<Device> parallel_devices(const TrainConfig& c, Device device) {
  std::vector<Device> out;
  if (!c.devices.empty()) {
    out = parse_device_list(c.devices);
  } else {
    const int64_t n = c.parallel == "dp" ? c.replicas : c.parallel == "ddp" ? c.stages : 1;
    out.assign(static_cast<std::size_t>(n), device);
  }
  for (const Device& d : out) check_available(d);
  return out;
}

// --sample-weights W.npy: one weight per row of the data, [rows] or [rows, 1].
std::vector<double> read_sample_weights(const std::string& path, int64_t rows) {
  const Tensor w = read_npy(path);  // an IoError names the file
  const bool column = w.ndim() == 1 || (w.ndim() == 2 && w.size(1) == 1);
  if (!column || w.numel() != rows)
    MT_THROW(ShapeError, "--sample-weights ", path, " holds an array of shape ", w.shape(), " (",
             w.numel(), " weights) but --data has ", rows,
             " rows; give one weight per --data row (shape [", rows, "]), before any --val-split");
  const std::vector<double> values = w.to_double_vector();
  // Bad weights (negative, NaN, all zero) are refused now, before anything is written.
  with_flag_context("--sample-weights " + path, [&] { WeightedRandomSampler(values, rows); });
  return values;
}

// The communicator settings of --backend, --all-reduce and --comm-timeout. `stages`: the devices
// of the hybrid's stages (empty otherwise), each of which gets a communicator split from this
// one. NCCL exchanges GPU tensors only, so a hybrid with stages on both the CPU and GPUs takes
// mpi for auto, and an explicit nccl there is refused before any communicator is made.
ProcessGroupOptions process_group_options(const TrainConfig& c, const std::vector<Device>& stages) {
  ProcessGroupOptions o;
  o.backend = c.backend;
  const auto on_cpu =
      std::find_if(stages.begin(), stages.end(), [](const Device& d) { return d.is_cpu(); });
  const bool on_gpu =
      std::any_of(stages.begin(), stages.end(), [](const Device& d) { return d.is_cuda(); });
  if (on_cpu != stages.end() && on_gpu) {
    if (c.backend == "nccl")
      MT_THROW(ValueError, "--backend nccl exchanges GPU tensors only, but --devices ", c.devices,
               " puts stage ", on_cpu - stages.begin(),
               " on cpu; use --backend mpi (or auto) under mpirun for a hybrid with CPU stages");
    o.backend = "mpi";
  }
  o.comm.timeout = std::chrono::milliseconds(static_cast<int64_t>(c.comm_timeout * 1000.0));
  o.comm.all_reduce =
      c.all_reduce == "ring" ? AllReduceAlgorithm::Ring : AllReduceAlgorithm::Native;
  return o;
}

std::string join_devices(const std::vector<Device>& devices) {
  std::vector<std::string> names;
  for (const Device& d : devices) names.push_back(d.str());
  return join(names, ",");
}

// --allow-tf32 is torch's flag: float32 GEMMs of CUDA devices on TF32 tensor cores, through
// cuBLAS where it is linked (cublas_tf32), else the ladder's WMMA rung (the emulated GPUs). A
// named --gemm is taken as named; on the CPU the flag changes nothing, as in torch.
std::string gemm_for(const TrainConfig& c, Device device) {
  if (!c.allow_tf32 || c.gemm != "auto" || !device.is_cuda()) return c.gemm;
  return has_gemm_backend("cublas_tf32") ? "cublas_tf32" : "tc_tf32";
}

}  // namespace

int64_t synthetic_rows(const std::string& spec) {
  if (spec == "synthetic") return kDefaultSyntheticRows;
  MT_CHECK_AS(ValueError, starts_with(spec, "synthetic:"), "not a synthetic data spec: '", spec,
              "'");
  const std::string n = spec.substr(10);
  std::size_t used = 0;
  long long rows = 0;
  try {
    rows = std::stoll(n, &used);
  } catch (const std::exception&) {
  }
  MT_CHECK_AS(ValueError, used == n.size() && rows >= 1, "--data '", spec,
              "': the row count after 'synthetic:' must be a positive integer");
  return rows;
}

namespace {

// ---- the steps of a run, in order ----

// Settings checked and resolved: where the run goes and what it builds.
struct RunPlan {
  Device device = Device::cpu();  // where batches arrive and the loss is computed
  std::vector<Device> devices;    // dp replicas, mp or hybrid stages; empty otherwise
  bool dp = false, mp = false, ddp = false;
  ProcessEnv env;  // a single process unless ddp
  std::vector<int64_t> sizes;
  Activation activation = Activation::ReLU;
  ProgressMode progress_mode = ProgressMode::Lines;
  bool classifier = false;           // the loss takes class labels
  DType precision = DType::Float32;  // --precision
  std::string gemm;                  // --gemm, or what --allow-tf32 makes of auto on a GPU
};

// More threads than cores wait on each other (and on the OS): say so, as torch does not.
void warn_oversubscription(const TrainConfig& c, std::ostream& info) {
  const int cores = available_cores();
  if (c.threads > cores)
    info << "warning: --threads " << c.threads << " is more than the " << cores
         << " core(s) this process may use (CPU affinity, cgroup quota); the threads will take "
            "turns on them\n";
  if (c.workers > cores)
    info << "warning: --workers " << c.workers << " is more than the " << cores
         << " core(s) this process may use; workers beyond that help only a data set that waits "
            "(on a disk), not one that computes\n";
  if (c.parallel == "dp" && c.replicas > cores && c.devices.empty())
    info << "warning: --replicas " << c.replicas << " is more than the " << cores
         << " core(s) this process may use; CPU replicas beyond that only take turns\n";
}

RunPlan plan_run(const TrainConfig& c, std::ostream& info) {
  validate(c);
  warn_oversubscription(c, info);
  if (c.threads > 0) set_num_threads(static_cast<int>(c.threads));
  RunPlan p;
  p.device = Device::parse(c.device);
  p.dp = c.parallel == "dp";
  p.mp = c.parallel == "mp";
  p.ddp = c.parallel == "ddp";
  if (p.ddp) {
    p.env = detect_process_env();
    p.device = rank_device(p.device, p.env);  // "cuda": this rank's GPU, cuda:LOCAL_RANK
  }
  check_available(p.device);
  check_gemm_flag(c.gemm, p.device);
  p.precision = parse_precision(c.precision);
  p.gemm = gemm_for(c, p.device);
  with_flag_context("--precision", [&] { check_gemm_precision(p.gemm, p.precision); });
  if (p.dp || p.mp || (p.ddp && c.stages != 0)) {
    p.devices = parallel_devices(c, p.device);
    p.device = p.devices.front();  // batches arrive, and the loss is computed, on the first
  }
  if (!c.memory_cap.empty()) {
    const uint64_t cap = parse_bytes(c.memory_cap);
    for (const Device& d : p.devices.empty() ? std::vector<Device>{p.device} : p.devices)
      set_memory_cap(d, cap);
  }
  p.sizes = parse_mlp_spec(c.model);
  p.activation = parse_activation(c.activation);
  p.progress_mode = parse_progress_mode(c.progress);
  p.classifier = loss_target_kind(c.loss) == TargetKind::ClassIndices;
  // torch.topk refuses k beyond the classes ("selected index k out of range"); a top-k over all
  // of them would score 1 whatever the model does.
  MT_CHECK_AS(ValueError, !p.classifier || c.topk <= p.sizes.back(), "--topk ", c.topk,
              " is more than the ", p.sizes.back(), " classes of --model ", c.model,
              " (its last width); give --topk at most ", p.sizes.back());
  return p;
}

// The rows to train on and to hold out, and the loss they are scored with.
struct RunData {
  std::shared_ptr<const Dataset> train, val;  // val: null without validation
  std::string val_source;                     // "--val-data F" or "--val-split F of --data"
  std::vector<std::string> classes;           // a CSV label column's class names
  std::vector<std::string> feature_columns;   // a CSV table's feature columns, in input order
  std::string label_note;                     // a regression on what look like class ids
  int64_t data_rows = 0;                      // --data's rows, before any --val-split
  std::vector<int64_t> train_rows;            // --val-split: the --data rows trained on
  StandardScaler scaler;                      // --standardize: fitted on the training rows
  LossOptions loss;
};

RunData load_run_data(const TrainConfig& c, const RunPlan& p) {
  RunData d;
  const std::vector<int64_t>& sizes = p.sizes;
  const int64_t classes = sizes.back();
  CsvClassLabels labels;
  CsvClassLabels* wanted_labels = p.classifier ? &labels : nullptr;
  std::shared_ptr<const Dataset> all;
  Tensor all_targets;    // every row's targets, in memory (labels are checked and counted here)
  if (c.data_on_disk) {  // X.npy read as batches need it (data/npy_file_dataset.h)
    auto on_disk = std::make_shared<NpyFileDataset>(c.data, c.targets);
    all_targets = on_disk->targets();
    all = std::move(on_disk);
  } else if (ends_with(c.data, ".npy") || ends_with(c.data, ".csv")) {
    CsvFeatureColumns features;
    auto table =
        std::make_shared<TensorDataset>(load_table(c.data, c.targets, c, wanted_labels, &features));
    d.feature_columns = std::move(features.names);
    all_targets = table->targets();
    all = std::move(table);
  } else {
    MT_CHECK_AS(ValueError, !p.classifier, "--loss ", c.loss, " needs class labels, but --data ",
                c.data,
                " is a regression; give a table with a label column or X.npy with --targets "
                "Y.npy of labels");
    auto synthetic = std::make_shared<TensorDataset>(make_synthetic_regression(
        synthetic_rows(c.data), sizes.front(), sizes.back(), c.seed ^ kDataSeedMix));
    all_targets = synthetic->targets();
    all = std::move(synthetic);
  }
  check_data_fits_model(*all, "--data " + c.data, c, sizes, p.classifier);
  d.classes = labels.names;
  if (!p.classifier) d.label_note = class_id_note(c, all_targets, sizes);
  std::vector<int64_t> label_of_row;  // classifiers: every row's class
  if (p.classifier) {
    check_classes_fit_model(d.classes, c, sizes);
    check_class_labels(all_targets, classes, c.ignore_index,
                       c.targets.empty() ? c.data : c.targets);
    label_of_row = label_values(all_targets);
  }
  d.train = all;
  d.data_rows = all->size();
  std::vector<int64_t> train_rows;  // empty: all
  if (c.val_split > 0) {
    HoldoutSplit split = holdout_split(all->size(), c.val_split, c.seed, label_of_row);
    if (c.data_on_disk) {  // views: the rows stay on disk
      d.train = std::make_shared<RowsOf>(all, split.train);
      d.val = std::make_shared<RowsOf>(all, split.held_out);
    } else {
      d.train = std::make_shared<TensorDataset>(subset(*all, split.train));
      d.val = std::make_shared<TensorDataset>(subset(*all, split.held_out));
    }
    train_rows = std::move(split.train);
    d.train_rows = train_rows;
    d.val_source = "--val-split " + number_text(c.val_split) + " of --data";
  } else if (!c.val_data.empty()) {
    CsvClassLabels val_labels = labels;  // the training table's kind and classes, in its order
    val_labels.held_out = true;
    CsvFeatureColumns val_features{d.feature_columns};  // by name, as the training table's
    auto val = std::make_shared<TensorDataset>(
        load_table(c.val_data, c.val_targets, c, p.classifier ? &val_labels : nullptr,
                   d.feature_columns.empty() ? nullptr : &val_features));
    check_data_fits_model(*val, "--val-data " + c.val_data, c, sizes, p.classifier);
    if (p.classifier)
      check_class_labels(val->targets(), classes, c.ignore_index,
                         c.val_targets.empty() ? c.val_data : c.val_targets);
    d.val = std::move(val);
    d.val_source = "--val-data " + c.val_data;
  }
  if (c.standardize) {
    // Fitted on the rows trained on only (after the split): held-out rows must not leak into the
    // statistics, as sklearn's scaler is fitted on the training split. --data-on-disk is refused
    // with --standardize (config_validate.cpp), so the rows are in memory here.
    const auto& train = dynamic_cast<const TensorDataset&>(*d.train);
    d.scaler = fit_standard_scaler(train.features());
    d.train =
        std::make_shared<TensorDataset>(standardize(train.features(), d.scaler), train.targets());
    if (d.val) {
      const auto& val = dynamic_cast<const TensorDataset&>(*d.val);
      d.val = std::make_shared<TensorDataset>(standardize(val.features(), d.scaler), val.targets());
    }
  }
  if (p.classifier && !train_rows.empty()) {  // the labels of the rows trained on
    std::vector<int64_t> kept;
    for (int64_t r : train_rows) kept.push_back(label_of_row[static_cast<std::size_t>(r)]);
    label_of_row = std::move(kept);
  }
  d.loss = loss_options(c);  // the weights files' placeholders are replaced just below
  if (p.classifier) {
    d.loss.class_weights = read_class_weights(c, label_of_row, classes);
    check_some_row_counts(label_of_row, c.ignore_index, d.loss.class_weights);
  }
  if (!c.pos_weight.empty())
    d.loss.pos_weight = read_weights_file("pos-weight", c.pos_weight, sizes.back(), "outputs");
  return d;
}

// The model (wrapped for dp, mp, ddp or the hybrid) and handles on its wrappers.
struct BuiltModel {
  std::unique_ptr<Module> model;
  DataParallel* data_parallel = nullptr;
  ModelParallel* model_parallel = nullptr;
  DistributedDataParallel* distributed = nullptr;
};

BuiltModel build_model(const TrainConfig& c, const RunPlan& p, Generator& gen, Communicator* comm) {
  BuiltModel b;
  const Device device = p.device;
  if (p.dp) {
    // Every replica is built from the same seed, so replica 0's initial weights are the one-device
    // run's; DataParallel then broadcasts replica 0's weights anyway.
    auto dpm = std::make_unique<DataParallel>(
        [&](Device d) {
          Generator replica_gen(c.seed);
          std::unique_ptr<Sequential> m = make_mlp(p.sizes, p.activation, replica_gen, d);
          m->set_needs_input_grad(false);
          set_gemm_backend(*m, p.gemm);
          m->set_precision(p.precision);
          m->set_mlp_kernel(c.mlp_kernel);
          return std::unique_ptr<Module>(std::move(m));
        },
        p.devices);
    make_mlp(p.sizes, p.activation, gen, device);  // advance `gen` as the one-device run does
    b.data_parallel = dpm.get();
    b.model = std::move(dpm);
  } else {
    // Under ddp every rank builds the model from --seed, so all start from the one-device run's
    // weights (and `gen` advances as there); the wrapper broadcasts rank 0's anyway.
    std::unique_ptr<Sequential> seq = make_mlp(p.sizes, p.activation, gen, device);
    seq->set_needs_input_grad(false);  // the input is data: skip the first layer's dx GEMM
    set_gemm_backend(*seq, p.gemm);
    seq->set_precision(p.precision);  // before splitting: the stages' layers keep it
    seq->set_mlp_kernel(c.mlp_kernel);
    std::unique_ptr<Module> local;
    if (p.mp || (p.ddp && c.stages != 0)) {  // ddp with --stages: each rank a pipeline
      const int64_t stages = p.mp ? stages_or_default(c) : c.stages;
      auto mpm =
          std::make_unique<ModelParallel>(std::move(seq), static_cast<int>(stages),
                                          static_cast<int>(micro_batches_or_default(c)), p.devices);
      b.model_parallel = mpm.get();
      local = std::move(mpm);
    } else {
      local = std::move(seq);
    }
    if (p.ddp) {
      DdpOptions ddp_options;
      ddp_options.bucket_bytes = static_cast<int64_t>(parse_bytes(c.bucket_size));
      ddp_options.overlap = !c.no_overlap;
      ddp_options.reduce_dtype = parse_precision(c.grad_reduce_dtype, "grad reduce dtype");
      auto ddpm = std::make_unique<DistributedDataParallel>(std::move(local), *comm, ddp_options);
      b.distributed = ddpm.get();
      b.model = std::move(ddpm);
    } else {
      b.model = std::move(local);
    }
  }
  if (!c.init.empty()) {
    with_flag_context("--init", [&] { load_weights(c.init, *b.model); });
    if (b.data_parallel) b.data_parallel->broadcast_replica0_parameters();
  }
  return b;
}

std::unique_ptr<Optimizer> build_optimizer(const TrainConfig& c, const BuiltModel& b) {
  const OptimizerConfig oc = optimizer_config(c);
  return b.data_parallel ? b.data_parallel->make_optimizer(oc)
                         : make_optimizer(oc, b.model->named_parameters());
}

// --batch-size is per rank (as in torch): each rank takes its share of every epoch's order, or
// of the epoch's weighted draw (made alike on every rank).
DataLoaderOptions loader_options(const TrainConfig& c, const RunPlan& p, const Dataset& train,
                                 const std::vector<double>& sample_weights, int rank, int world) {
  DataLoaderOptions lo;
  lo.batch_size = c.batch_size;
  lo.shuffle = c.shuffle;
  lo.drop_last = c.drop_last;
  lo.seed = c.seed;
  lo.device = p.device;
  lo.workers = static_cast<int>(c.workers);  // validate() kept it within kMaxLoaderWorkers
  if (!sample_weights.empty())
    lo.sampler =
        std::make_shared<WeightedRandomSampler>(sample_weights, train.size(), c.seed, world, rank);
  else if (p.ddp)
    lo.sampler = std::make_shared<DistributedSampler>(train.size(), world, rank, c.shuffle, c.seed);
  return lo;
}

// A vector of doubles added over the ranks (an all-reduce SUM); null without a communicator.
std::function<void(std::vector<double>&)> sum_over_ranks(Communicator* comm) {
  if (comm == nullptr) return nullptr;
  return [comm](std::vector<double>& v) {
    Tensor t = Tensor::from_vector(v, {static_cast<int64_t>(v.size())}, comm->device());
    comm->all_reduce(t, ReduceOp::Sum);
    v = t.to_vector<double>();
  };
}

// The ddp hooks of the Trainer (TrainerOptions' multi-rank section).
void set_ddp_hooks(TrainerOptions& to, DistributedDataParallel* distributed, Communicator* cm,
                   int rank) {
  to.world_size = cm->size();
  // Only the step's last batch all-reduces; the others accumulate locally (torch's no_sync).
  to.before_backward = [distributed](bool sync) { distributed->set_require_gradient_sync(sync); };
  // The mean of the ranks' batch means is the global batch's mean: every rank's batch has the
  // same number of rows. Called after the step's last backward, when no bucket is in flight.
  // One all-reduce carries the loss and the stop request: the mean of the requests is > 0 when
  // any rank was signalled, so every rank stops after the same step.
  to.reduce_loss = [cm](double loss, bool& stop) {
    Tensor t = Tensor::from_vector(std::vector<double>{loss, stop ? 1.0 : 0.0}, {2}, cm->device());
    cm->all_reduce(t, ReduceOp::Avg);
    const std::vector<double> mean = t.to_vector<double>();
    stop = mean[1] > 0;
    return mean[0];
  };
  to.sum_over_ranks = sum_over_ranks(cm);
  to.write_checkpoints = rank == 0;
  to.after_checkpoint = [cm] { cm->barrier(); };  // nobody goes on (or reads it) half-written
}

// Local SGD (--sync-every K): no gradient all-reduce; the Trainer averages the replicas at its
// sync points (TrainerOptions::average_replicas), the optimizer moments too with
// --sync-optimizer-state and always at a checkpoint (it holds rank 0's optimizer state only).
void set_local_sgd_hooks(TrainerOptions& to, const TrainConfig& c,
                         DistributedDataParallel* distributed, Optimizer* optimizer) {
  to.before_backward = [distributed](bool) { distributed->set_require_gradient_sync(false); };
  to.sync_every = *c.sync_every;
  const bool moments = c.sync_optimizer_state;
  to.average_replicas = [distributed, optimizer, moments](bool checkpoint) {
    distributed->average_parameters();
    if (!moments && !checkpoint) return;
    // state_tensors() are copies on the host: averaged on the communicator's device, then
    // loaded back with the optimizer's own scalars (its lr and step counts stay).
    const Device device = distributed->communicator().device();
    auto named = optimizer->state_tensors();
    std::vector<Tensor> values;
    for (auto& [name, t] : named) values.push_back(t.to(device));
    distributed->average_tensors(values);
    for (std::size_t i = 0; i < named.size(); ++i) named[i].second = values[i];
    optimizer->load_state(named, optimizer->state_scalars());
  };
}

// After local SGD's last averaging every rank must hold one model (the saved file is rank 0's):
// per parameter the sum of its values and of their squares, whose maximum and minimum over the
// ranks must be equal; an Error (a bug, not a user's mistake) otherwise.
void check_replicas_agree(Module& model, Communicator& comm) {
  std::vector<double> v;
  for (auto& [name, p] : model.named_parameters()) {
    double sum = 0, squares = 0;
    for (double x : p->value.to_double_vector()) {
      sum += x;
      squares += x * x;
    }
    v.push_back(sum);
    v.push_back(squares);
  }
  const std::size_t n = v.size();
  for (std::size_t i = 0; i < n; ++i) v.push_back(-v[i]);
  Tensor t = Tensor::from_vector(v, {static_cast<int64_t>(v.size())}, comm.device());
  comm.all_reduce(t, ReduceOp::Max);
  const std::vector<double> m = t.to_vector<double>();
  for (std::size_t i = 0; i < n; ++i)
    MT_CHECK(m[i] == -m[n + i],
             "local SGD: after the last averaging the ranks' parameters differ "
             "(rank ",
             comm.rank(), ", checksum ", i, ": ", -m[n + i], " .. ", m[i], ")");
}

// fp16's loss scaling skips a step whose gradients overflow; a run whose every step was skipped
// trained nothing and is no success, whatever else went right (no --save of untrained weights).
void check_some_step_counted(const TrainSummary& s, int64_t total_steps) {
  if (s.stopped_early || s.last_step < s.first_step) return;
  // Likewise a run whose every step had no row to count (issue 30): each made no update.
  MT_CHECK(s.nothing_counted_steps < s.last_step - s.first_step + 1, "every step (",
           s.nothing_counted_steps, " of steps ", s.first_step, "-", s.last_step,
           ") had no row to count: each row of their batches has the --ignore-index label or a "
           "class whose --class-weights weight is 0, so nothing was trained; shuffle the rows "
           "(--shuffle, the default) or train for more steps");
  if (s.skipped_steps < s.last_step) return;
  MT_THROW(Error, "every step (", s.skipped_steps, " of ", s.last_step,
           ") was skipped for inf/NaN gradients, so nothing was trained (the loss scale ended at ",
           s.loss_scale, " after step ", s.last_step, " of ", total_steps,
           "); lower --loss-scale, or look for what overflows float16 (the data's scale, --lr)");
}

// Note [one configuration for all ranks]: ranks started with their own flags (per-node configs,
// MPMD) once trained silently with different --lr or --seed and saved rank 0's weights; only the
// model's shape was compared (by DistributedDataParallel). Rank 0's configuration goes to every
// rank before the first step; a rank whose own differs names each difference, and every rank
// stops together (a flag per rank, all-reduced, so no rank waits in a collective for a rank that
// left). Left out: what each process may set for itself without changing the result.
void check_same_config(const TrainConfig& c, Communicator& comm) {
  static const std::set<std::string> kPerProcess = {
      "device",     "devices",      "threads", "workers",   "progress",
      "memory-cap", "comm-timeout", "log",     "log-every", "profile-kernels"};
  const std::string own = config_to_json(c);
  Tensor length = Tensor::from_vector(std::vector<double>{static_cast<double>(own.size())}, {1})
                      .to(comm.device());
  comm.broadcast(length, 0);
  const auto n = static_cast<int64_t>(length.to_vector<double>()[0]);
  std::vector<float> bytes(static_cast<std::size_t>(n), 0.0f);  // a byte per float: exact
  if (comm.rank() == 0)
    for (int64_t i = 0; i < n; ++i)
      bytes[static_cast<std::size_t>(i)] =
          static_cast<unsigned char>(own[static_cast<std::size_t>(i)]);
  Tensor text = Tensor::from_vector(bytes, {n}).to(comm.device());
  comm.broadcast(text, 0);
  std::string root;
  for (float b : text.to_vector<float>()) root += static_cast<char>(static_cast<unsigned char>(b));

  const nlohmann::json mine = nlohmann::json::parse(own), theirs = nlohmann::json::parse(root);
  std::vector<std::string> differences;
  for (const auto& [key, value] : mine.items()) {
    if (kPerProcess.count(key)) continue;
    const auto it = theirs.find(key);
    const std::string other = it == theirs.end() ? "(not set)" : it->dump();
    if (it == theirs.end() || *it != value)
      differences.push_back("--" + key + " " + value.dump() + " (rank 0: " + other + ")");
  }
  std::vector<double> differs(static_cast<std::size_t>(comm.size()), 0.0);
  differs[static_cast<std::size_t>(comm.rank())] = differences.empty() ? 0.0 : 1.0;
  Tensor flags = Tensor::from_vector(differs, {comm.size()}).to(comm.device());
  comm.all_reduce(flags, ReduceOp::Max);
  std::vector<std::string> ranks;
  const std::vector<double> all = flags.to_vector<double>();
  for (std::size_t r = 0; r < all.size(); ++r)
    if (all[r] > 0) ranks.push_back(std::to_string(r));
  if (ranks.empty()) return;
  if (!differences.empty())
    MT_THROW(ValueError, "rank ", comm.rank(),
             " was started with another configuration than rank 0: ", join(differences, ", "),
             "; every rank of a ddp run must train the same run (give them the same flags)");
  MT_THROW(ValueError, "rank(s) ", join(ranks, ", "),
           " were started with another configuration than rank 0 (their errors name the "
           "differences); every rank of a ddp run must train the same run");
}

// Every file the run reads or writes, by flag (check_run_files compares them).
std::vector<RunFile> train_run_files(const TrainConfig& c, const ProcessEnv& env) {
  const bool data_file = ends_with(c.data, ".npy") || ends_with(c.data, ".csv");
  std::vector<RunFile> files = {
      {"--data", data_file ? c.data : "", false},
      {"--targets", c.targets, false},
      {"--val-data", c.val_data, false},
      {"--val-targets", c.val_targets, false},
      {"--init", c.init, false},
      {"--class-weights", c.class_weights == "auto" ? "" : c.class_weights, false},
      {"--pos-weight", c.pos_weight, false},
      {"--sample-weights", c.sample_weights, false},
      {"--save", c.save, true},
      {"--save-best", c.save_best, true},
      {"--checkpoint-dir", c.checkpoint_dir.empty() ? "" : checkpoint_path(c.checkpoint_dir), true},
  };
  // Under ddp each rank writes its own log: every rank's name is an output.
  for (int r = 0; r < (c.log.empty() ? 0 : env.world_size); ++r)
    files.push_back({r == 0 ? "--log" : "--log (rank " + std::to_string(r) + ")",
                     rank_log_path(c.log, r, env.world_size), true});
  for (int r = 0; r < (c.profile_kernels.empty() ? 0 : env.world_size); ++r)
    files.push_back(
        {r == 0 ? "--profile-kernels" : "--profile-kernels (rank " + std::to_string(r) + ")",
         rank_log_path(c.profile_kernels, r, env.world_size), true});
  return files;
}

std::vector<RunLock> lock_run_files(const TrainConfig& c, const ProcessEnv& env) {
  std::vector<RunLock> locks;
  if (!c.checkpoint_dir.empty() && env.rank == 0)
    locks.emplace_back("--checkpoint-dir " + c.checkpoint_dir,
                       checkpoint_dir_lock_path(c.checkpoint_dir));
  if (!c.log.empty()) {
    const std::string log = rank_log_path(c.log, env.rank, env.world_size);
    locks.emplace_back("--log " + log, file_lock_path(log));
  }
  return locks;
}

// The line that says what is trained where.
std::string describe_run(const TrainConfig& c, const RunPlan& p, const RunData& d,
                         const BuiltModel& b, const TrainReport& r, const Communicator* comm,
                         int64_t epochs, bool weighted_rows) {
  std::ostringstream what;
  what << "training " << c.model << " (" << c.activation << ", " << b.model->num_parameters()
       << " parameters) on " << r.device << ": " << c.data << " (" << d.train->size() << " rows";
  if (d.val) what << ", " << d.val->size() << " held out by " << d.val_source;
  what << "), " << c.loss << " loss";
  if (!d.classes.empty()) what << " over " << d.classes.size() << " classes";
  what << ", " << c.optimizer << " lr " << number_text(c.lr) << ", batch " << c.batch_size
       << (b.distributed ? " per rank" : "") << ", " << r.total_steps << " steps";
  if (b.data_parallel) what << ", data parallel: " << b.data_parallel->replicas() << " replicas";
  if (b.distributed) {
    const int world = r.world_size;
    what << ", distributed data parallel: " << world << (world == 1 ? " rank" : " ranks") << " ("
         << comm->backend() << ", " << c.all_reduce << " all-reduce, buckets of " << c.bucket_size
         << (c.no_overlap ? " all-reduced after backward" : "") << ", global batch "
         << c.batch_size * world;
    if (c.grad_reduce_dtype != "fp32") what << ", gradients reduced in " << c.grad_reduce_dtype;
    if (c.sync_every)
      what << ", local SGD: parameters averaged every " << *c.sync_every
           << (*c.sync_every == 1 ? " step" : " steps")
           << (c.sync_optimizer_state ? " with the optimizer moments" : "");
    what << ")";
  }
  if (weighted_rows) what << ", rows drawn by --sample-weights";
  if (b.model_parallel) {
    what << ", model parallel: " << b.model_parallel->stages() << " stages, "
         << b.model_parallel->micro_batches() << " micro-batches, bubble "
         << static_cast<int>(b.model_parallel->bubble_fraction() * 100 + 0.5) << "%";
  }
  if (epochs > 0) what << " (" << epochs << (epochs == 1 ? " epoch)" : " epochs)");
  if (p.precision != DType::Float32) {
    what << ", " << precision_name(p.precision) << " mixed precision (float32 master weights";
    if (p.precision == DType::Float16)
      what << ", loss scale from " << c.loss_scale.value_or(GradScalerOptions{}.init_scale);
    what << ")";
  }
  // The GEMM the run resolved: --gemm, or the tensor-core one --allow-tf32 made of auto on a GPU.
  if (p.gemm != "auto") what << ", GEMM " << p.gemm << (p.gemm != c.gemm ? " (--allow-tf32)" : "");
  if (r.resumed_from_step >= 0) what << ", resuming after step " << r.resumed_from_step;
  return what.str();
}

}  // namespace

TrainReport run_training(const TrainConfig& c, std::ostream& info, std::ostream& progress_out,
                         const std::atomic<int>* stop_requested) {
  // ---- check everything before the first step ----
  const RunPlan plan = plan_run(c, info);
  check_run_files(train_run_files(c, plan.env));
  const RunData data = load_run_data(c, plan);
  if (!c.save.empty()) prepare_output("save", c.save, info);
  if (!c.save_best.empty()) prepare_output("save-best", c.save_best, info);
  if (!c.log.empty()) prepare_output("log", c.log, info);
  if (!c.profile_kernels.empty()) prepare_output("profile-kernels", c.profile_kernels, info);
  std::string resume_path;
  if (c.resume) {
    resume_path = checkpoint_path(c.checkpoint_dir);
    if (!fs::exists(resume_path))
      MT_THROW(IoError, "--resume: no checkpoint in '", c.checkpoint_dir, "' (expected ",
               resume_path, "); run without --resume to start afresh");
    check_resume_config(resume_path, c, plan.env.world_size);
  }
  std::vector<double> sample_weights;
  if (!c.sample_weights.empty()) {
    // One weight per --data row, split with the rows: the rows --val-split leaves for training
    // are not the user's to see (they once had to give weights for that invisible subset).
    sample_weights = read_sample_weights(c.sample_weights, data.data_rows);
    if (!data.train_rows.empty()) {
      std::vector<double> kept;
      kept.reserve(data.train_rows.size());
      for (int64_t r : data.train_rows) kept.push_back(sample_weights[static_cast<std::size_t>(r)]);
      sample_weights = std::move(kept);
      with_flag_context(
          "--sample-weights " + c.sample_weights + " (the rows --val-split trains on)",
          [&] { WeightedRandomSampler(sample_weights, data.train->size()); });
    }
  }
  if (!c.checkpoint_dir.empty()) {
    std::error_code ec;
    fs::create_directories(c.checkpoint_dir, ec);
    if (!fs::is_directory(c.checkpoint_dir))
      MT_THROW(IoError, "--checkpoint-dir ", c.checkpoint_dir, ": cannot create the directory",
               ec ? ": " + ec.message() : std::string());
    prepare_output("checkpoint-dir", checkpoint_path(c.checkpoint_dir), info);
  }
  // One run at a time on the files: a second run on them is refused while this one lives. Rank 0
  // alone writes the checkpoints; every rank its own log.
  const std::vector<RunLock> locks = lock_run_files(c, plan.env);

  // Declared before the model: the DDP wrapper uses it until it is destroyed.
  std::unique_ptr<Communicator> comm;
  if (plan.ddp)
    comm = init_process_group(plan.env, plan.device, process_group_options(c, plan.devices));
  const int rank = comm ? comm->rank() : 0, world = comm ? comm->size() : 1;
  if (comm) check_same_config(c, *comm);

  Generator gen(c.seed);
  BuiltModel built = build_model(c, plan, gen, comm.get());
  Module& model = *built.model;
  std::unique_ptr<Optimizer> optimizer = build_optimizer(c, built);
  DataLoader loader(data.train, loader_options(c, plan, *data.train, sample_weights, rank, world));

  const std::map<std::string, std::string> metadata =
      model_metadata(c, data.classes, data.feature_columns, data.scaler);
  TrainerOptions to;
  to.stop_requested = stop_requested;
  const int64_t bpe = loader.batches_per_epoch();
  const int64_t epochs = c.steps ? 0 : c.epochs.value_or(kDefaultEpochs);
  to.total_steps = c.steps ? *c.steps : steps_for_epochs(epochs, bpe, c.grad_accum);
  to.total_batches = c.steps ? 0 : epochs * bpe;  // fits: steps_for_epochs checked the product
  to.grad_accum = c.grad_accum;
  to.clip_grad_norm = c.clip_grad_norm;
  to.schedule = make_schedule(c, to.total_steps);
  to.checkpoint_dir = c.checkpoint_dir;
  to.checkpoint_every = c.checkpoint_every;
  to.checkpoint_metadata = metadata;
  to.checkpoint_metadata["config"] = config_to_json(c);
  to.generator = &gen;
  to.loss = make_loss(data.loss);
  if (plan.precision == DType::Float16) {
    GradScalerOptions so;
    so.init_scale = c.loss_scale.value_or(so.init_scale);
    so.growth_interval = c.loss_scale_growth_interval.value_or(so.growth_interval);
    to.loss_scaling = so;
  }
  const DType save_dtype = parse_precision(c.save_dtype, "save dtype");
  if (built.distributed) {
    set_ddp_hooks(to, built.distributed, comm.get(), rank);
    if (c.sync_every) set_local_sgd_hooks(to, c, built.distributed, optimizer.get());
  }
  std::unique_ptr<Validator> validator;
  if (data.val) {
    ValidatorOptions vo;
    vo.loss = data.loss;
    vo.batch_size = std::max<int64_t>(c.batch_size, 1024);  // no gradients: larger batches fit
    vo.device = plan.device;
    vo.topk = c.topk;
    vo.stop_requested = stop_requested;
    if (comm) {  // each rank its own rows, every row once
      vo.rows = strided_rows(data.val->size(), rank, world);
      vo.sum_over_ranks = sum_over_ranks(comm.get());
    }
    validator = std::make_unique<Validator>(data.val, vo);
    to.validate = [&validator, &model] { return validator->evaluate(model); };
    to.eval_every = c.eval_every;
    to.early_stop = c.early_stop;
    if (!c.save_best.empty() && rank == 0) {
      to.on_best = [&c, &model, &metadata, save_dtype](int64_t step, const ValMetrics& v) {
        auto m = metadata;
        m["step"] = std::to_string(step);
        m["val_loss"] = nlohmann::json(v.loss).dump();  // shortest round trip
        with_flag_context("--save-dtype " + c.save_dtype,
                          [&] { save_weights(c.save_best, model, m, save_dtype); });
      };
    }
  }
  // GPU utilisation and memory in the metrics where NVML can be read; where not, a note says why.
  GpuMonitor gpu_monitor(plan.device);
  to.gpu_monitor = &gpu_monitor;
  // --profile-kernels: every op's time per step (train/kernel_profile.h), each rank its own file.
  std::unique_ptr<KernelProfile> kernel_profile;
  if (!c.profile_kernels.empty()) {
    kernel_profile = std::make_unique<KernelProfile>(rank_log_path(c.profile_kernels, rank, world));
    auto before = std::move(to.on_step);
    to.on_step = [&kernel_profile, before](const StepStats& s) {
      if (before) before(s);
      kernel_profile->end_step(s.step);
    };
  }
  Trainer trainer(model, *optimizer, loader, to);

  TrainReport report;
  report.rank = rank;
  report.world_size = world;
  report.total_steps = to.total_steps;
  report.device = plan.devices.empty() ? plan.device.str() : join_devices(plan.devices);
  if (!resume_path.empty()) {
    trainer.resume(resume_path);
    if (built.data_parallel) built.data_parallel->broadcast_replica0_parameters();
    report.resumed_from_step = trainer.step();
  }

  // ---- inputs are good: from here on, files are written ----
  std::unique_ptr<MetricsLog> log;
  if (!c.log.empty()) {
    log = std::make_unique<MetricsLog>(rank_log_path(c.log, rank, world), report.resumed_from_step,
                                       c.log_every);
    if (!log->repair_note().empty()) info << "warning: " << log->repair_note() << "\n";
  }
  Progress progress(progress_out, plan.progress_mode, trainer.step() + 1, to.total_steps);
  // With several ranks only rank 0 talks to the console; the others keep their own logs.
  if (rank == 0) {
    info << describe_run(c, plan, data, built, report, comm.get(), epochs, !sample_weights.empty())
         << "\n";
    if (!data.label_note.empty()) info << "note: " << data.label_note << "\n";
    if (log && !gpu_monitor.note().empty())
      info << "note: the metrics leave out GPU utilisation and memory: " << gpu_monitor.note()
           << "\n";
    info.flush();
  }

  trainer.set_log(log.get());
  trainer.set_progress(rank == 0 ? &progress : nullptr);
  report.summary = trainer.run();
  if (kernel_profile) {
    const std::string top = kernel_profile->finish();
    if (rank == 0) info << top << "kernel profile written to " << c.profile_kernels << "\n";
  }
  if (c.sync_every) check_replicas_agree(model, *comm);
  check_some_step_counted(report.summary, report.total_steps);

  if (!c.save.empty()) {
    check_parameters_finite(model, "--save");  // on every rank: the weights are the same on all
    if (rank == 0) {
      auto m = metadata;
      m["step"] = std::to_string(trainer.step());
      with_flag_context("--save-dtype " + c.save_dtype,
                        [&] { save_weights(c.save, model, m, save_dtype); });
    }
    report.saved = c.save;
  }
  if (!c.save_best.empty() && report.summary.best_val) report.saved_best = c.save_best;
  // No rank leaves before the weights are written: a script started after any rank returns finds
  // them.
  if (comm) comm->barrier();
  return report;
}

}  // namespace minitrain
