#pragma once
// torch.nn.utils.clip_grad_norm_ (norm_type 2): with total_norm the 2-norm over all gradients,
// multiplies every gradient by clip_coef = max_norm / (total_norm + 1e-6) clamped to at most 1,
// i.e. scales them once total_norm exceeds max_norm (from max_norm - 1e-6 on, as torch) and
// leaves them bit-for-bit alone otherwise. Gradients that are undefined are skipped. The norm
// is accumulated in float64 on each gradient's device and read back once per device.

#include <memory>
#include <vector>

#include "core/buffer_slot.h"
#include "core/tensor.h"
#include "nn/parameter.h"

namespace minitrain {

/// What clip_grad_norm_deferred_ keeps across calls (Note [buffers that live across steps],
/// core/buffer_slot.h), per device holding gradients: the sum of squares it returns and the
/// norm's partials. Held by whoever clips every step (the Trainer), so that a step's clipping
/// asks the allocator for nothing once warm. A sum of squares its caller still holds (a
/// PendingGradNorm kept) is never rewritten: the slot then allocates a new one. Serves one thread
/// at a time.
class ClipWorkspace {
 public:
  BufferSlot& sum_sq(Device device) { return on(device).sum_sq; }
  BufferSlot& partials(Device device) { return on(device).partials; }
  /// The devices it keeps buffers for.
  std::size_t devices() const noexcept { return devices_.size(); }
  void clear() noexcept { devices_.clear(); }

 private:
  struct OnDevice {
    explicit OnDevice(Device d) : device(d) {}
    Device device;
    BufferSlot sum_sq, partials;
  };
  OnDevice& on(Device device);
  std::vector<std::unique_ptr<OnDevice>> devices_;  // slots do not move: a caller holds one
};

/// Returns the total norm before clipping (NaN / inf when a gradient is not finite; the gradients
/// then become NaN, as in torch with error_if_nonfinite=False). max_norm 0 leaves the gradients
/// alone (the command line's "0: off"; torch would zero them). OptionError (a ValueError) about
/// "max_norm" for max_norm < 0 or non-finite.
double clip_grad_norm_(const NamedParameters& params, double max_norm, bool foreach = true);

/// The total norm of clip_grad_norm_deferred_, not read yet: one 0-d float64 sum of squares per
/// device holding gradients. read() waits for them (one copy per device) and returns the norm;
/// 0 when there were no gradients.
struct PendingGradNorm {
  std::vector<Tensor> sum_sq;
  double read() const;
};

/// clip_grad_norm_ without a host read when every gradient is on one device (issue 35): the
/// factor min(1, max_norm / (norm + 1e-6)) is computed by the scaling kernel from the sum of
/// squares in device memory (kernels/reduce.h clip_scale_), as torch's foreach path does, so the
/// host queues the clipping and goes on. Gradients on several devices need their global sum: then
/// the sums are read here and the gradients scaled by the host's factor (the same bits).
///
/// `foreach` (torch's flag): each device's sum of squares in two launches and the scale in one
/// (kernels/multi_tensor_norm.h), one allocation besides the result; without it, per gradient a
/// squared_norm, a widening cast, an add and a scale (4-5 launches and 3 allocations each). Both
/// give the same bits (Note [the per-tensor norm's bits]); both can be captured in a CUDA graph.
///
/// `workspace` (with foreach): the sums of squares and the partials come from its slots instead
/// of the allocator, so a caller that lets go of the last step's PendingGradNorm before the next
/// call allocates nothing after the first two. Null: new buffers per call.
PendingGradNorm clip_grad_norm_deferred_(const NamedParameters& params, double max_norm,
                                         bool foreach = true, ClipWorkspace* workspace = nullptr);

}  // namespace minitrain
