// Replicated data parallelism: one replica per device, one persistent host thread per replica.
// The caller's thread hands each worker a task (forward, backward, optimizer step) and waits for
// all of them; a worker owns its replica, its ThreadCommunicator and its device's current stream.
// Bounded by the slowest replica and by the gradient all-reduce (one flat buffer per replica).
//
// Replica 0 is the reference copy: named_parameters() are its parameters, so the Trainer's
// zero_grad and gradient clipping act on it. backward therefore clears the other replicas'
// gradients before their backward (replica 0 keeps what it accumulated), and the optimizer's step
// first copies replica 0's gradients to the others, so every replica applies the same update.

#include "parallel/data_parallel.h"

#include <exception>
#include <sstream>
#include <utility>

#include "core/error.h"
#include "core/stream.h"
#include "parallel/comm/thread_communicator.h"
#include "parallel/task_thread.h"

namespace minitrain {
namespace {

// One replica and the thread that drives it.
class ReplicaWorker {
 public:
  ReplicaWorker(Device device, std::unique_ptr<Module> module, std::unique_ptr<Communicator> comm)
      : device_(device), module_(std::move(module)), comm_(std::move(comm)) {}

  void post(std::function<void()> task) {
    thread_.post([this, task = std::move(task)] {
      // This thread's kernels, copies and allocations go to its device. Per task, inside the
      // task: after a device fault the switch throws, and that must reach the caller.
      DeviceGuard guard(device_);
      task();
      synchronize(device_);  // the caller reads the results next
    });
  }
  /// Waits for the posted task; its exception, if any.
  std::exception_ptr wait() { return thread_.wait_idle(); }

  Device device() const noexcept { return device_; }
  Module& module() { return *module_; }
  Communicator& comm() { return *comm_; }

 private:
  Device device_;
  std::unique_ptr<Module> module_;
  std::unique_ptr<Communicator> comm_;
  TaskThread thread_;  // last: joined before the replica and its communicator go
};

// Rows [begin, begin + count) of replica r: the first n % R replicas get one row more.
std::pair<int64_t, int64_t> row_range(int64_t n, int r, int replicas) {
  const int64_t base = n / replicas, extra = n % replicas;
  const int64_t begin = r * base + std::min<int64_t>(r, extra);
  return {begin, base + (r < extra ? 1 : 0)};
}

}  // namespace

struct DataParallel::Impl {
  std::vector<Device> devices;
  std::vector<std::unique_ptr<ReplicaWorker>> workers;
  std::vector<int64_t> rows;  // rows each replica got in the last forward
  Shape last_output_shape;
  bool have_forward = false;

  int size() const { return static_cast<int>(workers.size()); }

  /// Runs task(r) on every replica's thread at once and waits for all; rethrows the first error.
  void run_all(const std::function<void(int)>& task) {
    // The workers use their own streams: what the caller queued on its streams for these devices
    // (building the replicas, zero_grad on replica 0, loading weights) is done before they start.
    for (const Device& d : devices) synchronize(d);
    for (int r = 0; r < size(); ++r) workers[r]->post([&task, r] { task(r); });
    std::exception_ptr first;
    for (int r = 0; r < size(); ++r) {
      std::exception_ptr e = workers[r]->wait();
      if (e && !first) first = e;
    }
    if (first) std::rethrow_exception(first);
  }

  /// Sums every parameter gradient over the replicas, in one flat buffer per replica.
  void all_reduce_grads(int r) {
    Module& m = workers[r]->module();
    NamedParameters params = m.named_parameters();
    int64_t total = 0;
    bool same_dtype = true;
    for (auto& [name, p] : params) {
      ensure_grad(*p);
      total += p->grad.numel();
      same_dtype = same_dtype && p->grad.dtype() == params.front().second->grad.dtype();
    }
    if (params.empty() || total == 0) return;
    Communicator& comm = workers[r]->comm();
    if (!same_dtype) {  // every rank takes the same branch: the replicas are the same model
      for (auto& [name, p] : params) comm.all_reduce(p->grad, ReduceOp::Sum);
      return;
    }
    Tensor flat =
        Tensor::empty(Shape({total}), params.front().second->grad.dtype(), workers[r]->device());
    int64_t offset = 0;
    for (auto& [name, p] : params) {
      const int64_t n = p->grad.numel();
      flat.narrow(offset, n).copy_(p->grad.reshape({n}));
      offset += n;
    }
    comm.all_reduce(flat, ReduceOp::Sum);
    offset = 0;
    for (auto& [name, p] : params) {
      const int64_t n = p->grad.numel();
      p->grad.reshape({n}).copy_(flat.narrow(offset, n));
      offset += n;
    }
  }
};

DataParallel::DataParallel(const ReplicaFactory& make_replica, std::vector<Device> devices,
                           CommOptions options)
    : impl_(std::make_unique<Impl>()) {
  MT_CHECK_AS(ValueError, !devices.empty(),
              "DataParallel: no devices given; pass at least one (e.g. {cpu})");
  MT_CHECK_AS(ValueError, static_cast<bool>(make_replica),
              "DataParallel: the replica factory is empty");
  for (const Device& d : devices) check_available(d);
  impl_->devices = devices;
  std::vector<std::unique_ptr<Communicator>> comms = make_thread_communicators(devices, options);
  for (std::size_t r = 0; r < devices.size(); ++r) {
    std::unique_ptr<Module> m = make_replica(devices[r]);
    MT_CHECK_AS(ValueError, m != nullptr,
                "DataParallel: the replica factory returned no module for replica ", r, " on ",
                devices[r]);
    impl_->workers.push_back(
        std::make_unique<ReplicaWorker>(devices[r], std::move(m), std::move(comms[r])));
  }
  const std::size_t n_params = impl_->workers[0]->module().named_parameters().size();
  for (int r = 1; r < impl_->size(); ++r)
    MT_CHECK_AS(ValueError, impl_->workers[r]->module().named_parameters().size() == n_params,
                "DataParallel: replica ", r, " has ",
                impl_->workers[r]->module().named_parameters().size(),
                " parameters but replica 0 has ", n_params,
                "; the factory must build the same model each time");
  // Every replica starts from replica 0's weights, whatever the factory's initialisation did.
  broadcast_replica0_parameters();
}

void DataParallel::broadcast_replica0_parameters() {
  impl_->run_all([this](int r) {
    for (auto& [name, p] : impl_->workers[r]->module().named_parameters())
      impl_->workers[r]->comm().broadcast(p->value, 0);
  });
}

DataParallel::~DataParallel() = default;

Tensor DataParallel::forward(const Tensor& x) {
  Impl& im = *impl_;
  MT_CHECK_AS(ShapeError, x.defined() && x.ndim() >= 1,
              "DataParallel::forward: the input needs a batch dimension");
  synchronize(x.device());  // the caller's work on x is done before the workers read it
  const int64_t n = x.size(0);
  const int R = im.size();
  im.rows.assign(R, 0);
  std::vector<Tensor> outs(R);
  im.run_all([&](int r) {
    const auto [begin, count] = row_range(n, r, R);
    im.rows[r] = count;
    if (count == 0) return;  // fewer rows than replicas: this one sits the step out
    ReplicaWorker& w = *im.workers[r];
    outs[r] = w.module().forward(x.narrow(begin, count).to(w.device()));
  });
  // Gather on devices[0], in row order.
  int first = 0;
  while (first < R && !outs[first].defined()) ++first;
  MT_CHECK_AS(ShapeError, first < R, "DataParallel::forward: the input has no rows (shape ",
              x.shape(), ")");
  std::vector<int64_t> dims = outs[first].shape().dims();
  dims[0] = n;
  Tensor y = Tensor::empty(Shape(dims), outs[first].dtype(), im.devices[0]);
  im.run_all([&](int r) {
    if (!outs[r].defined()) return;
    y.narrow(row_range(n, r, R).first, im.rows[r]).copy_(outs[r]);
    synchronize(im.devices[0]);
  });
  im.last_output_shape = y.shape();
  im.have_forward = is_training();
  return y;
}

Tensor DataParallel::backward(const Tensor& grad_output) {
  Impl& im = *impl_;
  MT_CHECK(im.have_forward, "DataParallel::backward: no training-mode forward to differentiate");
  MT_CHECK_AS(ShapeError, grad_output.defined() && grad_output.shape() == im.last_output_shape,
              "DataParallel::backward: grad_output has shape ",
              grad_output.defined() ? grad_output.shape() : Shape(),
              " but the last forward's output has shape ", im.last_output_shape);
  synchronize(grad_output.device());
  const int64_t n = grad_output.size(0);
  const int R = im.size();
  std::vector<Tensor> dxs(R);
  im.run_all([&](int r) {
    ReplicaWorker& w = *im.workers[r];
    // Replica 0 accumulates onto the gradient it holds (the Trainer's zero_grad acts on it); the
    // others contribute only this batch's share, so the sum below is replica 0's + the batch's.
    if (r > 0) w.module().zero_grad();
    if (im.rows[r] > 0) {
      const int64_t begin = row_range(n, r, R).first;
      dxs[r] = w.module().backward(grad_output.narrow(begin, im.rows[r]).to(w.device()));
    }
    // Note [data-parallel gradient weighting]: a sum, not a mean.
    im.all_reduce_grads(r);
  });
  im.have_forward = false;
  int first = 0;
  while (first < R && !dxs[first].defined()) ++first;
  if (first == R) return Tensor();  // the replicas skip input gradients
  std::vector<int64_t> dims = dxs[first].shape().dims();
  dims[0] = n;
  Tensor dx = Tensor::empty(Shape(dims), dxs[first].dtype(), im.devices[0]);
  im.run_all([&](int r) {
    if (!dxs[r].defined()) return;
    dx.narrow(row_range(n, r, R).first, im.rows[r]).copy_(dxs[r]);
    synchronize(im.devices[0]);
  });
  return dx;
}

NamedParameters DataParallel::named_parameters(const std::string& prefix) {
  return impl_->workers[0]->module().named_parameters(prefix);
}

void DataParallel::to(Device device) {
  MT_THROW(DeviceError, "DataParallel::to(", device, "): the replicas stay on their devices (",
           repr(), "); build the DataParallel with the devices wanted instead");
}

void DataParallel::train(bool on) {
  Module::train(on);
  for (auto& w : impl_->workers) w->module().train(on);
}

std::string DataParallel::repr() const {
  std::ostringstream s;
  s << "DataParallel(replicas=" << impl_->size() << ", devices=[";
  for (std::size_t i = 0; i < impl_->devices.size(); ++i)
    s << (i ? ", " : "") << impl_->devices[i].str();
  s << "])(\n  (module): " << impl_->workers[0]->module().repr() << "\n)";
  return s.str();
}

int DataParallel::replicas() const noexcept { return impl_->size(); }

Module& DataParallel::replica(int i) {
  MT_CHECK_AS(ValueError, i >= 0 && i < impl_->size(), "DataParallel::replica(", i, "): there are ",
              impl_->size(), " replicas");
  return impl_->workers[i]->module();
}

const std::vector<Device>& DataParallel::devices() const noexcept { return impl_->devices; }

namespace {

// One optimizer per replica, stepped in the replicas' threads. Its own parameters() are replica
// 0's; lr is pushed to every replica's optimizer at each step. Must not outlive its DataParallel.
class ReplicatedOptimizer final : public Optimizer {
 public:
  ReplicatedOptimizer(DataParallel& dp,
                      std::function<void(const std::function<void(int)>&)> run_all,
                      std::vector<std::unique_ptr<Optimizer>> inner)
      : Optimizer(dp.replica(0).named_parameters()),
        dp_(dp),
        run_all_(std::move(run_all)),
        inner_(std::move(inner)) {
    lr_ = inner_.front()->lr();
  }

  void step() override {
    synchronize(dp_.devices()[0]);  // the caller's work on replica 0's gradients (clipping) is done
    for (auto& o : inner_) o->set_lr(lr_);
    // The same gradients everywhere: replica 0's, as the caller left them. Copied before any
    // replica steps, so no step reads a gradient another thread is writing.
    run_all_([this](int r) {
      if (r == 0) return;
      NamedParameters mine = dp_.replica(r).named_parameters();
      for (std::size_t i = 0; i < mine.size(); ++i) {
        const Tensor& g0 = params_[i].second->grad;
        if (!g0.defined()) {
          mine[i].second->grad = Tensor();
          continue;
        }
        ensure_grad(*mine[i].second).copy_(g0);
      }
    });
    run_all_([this](int r) { inner_[r]->step(); });
    ++steps_;
  }

  std::string name() const override { return inner_.front()->name(); }
  double base_lr() const noexcept override { return inner_.front()->base_lr(); }
  std::vector<std::pair<std::string, Tensor>> state_tensors() const override {
    return inner_.front()->state_tensors();
  }
  std::map<std::string, std::string> state_scalars() const override {
    inner_.front()->set_lr(lr_);
    return inner_.front()->state_scalars();
  }
  void load_state(const std::vector<std::pair<std::string, Tensor>>& tensors,
                  const std::map<std::string, std::string>& scalars) override {
    inner_.front()->load_state(tensors, scalars);  // validates first: a mismatch changes nothing
    for (std::size_t r = 1; r < inner_.size(); ++r) inner_[r]->load_state(tensors, scalars);
    lr_ = inner_.front()->lr();
    steps_ = inner_.front()->steps();
  }

 private:
  DataParallel& dp_;
  std::function<void(const std::function<void(int)>&)> run_all_;
  std::vector<std::unique_ptr<Optimizer>> inner_;
};

}  // namespace

std::unique_ptr<Optimizer> DataParallel::make_optimizer(const OptimizerConfig& config) {
  std::vector<std::unique_ptr<Optimizer>> inner;
  for (int r = 0; r < impl_->size(); ++r)
    inner.push_back(
        minitrain::make_optimizer(config, impl_->workers[r]->module().named_parameters()));
  Impl* im = impl_.get();
  return std::make_unique<ReplicatedOptimizer>(
      *this, [im](const std::function<void(int)>& task) { im->run_all(task); }, std::move(inner));
}

}  // namespace minitrain
