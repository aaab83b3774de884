#include "train/ddp_sync.h"

namespace minitrain {

DdpSync::DdpSync(DistributedDataParallel& model) : model_(model), comm_(model.communicator()) {}

// Only the step's last batch all-reduces; the others accumulate locally (torch's no_sync), so a
// step's gradients are reduced once.
void DdpSync::before_backward(bool last_batch) { model_.set_require_gradient_sync(last_batch); }

// The mean of the ranks' batch means is the global batch's mean: every rank's batch has the same
// number of rows. One all-reduce carries the loss and the stop request: the mean of the requests
// is > 0 when any rank was signalled, so every rank stops after the same step.
double DdpSync::reduce_loss(double loss, bool& stop) {
  Tensor t = Tensor::from_vector(std::vector<double>{loss, stop ? 1.0 : 0.0}, {2}, comm_.device());
  comm_.all_reduce(t, ReduceOp::Avg);
  const std::vector<double> mean = t.to_vector<double>();
  stop = mean[1] > 0;
  return mean[0];
}

void DdpSync::sum_over_ranks(std::vector<double>& values) {
  Tensor t = Tensor::from_vector(values, {static_cast<int64_t>(values.size())}, comm_.device());
  comm_.all_reduce(t, ReduceOp::Sum);
  values = t.to_vector<double>();
}

}  // namespace minitrain
