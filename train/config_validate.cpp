// The checks a run's settings must pass before anything is read or written: one message per
// problem, naming the flag and what to do about it.

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <limits>
#include <cstdlib>
#include <string>

#include "core/bytes.h"
#include "core/error.h"
#include "core/strings.h"
#include "nn/loss.h"
#include "train/config.h"
#include "train/flag_context.h"
#include "train/settings.h"

namespace minitrain {
namespace {

using config_detail::kMaxInt32;
using config_detail::kMaxSteps;
using config_detail::kMaxWorkers;

void check_finite(const char* flag, double v) {
  if (!std::isfinite(v))
    MT_THROW(ValueError, "--", flag, " must be a finite number, got ", number_text(v));
}

void check_at_least(const char* flag, int64_t v, int64_t lo) {
  if (v < lo) MT_THROW(ValueError, "--", flag, " must be >= ", lo, ", got ", v);
}

void check_at_most(const char* flag, int64_t v, int64_t hi) {
  if (v > hi) MT_THROW(ValueError, "--", flag, " must be <= ", hi, ", got ", v);
}

constexpr double kMaxCommTimeoutSeconds =
    1e6;  // 11.6 days; a deadline beyond it would overflow the clock

void validate_data(const TrainConfig& c) {
  const bool synthetic = c.data == "synthetic" || starts_with(c.data, "synthetic:");
  const bool npy = ends_with(c.data, ".npy");
  const bool csv = ends_with(c.data, ".csv");
  if (!synthetic && !npy && !csv)
    MT_THROW(
        ValueError, "--data '", c.data,
        "': expected synthetic[:N], a features file X.npy (with --targets Y.npy), or a table T.csv "
        "(with --target-columns)");
  if (synthetic && c.data != "synthetic") {
    const std::string n = c.data.substr(10);
    char* end = nullptr;
    errno = 0;
    const long long rows = std::strtoll(n.c_str(), &end, 10);
    if (n.empty() || end != n.c_str() + n.size() || rows < 1 || errno == ERANGE)
      MT_THROW(ValueError, "--data '", excerpt(c.data),
               "': the row count after 'synthetic:' must be a positive integer");
    if (rows > kMaxSteps)
      MT_THROW(ValueError, "--data '", c.data, "': ", rows, " rows is more than the ", kMaxSteps,
               " synthetic rows minitrain makes");
  }
  if (!c.targets.empty() && !npy)
    MT_THROW(ValueError,
             "--targets is for .npy data (--data X.npy --targets Y.npy), but --data is '", c.data,
             "'");
  if (npy && c.targets.empty())
    MT_THROW(ValueError, "--data ", c.data,
             " needs --targets Y.npy (the targets, one row per row of ", c.data, ")");
  if (c.data_on_disk && !npy)
    MT_THROW(ValueError, "--data-on-disk reads .npy features from disk, but --data is '", c.data,
             "' (convert a table with np.save)");
  if (c.standardize && c.data_on_disk)
    MT_THROW(ValueError,
             "--standardize scales the features in memory, but --data-on-disk leaves them on "
             "disk; standardise X.npy beforehand, or drop --data-on-disk");
  if (!c.target_columns.empty() && !csv)
    MT_THROW(ValueError, "--target-columns is for .csv data, but --data is '", c.data, "'");
  if (!c.ignore_columns.empty() && !csv)
    MT_THROW(ValueError, "--ignore-columns is for .csv data, but --data is '", c.data, "'");
  for (std::size_t i = 0; i < c.ignore_columns.size(); ++i) {
    const std::string& name = c.ignore_columns[i];
    MT_CHECK_AS(
        ValueError,
        std::find(c.target_columns.begin(), c.target_columns.end(), name) == c.target_columns.end(),
        "--ignore-columns names '", name,
        "', which --target-columns names too; a column "
        "is a target or ignored, not both");
    MT_CHECK_AS(ValueError,
                std::find(c.ignore_columns.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                          c.ignore_columns.end(), name) == c.ignore_columns.end(),
                "--ignore-columns names '", name, "' twice");
  }
  if (csv && c.target_columns.empty())
    MT_THROW(ValueError, "--data ", c.data,
             " needs --target-columns NAME[,NAME...] (the columns to predict)");
}

void validate_schedule(const TrainConfig& c) {
  if (c.schedule == "step") {
    if (c.step_size < 1)
      MT_THROW(ValueError,
               "--schedule step needs --step-size N >= 1 (decay the lr every N steps), got ",
               c.step_size);
    check_finite("gamma", c.gamma);
    if (c.gamma <= 0) MT_THROW(ValueError, "--gamma must be > 0, got ", number_text(c.gamma));
  }
  check_at_most("step-size", c.step_size, kMaxSteps);
}

// A path the system cannot open (ENAMETOOLONG) once failed deep inside the run as "internal
// error"; here it is refused up front, naming the flag and the limit. `longest` is the longest
// path the run makes from it (the checkpoint file and the lock file inside --checkpoint-dir).
void check_path_fits(const char* flag, const std::string& path, std::size_t longest) {
  constexpr std::size_t kPathMax = 4095;  // Linux's PATH_MAX (4096) less the terminating NUL
  constexpr std::size_t kNameMax = 255;   // NAME_MAX: one name between slashes
  MT_CHECK_AS(ValueError, longest <= kPathMax, "--", flag, " is ", path.size(),
              " characters long ('", excerpt(path, 40), "'); ",
              longest == path.size() ? "a path" : "the paths the run makes from it",
              " can be at most ", kPathMax, " bytes (PATH_MAX 4096, less the terminating NUL)");
  for (std::size_t b = 0; b < path.size();) {
    const std::size_t e = std::min(path.find('/', b), path.size());
    MT_CHECK_AS(ValueError, e - b <= kNameMax, "--", flag, ": the name '",
                excerpt(path.substr(b, e - b), 40), "' is ", e - b,
                " bytes long; a file or directory name can be at most ", kNameMax,
                " bytes (NAME_MAX)");
    b = e + 1;
  }
}

void validate_loop_and_files(const TrainConfig& c) {
  if (c.epochs && c.steps)
    MT_THROW(ValueError, "--epochs and --steps both given (", *c.epochs, " and ", *c.steps,
             "): give one, the run length is either");
  if (c.epochs) check_at_least("epochs", *c.epochs, 1);
  if (c.epochs) check_at_most("epochs", *c.epochs, kMaxInt32);
  if (c.steps) check_at_least("steps", *c.steps, 1);
  if (c.steps) check_at_most("steps", *c.steps, kMaxSteps);
  if (c.checkpoint_every > 0 && c.checkpoint_dir.empty())
    MT_THROW(ValueError,
             "--checkpoint-every needs --checkpoint-dir DIR (where to keep the checkpoint)");
  if (c.resume && c.checkpoint_dir.empty())
    MT_THROW(ValueError,
             "--resume needs --checkpoint-dir DIR (the directory of the run to continue)");
  if (!c.save.empty() && !ends_with(c.save, ".safetensors"))
    MT_THROW(ValueError, "--save '", c.save,
             "': weights are written as .safetensors; name the file *.safetensors");
  check_path_fits("save", c.save, c.save.size());
  check_path_fits("save-best", c.save_best, c.save_best.size());
  check_path_fits("log", c.log, c.log.size());
  // DIR/checkpoint.safetensors and DIR/.minitrain.lock, with a slash between
  check_path_fits("checkpoint-dir", c.checkpoint_dir,
                  c.checkpoint_dir.size() + std::string("/checkpoint.safetensors").size());
}

// The loss's file settings (the values are the loss constructor's: check_settings()).
void validate_loss(const TrainConfig& c) {
  if (!c.pos_weight.empty() && !ends_with(c.pos_weight, ".npy"))
    MT_THROW(ValueError, "--pos-weight '", c.pos_weight,
             "': expected a .npy file of one weight per output");
  if (!c.class_weights.empty() && c.class_weights != "auto" && !ends_with(c.class_weights, ".npy"))
    MT_THROW(ValueError, "--class-weights '", c.class_weights,
             "': expected auto or a .npy file of one weight per class");
  if (c.topk > 1 && loss_target_kind(c.loss) != TargetKind::ClassIndices)
    MT_THROW(ValueError,
             "--topk is an accuracy of classifiers (--loss cross_entropy), not of --loss ", c.loss);
}

// Held-out data: a file (--val-data) or a share of --data (--val-split), and what is done with
// its evaluations.
void validate_validation(const TrainConfig& c) {
  const bool file = !c.val_data.empty();
  check_finite("val-split", c.val_split);
  if (c.val_split < 0 || c.val_split >= 1)
    MT_THROW(ValueError, "--val-split is the fraction of --data held out, in [0, 1), got ",
             c.val_split);
  if (file && c.val_split > 0)
    MT_THROW(ValueError,
             "--val-data and --val-split both given: the held-out rows come from one "
             "of them");
  if (file && !ends_with(c.val_data, ".npy") && !ends_with(c.val_data, ".csv"))
    MT_THROW(ValueError, "--val-data '", c.val_data,
             "': expected X.npy (with --val-targets) or T.csv");
  if (file && ends_with(c.val_data, ".npy") && c.val_targets.empty())
    MT_THROW(ValueError, "--val-data ", c.val_data, " needs --val-targets Y.npy");
  if (!c.val_targets.empty() && !(file && ends_with(c.val_data, ".npy")))
    MT_THROW(ValueError, "--val-targets goes with --val-data X.npy");
  if (file && ends_with(c.val_data, ".csv") && !ends_with(c.data, ".csv"))
    MT_THROW(ValueError, "--val-data ", c.val_data,
             " is a table, so --data must be one too (the "
             "target columns are named once, by --target-columns)");
  const bool validating = file || c.val_split > 0;
  std::string needs;
  if (c.eval_every > 0) needs = "--eval-every";
  if (!c.save_best.empty()) needs = "--save-best";
  if (c.early_stop > 0) needs = "--early-stop";
  if (!validating && !needs.empty())
    MT_THROW(ValueError, needs,
             " needs held-out data: --val-split F (a share of --data) or "
             "--val-data FILE");
  if (!c.save_best.empty() && !ends_with(c.save_best, ".safetensors"))
    MT_THROW(ValueError, "--save-best '", c.save_best,
             "': weights are written as .safetensors; name the file *.safetensors");
  if (!c.save_best.empty() && c.save_best == c.save)
    MT_THROW(ValueError, "--save-best and --save both name '", c.save,
             "': the best and the final weights need two files");
}

// Note: 0 means "not given" for replicas, stages and micro-batches (see parallel_devices()).
void validate_parallel(const TrainConfig& c) {
  const bool dp = c.parallel == "dp", mp = c.parallel == "mp", ddp = c.parallel == "ddp";
  std::string misplaced;
  auto misplace = [&](bool given, const char* flag) {
    if (given) misplaced += (misplaced.empty() ? "--" : ", --") + std::string(flag);
  };
  if (!dp && !mp && !ddp) {
    misplace(c.replicas != 0, "replicas");
    misplace(!c.devices.empty(), "devices");
    misplace(c.stages != 0, "stages");
    misplace(c.micro_batches != 0, "micro-batches");
    if (!misplaced.empty())
      MT_THROW(ValueError, misplaced,
               " given without --parallel: --replicas goes with --parallel dp, --stages and "
               "--micro-batches with --parallel mp (or ddp), --devices with any of them");
    return;
  }
  if (ddp) {
    // Hybrid: --stages makes each rank a ModelParallel pipeline; --devices then lists its stages.
    if (c.replicas != 0)
      MT_THROW(ValueError,
               "--replicas does not go with --parallel ddp: the ranks come from the launcher, one "
               "process "
               "per rank (mpirun -n N, or minitrain launch -n N); drop --replicas");
    if (c.stages == 0 && c.micro_batches != 0)
      MT_THROW(ValueError,
               "--micro-batches with --parallel ddp needs --stages S (each rank a pipeline of S "
               "stages)");
    if (c.stages == 0 && !c.devices.empty())
      MT_THROW(ValueError,
               "--devices with --parallel ddp lists the devices of one rank's --stages; without "
               "--stages "
               "each rank runs on --device (cuda becomes cuda:LOCAL_RANK): drop --devices or give "
               "--stages");
  }
  if (dp) {
    misplace(c.stages != 0, "stages");
    misplace(c.micro_batches != 0, "micro-batches");
    if (!misplaced.empty())
      MT_THROW(ValueError, misplaced,
               " go(es) with --parallel mp, not --parallel dp; drop it or use --parallel mp");
  } else {
    misplace(c.replicas != 0, "replicas");
    if (!misplaced.empty())
      MT_THROW(
          ValueError,
          "--replicas goes with --parallel dp, not --parallel mp; use --stages N (and --devices)");
  }
  // --devices: a comma-separated list of device names, none empty.
  // (The names themselves are parsed when the run starts, after --device: see parallel_devices().)
  const int64_t n_devices =
      c.devices.empty() ? 0 : static_cast<int64_t>(device_list_entries(c.devices).size());
  if (dp) {
    if (c.replicas == 0 && n_devices == 0)
      MT_THROW(
          ValueError,
          "--parallel dp needs --replicas N (>= 1) or --devices LIST (one replica per device)");
    if (c.replicas != 0) check_at_least("replicas", c.replicas, 1);
    check_at_most("replicas", c.replicas, kMaxWorkers);
    if (c.replicas != 0 && n_devices != 0 && c.replicas != n_devices)
      MT_THROW(ValueError, "--replicas ", c.replicas, " but --devices '", c.devices, "' names ",
               n_devices, " device(s); give one device per replica (or drop --replicas)");
    return;
  }
  if (ddp && c.stages == 0) return;  // plain ddp: one model per rank, nothing more to check
  if (c.stages != 0) check_at_least("stages", c.stages, 1);
  check_at_most("stages", c.stages, kMaxWorkers);
  if (c.micro_batches != 0) check_at_least("micro-batches", c.micro_batches, 1);
  const int64_t stages = stages_or_default(c);
  if (c.micro_batches > c.batch_size)
    MT_THROW(ValueError, "--micro-batches ", c.micro_batches, " is more than --batch-size ",
             c.batch_size, "; a micro-batch needs at least one row");
  if (starts_with(c.model, "mlp:")) {
    std::size_t sizes = 1;
    for (char ch : c.model) sizes += ch == ',';
    const int64_t layers = 2 * static_cast<int64_t>(sizes - 1) - 1;  // Linear, act, ..., Linear
    if (sizes >= 2 && stages > layers)
      MT_THROW(ValueError, "--stages ", stages, " is more than the ", layers,
               " layer(s) of --model ", c.model,
               " (Linear and activation layers count one each); use --stages <= ", layers);
  }
}

void check_bytes(const char* flag, const std::string& text) {
  uint64_t bytes = 0;
  try {
    bytes = parse_bytes(text);
  } catch (const ValueError& e) {
    MT_THROW(ValueError, "--", flag, " '", text, "': ", e.what());
  }
  if (bytes == 0) MT_THROW(ValueError, "--", flag, " '", text, "' must be more than 0 bytes");
}

void validate_local_sgd(const TrainConfig& c) {
  if (c.sync_every) {
    if (c.parallel != "ddp")
      MT_THROW(ValueError, "--sync-every ", *c.sync_every,
               " averages the ranks of --parallel ddp, but --parallel is ", c.parallel,
               "; add --parallel ddp (under mpirun or minitrain launch) or drop --sync-every");
    check_at_least("sync-every", *c.sync_every, 1);
  }
  if (c.sync_optimizer_state && (!c.sync_every || *c.sync_every < 2))
    MT_THROW(ValueError,
             "--sync-optimizer-state averages the optimizer moments of local SGD; it needs "
             "--sync-every K with K > 1 (with gradients averaged every step the moments already "
             "agree): add --sync-every K or drop it");
}

void validate_communication_and_memory(const TrainConfig& c) {
  validate_local_sgd(c);
  check_bytes("bucket-size", c.bucket_size);
  if (c.no_overlap && c.parallel != "ddp")
    MT_THROW(ValueError,
             "--no-overlap orders the gradient all-reduces of --parallel ddp, but --parallel is ",
             c.parallel,
             "; add --parallel ddp (under mpirun or minitrain launch) or drop --no-overlap");
  if (c.no_overlap && c.sync_every)
    MT_THROW(ValueError, "--no-overlap orders the gradient all-reduces, but --sync-every ",
             *c.sync_every, " averages parameters instead and all-reduces no gradient; drop one");
  if (c.backend != "auto" && c.parallel != "ddp")
    MT_THROW(ValueError, "--backend ", c.backend,
             " picks the communicator of --parallel ddp, but --parallel is ", c.parallel,
             "; add --parallel ddp (under mpirun or minitrain launch) or drop --backend");
  if (!std::isfinite(c.comm_timeout) || c.comm_timeout <= 0 ||
      c.comm_timeout > kMaxCommTimeoutSeconds)
    MT_THROW(ValueError, "--comm-timeout must be a positive number of seconds up to ",
             kMaxCommTimeoutSeconds, ", got ", number_text(c.comm_timeout));
  if (!c.sample_weights.empty() && !ends_with(c.sample_weights, ".npy"))
    MT_THROW(ValueError, "--sample-weights '", c.sample_weights,
             "': expected a .npy file with one weight per row");
  if (!c.memory_cap.empty()) check_bytes("memory-cap", c.memory_cap);
  if (c.gemm.empty()) MT_THROW(ValueError, "--gemm: give a backend name, or auto");
}

}  // namespace

// --precision and what goes with it: loss scaling is float16's, save-dtype a 16-bit or float32.
void validate_precision(const TrainConfig& c) {
  DType precision = DType::Float32;
  with_flag_context("--precision", [&] { precision = parse_precision(c.precision); });
  with_flag_context("--save-dtype", [&] { (void)parse_precision(c.save_dtype, "save dtype"); });
  if (precision != DType::Float16 && (c.loss_scale || c.loss_scale_growth_interval))
    MT_THROW(ValueError,
             "--loss-scale and --loss-scale-growth-interval apply to --precision fp16 (bf16 has "
             "float32's range and needs no loss scaling), not to --precision ",
             c.precision);
  if (c.loss_scale) {
    check_finite("loss-scale", *c.loss_scale);
    if (*c.loss_scale <= 0)
      MT_THROW(ValueError, "--loss-scale must be > 0, got ", number_text(*c.loss_scale));
    // The scale multiplies a float32 loss: beyond float32's range every step would overflow and be
    // skipped, and the scale itself could not be stored in a checkpoint.
    if (*c.loss_scale > std::numeric_limits<float>::max())
      MT_THROW(ValueError, "--loss-scale ", *c.loss_scale, " is beyond float32's range (",
               std::numeric_limits<float>::max(),
               "): every scaled loss would be inf; GradScaler's default is 65536");
  }
  if (c.loss_scale_growth_interval)
    check_at_least("loss-scale-growth-interval", *c.loss_scale_growth_interval, 1);
  if (c.grad_reduce_dtype != "fp32") {
    if (c.grad_reduce_dtype != "bf16")
      MT_THROW(ValueError, "--grad-reduce-dtype must be fp32 or bf16, got '", c.grad_reduce_dtype,
               "'");
    if (c.parallel != "ddp")
      MT_THROW(ValueError, "--grad-reduce-dtype ", c.grad_reduce_dtype,
               " sets how --parallel ddp all-reduces gradients, but --parallel is ", c.parallel,
               "; add --parallel ddp or drop it");
    if (c.all_reduce == "ring")
      MT_THROW(ValueError,
               "--grad-reduce-dtype bf16 needs --all-reduce native (NCCL or MPI sum "
               "bfloat16; minitrain's ring adds in float32 and float64 only)");
    if (c.sync_every)
      MT_THROW(ValueError,
               "--grad-reduce-dtype applies to DDP's gradient all-reduce; local SGD "
               "(--sync-every) averages parameters instead: drop one of them");
  }
}

void validate(const TrainConfig& c) {
  if (!starts_with(c.model, "mlp:"))
    MT_THROW(ValueError, "--model '", c.model,
             "': expected mlp:IN,H1,...,OUT (e.g. mlp:8,64,64,1)");
  // Each setting alone, as its row says: the choices of a name, an integer's bounds, and the
  // optimizer's and the loss's settings as their constructors and tables judge them
  // (train/settings.h). What follows are combinations of settings.
  config_detail::check_settings(c);
  validate_data(c);
  validate_loss(c);
  validate_validation(c);
  validate_schedule(c);
  validate_loop_and_files(c);
  validate_parallel(c);
  validate_communication_and_memory(c);
  validate_precision(c);
}

}  // namespace minitrain
