#pragma once
// The training losses behind one interface, with torch.nn's formulas, defaults and reductions:
//
//   auto loss = make_loss({"cross_entropy"});           // LossOptions: name + its settings
//   Tensor l = loss->forward(logits, classes);          // 0-d for mean/sum
//   Tensor g = loss->backward();                        // dL/dlogits with dL/dl = 1
//
// A loss is not a Module: it takes two inputs and starts the backward pass. Targets come in two
// kinds (TargetKind): values of the prediction's shape (mse and the pointwise losses of
// kernels/loss/loss_math.h: l1, smooth_l1, huber, ...), or class indices (cross_entropy): one per
// row, shape [N] or [N, 1], stored in the prediction's float dtype (exact up to 2^24 classes; see
// Note [class indices as floats]).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/buffer_slot.h"
#include "core/tensor.h"
#include "kernels/loss/reduction.h"

namespace minitrain {

enum class TargetKind {
  Values,        ///< a target per prediction element, of the prediction's shape
  ClassIndices,  ///< one class index per row of [N, C] logits
};

struct LossOptions {
  std::string name = "mse";               ///< one of loss_names()
  Reduction reduction = Reduction::Mean;  ///< batchmean: not cross_entropy
  double beta = 1.0;   ///< smooth_l1: torch's beta (the L2 region's half-width), >= 0
  double delta = 1.0;  ///< huber: torch's delta, > 0
  /// cross_entropy: one weight per class (torch's weight=), empty for all 1.
  std::vector<double> class_weights;
  double label_smoothing = 0.0;  ///< cross_entropy: in [0, 1]
  int64_t ignore_index = -100;   ///< cross_entropy: rows with this target count for nothing
  /// bce_with_logits: one weight per output column for the positive term (torch's pos_weight=),
  /// empty for all 1.
  std::vector<double> pos_weight;
  /// kl_div: the target holds log-probabilities, as pred does (torch's log_target=).
  bool log_target = false;
  /// poisson_nll: pred is the log of the rate, loss exp(pred) - target pred (torch's log_input=,
  /// default true); false: pred is the rate, loss pred - target log(pred + 1e-8).
  bool log_input = true;
};

class Loss {
 public:
  virtual ~Loss() = default;
  const LossOptions& options() const noexcept { return options_; }
  const std::string& name() const noexcept { return options_.name; }
  virtual TargetKind target_kind() const noexcept { return TargetKind::Values; }

  /// 0-d loss for mean/sum, one value per element (or per row for cross_entropy) for none.
  /// ShapeError names both shapes when pred and target do not fit together; ValueError names the
  /// row of a class index outside [0, C) that is not ignore_index.
  virtual Tensor forward(const Tensor& pred, const Tensor& target) = 0;
  /// dL/dpred for the last forward, with dL/dloss = 1 (ones for reduction none).
  virtual Tensor backward() = 0;
  /// forward then backward, as one pass where the loss has a fused kernel; the training step's
  /// call. The loss and the gradient equal forward's and backward's.
  virtual Tensor forward_backward(const Tensor& pred, const Tensor& target, Tensor& grad_pred);
  /// Lets go of the inputs the last forward kept for backward(), for a caller that will not call
  /// it (an evaluation): the model may then rewrite their buffers (core/buffer_slot.h).
  virtual void release_inputs() noexcept = 0;

 protected:
  explicit Loss(LossOptions options) : options_(std::move(options)) {}
  LossOptions options_;
  // Note [buffers that live across steps] (core/buffer_slot.h): forward_backward's loss value and
  // gradient, rewritten each step when no one else holds them.
  BufferSlot value_buffer_, grad_buffer_, workspace_;  // workspace_: a reduction's scratch
};

/// The settings of LossOptions that only some losses take (reduction every one takes). Note
/// [settings as columns] (optim/make_optimizer.h), for losses: each loss's row of loss_table()
/// lists the ones it takes; one given away from its default to a loss that does not take it is
/// refused with a message made from the column ("--huber-delta applies to --loss huber, not to
/// --loss mse").
///
/// One row per setting: X(Setting, member, flag): its LossSetting, the LossOptions member it is
/// (also the option's name in the constructors' messages, and a pointwise loss's setting column
/// in MT_POINTWISE_LOSSES), and the flag that sets it ("huber-delta") as --help and messages
/// spell it. A new setting is its LossOptions member above and its row here.
#define MT_LOSS_SETTINGS(X)                             \
  X(ClassWeights, class_weights, "class-weights")       \
  X(LabelSmoothing, label_smoothing, "label-smoothing") \
  X(IgnoreIndex, ignore_index, "ignore-index")          \
  X(PosWeight, pos_weight, "pos-weight")                \
  X(Beta, beta, "smooth-l1-beta")                       \
  X(Delta, delta, "huber-delta")                        \
  X(LogTarget, log_target, "kl-log-target")             \
  X(LogInput, log_input, "poisson-log-input")

#define MT_LOSS_SETTING_ENUM(Setting, member, flag) Setting,
enum class LossSetting { MT_LOSS_SETTINGS(MT_LOSS_SETTING_ENUM) };
#undef MT_LOSS_SETTING_ENUM

// Note [one table per list of choices]: loss_table() (nn/loss.cpp) is the only list of loss
// names; make_loss, loss_names() (--loss's help and its "choose one of" message) and
// loss_target_kind read it. Its pointwise rows follow from MT_POINTWISE_LOSSES
// (kernels/loss/loss_math.h): a pointwise loss is one row there; another loss is a row here and
// its class.
struct LossInfo {
  const char* name;  ///< "huber", as --loss and Loss::name() spell it
  TargetKind kind;
  std::unique_ptr<Loss> (*make)(const LossOptions& options);
  std::vector<LossSetting> settings;  ///< the settings it takes beside reduction
};
/// Every loss, in the order --help and error messages list them.
const std::vector<LossInfo>& loss_table();

/// The flag that sets `s` ("huber-delta", "smooth-l1-beta"), as --help and messages spell it.
const char* loss_setting_flag(LossSetting s);
/// The LossOptions member `s` is, as spelled in the source and in the constructors' messages
/// ("delta").
const char* loss_setting_option(LossSetting s);
/// A scalar setting's value as a number (a bool 0 or 1; a list setting: 0).
double loss_setting_value(const LossOptions& o, LossSetting s);
/// The setting whose member is spelled `option` ("delta"), for MT_POINTWISE_LOSSES's
/// setting column; an empty list for "none".
std::vector<LossSetting> loss_settings_named(const std::string& option);
/// The losses whose row takes `s`, in table order: "bce_with_logits".
std::string losses_taking(LossSetting s);
/// The settings of `o` away from their defaults (LossOptions{}).
std::vector<LossSetting> given_loss_settings(const LossOptions& o);
/// ValueError for the first of `given` that loss `name` does not take, naming the flag and the
/// losses that take it. An unknown name is make_loss's error, not this one's.
void check_loss_settings_apply(const std::string& name, const std::vector<LossSetting>& given);

/// The loss `options.name` names; ValueError listing loss_names() for another name, and for a
/// setting out of its range (naming it and its value).
std::unique_ptr<Loss> make_loss(const LossOptions& options);
/// Every name make_loss takes, in the order --help lists them.
const std::vector<std::string>& loss_names();
/// Whether `name` takes class indices (as make_loss(name)->target_kind() would say).
TargetKind loss_target_kind(const std::string& name);

}  // namespace minitrain
