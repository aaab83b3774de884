#pragma once
// The settings of one training run: every flag of `minitrain train`, with the defaults that make
// a bare `minitrain train` learn the built-in synthetic regression in a few seconds. A TOML file
// (`--config FILE`) sets the same keys as the command line (the long flag names, "batch-size"),
// and flags given on the command line override it.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nn/loss.h"
#include "optim/make_optimizer.h"
#include "optim/optimizer.h"

namespace minitrain {

/// One value a string setting may take, and what it means (for --help).
struct Choice {
  const char* name;
  const char* what;
};
/// The values of --parallel and of --all-reduce: the help text and the checker read these.
inline constexpr Choice kParallelModes[] = {{"none", "one device"},
                                            {"dp", "replicas, one thread each"},
                                            {"ddp", "one process per rank"},
                                            {"mp", "layer-split stages"}};
inline constexpr Choice kAllReduceAlgorithms[] = {
    {"native", "the backend's own: NCCL, MPI, or the threads' shared-memory sum"},
    {"ring", "minitrain's ring over send/recv"}};
/// The values of --backend, the communicator of --parallel ddp.
inline constexpr Choice kCommBackends[] = {
    {"auto", "nccl for GPU ranks, mpi for CPU ranks"},
    {"mpi", "MPI under mpirun; GPU tensors are staged through pinned host memory"},
    {"nccl", "NCCL, GPU ranks only"}};

// The optimizer's settings (--lr, --momentum, --betas, ...) are its own struct, OptimizerOptions
// (optim/optimizer.h), which TrainConfig derives from: declared and defaulted once there, the rows
// of the settings table point into it (Note [one options struct]).
struct TrainConfig : OptimizerOptions {
  // ---- model ----
  std::string model = "mlp:4,64,64,1";  ///< mlp:IN,H1,...,OUT
  std::string activation = "relu";      ///< a name of kActivations (kernels/activation.h)
  // ---- data ----
  std::string data = "synthetic";           ///< synthetic[:N] | X.npy (with targets) | T.csv
  std::string targets;                      ///< Y.npy, with an X.npy data file
  std::vector<std::string> target_columns;  ///< with a .csv data file
  /// Columns of a .csv data file (and --val-data) that are neither feature nor target (an `id`).
  std::vector<std::string> ignore_columns;
  bool data_on_disk = false;  ///< X.npy read from disk as batches need it (data/npy_file_dataset.h)
  /// Features scaled to mean 0, std 1 by the training rows' statistics (data/standard_scaler.h),
  /// which the weights' metadata keeps for predict, evaluate and export.
  bool standardize = false;
  // ---- optimizer ----
  std::string optimizer = "adam";  ///< a name of optimizer_table() (optim/make_optimizer.h)
  // Its settings: the members of the base, OptimizerOptions.
  // ---- schedule, clipping, accumulation ----
  std::string schedule = "none";  ///< a name of schedule_table() (optim/schedule.h)
  int64_t warmup_steps = 0;       ///< linear warm-up before the schedule
  int64_t step_size = 0;          ///< step: decay every step_size steps (required)
  double gamma = 0.1;             ///< step: the decay factor
  double clip_grad_norm = 0.0;    ///< 0: no clipping
  int64_t grad_accum = 1;         ///< batches per optimizer step
  // ---- loop ----
  int64_t batch_size = 64;
  std::optional<int64_t> epochs;  ///< neither epochs nor steps: kDefaultEpochs
  std::optional<int64_t> steps;   ///< optimizer steps
  bool shuffle = true;
  bool drop_last = false;  ///< drop each epoch's last partial batch (torch's drop_last)
  uint64_t seed = 0;
  std::string device = "auto";  ///< auto | cpu | cuda | cuda:N
  int64_t threads = 0;          ///< CPU threads; 0: the default (cores)
  /// Threads preparing batches ahead of the step (data/data_loader.h, torch's num_workers); 0: on
  /// the training thread. The batches are the same for any count.
  int64_t workers = 1;
  // ---- files ----
  std::string init;  ///< initial weights (.safetensors)
  std::string save;  ///< final weights (.safetensors), written at the end
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;   ///< steps; 0: only at the end of the run
  bool resume = false;            ///< continue from checkpoint_dir's checkpoint
  std::string log;                ///< metrics, one JSON object per line per step
  int64_t log_every = 1;          ///< steps per metrics line (their means over the interval)
  std::string profile_kernels;    ///< each op's time per step and a summary (kernel_profile.h)
  std::string progress = "auto";  ///< auto | bar | lines | none
  // ---- parallelism: a name of kParallelModes; 0 / "" = not given ----
  std::string parallel = "none";
  int64_t replicas = 0, stages = 0, micro_batches = 0;
  std::string devices;
  // ---- distributed data parallel (--parallel ddp) ----
  std::string bucket_size = "25MiB";  ///< gradient bucket size (bytes, "25MiB")
  /// All-reduce every bucket after backward instead of each as soon as backward has filled it
  /// (DdpOptions::overlap off): the same sums, for when overlap does not pay.
  bool no_overlap = false;
  std::string all_reduce = "native";  ///< a name of kAllReduceAlgorithms
  std::string backend = "auto";       ///< a name of kCommBackends
  double comm_timeout = 300.0;        ///< seconds a collective may wait for a peer
  /// Local SGD: each rank steps on its own and the parameters are averaged every K steps; not
  /// given: DDP (each step's gradients all-reduced, what K = 1 amounts to).
  std::optional<int64_t> sync_every;
  bool sync_optimizer_state = false;       ///< local SGD: average the optimizer moments too
  std::string grad_reduce_dtype = "fp32";  ///< fp32 | bf16: the type gradients are all-reduced in
  // ---- loss (nn/loss.h) ----
  std::string loss = "mse";     ///< a name of loss_names()
  std::string class_weights;    ///< cross_entropy: "auto" (balanced) | W.npy (one per class)
  int64_t ignore_index = -100;  ///< cross_entropy: rows with this label count for nothing
  std::string pos_weight;       ///< bce_with_logits: W.npy, one weight per output
  /// The loss's own settings, declared once in LossOptions (nn/loss.h): the rows of
  /// --label-smoothing, --huber-delta and the other loss settings of one value point into it. Its
  /// name, reduction and weights are not read: --loss and the weights files above give those.
  LossOptions loss_settings;
  // ---- validation (train/validation.h) ----
  std::string val_data;     ///< X.npy | T.csv held out (with val_targets for .npy)
  std::string val_targets;  ///< Y.npy, with a .npy val_data
  double val_split = 0.0;   ///< fraction of --data held out instead (seeded; stratified by class)
  int64_t eval_every = 0;   ///< steps between evaluations; 0: at each epoch's end only
  std::string save_best;    ///< weights of the best evaluation (lowest val_loss)
  int64_t early_stop = 0;   ///< stop after this many evaluations without improvement; 0: never
  int64_t topk = 1;         ///< classifiers: also report top-k accuracy when k > 1
  // ---- sampling ----
  std::string sample_weights;  ///< W.npy: one weight per row; rows drawn with replacement
  // ---- precision (nn/module.h set_precision, optim/grad_scaler.h) ----
  std::string precision = "fp32";    ///< fp32 | bf16 | fp16: the GEMMs' and activations' type
  std::optional<double> loss_scale;  ///< fp16: the initial loss scale (GradScaler's 65536)
  std::optional<int64_t> loss_scale_growth_interval;  ///< fp16: finite steps before it doubles
  bool cuda_graph = false;          ///< each step replayed as one CUDA graph where it can be
  bool allow_tf32 = false;          ///< CUDA: float32 GEMMs on TF32 tensor cores (as torch's flag)
  std::string save_dtype = "fp32";  ///< --save/--save-best weights: fp32 | bf16 | fp16
  // ---- kernels and memory ----
  std::string gemm = "auto";  ///< GEMM backend by registry name (kernels/gemm/gemm_registry.h)
  std::string memory_cap;     ///< device memory cap ("4GiB"); "": none
  /// layers | fused: the kernels that run the MLP (nn/sequential.h kMlpKernels)
  std::string mlp_kernel = "layers";
};

/// Epochs when neither --epochs nor --steps is given.
inline constexpr int64_t kDefaultEpochs = 8;
/// --parallel mp (and ddp with --stages): stages and micro-batches when not given. TrainConfig
/// keeps 0 for "not given" (validation tells a given value from none); these decide the default.
inline constexpr int64_t kDefaultStages = 2;
inline constexpr int64_t kDefaultMicroBatches = 1;
inline int64_t stages_or_default(const TrainConfig& c) {
  return c.stages != 0 ? c.stages : kDefaultStages;
}
inline int64_t micro_batches_or_default(const TrainConfig& c) {
  return c.micro_batches != 0 ? c.micro_batches : kDefaultMicroBatches;
}

/// One settable key: its name (the long flag without dashes) and the type of its value.
enum class ConfigValueKind { Bool, Int, Float, String, FloatPair, StringList };
struct ConfigKey {
  const char* name;  ///< "batch-size"
  ConfigValueKind kind;
  const char* help;  ///< one line for --help
};
/// Every key, in the order --help lists them. "no-shuffle" is the command line's negation of
/// "shuffle" and is not a key of its own.
const std::vector<ConfigKey>& config_keys();

/// Whether `name` ('_' read as '-') is a key; the known key closest to it ("lr" for
/// "lerning-rate"), or "" when none is close: for "did you mean" hints.
bool find_config_key(const std::string& name);
std::string closest_config_key(const std::string& name);

/// Sets `key` from its command-line text ("3e-4", "0.9,0.999", "a,b"; booleans "true"/"false").
/// ValueError naming the flag and the text when it does not parse or the key does not exist.
void set_config_value(TrainConfig& config, const std::string& key, const std::string& text);

/// Sets the keys a TOML document gives. Keys may be spelled with '-' or '_'. An unknown key, a
/// value of the wrong type or a TOML syntax error is a ValueError naming `source` (the file
/// name), the line and the key; nothing is set then. Relative paths in file keys (data, targets,
/// init, save, checkpoint-dir, log) are taken relative to `base_dir` when it is not empty.
void apply_toml_config(TrainConfig& config, const std::string& toml_text, const std::string& source,
                       const std::string& base_dir = "");
/// The same for a file, with paths relative to the file's directory (so a config file and its
/// data move together); IoError when it cannot be read.
void apply_toml_config_file(TrainConfig& config, const std::string& path);

/// Checks every value and every combination (epochs and steps both given, targets without .npy
/// data, an lr < 0, ...); the first problem is a ValueError naming the flag and what to do.
/// Does not touch the file system.
void validate(const TrainConfig& config);

/// The optimizer settings of a run, made from the settings table's optimizer column (Note [one
/// home per setting] in train/settings.h): validate() builds the optimizer from them once
/// without parameters (its constructor checks them), the run builds it for the model.
OptimizerConfig optimizer_config(const TrainConfig& config);
/// The same for the loss: every LossOptions member but the weights files' contents, which the
/// run reads (a given file is one placeholder weight here).
LossOptions loss_options(const TrainConfig& config);

/// The config as a JSON object (keys as in TOML), stored in checkpoints.
std::string config_to_json(const TrainConfig& config);

}  // namespace minitrain
