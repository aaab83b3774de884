// The optimizers step several parameters of one device with one multi-tensor call; this checks
// that the result is bit for bit that of one per-tensor kernel call per parameter (the path the
// optimizers took before), over several steps, with odd sizes, more tensors than one GPU launch
// holds, and a parameter that skips a step (Adam then groups parameters by their own step count).

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/optim/adam_step.h"
#include "kernels/optim/sgd_step.h"
#include "nn/parameter.h"
#include "optim/optimizer.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::host_max_abs;
using testing::host_values;
using testing::random_tensor;

// 60 parameters (more than the 30-48 a GPU launch holds) of odd sizes, and one 2-chunk matrix.
struct Params {
  std::vector<std::unique_ptr<Parameter>> owned;
  NamedParameters named;
  Params(Device d, DType dtype) {
    for (int i = 0; i < 61; ++i) {
      const Shape shape = i == 0 ? Shape{257, 513} : Shape{int64_t(1 + (i * 37) % 1030)};
      auto p = std::make_unique<Parameter>();
      p->value = random_tensor(shape, 10u + uint32_t(i), d, dtype);
      named.emplace_back(std::to_string(i) + ".weight", p.get());
      owned.push_back(std::move(p));
    }
  }
  // Step `step`'s gradients; parameter 5 has none at step 1 (torch's grad=None: skipped).
  void set_grads(int step, Device d, DType dtype) {
    for (std::size_t i = 0; i < owned.size(); ++i) {
      owned[i]->grad =
          (step == 1 && i == 5)
              ? Tensor()
              : random_tensor(owned[i]->value.shape(), 500u + 71u * step + i, d, dtype, -0.5, 0.5);
    }
  }
};

class MultiTensorOptimizerStep : public testing::DeviceTest {};

TEST_P(MultiTensorOptimizerStep, SgdEqualsPerTensorKernels) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Params ps(device(), dtype);
    std::vector<Tensor> want, bufs(ps.owned.size());
    for (auto& p : ps.owned) want.push_back(p->value.clone());
    SGDOptions o;
    o.lr = 0.05, o.momentum = 0.9, o.weight_decay = 0.01, o.nesterov = true;
    SGD opt(ps.named, o);
    for (int step = 0; step < 4; ++step) {
      ps.set_grads(step, device(), dtype);
      opt.step();
      for (std::size_t i = 0; i < ps.owned.size(); ++i) {
        if (!ps.owned[i]->grad.defined()) continue;
        SGDStepArgs a;
        a.lr = o.lr, a.momentum = o.momentum, a.weight_decay = *o.weight_decay;
        a.nesterov = o.nesterov;
        a.first_step = !bufs[i].defined();
        if (a.first_step) bufs[i] = Tensor::empty(want[i].shape(), dtype, device());
        sgd_step(want[i], ps.owned[i]->grad, bufs[i], a);
      }
    }
    ASSERT_GT(host_max_abs(ps.owned[0]->value), 0.0);
    for (std::size_t i = 0; i < ps.owned.size(); ++i)
      EXPECT_EQ(host_values(ps.owned[i]->value), host_values(want[i])) << "parameter " << i;
  }
}

TEST_P(MultiTensorOptimizerStep, AdamAndAdamWEqualPerTensorKernels) {
  for (bool decoupled : {false, true})
    for (bool amsgrad : {false, true}) {
      const DType dtype = DType::Float32;
      Params ps(device(), dtype);
      const std::size_t n = ps.owned.size();
      std::vector<Tensor> want, m(n), v(n), vmax(n);
      std::vector<int64_t> t(n, 0);
      for (auto& p : ps.owned) want.push_back(p->value.clone());
      AdamOptions o;
      o.lr = 0.01, o.weight_decay = 0.1, o.amsgrad = amsgrad;
      Adam opt(ps.named, o, decoupled);
      for (int step = 0; step < 4; ++step) {
        ps.set_grads(step, device(), dtype);
        opt.step();
        for (std::size_t i = 0; i < n; ++i) {
          if (!ps.owned[i]->grad.defined()) continue;
          if (!m[i].defined()) {
            m[i] = Tensor::zeros(want[i].shape(), dtype, device());
            v[i] = Tensor::zeros(want[i].shape(), dtype, device());
            vmax[i] = Tensor::zeros(want[i].shape(), dtype, device());
          }
          const AdamStepArgs a = adam_step_args(o.lr, o.beta1, o.beta2, o.eps, *o.weight_decay,
                                                decoupled, amsgrad, ++t[i]);
          adam_step(want[i], ps.owned[i]->grad, m[i], v[i], vmax[i], a);
        }
      }
      ASSERT_GT(host_max_abs(ps.owned[0]->value), 0.0);
      for (std::size_t i = 0; i < n; ++i)
        EXPECT_EQ(host_values(ps.owned[i]->value), host_values(want[i]))
            << (decoupled ? "adamw" : "adam") << (amsgrad ? " amsgrad" : "") << ", parameter " << i;
    }
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(MultiTensorOptimizerStep);

}  // namespace
}  // namespace minitrain
