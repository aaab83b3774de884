// `minitrain train` as a library call: settings -> data, model, optimizer -> Trainer -> weights.

#include "train/run_training.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
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
#include "kernels/gemm/gemm_registry.h"
#include "nn/state_dict.h"
#include "optim/schedule.h"
#include "parallel/launch/process_group.h"
#include "train/flag_context.h"
#include "train/gemm_flag.h"
#include "train/kernel_profile.h"
#include "train/loss_metadata.h"
#include "train/parallel_setup.h"
#include "train/run_data.h"
#include "train/run_files.h"
#include "train/validation.h"

namespace minitrain {
namespace {

namespace fs = std::filesystem;

// What a weights file or checkpoint says of its model, so that `minitrain predict` needs no flags
// to rebuild it: the spec, the activation, the loss, and for a table the target columns (the
// columns that are not features, and the names of the outputs). `classes`: the names of a CSV label
// column's classes, in index order (empty: numbered). `features`: a table's feature columns in the
// model's input order (empty for .npy data), so that predict and evaluate read a table by column
// name; `ignore_columns`: --ignore-columns, which they ignore too. `scaler`: --standardize's
// statistics of the training rows, as JSON lists of float32 values.
std::map<std::string, std::string> model_metadata(const TrainConfig& c, const LossOptions& loss,
                                                  const std::vector<std::string>& classes,
                                                  const std::vector<std::string>& features,
                                                  const StandardScaler& scaler) {
  std::map<std::string, std::string> m{
      {"model", c.model}, {"activation", c.activation}, {"loss", c.loss}};
  // The loss's settings (class weights read from their file included): evaluate scores with them.
  if (std::string settings = loss_settings_metadata(loss); !settings.empty())
    m["loss_settings"] = std::move(settings);
  // JSON lists: a column's or a class's name may hold a comma.
  if (!c.target_columns.empty()) m["target_columns"] = nlohmann::json(c.target_columns).dump();
  if (!features.empty())
    m["feature_columns"] =
        nlohmann::json(features).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  // The table's --ignore-columns: evaluate and predict on the same table ignore them too.
  if (!c.ignore_columns.empty())
    m["ignore_columns"] = nlohmann::json(c.ignore_columns)
                              .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (!scaler.empty()) {
    m["standardize_mean"] = nlohmann::json(scaler.mean).dump();
    m["standardize_scale"] = nlohmann::json(scaler.scale).dump();
  }
  if (!classes.empty())
    m["classes"] =
        nlohmann::json(classes).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return m;
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

// ---- the steps of a run, in order ----

// Settings checked and resolved: where the model goes and what it is built from
// (train/parallel_setup.h), how the run reports, whether it classifies.
struct RunPlan : ParallelPlan, ModelRecipe {
  ProgressMode progress_mode = ProgressMode::Lines;
  bool classifier = false;            // the loss takes class labels
  DType save_dtype = DType::Float32;  // --save-dtype, of --save and --save-best
};

// The epochs of an --epochs run (also the default one); 0 for a --steps run.
int64_t run_epochs(const TrainConfig& c) { return c.steps ? 0 : c.epochs.value_or(kDefaultEpochs); }

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
  p.mlp_kernel = c.mlp_kernel;
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
  p.save_dtype = parse_precision(c.save_dtype, "save dtype");
  p.classifier = loss_target_kind(c.loss) == TargetKind::ClassIndices;
  // torch.topk refuses k beyond the classes ("selected index k out of range"); a top-k over all
  // of them would score 1 whatever the model does.
  MT_CHECK_AS(ValueError, !p.classifier || c.topk <= p.sizes.back(), "--topk ", c.topk,
              " is more than the ", p.sizes.back(), " classes of --model ", c.model,
              " (its last width); give --topk at most ", p.sizes.back());
  return p;
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
                         const ParallelSetup& par, const TrainReport& r, bool weighted_rows) {
  std::ostringstream what;
  what << "training " << c.model << " (" << c.activation << ", " << par.model->num_parameters()
       << " parameters) on " << r.device << ": " << c.data << " (" << d.train->size() << " rows";
  if (d.val) what << ", " << d.val->size() << " held out by " << d.val_source;
  what << "), " << c.loss << " loss";
  if (!d.classes.empty()) what << " over " << d.classes.size() << " classes";
  what << ", " << c.optimizer << " lr " << number_text(c.lr) << ", batch " << c.batch_size
       << (par.distributed ? " per rank" : "") << ", " << r.total_steps << " steps";
  if (const std::string replicas = describe_replicas(c, par); !replicas.empty())
    what << ", " << replicas;
  if (weighted_rows) what << ", rows drawn by --sample-weights";
  if (const std::string stages = describe_stages(par); !stages.empty()) what << ", " << stages;
  const int64_t epochs = run_epochs(c);
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

// The files the run writes at its end or as it goes: writable now, their directories made.
void prepare_outputs(const TrainConfig& c, std::ostream& info) {
  if (!c.save.empty()) prepare_output("save", c.save, info);
  if (!c.save_best.empty()) prepare_output("save-best", c.save_best, info);
  if (!c.log.empty()) prepare_output("log", c.log, info);
  if (!c.profile_kernels.empty()) prepare_output("profile-kernels", c.profile_kernels, info);
}

// --resume: the checkpoint to go on from, checked against this run's settings; empty: none.
std::string checkpoint_to_resume(const TrainConfig& c, int world_size) {
  if (!c.resume) return "";
  const std::string path = checkpoint_path(c.checkpoint_dir);
  if (!fs::exists(path))
    MT_THROW(IoError, "--resume: no checkpoint in '", c.checkpoint_dir, "' (expected ", path,
             "); run without --resume to start afresh");
  check_resume_config(path, c, world_size);
  return path;
}

void prepare_checkpoint_dir(const TrainConfig& c, std::ostream& info) {
  if (c.checkpoint_dir.empty()) return;
  std::error_code ec;
  fs::create_directories(c.checkpoint_dir, ec);
  if (!fs::is_directory(c.checkpoint_dir))
    MT_THROW(IoError, "--checkpoint-dir ", c.checkpoint_dir, ": cannot create the directory",
             ec ? ": " + ec.message() : std::string());
  prepare_output("checkpoint-dir", checkpoint_path(c.checkpoint_dir), info);
}

// The loop's settings: how long, the schedule, clipping, loss and its scaling, checkpoints.
TrainerOptions trainer_options(const TrainConfig& c, const RunPlan& plan, const RunData& data,
                               const DataLoader& loader, Generator& gen,
                               const std::map<std::string, std::string>& metadata) {
  TrainerOptions to;
  const int64_t bpe = loader.batches_per_epoch();
  const int64_t epochs = run_epochs(c);
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
  // Issue 35: with no training row labelled --ignore-index every batch has a row to count, and a
  // classifier's step on a GPU need not count its batches (otherwise the device counts them).
  const auto* rows = dynamic_cast<const TensorDataset*>(data.train.get());
  if (rows != nullptr && to.loss->target_kind() == TargetKind::ClassIndices) {
    const std::vector<double> y = rows->targets().to_double_vector();
    to.every_row_counts = std::find(y.begin(), y.end(), double(data.loss.ignore_index)) == y.end();
  }
  if (plan.precision == DType::Float16) {
    GradScalerOptions so;
    so.init_scale = c.loss_scale.value_or(so.init_scale);
    so.growth_interval = c.loss_scale_growth_interval.value_or(so.growth_interval);
    to.loss_scaling = so;
  }
  return to;
}

// --cuda-graph: each step replayed as one CUDA graph where the step can be captured; where it
// cannot, a note says why and the steps run eagerly (the same bits either way).
void use_cuda_graph(TrainerOptions& to, const TrainConfig& c, const RunPlan& plan,
                    const Optimizer& optimizer, std::ostream& info) {
  std::string why;
  if (c.parallel != "none")
    why = "--parallel " + c.parallel + " spreads the step over several devices or ranks";
  else
    why = Trainer::graph_unsupported(to, optimizer, plan.device);
  if (why.empty())
    to.cuda_graph = true;
  else
    info << "note: --cuda-graph is off for this run: " << why << "; the steps run eagerly\n";
}

// Held-out evaluation (--val-split, --val-data): the Validator the Trainer calls, and --save-best
// written by rank 0 after an evaluation with a lower val_loss. Null without held-out rows.
std::unique_ptr<Validator> add_validation(TrainerOptions& to, const TrainConfig& c,
                                          const RunPlan& plan, const RunData& data,
                                          const ParallelSetup& par,
                                          const std::map<std::string, std::string>& metadata) {
  if (!data.val) return nullptr;
  ValidatorOptions vo;
  vo.loss = data.loss;
  vo.batch_size = std::max<int64_t>(c.batch_size, 1024);  // no gradients: larger batches fit
  vo.device = plan.device;
  vo.topk = c.topk;
  vo.stop_requested = to.stop_requested;  // a signal ends the evaluation at its next batch
  if (plan.ddp) {                         // each rank its own rows, every row once
    vo.rows = strided_rows(data.val->size(), par.rank(), par.world_size());
    vo.sum_over_ranks = [&sync = *par.sync](std::vector<double>& v) { sync.sum_over_ranks(v); };
  }
  auto validator = std::make_unique<Validator>(data.val, vo);
  to.validate = [v = validator.get(), &model = *par.model] { return v->evaluate(model); };
  to.eval_every = c.eval_every;
  to.early_stop = c.early_stop;
  if (!c.save_best.empty() && par.sync->writes_files()) {
    to.on_best = [&c, &model = *par.model, &metadata, save_dtype = plan.save_dtype](
                     int64_t step, const ValMetrics& v) {
      auto m = metadata;
      m["step"] = std::to_string(step);
      m["val_loss"] = nlohmann::json(v.loss).dump();  // shortest round trip
      with_flag_context("--save-dtype " + c.save_dtype,
                        [&] { save_weights(c.save_best, model, m, save_dtype); });
    };
  }
  return validator;
}

// --profile-kernels: every op's time per step (train/kernel_profile.h), each rank its own file.
std::unique_ptr<KernelProfile> add_kernel_profile(TrainerOptions& to, const TrainConfig& c,
                                                  const ParallelSetup& par) {
  if (c.profile_kernels.empty()) return nullptr;
  auto profile = std::make_unique<KernelProfile>(
      rank_log_path(c.profile_kernels, par.rank(), par.world_size()));
  to.on_step = [p = profile.get(), before = std::move(to.on_step)](const StepStats& s) {
    if (before) before(s);
    p->end_step(s.step);
  };
  return profile;
}

// --save: the final weights, checked on every rank (they are the same on all), written by rank 0.
void save_final_weights(const TrainConfig& c, const RunPlan& plan, const ParallelSetup& par,
                        std::map<std::string, std::string> metadata, int64_t step) {
  check_parameters_finite(*par.model, "--save");
  if (!par.sync->writes_files()) return;
  metadata["step"] = std::to_string(step);
  with_flag_context("--save-dtype " + c.save_dtype,
                    [&] { save_weights(c.save, *par.model, metadata, plan.save_dtype); });
}

}  // namespace

TrainReport run_training(const TrainConfig& c, std::ostream& info, std::ostream& progress_out,
                         const std::atomic<int>* stop_requested) {
  // ---- check everything before the first step ----
  const RunPlan plan = plan_run(c, info);
  check_run_files(train_run_files(c, plan.env));
  const RunData data = load_run_data(c, plan.sizes, plan.classifier);
  prepare_outputs(c, info);
  const std::string resume_path = checkpoint_to_resume(c, plan.env.world_size);
  const std::vector<double> sample_weights = train_sample_weights(c, data);
  prepare_checkpoint_dir(c, info);
  // One run at a time on the files: a second run on them is refused while this one lives. Rank 0
  // alone writes the checkpoints; every rank its own log.
  const std::vector<RunLock> locks = lock_run_files(c, plan.env);

  // ---- the model on its devices, and the ReplicaSync of its --parallel mode ----
  Generator gen(c.seed);
  ParallelSetup par = set_up_parallel(c, /*where=*/plan, /*what=*/plan, gen);
  Module& model = *par.model;
  DataLoader loader(data.train, loader_options(c, plan.device, plan.ddp, *data.train,
                                               sample_weights, par.rank(), par.world_size()));

  // ---- the trainer: the loop's settings, the mode's ReplicaSync, evaluation, profiling ----
  const std::map<std::string, std::string> metadata =
      model_metadata(c, data.loss, data.classes, data.feature_columns, data.scaler);
  TrainerOptions to = trainer_options(c, plan, data, loader, gen, metadata);
  to.stop_requested = stop_requested;
  to.replica_sync = par.sync.get();
  if (c.cuda_graph) use_cuda_graph(to, c, plan, *par.optimizer, info);
  const std::unique_ptr<Validator> validator = add_validation(to, c, plan, data, par, metadata);
  // GPU utilisation and memory in the metrics where NVML can be read; where not, a note says why.
  GpuMonitor gpu_monitor(plan.device);
  to.gpu_monitor = &gpu_monitor;
  const std::unique_ptr<KernelProfile> kernel_profile = add_kernel_profile(to, c, par);
  Trainer trainer(model, *par.optimizer, loader, to);

  TrainReport report;
  report.rank = par.rank();
  report.world_size = par.world_size();
  report.total_steps = to.total_steps;
  report.device = plan.devices.empty() ? plan.device.str() : join_devices(plan.devices);
  if (!resume_path.empty()) {
    trainer.resume(resume_path);
    report.resumed_from_step = trainer.step();
  }

  // ---- inputs are good: from here on, files are written ----
  std::unique_ptr<MetricsLog> log;
  if (!c.log.empty()) {
    log = std::make_unique<MetricsLog>(rank_log_path(c.log, report.rank, report.world_size),
                                       report.resumed_from_step, c.log_every);
    if (!log->repair_note().empty()) info << "warning: " << log->repair_note() << "\n";
  }
  Progress progress(progress_out, plan.progress_mode, trainer.step() + 1, to.total_steps);
  // With several ranks only rank 0 talks to the console; the others keep their own logs.
  if (report.rank == 0) {
    info << describe_run(c, plan, data, par, report, !sample_weights.empty()) << "\n";
    if (!data.label_note.empty()) info << "note: " << data.label_note << "\n";
    if (log && !gpu_monitor.note().empty())
      info << "note: the metrics leave out GPU utilisation and memory: " << gpu_monitor.note()
           << "\n";
    info.flush();
  }

  // ---- train ----
  trainer.set_log(log.get());
  trainer.set_progress(report.rank == 0 ? &progress : nullptr);
  report.summary = trainer.run();
  if (kernel_profile) {
    const std::string top = kernel_profile->finish();
    if (report.rank == 0) info << top << "kernel profile written to " << c.profile_kernels << "\n";
  }
  par.sync->after_run();  // local SGD: every rank holds one model
  check_some_step_counted(report.summary, report.total_steps);

  // ---- save ----
  if (!c.save.empty()) {
    save_final_weights(c, plan, par, metadata, trainer.step());
    report.saved = c.save;
  }
  if (!c.save_best.empty() && report.summary.best_val) report.saved_best = c.save_best;
  par.sync->after_save();  // no rank returns before the weights are written
  return report;
}

}  // namespace minitrain
