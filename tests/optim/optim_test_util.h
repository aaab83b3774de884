#pragma once
// Shared by the optimizer tests: reference optimizers in double precision written from
// torch.optim's documented update rules (independently of kernels/optim/optimizer_math.h), sets of
// named parameters of odd sizes built without nn/ modules, and a driver that steps an optimizer
// and its reference side by side.
//
// Note [optimizer test tolerance]: a float32 run is compared with the double reference started
// from the same float32 values and fed the same float32 gradients. Each step rounds a handful of
// float32 operations (relative error 2^-24 ~ 6e-8 each) and the errors carried in the state
// (momentum, moments) decay with beta; over the few steps of a test |p| stays below ~2, so the
// accumulated difference stays below ~1e-6 (measured: at most 2.6e-7, two float32 ulps at
// |p| ~ 1). kF32Atol/kF32Rtol (2e-6 + 2e-6 |p|) leave a margin of about ten over the measured
// error, while every formula slip the tests look for (dampening at the
// first step, eps inside the bias correction, L2 instead of decoupled decay, a missing max for
// amsgrad, a wrong step count) moves parameters by 1e-4 or more with the hyperparameters used.
// Float64 runs differ from the reference by rounding order alone: 1e-12.

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/parameter.h"
#include "optim/optimizer.h"
#include "tests/support/test_util.h"

namespace minitrain::optim_test {

inline constexpr double kF32Atol = 2e-6, kF32Rtol = 2e-6;
inline constexpr double kF64Atol = 1e-12, kF64Rtol = 1e-12;

inline double atol_for(DType d) { return d == DType::Float64 ? kF64Atol : kF32Atol; }
inline double rtol_for(DType d) { return d == DType::Float64 ? kF64Rtol : kF32Rtol; }

/// Gradient magnitudes by step: shrinking and growing, so amsgrad's max and the momentum's
/// memory both matter.
inline double grad_scale(int step) {
  static const double kScales[] = {1.0, 0.3, 0.05, 0.6, 0.02, 0.4};
  return kScales[step % 6];
}

// ---- references (double), from torch.optim's documentation ----

struct RefSGD {
  double lr = 0.01, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
  std::vector<double> buf;  // empty until the first step, as torch's momentum_buffer = None

  void step(std::vector<double>& p, const std::vector<double>& grad) {
    for (std::size_t i = 0; i < p.size(); ++i) {
      double g = grad[i] + weight_decay * p[i];
      if (momentum != 0) {
        if (buf.size() != p.size()) buf.assign(p.size(), std::nan(""));
        // torch: buf = clone(g) at the first step, else buf = momentum * buf + (1 - dampening) * g
        buf[i] = std::isnan(buf[i]) ? g : momentum * buf[i] + (1 - dampening) * g;
        g = nesterov ? g + momentum * buf[i] : buf[i];
      }
      p[i] -= lr * g;
    }
  }
};

struct RefAdam {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool amsgrad = false, decoupled = false;  // decoupled: AdamW
  int64_t t = 0;
  std::vector<double> m, v, vmax;

  void step(std::vector<double>& p, const std::vector<double>& grad) {
    if (m.empty()) m.assign(p.size(), 0), v.assign(p.size(), 0), vmax.assign(p.size(), 0);
    ++t;
    const double bc1 = 1 - std::pow(beta1, double(t)), bc2 = 1 - std::pow(beta2, double(t));
    for (std::size_t i = 0; i < p.size(); ++i) {
      double g = grad[i];
      if (decoupled) {
        p[i] *= 1 - lr * weight_decay;
      } else {
        g += weight_decay * p[i];
      }
      m[i] = beta1 * m[i] + (1 - beta1) * g;
      v[i] = beta2 * v[i] + (1 - beta2) * g * g;
      double v_hat = v[i];
      if (amsgrad) v_hat = vmax[i] = std::max(vmax[i], v[i]);
      p[i] -= (lr / bc1) * m[i] / (std::sqrt(v_hat) / std::sqrt(bc2) + eps);
    }
  }
};

// ---- parameters ----

/// Named parameters of odd sizes (1, 7 and 1000 elements by default) with U(-1, 1) values.
class ParamSet {
 public:
  explicit ParamSet(DType dtype, uint32_t seed = 7,
                    std::vector<std::pair<std::string, Shape>> shapes =
                        {{"0.weight", Shape{1}}, {"0.bias", Shape{7}}, {"2.weight", Shape{20, 50}}})
      : dtype_(dtype) {
    for (auto& [name, shape] : shapes) {
      auto p = std::make_unique<Parameter>();
      p->value = testing::random_tensor(shape, seed++, Device::cpu(), dtype);
      p->grad = Tensor::zeros(shape, dtype);
      named_.emplace_back(name, p.get());
      params_.push_back(std::move(p));
    }
  }
  ParamSet(const ParamSet&) = delete;

  const NamedParameters& named() const { return named_; }
  std::size_t size() const { return params_.size(); }
  Parameter& operator[](std::size_t i) { return *params_[i]; }

  /// Fresh U(-s, s) gradients for step `step` (s = grad_scale(step)); defined ones only.
  void set_grads(int step) {
    for (std::size_t i = 0; i < params_.size(); ++i) {
      Tensor& g = params_[i]->grad;
      if (!g.defined()) continue;
      const double s = grad_scale(step);
      g.copy_(testing::random_tensor(g.shape(), 1000u + 31u * uint32_t(step) + uint32_t(i),
                                     Device::cpu(), dtype_, -s, s));
    }
  }
  std::vector<std::vector<double>> values() const {
    std::vector<std::vector<double>> out;
    for (const auto& p : params_) out.push_back(testing::host_values(p->value));
    return out;
  }
  std::vector<std::vector<double>> grads() const {
    std::vector<std::vector<double>> out;
    for (const auto& p : params_)
      out.push_back(p->grad.defined() ? testing::host_values(p->grad) : std::vector<double>{});
    return out;
  }

 private:
  DType dtype_;
  std::vector<std::unique_ptr<Parameter>> params_;
  NamedParameters named_;
};

/// Steps `opt` and one reference per parameter `steps` times on the same gradients and checks
/// the parameters after every step. `before_step(step)` may change both (e.g. the lr).
template <typename Ref, typename BeforeStep>
void expect_matches_reference(Optimizer& opt, ParamSet& ps, std::vector<Ref>& refs, int steps,
                              DType dtype, BeforeStep before_step) {
  std::vector<std::vector<double>> want = ps.values();
  for (int s = 0; s < steps; ++s) {
    before_step(s);
    ps.set_grads(s);
    const auto grads = ps.grads();
    opt.step();
    for (std::size_t i = 0; i < ps.size(); ++i) {
      if (grads[i].empty()) continue;
      refs[i].step(want[i], grads[i]);
    }
    const auto got = ps.values();
    for (std::size_t i = 0; i < ps.size(); ++i) {
      ASSERT_GT(testing::host_max_abs(ps[i].value), 0.0);
      ASSERT_TRUE(testing::allclose(got[i], want[i], atol_for(dtype), rtol_for(dtype)))
          << "parameter " << ps.named()[i].first << " after step " << (s + 1);
    }
  }
  EXPECT_EQ(opt.steps(), steps);
}

template <typename Ref>
void expect_matches_reference(Optimizer& opt, ParamSet& ps, std::vector<Ref>& refs, int steps,
                              DType dtype) {
  expect_matches_reference(opt, ps, refs, steps, dtype, [](int) {});
}

}  // namespace minitrain::optim_test
