// `minitrain train` as a library call: settings -> data, model, optimizer -> Trainer -> weights.

#include "train/run_training.h"

#include <filesystem>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/allocator.h"
#include "core/bytes.h"
#include "core/device.h"
#include "core/parallel_for.h"
#include "data/readers.h"
#include "nn/mlp.h"
#include "nn/state_dict.h"
#include "optim/make_optimizer.h"
#include "optim/schedule.h"
#include "parallel/data_parallel.h"
#include "parallel/model_parallel.h"
#include "train/flag_context.h"

namespace minitrain {
namespace {

namespace fs = std::filesystem;

// The synthetic data's seed, apart from the init's: the same Philox seed would make the first
// inputs and the first weights the same numbers.
constexpr uint64_t kDataSeedMix = 0x9E3779B97F4A7C15ull;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

std::shared_ptr<const Dataset> load_data(const TrainConfig& c, const std::vector<int64_t>& sizes) {
  if (ends_with(c.data, ".npy"))
    return std::make_shared<TensorDataset>(load_npy_dataset(c.data, c.targets));
  if (ends_with(c.data, ".csv"))
    return std::make_shared<TensorDataset>(load_csv_dataset(c.data, c.target_columns));
  return std::make_shared<TensorDataset>(make_synthetic_regression(
      synthetic_rows(c.data), sizes.front(), sizes.back(), c.seed ^ kDataSeedMix));
}

void check_data_fits_model(const Dataset& d, const TrainConfig& c, const std::vector<int64_t>& sizes) {
  if (d.feature_dim() != sizes.front()) {
    std::vector<int64_t> fixed = sizes;
    fixed.front() = d.feature_dim();
    MT_THROW(ShapeError, "--data ", c.data, " has ", d.feature_dim(), " feature column(s) per row but --model ",
             c.model, " expects ", sizes.front(), " inputs; use --model mlp:", join(fixed));
  }
  if (d.target_dim() != sizes.back()) {
    std::vector<int64_t> fixed = sizes;
    fixed.back() = d.target_dim();
    MT_THROW(ShapeError, "--data ", c.data, " has ", d.target_dim(), " target(s) per row but --model ", c.model,
             " has ", sizes.back(), " outputs; use --model mlp:", join(fixed));
  }
}

// A file the run writes at its end must have a directory to go to: found out now, not after
// an hour of training.
void check_writable_dir(const char* flag, const std::string& path) {
  const fs::path dir = fs::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty() && !fs::is_directory(dir, ec))
    MT_THROW(IoError, "--", flag, " ", path, ": directory '", dir.string(), "' does not exist");
  if (fs::is_directory(path, ec)) MT_THROW(IoError, "--", flag, " ", path, " is a directory; give a file name");
}

std::shared_ptr<const LRSchedule> make_schedule(const TrainConfig& c, int64_t total_steps) {
  std::unique_ptr<LRSchedule> s;
  if (c.schedule == "step")
    s = step_lr(c.lr, c.step_size, c.gamma);
  else if (c.schedule == "cosine")
    s = cosine_lr(c.lr, total_steps);
  else
    s = constant_lr(c.lr);
  if (c.warmup_steps > 0) s = linear_warmup(std::move(s), c.warmup_steps);
  return std::shared_ptr<const LRSchedule>(std::move(s));
}

// A resumed run continues bit-identically only with the data order and model of the original.
void check_resume_config(const std::string& path, const TrainConfig& c) {
  const auto meta = read_checkpoint_metadata(path);
  const auto it = meta.find("config");
  if (it == meta.end()) return;
  const nlohmann::json saved = nlohmann::json::parse(it->second, nullptr, false);
  if (!saved.is_object()) return;
  const nlohmann::json now = nlohmann::json::parse(config_to_json(c));
  for (const char* key : {"model", "activation", "data", "targets", "target-columns", "optimizer", "batch-size",
                          "shuffle", "seed", "grad-accum"}) {
    if (saved.contains(key) && saved[key] != now[key])
      MT_THROW(ValueError, "--resume: the checkpoint in ", c.checkpoint_dir, " was written with ", key, " ",
               saved[key].dump(), ", this run has ", now[key].dump(),
               "; resume with the settings of the original run (or start a new --checkpoint-dir)");
  }
}

// --parallel dp|mp: the devices of the replicas or stages (--devices, else --device repeated).
std::vector<Device> parallel_devices(const TrainConfig& c, Device device) {
  std::vector<Device> out;
  if (!c.devices.empty()) {
    std::size_t begin = 0;
    for (;;) {
      const std::size_t comma = c.devices.find(',', begin);
      out.push_back(Device::parse(c.devices.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin)));
      if (comma == std::string::npos) break;
      begin = comma + 1;
    }
  } else {
    const int64_t n = c.parallel == "dp" ? c.replicas : 1;
    out.assign(static_cast<std::size_t>(n), device);
  }
  for (const Device& d : out) check_available(d);
  return out;
}

// After weights were loaded into replica 0 (--init, --resume), the other replicas take them.
void copy_replica0_weights(DataParallel& dp) {
  NamedParameters src = dp.replica(0).named_parameters();
  for (int r = 1; r < dp.replicas(); ++r) {
    NamedParameters dst = dp.replica(r).named_parameters();
    for (std::size_t i = 0; i < dst.size(); ++i) dst[i].second->value.copy_(src[i].second->value);
  }
}

std::string join_devices(const std::vector<Device>& devices) {
  std::string s;
  for (const Device& d : devices) s += (s.empty() ? "" : ",") + d.str();
  return s;
}

}  // namespace

int64_t synthetic_rows(const std::string& spec) {
  if (spec == "synthetic") return kDefaultSyntheticRows;
  MT_CHECK_AS(ValueError, spec.rfind("synthetic:", 0) == 0, "not a synthetic data spec: '", spec, "'");
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

TrainReport run_training(const TrainConfig& c, std::ostream& info, std::ostream& progress_out) {
  // ---- check everything before the first step ----
  validate(c);
  if (c.threads > 0) set_num_threads(static_cast<int>(c.threads));
  Device device = Device::parse(c.device);
  check_available(device);
  const bool dp = c.parallel == "dp", mp = c.parallel == "mp";
  std::vector<Device> devices;
  if (dp || mp) {
    devices = parallel_devices(c, device);
    device = devices.front();  // batches arrive, and the loss is computed, on the first replica/stage
  }
  if (!c.memory_cap.empty()) {
    const uint64_t cap = parse_bytes(c.memory_cap);
    for (const Device& d : devices.empty() ? std::vector<Device>{device} : devices) set_memory_cap(d, cap);
  }
  const std::vector<int64_t> sizes = parse_mlp_spec(c.model);
  const Activation activation = parse_activation(c.activation);
  const ProgressMode progress_mode = parse_progress_mode(c.progress);

  const std::shared_ptr<const Dataset> data = load_data(c, sizes);
  check_data_fits_model(*data, c, sizes);
  if (!c.save.empty()) check_writable_dir("save", c.save);
  if (!c.log.empty()) check_writable_dir("log", c.log);
  std::string resume_path;
  if (c.resume) {
    resume_path = checkpoint_path(c.checkpoint_dir);
    if (!fs::exists(resume_path))
      MT_THROW(IoError, "--resume: no checkpoint in '", c.checkpoint_dir, "' (expected ", resume_path,
               "); run without --resume to start afresh");
    check_resume_config(resume_path, c);
  }
  if (!c.checkpoint_dir.empty()) {
    std::error_code ec;
    fs::create_directories(c.checkpoint_dir, ec);
    if (!fs::is_directory(c.checkpoint_dir))
      MT_THROW(IoError, "--checkpoint-dir ", c.checkpoint_dir, ": cannot create the directory",
               ec ? ": " + ec.message() : std::string());
  }

  Generator gen(c.seed);
  std::unique_ptr<Module> model;
  DataParallel* data_parallel = nullptr;
  ModelParallel* model_parallel = nullptr;
  if (dp) {
    // Every replica is built from the same seed, so replica 0's initial weights are the one-device
    // run's; DataParallel then broadcasts replica 0's weights anyway.
    auto dpm = std::make_unique<DataParallel>(
        [&](Device d) {
          Generator replica_gen(c.seed);
          std::unique_ptr<Sequential> m = make_mlp(sizes, activation, replica_gen, d);
          m->set_needs_input_grad(false);
          return std::unique_ptr<Module>(std::move(m));
        },
        devices);
    make_mlp(sizes, activation, gen, device);  // advance `gen` as the one-device run does
    data_parallel = dpm.get();
    model = std::move(dpm);
  } else {
    std::unique_ptr<Sequential> seq = make_mlp(sizes, activation, gen, device);
    seq->set_needs_input_grad(false);  // the input is data: skip the first layer's dx GEMM, as torch does
    if (mp) {
      auto mpm = std::make_unique<ModelParallel>(std::move(seq), static_cast<int>(c.stages != 0 ? c.stages : 2),
                                                 static_cast<int>(c.micro_batches != 0 ? c.micro_batches : 1),
                                                 devices);
      model_parallel = mpm.get();
      model = std::move(mpm);
    } else {
      model = std::move(seq);
    }
  }
  if (!c.init.empty()) {
    with_flag_context("--init", [&] { load_weights(c.init, *model); });
    if (data_parallel) copy_replica0_weights(*data_parallel);
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
  std::unique_ptr<Optimizer> optimizer =
      data_parallel ? data_parallel->make_optimizer(oc) : make_optimizer(oc, model->named_parameters());

  DataLoaderOptions lo;
  lo.batch_size = c.batch_size;
  lo.shuffle = c.shuffle;
  lo.seed = c.seed;
  lo.device = device;
  DataLoader loader(data, lo);

  TrainerOptions to;
  const int64_t bpe = loader.batches_per_epoch();
  const int64_t epochs = c.steps ? 0 : c.epochs.value_or(kDefaultEpochs);
  to.total_steps = c.steps ? *c.steps : steps_for_epochs(epochs, bpe, c.grad_accum);
  to.total_batches = c.steps ? 0 : epochs * bpe;
  to.grad_accum = c.grad_accum;
  to.clip_grad_norm = c.clip_grad_norm;
  to.schedule = make_schedule(c, to.total_steps);
  to.checkpoint_dir = c.checkpoint_dir;
  to.checkpoint_every = c.checkpoint_every;
  to.checkpoint_metadata = {{"config", config_to_json(c)}, {"model", c.model}, {"activation", c.activation}};
  to.generator = &gen;
  Trainer trainer(*model, *optimizer, loader, to);

  TrainReport report;
  report.total_steps = to.total_steps;
  report.device = devices.empty() ? device.str() : join_devices(devices);
  if (!resume_path.empty()) {
    trainer.resume(resume_path);
    if (data_parallel) copy_replica0_weights(*data_parallel);
    report.resumed_from_step = trainer.step();
  }

  // ---- inputs are good: from here on, files are written ----
  std::unique_ptr<MetricsLog> log;
  if (!c.log.empty()) log = std::make_unique<MetricsLog>(c.log, report.resumed_from_step);
  Progress progress(progress_out, progress_mode, trainer.step() + 1, to.total_steps);

  std::ostringstream what;
  what << "training " << c.model << " (" << c.activation << ", " << model->num_parameters() << " parameters) on "
       << report.device << ": " << c.data << " (" << data->size() << " rows), " << c.optimizer << " lr " << c.lr
       << ", batch " << c.batch_size << ", " << to.total_steps << " steps";
  if (data_parallel) what << ", data parallel: " << data_parallel->replicas() << " replicas";
  if (model_parallel) {
    what << ", model parallel: " << model_parallel->stages() << " stages, " << model_parallel->micro_batches()
         << " micro-batches, bubble " << static_cast<int>(model_parallel->bubble_fraction() * 100 + 0.5) << "%";
  }
  if (epochs > 0) what << " (" << epochs << (epochs == 1 ? " epoch)" : " epochs)");
  if (report.resumed_from_step >= 0) what << ", resuming after step " << report.resumed_from_step;
  info << what.str() << "\n";
  info.flush();

  trainer.set_log(log.get());
  trainer.set_progress(&progress);
  report.summary = trainer.run();

  if (!c.save.empty()) {
    check_parameters_finite(*model, "--save");
    save_weights(c.save, *model, {{"model", c.model}, {"activation", c.activation},
                                  {"step", std::to_string(trainer.step())}});
    report.saved = c.save;
  }
  return report;
}

}  // namespace minitrain
