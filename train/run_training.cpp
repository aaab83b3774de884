// `minitrain train` as a library call: settings -> data, model, optimizer -> Trainer -> weights.

#include "train/run_training.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/allocator.h"
#include "core/atomic_file.h"
#include "core/bytes.h"
#include "core/device.h"
#include "core/npy.h"
#include "core/parallel_for.h"
#include "core/strings.h"
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

namespace minitrain {
namespace {

namespace fs = std::filesystem;

// What a weights file or checkpoint says of its model, so that `minitrain predict` needs no flags
// to rebuild it: the spec, the activation, and for a table the target columns (the columns that
// are not features, and the names of the outputs).
std::map<std::string, std::string> model_metadata(const TrainConfig& c) {
  std::map<std::string, std::string> m{{"model", c.model}, {"activation", c.activation}};
  // A JSON list: a column's name may hold a comma.
  if (!c.target_columns.empty()) m["target_columns"] = nlohmann::json(c.target_columns).dump();
  return m;
}

// The synthetic data's seed, apart from the init's: the same Philox seed would make the first
// inputs and the first weights the same numbers.
constexpr uint64_t kDataSeedMix = 0x9E3779B97F4A7C15ull;

std::shared_ptr<const Dataset> load_data(const TrainConfig& c, const std::vector<int64_t>& sizes) {
  if (ends_with(c.data, ".npy"))
    return std::make_shared<TensorDataset>(load_npy_dataset(c.data, c.targets));
  if (ends_with(c.data, ".csv"))
    return std::make_shared<TensorDataset>(load_csv_dataset(c.data, c.target_columns));
  return std::make_shared<TensorDataset>(make_synthetic_regression(
      synthetic_rows(c.data), sizes.front(), sizes.back(), c.seed ^ kDataSeedMix));
}

void check_data_fits_model(const Dataset& d, const TrainConfig& c,
                           const std::vector<int64_t>& sizes) {
  if (d.feature_dim() != sizes.front()) {
    std::vector<int64_t> fixed = sizes;
    fixed.front() = d.feature_dim();
    MT_THROW(ShapeError, "--data ", c.data, " has ", d.feature_dim(),
             " feature column(s) per row but --model ", c.model, " expects ", sizes.front(),
             " inputs; use --model mlp:", join(fixed, ","));
  }
  if (d.target_dim() != sizes.back()) {
    std::vector<int64_t> fixed = sizes;
    fixed.back() = d.target_dim();
    MT_THROW(ShapeError, "--data ", c.data, " has ", d.target_dim(),
             " target(s) per row but --model ", c.model, " has ", sizes.back(),
             " outputs; use --model mlp:", join(fixed, ","));
  }
}

// A file the run writes must be writable now, found out before the first step rather than after
// an hour of training; temporaries that killed writes of it left behind are removed.
void prepare_output(const char* flag, const std::string& path, std::ostream& info) {
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
                          "shuffle", "drop-last", "seed", "grad-accum"}) {
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
    MT_THROW(ShapeError, "--sample-weights ", path, " holds an array of shape ", w.shape(),
             " but the data has ", rows, " rows; give one weight per row (shape [", rows, "])");
  std::vector<double> values;
  if (w.dtype() == DType::Float64) {
    values = w.to_vector<double>();
  } else {
    const std::vector<float> f = w.to_vector<float>();
    values.assign(f.begin(), f.end());
  }
  // Bad weights (negative, NaN, all zero) are refused now, before anything is written.
  with_flag_context("--sample-weights " + path, [&] { WeightedRandomSampler(values, rows); });
  return values;
}

// The communicator settings of --all-reduce and --comm-timeout.
ProcessGroupOptions process_group_options(const TrainConfig& c) {
  ProcessGroupOptions o;
  o.backend = "auto";
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

// --gemm: a registered backend for the run's device type, found out before any data is read.
void check_gemm_backend(const std::string& name, Device device) {
  if (name == "auto") return;
  const GemmBackend* b = nullptr;
  with_flag_context("--gemm", [&] { b = &gemm_backend(name); });
  if (b->device != device.type()) {
    const std::string names = join(gemm_backend_names(device.type()), ", ");
    MT_THROW(ValueError, "--gemm ", name, " runs on ",
             b->device == DeviceType::CUDA ? "CUDA" : "CPU", " tensors, but this run is on ",
             device.str(), "; for ", device.str(), " choose auto or one of: ", names);
  }
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

TrainReport run_training(const TrainConfig& c, std::ostream& info, std::ostream& progress_out,
                         const std::atomic<int>* stop_requested) {
  // ---- check everything before the first step ----
  validate(c);
  if (c.threads > 0) set_num_threads(static_cast<int>(c.threads));
  Device device = Device::parse(c.device);
  const bool dp = c.parallel == "dp", mp = c.parallel == "mp", ddp = c.parallel == "ddp";
  ProcessEnv env;  // a single process unless ddp
  if (ddp) {
    env = detect_process_env();
    device = rank_device(device, env);  // "cuda": this rank's GPU, cuda:LOCAL_RANK
  }
  check_available(device);
  check_gemm_backend(c.gemm, device);
  std::vector<Device> devices;
  if (dp || mp || (ddp && c.stages != 0)) {
    devices = parallel_devices(c, device);
    device =
        devices.front();  // batches arrive, and the loss is computed, on the first replica/stage
  }
  if (!c.memory_cap.empty()) {
    const uint64_t cap = parse_bytes(c.memory_cap);
    for (const Device& d : devices.empty() ? std::vector<Device>{device} : devices)
      set_memory_cap(d, cap);
  }
  const std::vector<int64_t> sizes = parse_mlp_spec(c.model);
  const Activation activation = parse_activation(c.activation);
  const ProgressMode progress_mode = parse_progress_mode(c.progress);

  const std::shared_ptr<const Dataset> data = load_data(c, sizes);
  check_data_fits_model(*data, c, sizes);
  if (!c.save.empty()) prepare_output("save", c.save, info);
  if (!c.log.empty()) prepare_output("log", c.log, info);
  std::string resume_path;
  if (c.resume) {
    resume_path = checkpoint_path(c.checkpoint_dir);
    if (!fs::exists(resume_path))
      MT_THROW(IoError, "--resume: no checkpoint in '", c.checkpoint_dir, "' (expected ",
               resume_path, "); run without --resume to start afresh");
    check_resume_config(resume_path, c, env.world_size);
  }
  std::vector<double> sample_weights;
  if (!c.sample_weights.empty())
    sample_weights = read_sample_weights(c.sample_weights, data->size());
  if (!c.checkpoint_dir.empty()) {
    std::error_code ec;
    fs::create_directories(c.checkpoint_dir, ec);
    if (!fs::is_directory(c.checkpoint_dir))
      MT_THROW(IoError, "--checkpoint-dir ", c.checkpoint_dir, ": cannot create the directory",
               ec ? ": " + ec.message() : std::string());
    prepare_output("checkpoint-dir", checkpoint_path(c.checkpoint_dir), info);
  }

  // Declared before the model: the DDP wrapper uses it until it is destroyed.
  std::unique_ptr<Communicator> comm;
  if (ddp) comm = init_process_group(env, device, process_group_options(c));
  const int rank = comm ? comm->rank() : 0, world = comm ? comm->size() : 1;

  Generator gen(c.seed);
  std::unique_ptr<Module> model;
  DataParallel* data_parallel = nullptr;
  ModelParallel* model_parallel = nullptr;
  DistributedDataParallel* distributed = nullptr;
  if (dp) {
    // Every replica is built from the same seed, so replica 0's initial weights are the one-device
    // run's; DataParallel then broadcasts replica 0's weights anyway.
    auto dpm = std::make_unique<DataParallel>(
        [&](Device d) {
          Generator replica_gen(c.seed);
          std::unique_ptr<Sequential> m = make_mlp(sizes, activation, replica_gen, d);
          m->set_needs_input_grad(false);
          set_gemm_backend(*m, c.gemm);
          return std::unique_ptr<Module>(std::move(m));
        },
        devices);
    make_mlp(sizes, activation, gen, device);  // advance `gen` as the one-device run does
    data_parallel = dpm.get();
    model = std::move(dpm);
  } else if (ddp) {
    // Every rank builds the model from --seed, so all start from the one-device run's weights
    // (and `gen` advances as there); the wrapper broadcasts rank 0's anyway.
    std::unique_ptr<Sequential> seq = make_mlp(sizes, activation, gen, device);
    seq->set_needs_input_grad(false);
    set_gemm_backend(*seq, c.gemm);
    std::unique_ptr<Module> local;
    if (c.stages != 0) {  // hybrid: each rank a pipeline of --stages stages
      auto mpm =
          std::make_unique<ModelParallel>(std::move(seq), static_cast<int>(c.stages),
                                          static_cast<int>(micro_batches_or_default(c)), devices);
      model_parallel = mpm.get();
      local = std::move(mpm);
    } else {
      local = std::move(seq);
    }
    DdpOptions ddp_options;
    ddp_options.bucket_bytes = static_cast<int64_t>(parse_bytes(c.bucket_size));
    auto ddpm = std::make_unique<DistributedDataParallel>(std::move(local), *comm, ddp_options);
    distributed = ddpm.get();
    model = std::move(ddpm);
  } else {
    std::unique_ptr<Sequential> seq = make_mlp(sizes, activation, gen, device);
    seq->set_needs_input_grad(
        false);  // the input is data: skip the first layer's dx GEMM, as torch does
    set_gemm_backend(*seq, c.gemm);
    if (mp) {
      auto mpm =
          std::make_unique<ModelParallel>(std::move(seq), static_cast<int>(stages_or_default(c)),
                                          static_cast<int>(micro_batches_or_default(c)), devices);
      model_parallel = mpm.get();
      model = std::move(mpm);
    } else {
      model = std::move(seq);
    }
  }
  if (!c.init.empty()) {
    with_flag_context("--init", [&] { load_weights(c.init, *model); });
    if (data_parallel) data_parallel->broadcast_replica0_parameters();
  }

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
  std::unique_ptr<Optimizer> optimizer = data_parallel
                                             ? data_parallel->make_optimizer(oc)
                                             : make_optimizer(oc, model->named_parameters());

  DataLoaderOptions lo;
  lo.batch_size = c.batch_size;
  lo.shuffle = c.shuffle;
  lo.drop_last = c.drop_last;
  lo.seed = c.seed;
  lo.device = device;
  // --batch-size is per rank (as in torch): each rank takes its share of every epoch's order, or
  // of the epoch's weighted draw (made alike on every rank).
  if (!sample_weights.empty())
    lo.sampler =
        std::make_shared<WeightedRandomSampler>(sample_weights, data->size(), c.seed, world, rank);
  else if (ddp)
    lo.sampler = std::make_shared<DistributedSampler>(data->size(), world, rank, c.shuffle, c.seed);
  DataLoader loader(data, lo);

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
  to.checkpoint_metadata = model_metadata(c);
  to.checkpoint_metadata["config"] = config_to_json(c);
  to.generator = &gen;
  if (distributed) {
    to.world_size = world;
    // Only the step's last batch all-reduces; the others accumulate locally (torch's no_sync).
    to.before_backward = [distributed](bool sync) { distributed->set_require_gradient_sync(sync); };
    // The mean of the ranks' batch means is the global batch's mean: every rank's batch has the
    // same number of rows. Called after the step's last backward, when no bucket is in flight.
    Communicator* cm = comm.get();
    // One all-reduce carries the loss and the stop request: the mean of the requests is > 0
    // when any rank was signalled, so every rank stops after the same step.
    to.reduce_loss = [cm](double loss, bool& stop) {
      Tensor t =
          Tensor::from_vector(std::vector<double>{loss, stop ? 1.0 : 0.0}, {2}, cm->device());
      cm->all_reduce(t, ReduceOp::Avg);
      const std::vector<double> mean = t.to_vector<double>();
      stop = mean[1] > 0;
      return mean[0];
    };
    to.write_checkpoints = rank == 0;
    to.after_checkpoint = [cm] { cm->barrier(); };  // nobody goes on (or reads it) half-written
  }
  Trainer trainer(*model, *optimizer, loader, to);

  TrainReport report;
  report.rank = rank;
  report.world_size = world;
  report.total_steps = to.total_steps;
  report.device = devices.empty() ? device.str() : join_devices(devices);
  if (!resume_path.empty()) {
    trainer.resume(resume_path);
    if (data_parallel) data_parallel->broadcast_replica0_parameters();
    report.resumed_from_step = trainer.step();
  }

  // ---- inputs are good: from here on, files are written ----
  std::unique_ptr<MetricsLog> log;
  if (!c.log.empty()) {
    log = std::make_unique<MetricsLog>(rank_log_path(c.log, rank, world), report.resumed_from_step,
                                       c.log_every);
    if (!log->repair_note().empty()) info << "warning: " << log->repair_note() << "\n";
  }
  Progress progress(progress_out, progress_mode, trainer.step() + 1, to.total_steps);

  std::ostringstream what;
  what << "training " << c.model << " (" << c.activation << ", " << model->num_parameters()
       << " parameters) on " << report.device << ": " << c.data << " (" << data->size()
       << " rows), " << c.optimizer << " lr " << c.lr << ", batch " << c.batch_size
       << (distributed ? " per rank" : "") << ", " << to.total_steps << " steps";
  if (data_parallel) what << ", data parallel: " << data_parallel->replicas() << " replicas";
  if (distributed) {
    what << ", distributed data parallel: " << world << (world == 1 ? " rank" : " ranks") << " ("
         << comm->backend() << ", " << c.all_reduce << " all-reduce, buckets of " << c.bucket_size
         << ", global batch " << c.batch_size * world << ")";
  }
  if (!sample_weights.empty()) what << ", rows drawn by --sample-weights";
  if (model_parallel) {
    what << ", model parallel: " << model_parallel->stages() << " stages, "
         << model_parallel->micro_batches() << " micro-batches, bubble "
         << static_cast<int>(model_parallel->bubble_fraction() * 100 + 0.5) << "%";
  }
  if (epochs > 0) what << " (" << epochs << (epochs == 1 ? " epoch)" : " epochs)");
  if (report.resumed_from_step >= 0) what << ", resuming after step " << report.resumed_from_step;
  // With several ranks only rank 0 talks to the console; the others keep their own logs.
  if (rank == 0) {
    info << what.str() << "\n";
    info.flush();
  }

  trainer.set_log(log.get());
  trainer.set_progress(rank == 0 ? &progress : nullptr);
  report.summary = trainer.run();

  if (!c.save.empty()) {
    check_parameters_finite(*model, "--save");  // on every rank: the weights are the same on all
    if (rank == 0) {
      auto metadata = model_metadata(c);
      metadata["step"] = std::to_string(trainer.step());
      save_weights(c.save, *model, metadata);
    }
    report.saved = c.save;
  }
  // No rank leaves before the weights are written: a script started after any rank returns finds
  // them.
  if (comm) comm->barrier();
  return report;
}

}  // namespace minitrain
