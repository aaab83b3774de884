// The loss table: one entry per name, each making its Loss. Each loss lives in its own file;
// this one only maps names to them.

#include "nn/loss.h"

#include "core/error.h"
#include "core/strings.h"
#include "nn/cross_entropy_loss.h"
#include "nn/mse_loss.h"
#include "nn/pointwise_loss.h"

namespace minitrain {

Tensor Loss::forward_backward(const Tensor& pred, const Tensor& target, Tensor& grad_pred) {
  Tensor loss = forward(pred, target);
  grad_pred = backward();
  return loss;
}

namespace {

// MSELoss behind the interface.
class MseLossAdapter final : public Loss {
 public:
  explicit MseLossAdapter(LossOptions o) : Loss(std::move(o)), mse_(options_.reduction) {}
  Tensor forward(const Tensor& pred, const Tensor& target) override {
    return mse_.forward(pred, target);
  }
  Tensor backward() override { return mse_.backward(); }

 private:
  MSELoss mse_;
};

struct LossEntry {
  const char* name;
  TargetKind kind;
  std::unique_ptr<Loss> (*make)(const LossOptions&);
};

// The entry for a Loss class constructed from the options (its constructor checks them).
template <typename L>
std::unique_ptr<Loss> make(const LossOptions& o) {
  return std::make_unique<L>(o);
}

const LossEntry kLosses[] = {
    {"mse", TargetKind::Values, make<MseLossAdapter>},
    {"l1", TargetKind::Values, make<L1Loss>},
    {"smooth_l1", TargetKind::Values, make<SmoothL1Loss>},
    {"huber", TargetKind::Values, make<HuberLoss>},
    {"bce_with_logits", TargetKind::Values, make<BCEWithLogitsLoss>},
    {"kl_div", TargetKind::Values, make<KLDivLoss>},
    {"cross_entropy", TargetKind::ClassIndices, make<CrossEntropyLoss>},
};

const LossEntry& find_loss(const std::string& name) {
  for (const LossEntry& e : kLosses)
    if (name == e.name) return e;
  MT_THROW(ValueError, "unknown loss '", name, "'; valid names: ", join(loss_names(), ", "));
}

}  // namespace

const std::vector<std::string>& loss_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const LossEntry& e : kLosses) v.emplace_back(e.name);
    return v;
  }();
  return names;
}

TargetKind loss_target_kind(const std::string& name) { return find_loss(name).kind; }

std::unique_ptr<Loss> make_loss(const LossOptions& options) {
  return find_loss(options.name).make(options);
}

}  // namespace minitrain
