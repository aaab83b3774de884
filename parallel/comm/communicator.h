#pragma once
// A group of ranks that exchange tensors: the collectives of NCCL/MPI, over several backends.
// Every rank calls the same collectives in the same order with tensors of the same shape and
// dtype on its own device (Communicator::device()). Calls are blocking from the caller's point of
// view (on a GPU: enqueued on the caller's current stream and complete in stream order).
//
// Note [collective timeouts]: every blocking wait has a deadline (CommOptions::timeout). A peer
// that never arrives turns into CommError naming the operation, this rank and the peer waited on
// ("all_reduce: rank 2 waited 5.0 s for rank 3 (send/recv step 1)"), never a hang.
//
// Note [splitting a communicator]: split(color, key, device) is MPI_Comm_split's rule on every
// backend: the ranks that pass the same color form a new group, ranked by key and then by their
// rank here, and each member chooses the device its tensors live on in the new group. That is how
// the hybrid (DistributedDataParallel over a pipeline whose stages sit on several GPUs) gets one
// communicator per stage: stage s of every rank exchanges with stage s of the others, on stage
// s's device. A split communicator is independent of its parent (either may be destroyed first)
// and has the parent's CommOptions.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"

namespace minitrain {

enum class ReduceOp { Sum, Avg, Max };
ReduceOp parse_reduce_op(const std::string& name);  ///< "sum" | "avg" | "max"; ValueError else
const char* reduce_op_name(ReduceOp op);

/// How all_reduce is carried out: the backend's own collective (ncclAllReduce, MPI_Allreduce, the
/// threads backend's shared-memory reduction) or minitrain's ring over send/recv
/// (parallel/comm/ring.h).
enum class AllReduceAlgorithm { Native, Ring };

struct CommOptions {
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  AllReduceAlgorithm all_reduce = AllReduceAlgorithm::Native;
};

/// Process-wide: a communicator of this process gave up on a peer (an operation timed out or failed
/// with an error from the transport), so the ranks no longer agree on what comes next and the peer
/// may be stopped or dead. A process that then ends must not wait for its peers on the way out
/// (MpiRuntime::leave_job_after_failure). Set by the backends when they throw such a CommError.
void record_lost_peer() noexcept;
bool lost_a_peer() noexcept;

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  virtual Device device() const noexcept = 0;  ///< where this rank's tensors live
  virtual std::string backend() const = 0;     ///< "threads", "nccl", "mpi"
  const CommOptions& options() const noexcept { return options_; }

  /// In place: every rank ends with op over all ranks' `t` (Avg = Sum / size). Dispatches on
  /// options().all_reduce to native_all_reduce or ring_all_reduce (parallel/comm/ring.h).
  void all_reduce(Tensor& t, ReduceOp op = ReduceOp::Sum);
  /// all_reduce calls made through this communicator and the bytes of their tensors (what the
  /// caller reduced, not what the algorithm sent): how much a mode communicates, for tests and
  /// measurements (local SGD against DDP).
  int64_t all_reduce_calls() const noexcept { return all_reduce_calls_.load(); }
  int64_t all_reduce_bytes() const noexcept { return all_reduce_bytes_.load(); }
  /// The backend's own all-reduce.
  virtual void native_all_reduce(Tensor& t, ReduceOp op) = 0;
  /// `t` of rank `root` copied into every rank's `t`.
  virtual void broadcast(Tensor& t, int root) = 0;
  /// `in` has size() equal chunks of out.numel() elements (in.numel() == size() * out.numel());
  /// rank r receives op over ranks of chunk r.
  virtual void reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op) = 0;
  /// out.numel() == size() * in.numel(); chunk r of `out` is rank r's `in`.
  virtual void all_gather(Tensor& out, const Tensor& in) = 0;
  /// Point to point; a send is matched by the recv of the same shape on `peer`, in order.
  virtual void send(const Tensor& t, int peer) = 0;
  virtual void recv(Tensor& t, int peer) = 0;
  /// send to `send_peer` and recv from `recv_peer` together (the ring's step; no deadlock when
  /// every rank calls it at once).
  virtual void send_recv(const Tensor& send_t, int send_peer, Tensor& recv_t, int recv_peer) = 0;
  virtual void barrier() = 0;

  /// A color that joins no group: that rank takes part in the split and gets null.
  static constexpr int kNoColor = -1;
  /// Collective over this communicator (Note [splitting a communicator]): this rank's member of
  /// the group of `color` (>= 0, or kNoColor), ranked by `key` then by rank(), its tensors on
  /// `device`. ValueError for a negative color other than kNoColor; DeviceError for a device that
  /// is not available or that the backend cannot exchange tensors on; CommError past the timeout
  /// when a rank never calls it.
  std::unique_ptr<Communicator> split(int color, int key, Device device);
  /// The same, on this communicator's device.
  std::unique_ptr<Communicator> split(int color, int key) { return split(color, key, device()); }

 protected:
  explicit Communicator(CommOptions options) : options_(options) {}
  /// The shape rule of reduce_scatter and all_gather: `whole` holds size() chunks of `part`'s
  /// numel, of `part`'s dtype. ShapeError / DTypeError naming both otherwise.
  /// ValueError unless `peer` (a "peer" or "root") is a rank of this communicator.
  void check_peer(const char* op, int peer, const char* role = "peer") const;
  void check_chunks(const char* op, const Tensor& whole, const char* whole_name, const Tensor& part,
                    const char* part_name) const;
  /// The backend's split, after split() checked the color and the device; null for kNoColor.
  virtual std::unique_ptr<Communicator> split_group(int color, int key, Device device) = 0;
  CommOptions options_;

 private:
  std::atomic<int64_t> all_reduce_calls_{0};  // atomic: DDP calls from its communication thread
  std::atomic<int64_t> all_reduce_bytes_{0};
};

}  // namespace minitrain
