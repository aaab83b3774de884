// DistributedDataParallel: gradient buckets all-reduced by one communication thread per instance
// while backward goes on (torch's Reducer, without autograd: a Sequential's backward hook says
// when a layer's gradients are final). Bounded by the slower of backward and the bucket
// all-reduces; the overlap hides the communication of every bucket but the last.
//
// Note [DDP communication thread]: every collective of an instance (the construction's checks
// and broadcast, every bucket's all-reduce) runs on its communication thread, in the order it was
// posted, which is the same on every rank. The caller's thread makes no collective call while a
// backward is in flight, so MPI built with MPI_THREAD_SERIALIZED is enough, and the ranks can
// never interleave two DDP collectives differently. On a GPU the thread works on its own side
// stream: each bucket's task first makes the side stream wait for an event recorded on the
// caller's stream when the bucket became ready (its gradients are enqueued before it), and at the
// end of backward the caller's stream waits for an event recorded after the last copy back.
//
// Note [DDP bucket order]: buckets hold parameters in reverse registration order, the order in
// which a Sequential's backward finishes them. A layer's parameters are contiguous in that order
// and layers finish from last to first, so bucket k is complete no later than bucket k + 1;
// buckets are still launched strictly by index (a bucket complete before an earlier one waits
// for it) so that every rank issues the same sequence of all-reduces.
//
// Note [DDP gradients as bucket views]: each parameter's gradient is a view of its bucket's flat
// buffer (torch's gradient_as_bucket_view), bound when the buckets are built: backward writes the
// gradients where the all-reduce reads them, and the averaged result lands where the optimizer
// reads it, so a step copies no gradient into or out of a bucket (on CPU ranks those copies were
// 4 passes over the gradients, as much memory traffic as the all-reduce itself). A gradient that
// has been replaced since (Module::to, a caller's own tensor) is no longer a view: its bucket
// copies it in and out as before. Parameter values (the broadcast at construction, local SGD's
// averaging) travel through a second buffer per bucket, so that they never overwrite gradients.
//
// Note [DDP over several devices]: a module whose parameters sit on several devices (the hybrid:
// a ModelParallel with its stages on several GPUs) is reduced device by device. Its parameters
// are grouped by device, in order of first appearance; a bucket never mixes two groups (its flat
// buffer lives on one device); and group k all-reduces with group k of the other ranks through
// a communicator of its own on its device, split from the caller's (Note [splitting a
// communicator]). Every group gets a split, the one on the caller's device too, so that the ranks
// pair their groups by position alone (were the caller's communicator used for its own device's
// group, a rank whose communicator sits on another stage than another rank's would pair the wrong
// groups); the construction first checks that every rank has as many groups of as many elements.
// The one communication thread serves all groups, with a side stream on each device, and the
// buckets keep one order on every rank, so the collectives of the several communicators follow one
// sequence everywhere. A module on one device keeps the caller's communicator, as before.

#include "parallel/distributed_data_parallel.h"

#include <algorithm>
#include <functional>
#include <sstream>
#include <unordered_map>
#include <utility>

#include "core/error.h"
#include "core/strings.h"
#include "core/stream.h"
#include "kernels/cast.h"
#include "kernels/elementwise.h"
#include "kernels/fill.h"
#include "nn/sequential.h"
#include "parallel/task_thread.h"

namespace minitrain {
namespace {

// The communication thread: a TaskThread that works on the side streams (one per device) for its
// whole life. After a task throws, the tasks after it are skipped (the communicator is broken, or
// the ranks disagree about what comes next) until the caller has taken the error.
std::unique_ptr<TaskThread> make_comm_thread(std::vector<const Stream*> sides) {
  return std::make_unique<TaskThread>([sides](const std::function<void()>& serve) {
    DeviceGuard device_guard(sides.front()->device());
    // Collectives and copies of this thread go to the side stream of their device.
    std::vector<std::unique_ptr<StreamGuard>> stream_guards;
    for (const Stream* side : sides) stream_guards.push_back(std::make_unique<StreamGuard>(*side));
    serve();
    while (!stream_guards.empty()) stream_guards.pop_back();  // the reverse of their making
  });
}

// The devices of `params` in order of first appearance; `group_of[i]` is parameter i's.
std::vector<Device> parameter_devices(const NamedParameters& params, std::vector<int>& group_of) {
  std::vector<Device> devices;
  for (const auto& [name, p] : params) {
    const Device d = p->value.device();
    auto it = std::find(devices.begin(), devices.end(), d);
    group_of.push_back(static_cast<int>(it - devices.begin()));
    if (it == devices.end()) devices.push_back(d);
  }
  return devices;
}

std::string join_devices(const std::vector<Device>& devices) {
  std::vector<std::string> names;
  for (const Device& d : devices) names.push_back(d.str());
  return join(names, ", ");
}

}  // namespace

struct DistributedDataParallel::Impl {
  // The parameters on one device and the communicator they are all-reduced through (Note [DDP
  // over several devices]).
  struct Group {
    explicit Group(Device d) : device(d), side(Stream::create(d)), done(Event::create(d)) {}
    Device device;
    Communicator* comm = nullptr;         // the caller's, or `split`
    std::unique_ptr<Communicator> split;  // this group's own, when the module spans devices
    Stream side;                          // the worker's stream here (an empty handle on the CPU)
    Event done;  // recorded by the worker after its last work here, and by the caller before
  };
  struct Bucket {
    Bucket(int g, DType d, Event e) : group(g), dtype(d), ready(std::move(e)) {}
    std::vector<int> params;  // indices into `params`, in reverse registration order
    int group;                // its parameters' device group
    int64_t numel = 0;
    DType dtype;
    Tensor flat;      // the bucket's gradients, contiguous, on its group's device (their views)
    Tensor values;    // parameter values packed for a broadcast or an average (made on first use)
    Tensor narrow;    // flat in options.reduce_dtype when that is another type (else undefined)
    Event ready;      // recorded on the caller's stream when the bucket's gradients are final
    int pending = 0;  // parameters not yet ready in the backward in flight
  };

  Impl(std::unique_ptr<Module> m, Communicator& c, DdpOptions o)
      : module(std::move(m)), comm(c), options(o) {}

  std::unique_ptr<Module> module;
  Communicator& comm;  // the caller's: construction checks, average_tensors
  DdpOptions options;
  NamedParameters params;     // the module's, in registration order
  std::vector<int> group_of;  // parameter index -> its group
  std::vector<Group> groups;  // never resized once the worker runs: it holds their streams
  std::vector<Bucket> buckets;
  std::vector<int> bucket_of;        // parameter index -> bucket
  Sequential* sequential = nullptr;  // the module, when it is one: its hook drives the overlap
  std::vector<std::vector<int>> layer_params;  // Sequential child -> its parameter indices
  std::vector<bool> ready;                     // per parameter, in the backward in flight
  std::size_t next_bucket = 0;                 // the next bucket to hand to the worker
  bool in_flight = false;                      // a synced, overlapped backward is running
  std::unique_ptr<TaskThread> worker;          // last: joined before the streams and buffers go

  Device device() const { return comm.device(); }

  // The groups of the parameters' devices, each with its side stream, and the worker serving them.
  // DeviceError when no parameter is on the caller's communicator's device.
  void make_groups() {
    std::vector<Device> devices = parameter_devices(params, group_of);
    if (devices.empty()) devices.push_back(device());  // no parameters: nothing to reduce
    if (std::find(devices.begin(), devices.end(), device()) == devices.end()) {
      const auto& [name, p] = params.front();
      MT_THROW(DeviceError, "DistributedDataParallel: parameter '", name, "' is on ",
               p->value.device(), " but rank ", comm.rank(), "'s communicator is on ", device(),
               " and no parameter is; move the module to ", device(),
               " before wrapping it, or make the communicator on one of its devices (",
               join_devices(devices), ")");
    }
    groups.reserve(devices.size());
    std::vector<const Stream*> sides;
    for (const Device& d : devices) {
      groups.emplace_back(d);
      sides.push_back(&groups.back().side);
    }
    if (groups.size() == 1) groups.front().comm = &comm;
    worker = make_comm_thread(sides);
  }

  // Collective over the caller's communicator, on the worker: a communicator per group, the
  // ranks' groups paired by position (Note [DDP over several devices]).
  void split_groups() {
    if (groups.size() == 1) return;
    for (Group& g : groups) {
      g.split = comm.split(/*color=*/0, /*key=*/comm.rank(), g.device);
      g.comm = g.split.get();
    }
  }

  void build_buckets() {
    const int n = static_cast<int>(params.size());
    bucket_of.assign(n, -1);
    int64_t bytes = 0;
    for (int i = n - 1; i >= 0; --i) {  // Note [DDP bucket order]
      const Tensor& v = params[i].second->value;
      const int64_t p_bytes = static_cast<int64_t>(v.nbytes());
      // A new bucket when this one would overflow (never splitting a parameter, so a parameter
      // larger than a bucket gets one of its own) or when the dtype or the device changes (one
      // flat buffer).
      const bool fits = !buckets.empty() && bytes + p_bytes <= options.bucket_bytes &&
                        buckets.back().dtype == v.dtype() && buckets.back().group == group_of[i];
      if (!fits) {
        buckets.emplace_back(group_of[i], v.dtype(), Event::create(v.device()));
        bytes = 0;
      }
      Bucket& b = buckets.back();
      b.params.push_back(i);
      b.numel += v.numel();
      bytes += p_bytes;
      bucket_of[i] = static_cast<int>(buckets.size()) - 1;
    }
    for (Bucket& b : buckets) {
      const Device d = groups[b.group].device;
      DeviceGuard guard(d);
      b.flat = Tensor::empty(Shape({b.numel}), b.dtype, d);
      if (options.reduce_dtype != b.dtype)
        b.narrow = Tensor::empty(Shape({b.numel}), options.reduce_dtype, d);
      bind_grads(b);
    }
  }

  // Note [DDP gradients as bucket views]: every gradient of `b` becomes a view of b.flat, keeping
  // what it held (zeros when it had none yet).
  void bind_grads(Bucket& b) {
    int64_t offset = 0;
    for (int i : b.params) {
      Parameter& p = *params[i].second;
      const int64_t numel = p.value.numel();
      Tensor view = b.flat.narrow(offset, numel).reshape(p.value.shape().dims());
      const bool keep = p.grad.defined() && p.grad.shape() == p.value.shape() &&
                        p.grad.dtype() == b.dtype && p.grad.device() == b.flat.device();
      if (keep)
        view.copy_(p.grad);
      else
        zero_(view);
      p.grad = view;
      offset += numel;
    }
  }

  // Whether `g`, the gradient of the parameter at `offset` in `b`, is still its view of b.flat.
  static bool is_bucket_view(const Bucket& b, const Tensor& g, int64_t offset) {
    return g.defined() && g.device() == b.flat.device() &&
           g.raw_data() == static_cast<const char*>(b.flat.raw_data()) +
                               offset * static_cast<int64_t>(dtype_size(b.dtype));
  }

  Tensor& values_of(Bucket& b) {
    if (!b.values.defined()) b.values = Tensor::empty(Shape({b.numel}), b.dtype, b.flat.device());
    return b.values;
  }

  void map_layers() {
    sequential = dynamic_cast<Sequential*>(module.get());
    if (sequential == nullptr) return;
    std::unordered_map<const Parameter*, int> index;
    for (int i = static_cast<int>(params.size()) - 1; i >= 0; --i) index[params[i].second] = i;
    layer_params.assign(sequential->size(), {});
    for (std::size_t l = 0; l < sequential->size(); ++l)
      for (auto& [name, p] : (*sequential)[l].named_parameters()) {
        auto it = index.find(p);
        if (it != index.end()) layer_params[l].push_back(it->second);
      }
    Impl* self = this;
    sequential->set_backward_hook([self](std::size_t layer) {
      if (self->in_flight) self->layer_done(layer);
    });
  }

  // A bucket's parameter values into its value buffer, and back.
  void pack_values(Bucket& b) {
    Tensor& flat = values_of(b);
    int64_t offset = 0;
    for (int i : b.params) {
      const Tensor& v = params[i].second->value;
      flat.narrow(offset, v.numel()).copy_(v.reshape({v.numel()}));
      offset += v.numel();
    }
  }
  void unpack_values(Bucket& b) {
    int64_t offset = 0;
    for (int i : b.params) {
      Tensor& v = params[i].second->value;
      v.reshape({v.numel()}).copy_(b.values.narrow(offset, v.numel()));
      offset += v.numel();
    }
  }

  // Rank 0's values into every rank's parameters, a bucket at a time. The value buffers go again
  // afterwards: only local SGD needs them later, and it makes them again.
  void broadcast_parameters() {
    for (Bucket& b : buckets) {
      DeviceGuard guard(groups[b.group].device);
      pack_values(b);
      groups[b.group].comm->broadcast(b.values, 0);
      unpack_values(b);
      b.values = Tensor();
    }
  }

  // Runs `task` (collectives) on the communication thread after the caller's streams' work so
  // far, and makes the caller's streams wait for it; rethrows the task's error.
  void run_on_worker(const std::function<void()>& task) {
    for (Group& g : groups) {
      DeviceGuard guard(g.device);
      g.done.record(current_stream(g.device));
    }
    worker->post([this, task] {
      for (Group& g : groups) g.side.wait_for(g.done);
      task();
      record_worker_done();
    });
    worker->finish();
    caller_waits_for_worker();
  }

  // On the worker: each side stream's work so far, marked for the caller.
  void record_worker_done() {
    for (Group& g : groups) g.done.record(g.side);
  }
  // On the caller's thread, after the worker has finished: its streams wait for that work.
  void caller_waits_for_worker() {
    for (Group& g : groups) {
      DeviceGuard guard(g.device);
      current_stream(g.device).wait_for(g.done);
    }
  }

  // Every rank must hold the same parameters; a mismatch would otherwise pair unrelated buffers
  // (or hang MPI on different sizes). Max of (count, numel) and of their negations gives every
  // rank the largest and smallest, so all ranks see a mismatch alike and throw together.
  void check_same_model() {
    DeviceGuard guard(device());
    int64_t total = 0;
    for (auto& [name, p] : params) total += p->value.numel();
    const double n = static_cast<double>(params.size()), t = static_cast<double>(total);
    const double nb = static_cast<double>(buckets.size()), ng = static_cast<double>(groups.size());
    Tensor meta =
        Tensor::from_vector(std::vector<double>{n, t, nb, ng, -n, -t, -nb, -ng}, {8}).to(device());
    comm.all_reduce(meta, ReduceOp::Max);
    const std::vector<double> m = meta.to_vector<double>();
    // First: a bucket never spans two devices, so other devices also mean other buckets.
    MT_CHECK_AS(ValueError, m[3] == -m[7],
                "DistributedDataParallel: the ranks spread the model over different numbers of "
                "devices: rank ",
                comm.rank(), " has its parameters on ", groups.size(), " (",
                join_devices(devices()), "), while the ranks range over ", -m[7], "..", m[3],
                "; give every rank the same stages on as many devices");
    MT_CHECK_AS(ValueError, m[0] == -m[4] && m[1] == -m[5] && m[2] == -m[6],
                "DistributedDataParallel: the ranks hold different models: rank ", comm.rank(),
                " has ", params.size(), " parameters of ", total, " elements in ", buckets.size(),
                " buckets, while the ranks range over ", -m[4], "..", m[0], " parameters, ", -m[5],
                "..", m[1], " elements and ", -m[6], "..", m[2],
                " buckets; build the same model with the same bucket_bytes on every rank");
    if (groups.size() > 1) check_same_groups();
  }

  // A module on several devices (every rank has as many, checked just before): the same number of
  // elements in group k on every rank, since the ranks pair group k with group k.
  void check_same_groups() {
    std::vector<double> v;
    std::vector<int64_t> numel(groups.size(), 0);
    for (std::size_t i = 0; i < params.size(); ++i)
      numel[group_of[i]] += params[i].second->value.numel();
    for (int64_t e : numel) v.push_back(static_cast<double>(e));
    const std::size_t k = v.size();
    for (std::size_t i = 0; i < k; ++i) v.push_back(-v[i]);
    Tensor meta = Tensor::from_vector(v, {static_cast<int64_t>(v.size())}).to(device());
    comm.all_reduce(meta, ReduceOp::Max);
    const std::vector<double> m = meta.to_vector<double>();
    std::vector<std::string> sizes;
    for (int64_t e : numel) sizes.push_back(std::to_string(e));
    for (std::size_t i = 0; i < k; ++i)
      MT_CHECK_AS(ValueError, m[i] == -m[k + i],
                  "DistributedDataParallel: the ranks split the model over their devices "
                  "differently: on rank ",
                  comm.rank(), " its devices ", join_devices(devices()), " hold ",
                  join(sizes, ", "), " elements, while device ", i, " of the ranks holds ",
                  -m[k + i], "..", m[i], "; give every rank the same stages on as many devices");
  }

  std::vector<Device> devices() const {
    std::vector<Device> out;
    for (const Group& g : groups) out.push_back(g.device);
    return out;
  }

  // Worker task: the bucket's gradients, averaged over the ranks, back into every parameter.
  void reduce_bucket(Bucket& b) {
    Group& group = groups[b.group];
    DeviceGuard guard(group.device);
    group.side.wait_for(b.ready);  // the caller's stream has produced these gradients
    int64_t offset = 0;
    for (int i : b.params) {  // Note [DDP gradients as bucket views]: only a replaced one is copied
      const Tensor& g = params[i].second->grad;  // allocated by launch()
      if (!is_bucket_view(b, g, offset))
        b.flat.narrow(offset, g.numel()).copy_(g.reshape({g.numel()}));
      offset += g.numel();
    }
    // Communicator::all_reduce dispatches native vs ring from the communicator's options.
    if (b.narrow.defined()) {
      // Summed in the narrow type, divided once widened: one rounding fewer than a narrow Avg.
      cast(b.narrow, b.flat);
      group.comm->all_reduce(b.narrow, ReduceOp::Sum);
      cast(b.flat, b.narrow);
      scale(b.flat, b.flat, 1.0 / group.comm->size());
    } else {
      group.comm->all_reduce(b.flat, ReduceOp::Avg);
    }
    offset = 0;
    for (int i : b.params) {
      Tensor& g = params[i].second->grad;
      if (!is_bucket_view(b, g, offset))
        g.reshape({g.numel()}).copy_(b.flat.narrow(offset, g.numel()));
      offset += g.numel();
    }
  }

  // On the caller's thread: the bucket's gradients are final on the caller's stream.
  void launch(std::size_t k) {
    Bucket& b = buckets[k];
    // Allocated here, on the caller's thread, so the worker never races the layers over a grad
    // that is still undefined (a parameter whose layer got no gradient this backward).
    for (int i : b.params) ensure_grad(*params[i].second);
    const Device d = groups[b.group].device;
    DeviceGuard guard(d);
    b.ready.record(current_stream(d));
    worker->post([this, &b] { reduce_bucket(b); });
  }

  void launch_ready() {
    while (next_bucket < buckets.size() && buckets[next_bucket].pending == 0) launch(next_bucket++);
  }

  void layer_done(std::size_t layer) {
    if (layer >= layer_params.size()) return;
    for (int i : layer_params[layer]) {
      if (ready[i]) continue;
      ready[i] = true;
      --buckets[bucket_of[i]].pending;
    }
    launch_ready();
  }

  void begin_sync(bool overlap) {
    ready.assign(params.size(), false);
    for (Bucket& b : buckets) b.pending = static_cast<int>(b.params.size());
    next_bucket = 0;
    in_flight = overlap;
  }

  // After the module's backward: every bucket not yet launched, in order; then wait for all.
  void finish_sync() {
    in_flight = false;
    for (Bucket& b : buckets) b.pending = 0;
    launch_ready();
    worker->post([this] { record_worker_done(); });
    worker->finish();           // rethrows a CommError of the worker
    caller_waits_for_worker();  // the optimizer reads the gradients next
  }
};

DistributedDataParallel::DistributedDataParallel(std::unique_ptr<Module> module, Communicator& comm,
                                                 DdpOptions options) {
  MT_CHECK_AS(ValueError, module != nullptr, "DistributedDataParallel: the module is null");
  MT_CHECK_AS(ValueError, options.bucket_bytes >= 1,
              "DistributedDataParallel: bucket_bytes must be at least 1, got ",
              options.bucket_bytes, "; torch's default is 25 MiB (", int64_t(25) << 20, ")");
  impl_ = std::make_unique<Impl>(std::move(module), comm, options);
  Impl& im = *impl_;
  im.params = im.module->named_parameters();
  im.make_groups();
  im.build_buckets();
  // The caller's initialisation of the values is done before the worker copies them.
  im.run_on_worker([&im] {
    im.check_same_model();
    im.split_groups();
    im.broadcast_parameters();
  });
  im.map_layers();
}

DistributedDataParallel::~DistributedDataParallel() {
  if (impl_ && impl_->sequential) impl_->sequential->set_backward_hook(nullptr);
}

Tensor DistributedDataParallel::forward(const Tensor& x) { return impl_->module->forward(x); }

Tensor DistributedDataParallel::backward(const Tensor& grad_output) {
  Impl& im = *impl_;
  if (!sync_) return im.module->backward(grad_output);  // no_sync: local accumulation only
  im.begin_sync(im.options.overlap && im.sequential != nullptr);
  Tensor dx;
  try {
    dx = im.module->backward(grad_output);
  } catch (...) {
    // Buckets already handed over may still be in the worker; they use this object's buffers,
    // so wait for them (their own errors are dropped: the module's error is the cause).
    im.in_flight = false;
    im.worker->wait_idle();
    throw;
  }
  im.finish_sync();
  return dx;
}

void DistributedDataParallel::average_parameters() {
  Impl& im = *impl_;
  im.run_on_worker([&im] {
    for (Impl::Bucket& b : im.buckets) {
      Impl::Group& g = im.groups[b.group];
      DeviceGuard guard(g.device);
      im.pack_values(b);
      g.comm->all_reduce(b.values, ReduceOp::Avg);
      im.unpack_values(b);
    }
  });
}

void DistributedDataParallel::average_tensors(std::vector<Tensor>& tensors) {
  Impl& im = *impl_;
  for (std::size_t i = 0; i < tensors.size(); ++i)
    MT_CHECK_AS(DeviceError, tensors[i].device() == im.device(),
                "DistributedDataParallel::average_tensors: tensor ", i, " is on ",
                tensors[i].device(), " but rank ", im.comm.rank(), "'s communicator is on ",
                im.device(), "; move it there first");
  // Runs of consecutive tensors of one dtype, each up to bucket_bytes (a larger tensor alone):
  // the same rule as the gradient buckets, so every rank groups alike.
  im.run_on_worker([&im, &tensors] {
    DeviceGuard guard(im.device());
    std::size_t first = 0;
    while (first < tensors.size()) {
      const DType dtype = tensors[first].dtype();
      std::size_t last = first;
      int64_t bytes = static_cast<int64_t>(tensors[first].nbytes()), numel = tensors[first].numel();
      while (last + 1 < tensors.size() && tensors[last + 1].dtype() == dtype &&
             bytes + static_cast<int64_t>(tensors[last + 1].nbytes()) <= im.options.bucket_bytes) {
        ++last;
        bytes += static_cast<int64_t>(tensors[last].nbytes());
        numel += tensors[last].numel();
      }
      Tensor flat = Tensor::empty(Shape({numel}), dtype, im.device());
      int64_t offset = 0;
      for (std::size_t i = first; i <= last; ++i) {
        flat.narrow(offset, tensors[i].numel()).copy_(tensors[i].reshape({tensors[i].numel()}));
        offset += tensors[i].numel();
      }
      im.comm.all_reduce(flat, ReduceOp::Avg);
      offset = 0;
      for (std::size_t i = first; i <= last; ++i) {
        tensors[i].reshape({tensors[i].numel()}).copy_(flat.narrow(offset, tensors[i].numel()));
        offset += tensors[i].numel();
      }
      first = last + 1;
    }
  });
}

NamedParameters DistributedDataParallel::named_parameters(const std::string& prefix) {
  return impl_->module->named_parameters(prefix);
}

void DistributedDataParallel::to(Device device) {
  const Impl& im = *impl_;
  if (im.groups.size() == 1 && device == im.device()) return;  // already there
  MT_THROW(DeviceError, "DistributedDataParallel::to(", device, "): rank ", im.comm.rank(),
           " stays on its communicators' devices (", join_devices(im.devices()),
           "); build the module on the device wanted and a communicator for it instead");
}

void DistributedDataParallel::train(bool on) {
  Module::train(on);
  impl_->module->train(on);
}

void DistributedDataParallel::set_needs_input_grad(bool on) {
  Module::set_needs_input_grad(on);
  impl_->module->set_needs_input_grad(on);
}

std::string DistributedDataParallel::repr() const {
  const Impl& im = *impl_;
  std::ostringstream s;
  s << "DistributedDataParallel(rank=" << im.comm.rank() << ", world_size=" << im.comm.size()
    << ", backend=" << im.comm.backend() << (im.groups.size() == 1 ? ", device=" : ", devices=")
    << join_devices(im.devices()) << ", buckets=" << im.buckets.size()
    << ", bucket_bytes=" << bytes_str(im.options.bucket_bytes)
    << ", overlap=" << (im.options.overlap ? "True" : "False") << ")(\n  (module): ";
  for (char c : im.module->repr()) {
    s << c;
    if (c == '\n') s << "  ";
  }
  s << "\n)";
  return s.str();
}

std::vector<std::vector<std::string>> DistributedDataParallel::bucket_names() const {
  std::vector<std::vector<std::string>> out;
  for (const auto& b : impl_->buckets) {
    out.emplace_back();
    for (int i : b.params) out.back().push_back(impl_->params[i].first);
  }
  return out;
}

std::vector<Device> DistributedDataParallel::devices() const { return impl_->devices(); }

Module& DistributedDataParallel::module() noexcept { return *impl_->module; }

Communicator& DistributedDataParallel::communicator() noexcept { return impl_->comm; }

}  // namespace minitrain
