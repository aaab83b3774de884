#pragma once
// Per-element math of the losses beside MSE, shared by the CPU loops (pointwise_loss.cpp,
// cross_entropy.cpp) and the CUDA kernels (pointwise_loss.cu, cross_entropy.cu), so each formula
// is written once and tested on machines without a GPU. The formulas are torch.nn's:
//
//   l1               |d|,                                          d = pred - target
//   smooth_l1        0.5 d^2 / beta  if |d| < beta, else |d| - 0.5 beta      (beta >= 0)
//   huber            0.5 d^2         if |d| < delta, else delta (|d| - 0.5 delta)
//   bce_with_logits  (1 - t) x - (1 + (pw - 1) t) log_sigmoid(x),          x = pred (a logit)
//   kl_div           xlogy(t, t) - t x,   log_target: exp(t) (t - x)        x = pred (log-probs)
//   poisson_nll      exp(x) - t x,        log_input false: x - t log(x + 1e-8)
//   cross_entropy    (1 - eps) w_y (-log p_y) + eps / C sum_c w_c (-log p_c)  per row
//
// Each pointwise loss is a small type with loss(p, t, i) and derivative(p, t, i) (dloss/dpred of
// one element); i, the flat index, picks bce's pos_weight column. Values are computed in the
// element type, as torch computes them; the sums over elements accumulate in double elsewhere.

#include <cmath>
#include <cstdint>

#include "core/host_device.h"
#include "kernels/activation_math.h"  // actmath::exp, sigmoid_forward

namespace minitrain {

// Note [one row per pointwise loss]: MT_POINTWISE_LOSSES is the one list of the elementwise
// losses; adding one is its Math below and its row here (docs/optimizers_and_losses.md, "Adding
// a pointwise loss"). A row X(Kind, name, TorchClass, Math, setting) declares:
//   Kind        its PointwiseLossKind (kernels/loss/pointwise_loss.h)
//   name        --loss's value and Loss::name(), the token as written (kl_div -> "kl_div")
//   TorchClass  its nn/ Loss class, torch.nn's name (nn/pointwise_loss.h: KLDivLoss)
//   Math        its formula: loss() and derivative(), built from PointwiseLossParams
//   setting     the LossOptions member (nn/loss.h) that becomes the params' `param`, or none;
//               the Math's param_ok() and kParamRule are its range
// From the rows follow the kind enum and pointwise_loss_name(), the one switch from a kind to its
// Math that the CPU loops and the CUDA kernels share (visit_pointwise_math), the nn/ classes,
// their rows of loss_table() with their settings column, and the check of the setting's range
// (the loss's constructor, the one place). Every pointwise loss takes every Reduction.
#define MT_POINTWISE_LOSSES(X)                                                        \
  X(L1, l1, L1Loss, L1Math, none)                                                     \
  X(SmoothL1, smooth_l1, SmoothL1Loss, SmoothL1Math, beta)                            \
  X(Huber, huber, HuberLoss, HuberMath, delta)                                        \
  X(BceWithLogits, bce_with_logits, BCEWithLogitsLoss, BceWithLogitsMath, pos_weight) \
  X(KlDiv, kl_div, KLDivLoss, KlDivMath, log_target)                                  \
  X(PoissonNll, poisson_nll, PoissonNLLLoss, PoissonNllMath, log_input)

/// What a Math is built from: its setting as a number (a bool as 0 or 1) and bce's pos_weight
/// (nullptr for all 1; `cols` entries, one per column of the row-major prediction, or 1).
template <typename T>
struct PointwiseLossParams {
  T param;
  const T* pos_weight;
  int64_t cols;
};

/// The range of a loss's setting, for the Maths that have one to check: param_ok(v) and the rule
/// that messages print ("finite and > 0"). The others take any value (or none).
struct AnyParam {
  static bool param_ok(double) { return true; }
  static constexpr const char* kParamRule = "";
};
/// A bool setting (log_target, log_input) as the number 0 or 1.
struct BoolParam {
  static bool param_ok(double v) { return v == 0 || v == 1; }
  static constexpr const char* kParamRule = "0 or 1";
};

namespace lossmath {
MT_HOST_DEVICE float abs(float x) { return ::fabsf(x); }
MT_HOST_DEVICE double abs(double x) { return ::fabs(x); }
MT_HOST_DEVICE float log(float x) { return ::logf(x); }
MT_HOST_DEVICE double log(double x) { return ::log(x); }
MT_HOST_DEVICE float log1p(float x) { return ::log1pf(x); }
MT_HOST_DEVICE double log1p(double x) { return ::log1p(x); }
}  // namespace lossmath

// ---- l1: |d|; derivative sign(d), 0 at d == 0 (torch's sgn) ----
template <typename T>
struct L1Math : AnyParam {
  MT_HOST_DEVICE explicit L1Math(const PointwiseLossParams<T>&) {}
  MT_HOST_DEVICE T loss(T p, T t, int64_t) const { return lossmath::abs(p - t); }
  MT_HOST_DEVICE T derivative(T p, T t, int64_t) const {
    const T d = p - t;
    return d > T(0) ? T(1) : (d < T(0) ? T(-1) : T(0));
  }
};

// ---- smooth_l1 with beta >= 0. beta == 0 is l1, as torch.nn.functional.smooth_l1_loss does:
// the loss is then |d| - 0 (bit for bit |d|) and the derivative at d == 0 is 0, as l1's ----
template <typename T>
struct SmoothL1Math {
  T beta;
  MT_HOST_DEVICE explicit SmoothL1Math(const PointwiseLossParams<T>& p) : beta(p.param) {}
  static bool param_ok(double v) { return std::isfinite(v) && v >= 0; }
  static constexpr const char* kParamRule = "finite and >= 0";
  MT_HOST_DEVICE T loss(T p, T t, int64_t) const {
    const T z = lossmath::abs(p - t);
    return z < beta ? T(0.5) * z * z / beta : z - T(0.5) * beta;
  }
  MT_HOST_DEVICE T derivative(T p, T t, int64_t) const {
    const T d = p - t;
    if (d <= -beta) return d < T(0) ? T(-1) : T(0);  // d == 0 only when beta == 0
    if (d >= beta) return T(1);
    return d / beta;
  }
};

// ---- huber with delta > 0: smooth_l1 scaled by delta (huber = delta * smooth_l1(beta = delta))
// ----
template <typename T>
struct HuberMath {
  T delta;
  MT_HOST_DEVICE explicit HuberMath(const PointwiseLossParams<T>& p) : delta(p.param) {}
  static bool param_ok(double v) { return std::isfinite(v) && v > 0; }
  static constexpr const char* kParamRule = "finite and > 0";
  MT_HOST_DEVICE T loss(T p, T t, int64_t) const {
    const T z = lossmath::abs(p - t);
    return z < delta ? T(0.5) * z * z : delta * (z - T(0.5) * delta);
  }
  MT_HOST_DEVICE T derivative(T p, T t, int64_t) const {
    const T d = p - t;
    if (d <= -delta) return -delta;
    if (d >= delta) return delta;
    return d;
  }
};

// ---- bce_with_logits: torch's stable form through log_sigmoid(x) = min(x, 0) - log1p(exp(-|x|)),
// which exponentiates only non-positive numbers, so |x| = 1000 neither overflows nor loses the
// loss. pos_weight (nullable: all 1) has `cols` entries, one per column of the row-major
// prediction (1 entry: broadcast to every column), as torch broadcasts a [C] pos_weight over
// [N, C]. derivative = (1 - t) - (1 + (pw - 1) t) * sigmoid(-x) ----
template <typename T>
MT_HOST_DEVICE T log_sigmoid(T x) {
  const T min_x_0 = x < T(0) ? x : T(0);
  return min_x_0 - lossmath::log1p(actmath::exp(-lossmath::abs(x)));
}

template <typename T>
struct BceWithLogitsMath : AnyParam {
  const T* pos_weight;  ///< nullptr for all 1
  int64_t cols;         ///< entries of pos_weight: the prediction's last extent, or 1
  MT_HOST_DEVICE explicit BceWithLogitsMath(const PointwiseLossParams<T>& p)
      : pos_weight(p.pos_weight), cols(p.cols) {}
  MT_HOST_DEVICE T log_weight(T t, int64_t i) const {
    if (pos_weight == nullptr) return T(1);
    return (pos_weight[cols == 1 ? 0 : i % cols] - T(1)) * t + T(1);
  }
  MT_HOST_DEVICE T loss(T x, T t, int64_t i) const {
    return (T(1) - t) * x - log_weight(t, i) * log_sigmoid(x);
  }
  MT_HOST_DEVICE T derivative(T x, T t, int64_t i) const {
    return (T(1) - t) - log_weight(t, i) * sigmoid_forward(-x);
  }
};

// ---- kl_div (torch.nn.KLDivLoss): pred x holds log-probabilities, the target t probabilities
// (or, with log_target, log-probabilities). torch's pointwise terms, in its order of operations
// (aten kl_div): xlogy(t, t) - t * x, where xlogy(0, y) = 0 (so a zero target adds nothing; NaN y
// gives NaN), and exp(t) * (t - x) with log_target. d/dx: -t, resp. -exp(t). ----
template <typename T>
MT_HOST_DEVICE T xlogy(T x, T y) {
  if (y != y) return y;  // torch: NaN y gives NaN even for x == 0
  if (x == T(0)) return T(0);
  return x * lossmath::log(y);
}

template <typename T>
struct KlDivMath : BoolParam {
  bool log_target;
  MT_HOST_DEVICE explicit KlDivMath(const PointwiseLossParams<T>& p)
      : log_target(p.param != T(0)) {}
  MT_HOST_DEVICE T loss(T x, T t, int64_t) const {
    return log_target ? actmath::exp(t) * (t - x) : xlogy(t, t) - t * x;
  }
  MT_HOST_DEVICE T derivative(T, T t, int64_t) const { return log_target ? -actmath::exp(t) : -t; }
};

// ---- poisson_nll (torch.nn.PoissonNLLLoss, full=False): with log_input (torch's default) pred x
// is the log of the rate, loss exp(x) - t x; without, x is the rate, loss x - t log(x + eps) with
// torch's eps = 1e-8 (so x = 0 stays finite). d/dx: exp(x) - t, resp. 1 - t / (x + eps). ----
template <typename T>
struct PoissonNllMath : BoolParam {
  bool log_input;
  MT_HOST_DEVICE explicit PoissonNllMath(const PointwiseLossParams<T>& p)
      : log_input(p.param != T(0)) {}
  MT_HOST_DEVICE T loss(T x, T t, int64_t) const {
    return log_input ? actmath::exp(x) - t * x : x - t * lossmath::log(x + T(1e-8));
  }
  MT_HOST_DEVICE T derivative(T x, T t, int64_t) const {
    return log_input ? actmath::exp(x) - t : T(1) - t / (x + T(1e-8));
  }
};

// ---- cross_entropy of one row of logits x[0..C) with target class y and class weights w ----
//
// With m = max_c x_c, shifted logits s_c = x_c - m (<= 0, so exp cannot overflow), the row's
// lse = log(sum_c exp(s_c)) and log p_c = s_c - lse:
//   loss = (1 - eps) w_y (lse - s_y) + eps/C (lse * W - sum_c w_c s_c),   W = sum_c w_c
// (the smoothing term written through s_c, not x_c: with logits of 1e4 the x_c form cancels
// catastrophically). Its gradient with respect to x_j:
//   (1 - eps) w_y (p_j - [j == y]) + eps/C (W p_j - w_j) = p_j * a - b_j,
//   a = (1 - eps) w_y + eps/C W,   b_j = (1 - eps) w_y [j == y] + eps/C w_j,
// which without weights is softmax minus the smoothed one-hot. Row sums are in double.
struct CrossEntropyCoefficients {
  double keep;          ///< 1 - eps: the one-hot's share
  double spread;        ///< eps / C: each class's share of the smoothing
  double weight_total;  ///< W = sum_c w_c (C without weights)
  bool smoothing;       ///< eps > 0: the smoothing term is computed at all
};

/// The loss of a non-ignored row from its statistics (w_y: the target's weight; s_y: its shifted
/// logit; weighted_shifted: sum_c w_c s_c, used only with smoothing).
MT_HOST_DEVICE double cross_entropy_row_loss(const CrossEntropyCoefficients& k, double lse,
                                             double s_y, double w_y, double weighted_shifted) {
  const double nll = k.keep * w_y * (lse - s_y);
  return k.smoothing ? nll + k.spread * (lse * k.weight_total - weighted_shifted) : nll;
}

/// dloss/dx_j * scale for a non-ignored row: p_j = exp(s_j - lse) in the element type.
template <typename T>
MT_HOST_DEVICE T cross_entropy_grad(const CrossEntropyCoefficients& k, T s_j, double lse,
                                    double w_y, double w_j, bool is_target, double scale) {
  const T p = actmath::exp(static_cast<T>(double(s_j) - lse));
  const double a = k.keep * w_y + k.spread * k.weight_total;
  const double b = (is_target ? k.keep * w_y : 0.0) + k.spread * w_j;
  return static_cast<T>((double(p) * a - b) * scale);
}

}  // namespace minitrain
