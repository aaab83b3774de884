// The Reduction names: parsing and printing them, and the check of the losses without batchmean.

#include "kernels/loss/reduction.h"

#include "core/error.h"

namespace minitrain {

Reduction parse_reduction(const std::string& name) {
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None, Reduction::BatchMean})
    if (name == reduction_name(r)) return r;
  MT_THROW(ValueError, "unknown reduction '", name,
           "'; valid names: mean, sum, none, batchmean (kl_div only)");
}

void check_not_batchmean(const char* op, Reduction r) {
  MT_CHECK_AS(ValueError, r != Reduction::BatchMean, op,
              ": reduction 'batchmean' is kl_div's (torch.nn.KLDivLoss); use mean, sum or none");
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
