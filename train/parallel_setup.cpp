#include "train/parallel_setup.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/bytes.h"
#include "core/strings.h"
#include "nn/gemm_backend.h"
#include "nn/state_dict.h"
#include "optim/make_optimizer.h"
#include "parallel/launch/process_group.h"
#include "train/data_parallel_sync.h"
#include "train/ddp_sync.h"
#include "train/flag_context.h"
#include "train/local_sgd_sync.h"

namespace minitrain {
namespace {

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

// The model, wrapped for dp, mp, ddp or the hybrid, with handles on its wrappers in `s`.
void build_model(const TrainConfig& c, const ParallelPlan& p, const ModelRecipe& recipe,
                 Generator& gen, ParallelSetup& s) {
  if (p.dp) {
    // Every replica is built from the same seed, so replica 0's initial weights are the one-device
    // run's; DataParallel then broadcasts replica 0's weights anyway.
    auto dpm = std::make_unique<DataParallel>(
        [&](Device d) {
          Generator replica_gen(c.seed);
          return std::unique_ptr<Module>(recipe.build(replica_gen, d));
        },
        p.devices);
    make_mlp(recipe.sizes, recipe.activation, gen, p.device);  // advance `gen` as one device
    s.data_parallel = dpm.get();
    s.model = std::move(dpm);
    return;
  }
  // Under ddp every rank builds the model from --seed, so all start from the one-device run's
  // weights (and `gen` advances as there); the wrapper broadcasts rank 0's anyway.
  std::unique_ptr<Sequential> seq = recipe.build(gen, p.device);
  std::unique_ptr<Module> local;
  if (p.mp || (p.ddp && c.stages != 0)) {  // ddp with --stages: each rank a pipeline
    const int64_t stages = p.mp ? stages_or_default(c) : c.stages;
    auto mpm =
        std::make_unique<ModelParallel>(std::move(seq), static_cast<int>(stages),
                                        static_cast<int>(micro_batches_or_default(c)), p.devices);
    s.model_parallel = mpm.get();
    local = std::move(mpm);
  } else {
    local = std::move(seq);
  }
  if (p.ddp) {
    DdpOptions ddp_options;
    ddp_options.bucket_bytes = static_cast<int64_t>(parse_bytes(c.bucket_size));
    ddp_options.overlap = !c.no_overlap;
    ddp_options.reduce_dtype = parse_precision(c.grad_reduce_dtype, "grad reduce dtype");
    auto ddpm = std::make_unique<DistributedDataParallel>(std::move(local), *s.comm, ddp_options);
    s.distributed = ddpm.get();
    local = std::move(ddpm);
  }
  s.model = std::move(local);
}

std::unique_ptr<ReplicaSync> make_replica_sync(const TrainConfig& c, const ParallelSetup& s) {
  if (s.data_parallel) return std::make_unique<DataParallelSync>(*s.data_parallel);
  if (s.distributed && c.sync_every)
    return std::make_unique<LocalSgdSync>(*s.distributed, *s.optimizer, *c.sync_every,
                                          c.sync_optimizer_state);
  if (s.distributed) return std::make_unique<DdpSync>(*s.distributed);
  return std::make_unique<ReplicaSync>();  // one device, and mp's stages
}

}  // namespace

std::unique_ptr<Sequential> ModelRecipe::build(Generator& gen, Device device) const {
  std::unique_ptr<Sequential> m = make_mlp(sizes, activation, gen, device);
  m->set_needs_input_grad(false);  // the input is data: skip the first layer's dx GEMM
  set_gemm_backend(*m, gemm);
  m->set_precision(precision);  // before mp splits it: the stages' layers keep it
  m->set_mlp_kernel(mlp_kernel);
  return m;
}

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

ParallelSetup set_up_parallel(const TrainConfig& c, const ParallelPlan& plan,
                              const ModelRecipe& recipe, Generator& gen) {
  ParallelSetup s;
  if (plan.ddp) {
    s.comm = init_process_group(plan.env, plan.device, process_group_options(c, plan.devices));
    check_same_config(c, *s.comm);
  }
  build_model(c, plan, recipe, gen, s);
  if (!c.init.empty()) {
    with_flag_context("--init", [&] { load_weights(c.init, *s.model); });
    if (s.data_parallel) s.data_parallel->broadcast_replica0_parameters();  // replica 0's
  }
  const OptimizerConfig oc = optimizer_config(c);
  s.optimizer = s.data_parallel ? s.data_parallel->make_optimizer(oc)
                                : make_optimizer(oc, s.model->named_parameters());
  s.sync = make_replica_sync(c, s);
  return s;
}

std::string describe_replicas(const TrainConfig& c, const ParallelSetup& s) {
  std::ostringstream what;
  if (s.data_parallel) what << "data parallel: " << s.data_parallel->replicas() << " replicas";
  if (s.distributed) {
    const int world = s.world_size();
    what << "distributed data parallel: " << world << (world == 1 ? " rank" : " ranks") << " ("
         << s.comm->backend() << ", " << c.all_reduce << " all-reduce, buckets of " << c.bucket_size
         << (c.no_overlap ? " all-reduced after backward" : "") << ", global batch "
         << c.batch_size * world;
    if (c.grad_reduce_dtype != "fp32") what << ", gradients reduced in " << c.grad_reduce_dtype;
    if (c.sync_every)
      what << ", local SGD: parameters averaged every " << *c.sync_every
           << (*c.sync_every == 1 ? " step" : " steps")
           << (c.sync_optimizer_state ? " with the optimizer moments" : "");
    what << ")";
  }
  return what.str();
}

std::string describe_stages(const ParallelSetup& s) {
  if (!s.model_parallel) return "";
  std::ostringstream what;
  what << "model parallel: " << s.model_parallel->stages() << " stages, "
       << s.model_parallel->micro_batches() << " micro-batches, bubble "
       << static_cast<int>(s.model_parallel->bubble_fraction() * 100 + 0.5) << "%";
  return what.str();
}

}  // namespace minitrain
