// Linear's GEMM backend by name: a user's backend registered in this binary with
// MINITRAIN_REGISTER_GEMM really runs a Linear's three GEMMs and gives OpenBLAS's results; Eigen
// agrees within float32 rounding; set_gemm_backend reaches every Linear of a nested Sequential;
// unknown names and wrong-device backends are refused with the names. On a GPU: Linear through
// cuBLASLt (fused bias epilogue) against cuBLAS, exactly, on integer values.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "kernels/cast.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_registry.h"
#include "nn/activation_layer.h"
#include "nn/gemm_backend.h"
#include "nn/linear.h"
#include "nn/mlp.h"
#include "nn/sequential.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::error_message;
using testing::host_values;
using testing::random_tensor;

// The user's kernel: OpenBLAS behind a call counter, float32 only.
std::atomic<int> g_calls{0};
void counting_sgemm(Device, float* c, const float* a, bool ta, const float* b, bool tb, int64_t m,
                    int64_t n, int64_t k, float alpha, float beta) {
  ++g_calls;
  gemm_cpu<float>(c, a, ta, b, tb, m, n, k, alpha, beta);
}
void counting_dgemm(Device, double* c, const double* a, bool ta, const double* b, bool tb,
                    int64_t m, int64_t n, int64_t k, double alpha, double beta) {
  ++g_calls;
  gemm_cpu<double>(c, a, ta, b, tb, m, n, k, alpha, beta);
}
GemmBackend counting_backend() {
  return GemmBackend{
      "nn_test_counting_sgemm", DeviceType::CPU, "test: OpenBLAS behind a call counter", false,
      &counting_sgemm,          &counting_dgemm};
}
MINITRAIN_REGISTER_GEMM(nn_test_counting_sgemm, counting_backend())

struct Pass {
  std::vector<double> y, dx, dw, db;
};

// One forward and backward of a fresh Linear(37, 19) (seed fixed) through `backend`.
Pass run_linear(const std::string& backend, Device device = Device::cpu()) {
  Generator gen(7);
  Linear layer(37, 19, gen, true, device);
  layer.set_gemm_backend(backend);
  Tensor x = random_tensor(Shape{23, 37}, 1, device), dy = random_tensor(Shape{23, 19}, 2, device);
  layer.zero_grad();
  Tensor y = layer.forward(x);
  Tensor dx = layer.backward(dy);
  return {host_values(y), host_values(dx), host_values(layer.weight().grad),
          host_values(layer.bias().grad)};
}

TEST(LinearGemmBackend, DefaultIsAuto) {
  Generator gen(1);
  Linear layer(3, 2, gen);
  EXPECT_EQ(layer.gemm_backend(), "auto");
}

TEST(LinearGemmBackend, UserBackendRunsAllThreeGemmsWithOpenBlasResults) {
  const Pass want = run_linear("openblas");
  const int before = g_calls.load();
  const Pass got = run_linear("nn_test_counting_sgemm");
  EXPECT_EQ(g_calls.load() - before, 3) << "forward x W^T, backward dy^T x and dy W";
  ASSERT_GT(testing::host_max_abs(Tensor::from_vector(got.y, Shape{int64_t(got.y.size())})), 0.0);
  EXPECT_EQ(got.y, want.y);
  EXPECT_EQ(got.dx, want.dx);
  EXPECT_EQ(got.dw, want.dw);
  EXPECT_EQ(got.db, want.db);
}

TEST(LinearGemmBackend, AutoIsOpenBlasBitForBitOnTheCpu) {
  const Pass a = run_linear("auto"), o = run_linear("openblas");
  EXPECT_EQ(a.y, o.y);
  EXPECT_EQ(a.dx, o.dx);
  EXPECT_EQ(a.dw, o.dw);
}

TEST(LinearGemmBackend, EigenAgreesWithOpenBlas) {
  const Pass e = run_linear("eigen"), o = run_linear("openblas");
  EXPECT_ALLCLOSE(e.y, o.y, 1e-5, 1e-5);  // float32 sums of 37 (23 for dW) products, other orders
  EXPECT_ALLCLOSE(e.dx, o.dx, 1e-5, 1e-5);
  EXPECT_ALLCLOSE(e.dw, o.dw, 1e-5, 1e-5);
  EXPECT_EQ(e.db, o.db);  // the bias gradient is no GEMM
}

TEST(LinearGemmBackend, UnknownNameIsRefusedAndNothingChanges) {
  Generator gen(1);
  Linear layer(3, 2, gen);
  layer.set_gemm_backend("eigen");
  EXPECT_THROW(layer.set_gemm_backend("no_such_gemm"), ValueError);
  const std::string msg = error_message([&] { layer.set_gemm_backend("no_such_gemm"); });
  EXPECT_NE(msg.find("'no_such_gemm'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("openblas, eigen"), std::string::npos) << msg;
  EXPECT_EQ(layer.gemm_backend(), "eigen");
}

TEST(LinearGemmBackend, BackendOfAnotherDeviceTypeFailsAtForwardNamingIt) {
  register_gemm_backend(
      GemmBackend{"nn_test_fake_cuda",
                  DeviceType::CUDA,
                  "test: never runs",
                  false,
                  [](Device, float*, const float*, bool, const float*, bool, int64_t, int64_t,
                     int64_t, float, float) { FAIL() << "must not run"; },
                  {}});
  Generator gen(1);
  Linear layer(3, 2, gen);
  layer.set_gemm_backend("nn_test_fake_cuda");
  Tensor x = random_tensor(Shape{4, 3}, 1);
  EXPECT_THROW(layer.forward(x), ValueError);
  const std::string msg = error_message([&] { layer.forward(x); });
  EXPECT_NE(msg.find("'nn_test_fake_cuda' runs on cuda devices but the tensors are on cpu"),
            std::string::npos)
      << msg;
}

TEST(SetGemmBackend, ReachesEveryLinearOfNestedSequentials) {
  Generator gen(3);
  std::unique_ptr<Sequential> mlp = make_mlp({5, 8, 8, 2}, Activation::ReLU, gen);
  auto outer = std::make_unique<Sequential>();
  Sequential& model = *outer;
  model.add(std::move(mlp));
  model.add(std::make_unique<ActivationLayer>(Activation::Tanh));
  model.add(std::make_unique<Linear>(2, 3, gen));
  EXPECT_EQ(set_gemm_backend(model, "nn_test_counting_sgemm"), 4);
  auto& inner = dynamic_cast<Sequential&>(model[0]);
  for (std::size_t i : {0u, 2u, 4u})
    EXPECT_EQ(dynamic_cast<Linear&>(inner[i]).gemm_backend(), "nn_test_counting_sgemm");
  EXPECT_EQ(dynamic_cast<Linear&>(model[2]).gemm_backend(), "nn_test_counting_sgemm");

  Tensor x = random_tensor(Shape{6, 5}, 4);
  const int before = g_calls.load();
  Tensor y_counted = model.forward(x);
  EXPECT_EQ(g_calls.load() - before, 4);
  set_gemm_backend(model, "auto");
  Tensor y_auto = model.forward(x);
  EXPECT_EQ(g_calls.load() - before, 4) << "auto must not go through the user's backend";
  EXPECT_EQ(host_values(y_counted), host_values(y_auto));
}

TEST(SetGemmBackend, UnknownNameLeavesTheModelUntouched) {
  Generator gen(3);
  std::unique_ptr<Sequential> model = make_mlp({4, 4, 2}, Activation::ReLU, gen);
  set_gemm_backend(*model, "eigen");
  EXPECT_THROW(set_gemm_backend(*model, "nope"), ValueError);
  EXPECT_EQ(dynamic_cast<Linear&>((*model)[0]).gemm_backend(), "eigen");
  EXPECT_EQ(dynamic_cast<Linear&>((*model)[2]).gemm_backend(), "eigen");
}

// Note [Linear + activation]: with "auto" on the CPU a Sequential runs each Linear with the
// activation after it in one pass (and in backward with the activation before it); through the
// user's backend (OpenBLAS behind a counter) it runs them one by one. Every activation, both
// float types, an MLP that ends without one and one that starts with one: outputs, every
// gradient and the input gradient are the same bits, the activation layers keep the same inputs
// (ReLU after a fused Linear keeps its output instead, Note [ReLU in place] in nn/linear.cpp: the
// same values where they are positive, zeros elsewhere), and the backward hook sees the same layers
// in the same order.
TEST(SequentialFusion, LinearPlusActivationIsTheLayerByLayerRunBitForBit) {
  for (Activation act : {Activation::ReLU, Activation::GELU, Activation::GELUTanh, Activation::Tanh,
                         Activation::Sigmoid})
    for (DType dtype : {DType::Float32, DType::Float64})
      for (bool leading_activation : {false, true}) {
        struct Run {
          std::vector<double> y, dx, kept;
          std::vector<std::vector<double>> grads;
          std::vector<std::size_t> hooks;
        };
        auto run = [&](const std::string& backend) {
          Generator gen(5);
          Sequential model;
          if (leading_activation) model.add(std::make_unique<ActivationLayer>(act));
          model.add(std::make_unique<Linear>(37, 300, gen, true, Device::cpu(), dtype));
          model.add(std::make_unique<ActivationLayer>(act));
          model.add(std::make_unique<Linear>(300, 129, gen, true, Device::cpu(), dtype));
          model.add(std::make_unique<ActivationLayer>(act));
          model.add(std::make_unique<Linear>(129, 3, gen, false, Device::cpu(), dtype));
          set_gemm_backend(model, backend);
          Run r;
          model.set_backward_hook([&r](std::size_t i) { r.hooks.push_back(i); });
          const Tensor x = random_tensor(Shape{70, 37}, 8, Device::cpu(), dtype);
          const Tensor dy = random_tensor(Shape{70, 3}, 9, Device::cpu(), dtype);
          model.zero_grad();
          r.y = host_values(model.forward(x));
          r.dx = host_values(model.backward(dy));
          for (auto& [name, p] : model.named_parameters()) r.grads.push_back(host_values(p->grad));
          for (std::size_t i = 0; i < model.size(); ++i)
            if (auto* a = dynamic_cast<ActivationLayer*>(&model[i])) {
              const std::vector<double> k = host_values(a->kept_input());
              r.kept.insert(r.kept.end(), k.begin(), k.end());
            }
          return r;
        };
        const Run fused = run("auto"), unfused = run("nn_test_counting_sgemm");
        const std::string what = std::string(activation_name(act)) + " " + dtype_name(dtype) +
                                 (leading_activation ? " (leading activation)" : "");
        ASSERT_GT(
            testing::host_max_abs(Tensor::from_vector(fused.y, Shape{int64_t(fused.y.size())})),
            0.0);
        EXPECT_TRUE(fused.y == unfused.y) << what;
        EXPECT_TRUE(fused.dx == unfused.dx) << what;
        EXPECT_TRUE(fused.grads == unfused.grads) << what;
        std::vector<double> kept = unfused.kept;
        if (act == Activation::ReLU)
          for (std::size_t i = leading_activation ? 70 * 37 : 0; i < kept.size(); ++i)
            kept[i] = kept[i] < 0 ? 0.0 : kept[i];
        EXPECT_TRUE(fused.kept == kept) << what;
        EXPECT_EQ(fused.hooks, unfused.hooks) << what;
      }
}

// ---- CUDA: Linear through cuBLASLt's fused bias epilogue against cuBLAS ----

Tensor small_ints(const Shape& s, uint32_t seed, Device d) {
  return Tensor::from_vector(testing::random_small_ints(s.numel(), seed), s, d);
}

TEST(LinearGemmBackendCuda, CublasLtFusedBiasMatchesCublasExactly) {
  if (cuda_emulated()) GTEST_SKIP() << "needs cuBLASLt on a real GPU (the emulated GPUs have none)";
  MT_SKIP_UNLESS_AVAILABLE(Device::cuda(0));
  const Device d = Device::cuda(0);
  for (auto [batch, in, out] : {std::tuple{1, 1, 1}, {17, 33, 65}, {256, 129, 127}}) {
    SCOPED_TRACE(::testing::Message() << "batch=" << batch << " in=" << in << " out=" << out);
    std::vector<double> ys[2], dxs[2], dws[2];
    const char* backends[2] = {"cublaslt", "cublas"};
    for (int i = 0; i < 2; ++i) {
      Generator gen(1);
      Linear layer(in, out, gen, true, d);
      layer.weight().value = small_ints(Shape{out, in}, 1, d);  // integers: every sum exact
      layer.bias().value = small_ints(Shape{out}, 2, d);
      layer.set_gemm_backend(backends[i]);
      layer.zero_grad();
      Tensor y = layer.forward(small_ints(Shape{batch, in}, 3, d));
      Tensor dx = layer.backward(small_ints(Shape{batch, out}, 4, d));
      ys[i] = host_values(y);
      dxs[i] = host_values(dx);
      dws[i] = host_values(layer.weight().grad);
    }
    ASSERT_GT(testing::host_max_abs(Tensor::from_vector(ys[1], Shape{int64_t(ys[1].size())})), 0.0);
    EXPECT_EQ(ys[0], ys[1]);
    EXPECT_EQ(dxs[0], dxs[1]);
    EXPECT_EQ(dws[0], dws[1]);
  }
}

// ---- mixed precision: 16-bit GEMM operands (issue 35, Note [16-bit GEMM operands]) ----

// Backend `of`'s float32 GEMM without its mixed one, as `name`: a Linear on it takes the cast
// path (widen, float32 GEMM, bias add, cast), which the mixed GEMM replaces.
void register_cast_only(const std::string& name, const std::string& of) {
  if (has_gemm_backend(name)) return;
  GemmBackend g = gemm_backend(of);
  g.name = name;
  g.mixed = nullptr;
  g.mixed_bias = false;
  register_gemm_backend(std::move(g));
}

// One forward and backward of mlp:37,19,23,5 (ReLU) under `precision` through `backend`: the
// output, the input gradient and every parameter gradient.
std::vector<std::vector<double>> run_mixed_mlp(const std::string& backend, DType precision,
                                               Device device) {
  Generator gen(11);
  std::unique_ptr<Sequential> model = make_mlp({37, 19, 23, 5}, Activation::ReLU, gen, device);
  set_gemm_backend(*model, backend);
  model->set_precision(precision);
  model->zero_grad();
  const Tensor x = random_tensor(Shape{29, 37}, 3, device);
  const Tensor y = model->forward(x);
  EXPECT_EQ(y.dtype(), precision);
  const Tensor dy = cast(random_tensor(y.shape(), 4, device), precision);
  const Tensor dx = model->backward(dy);
  std::vector<std::vector<double>> out{host_values(y), host_values(dx)};
  for (const auto& [name, param] : model->named_parameters())
    out.push_back(host_values(param->grad));
  return out;
}

void expect_mixed_gemm_gives_the_cast_paths_bits(const std::string& backend, Device device) {
  const std::string cast_only = backend + "_cast_only";
  register_cast_only(cast_only, backend);
  for (DType p : {DType::BFloat16, DType::Float16}) {
    SCOPED_TRACE(precision_name(p));
    ASSERT_TRUE(gemm_takes_mixed(backend, device, p, p, DType::Float32, true));
    ASSERT_FALSE(gemm_takes_mixed(cast_only, device, p, p, DType::Float32, true));
    const auto mixed = run_mixed_mlp(backend, p, device);
    const auto cast_path = run_mixed_mlp(cast_only, p, device);
    ASSERT_EQ(mixed.size(), 2u + 6u);
    for (std::size_t i = 0; i < mixed.size(); ++i) {
      ASSERT_GT(*std::max_element(mixed[i].begin(), mixed[i].end()), 0.0) << "value " << i;
      EXPECT_EQ(mixed[i], cast_path[i]) << "value " << i << " (y, dx, then the gradients)";
    }
  }
}

TEST(LinearMixedPrecision, SixteenBitGemmOperandsGiveTheCastPathsBits) {
  expect_mixed_gemm_gives_the_cast_paths_bits("reference", Device::cpu());
}

TEST(LinearMixedPrecisionCuda, SixteenBitGemmOperandsGiveTheCastPathsBits) {
  MT_SKIP_UNLESS_AVAILABLE(Device::cuda(0));
  expect_mixed_gemm_gives_the_cast_paths_bits("warptile", Device::cuda(0));
}

// What a backend was handed: its float32 GEMM's calls, and its mixed GEMM's (C, A, B) dtypes.
struct GemmCalls {
  int float32 = 0;
  std::vector<std::tuple<DType, DType, DType>> mixed;
};

// Backend `of` restricted to cuBLAS's type table (mixed_equal_inputs: A and B of one 16-bit
// dtype), as `name`, its calls recorded in the GemmCalls returned (registered once a process): a
// Linear on it stands for one on cuBLAS, which the emulated GPUs do not have.
std::shared_ptr<GemmCalls> equal_inputs_only(const std::string& name, const std::string& of) {
  static std::map<std::string, std::shared_ptr<GemmCalls>> registered;
  std::shared_ptr<GemmCalls>& calls = registered[name];
  if (calls) return calls;
  calls = std::make_shared<GemmCalls>();
  GemmBackend g = gemm_backend(of);
  g.name = name;
  g.mixed_equal_inputs = true;
  g.float32 = [calls, f = g.float32](Device d, float* c, const float* a, bool ta, const float* b,
                                     bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                                     float beta) {
    ++calls->float32;
    f(d, c, a, ta, b, tb, m, n, k, alpha, beta);
  };
  g.mixed = [calls, f = g.mixed](Device d, const GemmMixedCall& call) {
    calls->mixed.emplace_back(call.c_dtype, call.a_dtype, call.b_dtype);
    f(d, call);
  };
  register_gemm_backend(std::move(g));
  return calls;
}

// Note [16-bit GEMM operands]: on a backend that takes A and B of one 16-bit dtype only (cuBLAS,
// cuBLASLt), the weights' copy is 16-bit, so the forward, dW and dx are all mixed GEMMs of
// 16-bit operands (none widened around a float32 GEMM), with the cast path's bits. A backend set
// between the forward and the backward multiplies dx by that copy widened, with the same bits.
void expect_equal_input_backends_multiply_sixteen_bit_weights(const std::string& of,
                                                              Device device) {
  const std::string backend = of + "_equal_inputs_only";
  const std::string cast_only = of + "_cast_only";
  register_cast_only(cast_only, of);
  const std::shared_ptr<GemmCalls> calls = equal_inputs_only(backend, of);
  for (DType p : {DType::BFloat16, DType::Float16}) {
    SCOPED_TRACE(precision_name(p));
    *calls = GemmCalls{};
    ASSERT_FALSE(gemm_takes_mixed(backend, device, p, p, DType::Float32, true));
    const auto got = run_mixed_mlp(backend, p, device);
    EXPECT_EQ(calls->float32, 0) << "a GEMM widened its operands";
    ASSERT_EQ(calls->mixed.size(), 9u);  // 3 layers' forward, dW and dx
    for (const auto& [c, a, b] : calls->mixed) {
      EXPECT_EQ(a, p);
      EXPECT_EQ(b, p);
    }
    const auto want = run_mixed_mlp(cast_only, p, device);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i)
      EXPECT_EQ(got[i], want[i]) << "value " << i << " (y, dx, then the gradients)";

    // The backend changed between the forward and the backward.
    Generator gen(11);
    std::unique_ptr<Sequential> model = make_mlp({37, 19, 23, 5}, Activation::ReLU, gen, device);
    set_gemm_backend(*model, backend);
    model->set_precision(p);
    model->zero_grad();
    const Tensor y = model->forward(random_tensor(Shape{29, 37}, 3, device));
    set_gemm_backend(*model, cast_only);
    const Tensor dx = model->backward(cast(random_tensor(y.shape(), 4, device), p));
    EXPECT_EQ(host_values(dx), want[1]);
  }
}

TEST(LinearMixedPrecision, EqualInputBackendsMultiplySixteenBitWeights) {
  expect_equal_input_backends_multiply_sixteen_bit_weights("reference", Device::cpu());
}

TEST(LinearMixedPrecisionCuda, EqualInputBackendsMultiplySixteenBitWeights) {
  MT_SKIP_UNLESS_AVAILABLE(Device::cuda(0));
  expect_equal_input_backends_multiply_sixteen_bit_weights("warptile", Device::cuda(0));
}

}  // namespace
}  // namespace minitrain
