// The Reduction names: parsing and printing them, the divisor each one gives a sum, and the check
// of a loss without batchmean.

#include "kernels/loss/reduction.h"

#include "core/error.h"
#include "core/shape.h"

namespace minitrain {

Reduction parse_reduction(const std::string& name) {
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None, Reduction::BatchMean})
    if (name == reduction_name(r)) return r;
  MT_THROW(ValueError, "unknown reduction '", name, "'; valid names: mean, sum, none, batchmean");
}

double reduction_divisor(Reduction r, const Shape& pred_shape) {
  if (r == Reduction::Mean) return double(pred_shape.numel());
  if (r == Reduction::BatchMean && pred_shape.ndim() > 0) return double(pred_shape[0]);
  return 1.0;
}

void check_not_batchmean(const char* op, Reduction r) {
  MT_CHECK_AS(ValueError, r != Reduction::BatchMean, op,
              ": reduction 'batchmean' (the sum over the first extent) is for elementwise losses; "
              "use mean, sum or none");
}

const char* reduction_name(Reduction r) {
  switch (r) {
    case Reduction::Mean:
      return "mean";
    case Reduction::Sum:
      return "sum";
    case Reduction::None:
      return "none";
    case Reduction::BatchMean:
      return "batchmean";
  }
  return "unknown";
}

}  // namespace minitrain
