#include "train/local_sgd_sync.h"

#include <string>
#include <utility>

#include "core/error.h"

namespace minitrain {

LocalSgdSync::LocalSgdSync(DistributedDataParallel& model, Optimizer& optimizer, int64_t sync_every,
                           bool moments)
    : DdpSync(model), optimizer_(optimizer), sync_every_(sync_every), moments_(moments) {
  MT_CHECK_AS(ValueError, sync_every >= 1, "LocalSgdSync: sync_every must be >= 1, got ",
              sync_every);
}

// Every backward stays local: the ranks meet only in average().
void LocalSgdSync::before_backward(bool) { model_.set_require_gradient_sync(false); }

// The gradients were not all-reduced, so an overflow on one rank is not one on all: the ranks
// agree on skipping by a sum of their flags.
bool LocalSgdSync::any_rank_overflowed(bool found_inf) {
  std::vector<double> flag{found_inf ? 1.0 : 0.0};
  sum_over_ranks(flag);
  return flag[0] > 0;
}

bool LocalSgdSync::is_sync_point(const StepEnd& end) const {
  // An early stop follows an evaluation, itself a sync point; a stop request is a checkpoint's.
  return end.step % sync_every_ == 0 || end.last || end.checkpoint || end.evaluation;
}

void LocalSgdSync::after_update(const StepEnd& end) {
  if (is_sync_point(end)) average(end.checkpoint);
}

void LocalSgdSync::average(bool checkpoint) {
  model_.average_parameters();
  if (!moments_ && !checkpoint) return;
  // state_tensors() are copies on the host: averaged on the communicator's device, then loaded
  // back with the optimizer's own scalars (its lr and step counts stay).
  const Device device = comm_.device();
  auto named = optimizer_.state_tensors();
  std::vector<Tensor> values;
  for (auto& [name, t] : named) values.push_back(t.to(device));
  model_.average_tensors(values);
  for (std::size_t i = 0; i < named.size(); ++i) named[i].second = values[i];
  optimizer_.load_state(named, optimizer_.state_scalars());
}

// After the last averaging every rank must hold one model (the saved file is rank 0's): per
// parameter the sum of its values and of their squares, whose maximum and minimum over the ranks
// must be equal.
void LocalSgdSync::after_run() {
  std::vector<double> v;
  for (auto& [name, p] : model_.named_parameters()) {
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
  Tensor t = Tensor::from_vector(v, {static_cast<int64_t>(v.size())}, comm_.device());
  comm_.all_reduce(t, ReduceOp::Max);
  const std::vector<double> m = t.to_vector<double>();
  for (std::size_t i = 0; i < n; ++i)
    MT_CHECK(m[i] == -m[n + i],
             "local SGD: after the last averaging the ranks' parameters differ "
             "(rank ",
             comm_.rank(), ", checksum ", i, ": ", -m[n + i], " .. ", m[i], ")");
}

}  // namespace minitrain
