#pragma once
// DistributedDataParallel: one replica per process (rank),
// torch.nn.parallel.DistributedDataParallel's scheme. The constructor broadcasts rank 0's
// parameters, so every rank starts from the same weights. backward runs the wrapped module's
// backward; parameter gradients are grouped into buckets (about DdpOptions::bucket_bytes each) in
// reverse layer order, the order backward produces them, and a bucket is all-reduced (averaged over
// ranks) as soon as its last gradient is ready, while backward goes on with the layers before it (a
// communication thread; on GPUs a side stream ordered after the gradients by events). backward
// returns when every bucket is reduced, so each rank then holds the average of the ranks'
// gradients: with the loss a mean over each rank's batch of b rows, that is the gradient of one
// device on the N*b rows together.
//
// Each parameter's gradient is a view of its bucket's contiguous buffer from construction on
// (torch's gradient_as_bucket_view; Note [DDP gradients as bucket views] in the .cpp), so the
// all-reduce works in place on what backward wrote. A caller that replaces a gradient tensor
// still gets it averaged, through a copy.
//
// Gradient accumulation: inside no_sync() (or with set_require_gradient_sync(false)), backward only
// accumulates local gradients; the first backward with sync on all-reduces the accumulated sums.
//
// Every rank must call forward/backward the same number of times with the same parameter shapes.
//
// The hybrid (data x model parallelism): a module whose parameters sit on several devices, a
// ModelParallel with its stages on several GPUs, is reduced device by device, each device's
// gradients with the same device's of the other ranks through a communicator of its own, split
// from the one given (Note [DDP over several devices] in the .cpp).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"
#include "parallel/comm/communicator.h"

namespace minitrain {

struct DdpOptions {
  int64_t bucket_bytes = int64_t(25) << 20;  ///< torch's default bucket_cap_mb = 25
  /// false: all buckets are reduced after backward (no overlap), for comparison in benchmarks.
  /// The overlap needs a Sequential module (its backward hook says when a layer's gradients are
  /// final); with any other module (a ModelParallel: the hybrid) buckets go after backward too.
  bool overlap = true;
  /// The type gradients travel in (--grad-reduce-dtype). bfloat16 halves the bytes each
  /// all-reduce moves, at a price: each bucket is rounded to bfloat16 before the reduction, and
  /// every addition of the reduction rounds again (8 significant bits), so the averaged gradient
  /// is the float32 one only to about 2-3 decimal digits. Float32 (the default): exact sums.
  DType reduce_dtype = DType::Float32;
};

class DistributedDataParallel final : public Module {
 public:
  /// `module` is this rank's replica, its parameters on comm.device(), or on several devices one of
  /// which is comm.device() (then each device gets a communicator split from `comm`); `comm`
  /// outlives this object. Broadcasts rank 0's parameters (collective: every rank constructs at
  /// once). ValueError for bucket_bytes < 1 and for ranks whose models or devices differ;
  /// DeviceError when no parameter is on comm's device.
  DistributedDataParallel(std::unique_ptr<Module> module, Communicator& comm,
                          DdpOptions options = {});
  ~DistributedDataParallel() override;

  Tensor forward(const Tensor& x) override;
  /// The module's backward, then (with sync on) every bucket all-reduced; rethrows a CommError of
  /// the communication thread.
  Tensor backward(const Tensor& grad_output) override;
  /// The wrapped module's names ("0.weight", ...): checkpoints are those of one device.
  NamedParameters named_parameters(const std::string& prefix = "") override;
  void to(Device device) override;  ///< DeviceError: a rank stays on its communicators' devices
                                    ///< (to() the one device of a one-device module is a no-op)
  void train(bool on = true) override;
  void set_needs_input_grad(bool on) override;
  std::string repr() const override;

  /// torch's no_sync(): while off, backward keeps gradients local.
  void set_require_gradient_sync(bool on) noexcept { sync_ = on; }
  bool require_gradient_sync() const noexcept { return sync_; }
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp) : ddp_(ddp), was_(ddp.require_gradient_sync()) {
      ddp_.set_require_gradient_sync(false);
    }
    ~NoSync() { ddp_.set_require_gradient_sync(was_); }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool was_;
  };
  NoSync no_sync() { return NoSync(*this); }

  // ---- local SGD (periodic averaging): the ranks step on their own, inside no_sync ----
  /// Every rank's parameters replaced by their average over the ranks: one all-reduce (Avg) per
  /// gradient bucket, on the communication thread. Collective; not while a backward is in flight.
  void average_parameters();
  /// The same for other tensors of the same shapes on every rank (optimizer moments), in place:
  /// consecutive tensors of one dtype share a flat buffer of up to DdpOptions::bucket_bytes.
  /// DeviceError for a tensor off the communicator's device.
  void average_tensors(std::vector<Tensor>& tensors);

  /// Parameter names per bucket, in the order the buckets are all-reduced.
  std::vector<std::vector<std::string>> bucket_names() const;
  /// The devices of the module's parameters, in order of first appearance; one communicator each.
  std::vector<Device> devices() const;
  Module& module() noexcept;
  /// The communicator given at construction (the one split per device when there are several).
  Communicator& communicator() noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  bool sync_ = true;
};

}  // namespace minitrain
