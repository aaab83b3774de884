// Layer-split model parallelism with GPipe's schedule (Huang et al., 2019). The layers of a
// Sequential are cut into S contiguous stages; each stage has its own worker thread and device.
// The batch is cut into M micro-batches: forward pushes micro-batch m into stage s as soon as
// stage s-1 has handed it over, so the stages overlap and only the fill and drain of the pipe
// idle, a share (S-1)/(M+S-1) of the schedule (the bubble). Each stage keeps only the INPUT of
// each micro-batch; backward re-runs the stage's forward on it (re-materialisation) so the layers'
// caches hold that micro-batch, then runs the stage's backward. Gradients accumulate (+=) over
// the micro-batches, so the sum is the whole batch's gradient up to float32 summation order.

#include "parallel/model_parallel.h"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/stream.h"
#include "parallel/task_thread.h"

namespace minitrain {

namespace {

// One forward or backward pass: the caller waits until every micro-batch has left the pipe
// (finished, or dropped after a failure) and then rethrows the first exception of any stage.
struct Pass {
  std::mutex mu;
  std::condition_variable cv;
  int remaining = 0;
  std::exception_ptr error;
  bool failed = false;

  bool has_failed() {
    std::lock_guard<std::mutex> lock(mu);
    return failed;
  }
  void fail(std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(mu);
    if (!failed) error = std::move(e);
    failed = true;
  }
  void finish_one() {
    // Notify under the lock: the waiter owns this Pass and destroys it as soon as it sees
    // remaining == 0, which it can do between an unlock and a notify that follows it.
    std::lock_guard<std::mutex> lock(mu);
    --remaining;
    cv.notify_all();
  }
  void wait_and_rethrow() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [this] { return remaining == 0; });
    if (error) std::rethrow_exception(error);
  }
};

// Rows of micro-batch m when `rows` are cut into `m_total` parts as evenly as possible (the first
// rows % m_total parts get one more row); parts may be empty when rows < m_total.
std::pair<int64_t, int64_t> micro_batch_rows(int64_t rows, int m_total, int m) {
  const int64_t base = rows / m_total, extra = rows % m_total;
  const int64_t start = m * base + std::min<int64_t>(m, extra);
  return {start, base + (m < extra ? 1 : 0)};
}

// Greedy contiguous partition of `weights` into `parts` non-empty groups minimising the largest
// group (the classic linear-partition DP; n and parts are small). Returns each group's first index.
std::vector<int> balanced_starts(const std::vector<int64_t>& weights, int parts) {
  const int n = static_cast<int>(weights.size());
  std::vector<int64_t> prefix(n + 1, 0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + weights[i];
  const int64_t inf = std::numeric_limits<int64_t>::max();
  // best[k][i]: the smallest possible largest group when the first i units form k groups.
  std::vector<std::vector<int64_t>> best(parts + 1, std::vector<int64_t>(n + 1, inf));
  std::vector<std::vector<int>> cut(parts + 1, std::vector<int>(n + 1, 0));
  best[0][0] = 0;
  for (int k = 1; k <= parts; ++k)
    for (int i = k; i <= n; ++i)
      for (int j = k - 1; j < i; ++j) {  // the last group is units [j, i)
        if (best[k - 1][j] == inf) continue;
        const int64_t cost = std::max(best[k - 1][j], prefix[i] - prefix[j]);
        if (cost < best[k][i]) {  // strict: ties keep the earliest cut
          best[k][i] = cost;
          cut[k][i] = j;
        }
      }
  std::vector<int> starts(parts);
  for (int k = parts, i = n; k >= 1; --k) {
    starts[k - 1] = cut[k][i];
    i = cut[k][i];
  }
  return starts;
}

}  // namespace

struct ModelParallel::Impl {
  int stages = 0;
  int micro_batches = 0;
  std::vector<std::vector<std::unique_ptr<Module>>> layers;  // per stage
  std::vector<int> starts;                                   // first global layer index per stage
  std::vector<Device> devices;                               // per stage
  std::vector<std::vector<Tensor>> inputs;                   // [stage][micro-batch], training only
  int64_t forward_rows = -1;                                 // rows of the last training forward
  // One TaskThread per stage: micro-batches reach a stage in the order the previous stage finished
  // them, so its FIFO keeps them in order. Tasks catch their own exceptions (see Pass), so a
  // stage's thread never holds an error or skips a task.
  std::vector<std::unique_ptr<TaskThread>> workers;  // last: stopped first on destruction

  // The stage workers run on their own streams. Whatever the caller queued on its streams for
  // these devices (the input, zero_grad's fills, the last optimizer step's updates of the stages'
  // weights) must be done before a worker reads or accumulates into those tensors.
  void wait_for_caller(Device input_device) const {
    synchronize(input_device);
    for (const Device& d : devices) synchronize(d);
  }

  Tensor stage_forward(int s, Tensor h) {
    for (auto& layer : layers[s]) h = layer->forward(h);
    return h;
  }
  Tensor stage_backward(int s, Tensor g) {
    for (auto it = layers[s].rbegin(); it != layers[s].rend(); ++it) {
      if (!g.defined()) break;  // the layers before skip dL/dx and have no parameters
      g = (*it)->backward(g);
    }
    return g;
  }
};

ModelParallel::ModelParallel(std::unique_ptr<Sequential> model, int stages, int micro_batches,
                             std::vector<Device> devices, std::vector<int> boundaries)
    : impl_(std::make_unique<Impl>()) {
  MT_CHECK_AS(ValueError, model != nullptr, "ModelParallel: the model is null");
  const int n_layers = static_cast<int>(model->size());
  MT_CHECK_AS(ValueError, stages >= 1 && stages <= n_layers, "ModelParallel: stages = ", stages,
              " must be between 1 and the model's number of layers (", n_layers,
              "); use fewer stages");
  MT_CHECK_AS(ValueError, micro_batches >= 1, "ModelParallel: micro_batches = ", micro_batches,
              " must be at least 1");
  MT_CHECK_AS(ValueError, !devices.empty(),
              "ModelParallel: devices is empty; give at least one (stage s runs on "
              "devices[s % devices.size()])");

  std::vector<int> starts;
  if (!boundaries.empty()) {
    MT_CHECK_AS(ValueError, static_cast<int>(boundaries.size()) == stages - 1,
                "ModelParallel: boundaries has ", boundaries.size(), " entries but ", stages,
                " stages need ", stages - 1, " (the first layer index of stages 1..", stages - 1,
                ")");
    starts.push_back(0);
    for (std::size_t i = 0; i < boundaries.size(); ++i) {
      const int b = boundaries[i];
      MT_CHECK_AS(ValueError, b > starts.back() && b < n_layers, "ModelParallel: boundaries[", i,
                  "] = ", b, " must be greater than ", starts.back(), " and less than ", n_layers,
                  " (the number of layers) so that every stage has a layer");
      starts.push_back(b);
    }
  } else if (stages > 1) {
    // Units: a layer with parameters and the parameter-free layers that follow it (an activation
    // stays with its Linear); single layers when there are fewer such units than stages.
    std::vector<int> unit_start;
    std::vector<int64_t> weight;
    for (int i = 0; i < n_layers; ++i) {
      const int64_t p = (*model)[i].num_parameters();
      if (i == 0 || p > 0) {
        unit_start.push_back(i);
        weight.push_back(p);
      } else {
        weight.back() += p;
      }
    }
    if (static_cast<int>(unit_start.size()) < stages) {
      unit_start.clear();
      weight.clear();
      for (int i = 0; i < n_layers; ++i) {
        unit_start.push_back(i);
        weight.push_back((*model)[i].num_parameters());
      }
    }
    for (int u : balanced_starts(weight, stages)) starts.push_back(unit_start[u]);
  } else {
    starts.push_back(0);
  }

  Impl& im = *impl_;
  im.stages = stages;
  im.micro_batches = micro_batches;
  im.starts = starts;
  training_ = model->is_training();
  needs_input_grad_ = model->needs_input_grad();
  std::vector<std::unique_ptr<Module>> all = model->release_layers();
  im.layers.resize(stages);
  for (int s = 0; s < stages; ++s) {
    const Device d = devices[static_cast<std::size_t>(s) % devices.size()];
    im.devices.push_back(d);
    const int end = s + 1 < stages ? starts[s + 1] : n_layers;
    for (int i = starts[s]; i < end; ++i) {
      all[i]->to(d);
      im.layers[s].push_back(std::move(all[i]));
    }
  }
  im.inputs.assign(stages, std::vector<Tensor>(micro_batches));
  for (int s = 0; s < stages; ++s) im.workers.push_back(std::make_unique<TaskThread>());
}

// The workers are idle (passes wait), then joined. First, the caller's queued work on the stages'
// devices is waited for: the last optimizer step reads the stages' weights and gradients on the
// caller's streams, and they are freed with this object, into caches of stage streams that end
// with the workers (Note [streams and the caching allocator]: a tensor used on another stream
// is synchronised by its user before it is freed).
ModelParallel::~ModelParallel() {
  for (const Device& d : impl_->devices) {
    try {
      synchronize(d);
    } catch (const std::exception&) {
      // A device that faulted has nothing left to wait for; its error was reported where it rose.
    }
  }
}

// Sequential's rule across the stages: layer i computes dL/dx when the model's input needs it or
// a layer before i has parameters. Set on the caller's thread before a pass starts.
static void propagate_input_grad(std::vector<std::vector<std::unique_ptr<Module>>>& layers,
                                 bool needs_input_grad) {
  bool needed = needs_input_grad;
  for (auto& stage : layers)
    for (auto& layer : stage) {
      layer->set_needs_input_grad(needed);
      if (!needed && layer->num_parameters() > 0) needed = true;
    }
}

Tensor ModelParallel::forward(const Tensor& x) {
  Impl& im = *impl_;
  MT_CHECK_AS(ShapeError, x.defined() && x.ndim() >= 1 && x.size(0) > 0,
              "ModelParallel::forward: the input needs a non-empty batch dimension (rows to cut "
              "into micro-batches)");
  propagate_input_grad(im.layers, needs_input_grad_);
  const int64_t rows = x.size(0);
  const int S = im.stages, M = im.micro_batches;
  for (auto& per_stage : im.inputs) std::fill(per_stage.begin(), per_stage.end(), Tensor());
  im.forward_rows = -1;
  im.wait_for_caller(x.device());

  std::vector<Tensor> outputs(M);
  Pass pass;
  std::function<void(int, int, Tensor)> run = [&](int s, int m, Tensor h) {
    if (!pass.has_failed()) {
      try {
        const Device d = im.devices[s];
        DeviceGuard guard(d);
        h = h.to(d);  // stage 0: the caller's rows; later stages: copied by the previous one
        synchronize(d);
        if (training_) im.inputs[s][m] = h;
        Tensor y = im.stage_forward(s, h);
        if (s + 1 < S) {
          const Device next = im.devices[s + 1];
          Tensor moved = y.to(next);  // peer copy between GPUs, host copy otherwise
          synchronize(d);
          synchronize(next);
          im.workers[s + 1]->post([&run, s, m, moved] { run(s + 1, m, moved); });
          return;
        }
        synchronize(d);
        outputs[m] = y;
      } catch (...) {
        pass.fail(std::current_exception());
      }
    }
    pass.finish_one();
  };

  std::vector<int> active;
  for (int m = 0; m < M; ++m)
    if (micro_batch_rows(rows, M, m).second > 0) active.push_back(m);
  pass.remaining = static_cast<int>(active.size());
  for (int m : active) {
    const auto [start, len] = micro_batch_rows(rows, M, m);
    Tensor part = x.narrow(start, len);
    im.workers[0]->post([&run, m, part] { run(0, m, part); });
  }
  pass.wait_and_rethrow();

  // Concatenate the last stage's outputs in row order, on the last stage's device.
  std::vector<int64_t> dims = outputs[active.front()].shape().dims();
  dims[0] = rows;
  const Tensor& first = outputs[active.front()];
  Tensor out = Tensor::empty(Shape(dims), first.dtype(), im.devices[S - 1]);
  for (int m : active)
    out.narrow(micro_batch_rows(rows, M, m).first, outputs[m].size(0)).copy_(outputs[m]);
  if (training_) im.forward_rows = rows;
  return out;
}

Tensor ModelParallel::backward(const Tensor& grad_output) {
  Impl& im = *impl_;
  MT_CHECK(im.forward_rows >= 0,
           "ModelParallel::backward: no training-mode forward to go back through (call forward "
           "in training mode first; each forward allows one backward)");
  MT_CHECK_AS(
      ShapeError,
      grad_output.defined() && grad_output.ndim() >= 1 && grad_output.size(0) == im.forward_rows,
      "ModelParallel::backward: grad_output must have the forward's ", im.forward_rows, " rows");
  const int64_t rows = im.forward_rows;
  const int S = im.stages, M = im.micro_batches;
  im.wait_for_caller(grad_output.device());

  std::vector<Tensor> dxs(M);
  Pass pass;
  std::function<void(int, int, Tensor)> run = [&](int s, int m, Tensor g) {
    if (!pass.has_failed()) {
      try {
        const Device d = im.devices[s];
        DeviceGuard guard(d);
        g = g.to(d);
        synchronize(d);
        // Re-materialisation: recompute this stage's forward for micro-batch m so that the
        // layers' caches hold it, then go back through the stage.
        im.stage_forward(s, im.inputs[s][m]);
        Tensor dx = im.stage_backward(s, g);
        im.inputs[s][m] = Tensor();  // done with this micro-batch on this stage
        if (s > 0 && dx.defined()) {
          const Device prev = im.devices[s - 1];
          Tensor moved = dx.to(prev);
          synchronize(d);
          synchronize(prev);
          im.workers[s - 1]->post([&run, s, m, moved] { run(s - 1, m, moved); });
          return;
        }
        synchronize(d);
        if (s == 0) dxs[m] = dx;
      } catch (...) {
        pass.fail(std::current_exception());
      }
    }
    pass.finish_one();
  };

  std::vector<int> active;
  for (int m = M - 1; m >= 0; --m)  // last in, first back: as GPipe drains the pipe
    if (micro_batch_rows(rows, M, m).second > 0) active.push_back(m);
  pass.remaining = static_cast<int>(active.size());
  for (int m : active) {
    const auto [start, len] = micro_batch_rows(rows, M, m);
    Tensor part = grad_output.narrow(start, len);
    im.workers[S - 1]->post([&run, S, m, part] { run(S - 1, m, part); });
  }
  im.forward_rows = -1;
  pass.wait_and_rethrow();

  if (!dxs[active.front()].defined()) return Tensor();  // the model skips dL/dx
  std::vector<int64_t> dims = dxs[active.front()].shape().dims();
  dims[0] = rows;
  Tensor dx = Tensor::empty(Shape(dims), dxs[active.front()].dtype(), im.devices[0]);
  for (int m : active) dx.narrow(micro_batch_rows(rows, M, m).first, dxs[m].size(0)).copy_(dxs[m]);
  return dx;
}

NamedParameters ModelParallel::named_parameters(const std::string& prefix) {
  NamedParameters out;
  for (int s = 0; s < impl_->stages; ++s)
    for (std::size_t j = 0; j < impl_->layers[s].size(); ++j) {
      const int index = impl_->starts[s] + static_cast<int>(j);
      NamedParameters child =
          impl_->layers[s][j]->named_parameters(prefix + std::to_string(index) + ".");
      out.insert(out.end(), child.begin(), child.end());
    }
  return out;
}

void ModelParallel::to(Device device) {
  MT_THROW(DeviceError, "ModelParallel::to(", device.str(),
           "): the stages stay on their devices; build the ModelParallel with the devices wanted");
}

void ModelParallel::train(bool on) {
  training_ = on;
  for (auto& stage : impl_->layers)
    for (auto& layer : stage) layer->train(on);
}

std::string ModelParallel::repr() const {
  std::string s = "ModelParallel(stages=" + std::to_string(impl_->stages) +
                  ", micro_batches=" + std::to_string(impl_->micro_batches) + "\n";
  for (int st = 0; st < impl_->stages; ++st) {
    s += "  (stage " + std::to_string(st) + " on " + impl_->devices[st].str() + "):\n";
    for (std::size_t j = 0; j < impl_->layers[st].size(); ++j)
      s += "    (" + std::to_string(impl_->starts[st] + static_cast<int>(j)) +
           "): " + impl_->layers[st][j]->repr() + "\n";
  }
  return s + ")";
}

int ModelParallel::stages() const noexcept { return impl_->stages; }
int ModelParallel::micro_batches() const noexcept { return impl_->micro_batches; }

double ModelParallel::bubble_fraction() const noexcept {
  const double S = impl_->stages, M = impl_->micro_batches;
  return (S - 1) / (M + S - 1);
}

std::vector<int> ModelParallel::stage_starts() const { return impl_->starts; }

Device ModelParallel::stage_device(int stage) const {
  MT_CHECK_AS(ValueError, stage >= 0 && stage < impl_->stages,
              "ModelParallel::stage_device: stage ", stage, " is out of range [0, ", impl_->stages,
              ")");
  return impl_->devices[stage];
}

}  // namespace minitrain
