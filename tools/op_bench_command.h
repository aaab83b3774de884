#pragma once
// `minitrain bench op [NAME [VARIANT...]] [--size N ...] [--device D]`: lists the ops of the
// op-variant registry (kernels/op_bench/op_registry.h) with their variants, or verifies each
// variant of op NAME against its CPU reference and then times it, reporting time, GB/s and the
// share of a copy's bandwidth measured in the same run.

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace minitrain::cli {

struct OpBenchRequest {
  std::vector<std::string> words;  ///< what followed "op": [NAME [VARIANT...]]
  std::vector<int64_t> sizes;      ///< elements of the main operand; empty: a default per device
  std::string device = "auto";
  int runs = 20;  ///< timed calls per variant and size (at least 0.2 s of them on the CPU)
};

/// Lists (no NAME) or verifies and times. 0 when every variant verified, 1 when one was wrong
/// (it is reported and not timed). ValueError for an unknown op or variant or a size below 1,
/// DeviceError for an unavailable device.
int run_op_bench(const OpBenchRequest& request, std::ostream& out, std::ostream& err);

}  // namespace minitrain::cli
