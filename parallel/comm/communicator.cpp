// Communicator: the reduce-op names and the all_reduce dispatch between the backend's own
// collective and minitrain's ring (parallel/comm/ring.h).

#include "parallel/comm/communicator.h"

#include <atomic>

#include "core/error.h"
#include "parallel/comm/ring.h"

namespace minitrain {
namespace {
std::atomic<bool> g_lost_peer{false};
}  // namespace

void record_lost_peer() noexcept { g_lost_peer.store(true); }
bool lost_a_peer() noexcept { return g_lost_peer.load(); }

ReduceOp parse_reduce_op(const std::string& name) {
  if (name == "sum") return ReduceOp::Sum;
  if (name == "avg") return ReduceOp::Avg;
  if (name == "max") return ReduceOp::Max;
  MT_THROW(ValueError, "unknown reduce op '", name, "'; expected sum, avg or max");
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Avg:
      return "avg";
    case ReduceOp::Max:
      return "max";
  }
  return "?";
}

void Communicator::all_reduce(Tensor& t, ReduceOp op) {
  ++all_reduce_calls_;
  all_reduce_bytes_ += static_cast<int64_t>(t.nbytes());
  switch (options_.all_reduce) {
    case AllReduceAlgorithm::Native:
      return native_all_reduce(t, op);
    case AllReduceAlgorithm::Ring:
      return ring_all_reduce(*this, t, op);
  }
}

std::unique_ptr<Communicator> Communicator::split(int color, int key, Device device) {
  MT_CHECK_AS(ValueError, color >= 0 || color == kNoColor, "split: rank ", rank(), " passed color ",
              color, "; a color is a non-negative integer, or Communicator::kNoColor (", kNoColor,
              ") for a rank that joins no group");
  check_available(device);
  return split_group(color, key, device);
}

void Communicator::check_peer(const char* op, int peer, const char* role) const {
  MT_CHECK_AS(ValueError, peer >= 0 && peer < size(), op, ": ", role, " ", peer,
              " is not a rank of this group of ", size(), " (rank ", rank(), ")");
}

void Communicator::check_chunks(const char* op, const Tensor& whole, const char* whole_name,
                                const Tensor& part, const char* part_name) const {
  const int64_t m = part.numel();
  MT_CHECK_AS(ShapeError, whole.numel() == size() * m, op, ": `", whole_name, "` has ",
              whole.numel(), " elements but needs size() * ", part_name, ".numel() = ", size(),
              " * ", m, " = ", size() * m, " (", whole_name, " ", whole.shape(), ", ", part_name,
              " ", part.shape(), ")");
  MT_CHECK_AS(DTypeError, whole.dtype() == part.dtype(), op, ": ", whole_name, " is ",
              whole.dtype(), " but ", part_name, " is ", part.dtype());
}

}  // namespace minitrain
