#pragma once
// The NCCL backend: GPU tensors, one rank per GPU, either all GPUs of one process
// (make_nccl_communicators: ncclCommInitAll, one host thread per rank, as DataParallel drives
// them) or one rank per process (NcclCommunicator::from_unique_id: ncclCommInitRank; the id
// travels between processes by the bootstrap of "Parallel II").
//
// Compiled only in CUDA builds (parallel/CMakeLists.txt, CUDA_SOURCES): code compiled in every
// build must not call these functions. The header itself needs no CUDA headers.
//
// Note [NCCL timeouts]: collectives are enqueued on the caller's current stream (core/stream.h)
// and then waited for: the host polls cudaStreamQuery and ncclCommGetAsyncError against
// CommOptions::timeout. A peer that never comes, or an asynchronous NCCL error (a dead peer, a
// broken network), aborts the communicator (ncclCommAbort, which also ends the kernels waiting in
// it) and throws CommError; an aborted communicator refuses further work. Initialisation
// (ncclCommInitAll / ncclCommInitRank) blocks without a deadline.
// Teardown: ncclCommDestroy is an intra-node collective (NCCL 2.18 and later), so a rank that
// leaves by an exception while its peers go on (or are stopped) would hang in it at the end of the
// communicator's scope. A communicator destroyed during stack unwinding is therefore aborted
// (ncclCommAbort, local) instead; one destroyed in the normal course of a program is destroyed.
//
// Note [NCCL split onto another GPU]: ncclCommSplit's child lives on its parent's GPU, but the
// hybrid's stage s needs a communicator on stage s's GPU (Note [splitting a communicator]). So a
// split first all-gathers every rank's color, key and target GPU (its host and PCI bus); when every
// rank keeps its GPU it is ncclCommSplit, otherwise each group's first member makes an NCCL id,
// the ids are all-gathered, and each member joins its group's id on its GPU (ncclCommInitRank).
// NCCL cannot put two ranks of one communicator on one GPU, so a group that would is refused
// first, alike on every rank, naming both ranks and the GPU.

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "parallel/comm/communicator.h"

struct ncclComm;  // NCCL's opaque communicator (ncclComm_t is ncclComm*)

namespace minitrain {

/// The bytes of an ncclUniqueId (NCCL_UNIQUE_ID_BYTES), to send to the other processes.
using NcclUniqueId = std::array<char, 128>;
/// A fresh id (ncclGetUniqueId), made by rank 0 and shared with every rank.
NcclUniqueId nccl_unique_id();

class NcclCommunicator final : public Communicator {
 public:
  /// Rank `rank` of `size` on `device` (ncclCommInitRank; blocks until all ranks have joined).
  static std::unique_ptr<NcclCommunicator> from_unique_id(const NcclUniqueId& id, int rank,
                                                          int size, Device device,
                                                          CommOptions options = {});
  /// Takes ownership of an initialised NCCL communicator.
  NcclCommunicator(ncclComm* comm, int rank, int size, Device device, CommOptions options);
  ~NcclCommunicator() override;

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  Device device() const noexcept override { return device_; }
  std::string backend() const override { return "nccl"; }

  void native_all_reduce(Tensor& t, ReduceOp op) override;
  void broadcast(Tensor& t, int root) override;
  void reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op) override;
  void all_gather(Tensor& out, const Tensor& in) override;
  void send(const Tensor& t, int peer) override;
  void recv(Tensor& t, int peer) override;
  void send_recv(const Tensor& send_t, int send_peer, Tensor& recv_t, int recv_peer) override;
  void barrier() override;

 protected:
  std::unique_ptr<Communicator> split_group(int color, int key, Device device) override;

 private:
  void check_usable(const char* op) const;
  void check_tensor(const Tensor& t, const char* op, const char* what) const;
  /// Waits for the caller's current stream (Note [NCCL timeouts]); aborts and throws on timeout
  /// or an asynchronous error.
  void wait(const char* op, const std::string& waiting_for);
  /// ncclCommAbort, then CommError with `message`.
  [[noreturn]] void abort_and_throw(const std::string& message);

  ncclComm* comm_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
  Device device_;
  std::string broken_;  // why the communicator was aborted; empty while it is fine
  Tensor barrier_scratch_;
  int uncaught_at_creation_ =
      0;  // std::uncaught_exceptions() then: more at destruction = unwinding
};

/// One communicator per GPU of this process, all of one group (ncclCommInitAll): hand
/// communicators[r] to the thread that drives devices[r]. The devices must be distinct GPUs.
std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(
    const std::vector<Device>& devices, CommOptions options = {});

}  // namespace minitrain
