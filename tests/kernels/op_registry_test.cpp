// The op-variant registry (kernels/op_bench/op_registry.h) and `minitrain bench op`
// (tools/op_bench_command.h): every registered variant equals its op's CPU reference on odd sizes
// on each device; the float4 variant of the MSE (none) kernel is bit-exact; a wrong variant
// registered here is reported with its max error and never timed; unknown names are ValueErrors.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/elementwise.h"
#include "kernels/loss/mse_loss.h"
#include "kernels/op_bench/op_registry.h"
#include "tests/support/test_util.h"
#include "tools/op_bench_command.h"

namespace minitrain {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The what() of the E that f throws; "(no <E>)" when it throws nothing or another type.
template <typename E, typename F>
std::string typed_message(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("(another exception: ") + e.what() + ")";
  }
  return "(no exception)";
}

// Odd sizes reach the pack tails and (matrix ops: [1, 7], [13, 79], [5, 819]) odd columns.
const int64_t kOddSizes[] = {1, 7, 1027, 4095};

TEST(OpRegistry, HoldsEveryOpTheMemoryBenchTimed) {
  const std::vector<std::string> names = opbench::op_names();
  for (const char* op : {"copy", "add", "scale", "axpy", "relu_forward", "relu_backward",
                         "gelu_forward", "gelu_backward", "tanh_forward", "sum", "squared_norm",
                         "sum_rows", "mse_forward_backward", "bias_gelu", "bias_relu_backward",
                         "adam_step", "mse_none_forward_backward", "clip_grad_norm_sum_sq"})
    EXPECT_THAT(names, ::testing::Contains(std::string(op)));
  EXPECT_NO_THROW(opbench::op_variant("mse_forward_backward", "unfused"));
  EXPECT_NO_THROW(opbench::op_variant("bias_gelu", "unfused"));
  EXPECT_NO_THROW(opbench::op_variant("mse_none_forward_backward", "vec4"));
  for (const std::string& name : names) EXPECT_FALSE(opbench::op_family(name).variants.empty());
}

TEST(OpRegistry, UnknownNamesAreValueErrorsThatNameThem) {
  const std::string op = typed_message<ValueError>([] { opbench::op_family("frob"); });
  EXPECT_THAT(op, HasSubstr("unknown op 'frob'"));
  EXPECT_THAT(op, HasSubstr("mse_none_forward_backward"));  // the list of ops
  const std::string variant = typed_message<ValueError>([] { opbench::op_variant("add", "nope"); });
  EXPECT_THAT(variant, HasSubstr("op 'add' has no variant 'nope' (variants: map_vec4)"));
  EXPECT_THAT(
      typed_message<ValueError>([] {
        opbench::add_op_variant("frob", {"x", "", {DeviceType::CPU}, [](opbench::OpTensors&) {}});
      }),
      HasSubstr("unknown op 'frob'"));
  EXPECT_THAT(typed_message<ValueError>([] { opbench::register_op(opbench::op_family("add")); }),
              HasSubstr("op 'add' is already registered"));
  cli::OpBenchRequest r;
  r.words = {"frob"};
  std::ostringstream out, err;
  EXPECT_THAT(typed_message<ValueError>([&] { cli::run_op_bench(r, out, err); }),
              HasSubstr("unknown op 'frob'"));
  r.words = {"add"};
  r.sizes = {0};
  EXPECT_THAT(typed_message<ValueError>([&] { cli::run_op_bench(r, out, err); }),
              HasSubstr("--size must be at least 1, got 0"));
}

TEST(OpRegistry, TheListingNamesEveryOpAndVariant) {
  std::ostringstream out, err;
  EXPECT_EQ(cli::run_op_bench({}, out, err), 0);
  for (const std::string& name : opbench::op_names()) {
    EXPECT_THAT(out.str(), HasSubstr("  " + name + ": "));
    for (const opbench::OpVariant& v : opbench::op_family(name).variants)
      EXPECT_THAT(out.str(), HasSubstr("    " + v.name));
  }
}

TEST(OpRegistry, MatrixShapeIsFullWidthOrOdd) {
  EXPECT_EQ(opbench::matrix_shape(4096), Shape({4, 1024}));
  EXPECT_EQ(opbench::matrix_shape(1027), Shape({13, 79}));
  EXPECT_EQ(opbench::matrix_shape(7), Shape({1, 7}));
}

class OpRegistryVariants : public testing::DeviceTest {};

TEST_P(OpRegistryVariants, EveryVariantEqualsItsReferenceOnOddSizes) {
  int checked = 0;
  for (const std::string& name : opbench::op_names()) {
    const opbench::OpFamily& op = opbench::op_family(name);
    for (const opbench::OpVariant& v : op.variants) {
      if (!opbench::runs_on(v, device().type())) continue;
      for (int64_t n : kOddSizes) {
        SCOPED_TRACE(name + "." + v.name + " at " + std::to_string(n));
        const opbench::Verification r = opbench::verify_variant(op, v, device(), n);
        EXPECT_TRUE(r.ok()) << "max error " << r.max_error << " > " << r.tolerance << ": "
                            << r.where;
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 17 * 4);
}

// A variant registered only here that computes a - b for add: verification must say it is wrong
// with its max error, and `minitrain bench op add` must report it and not time it (exit 1), while
// the right variant beside it is verified and timed.
TEST_P(OpRegistryVariants, AWrongVariantIsReportedWithItsErrorAndNotTimed) {
  opbench::add_op_variant("add", {"wrong_sub",
                                  "a - b instead of a + b (a test's deliberate bug)",
                                  {DeviceType::CPU, DeviceType::CUDA},
                                  [](opbench::OpTensors& t) { sub(t.out[0], t.in[0], t.in[1]); }});
  struct Unregister {
    ~Unregister() { opbench::remove_op_variant("add", "wrong_sub"); }
  } unregister;
  const opbench::OpFamily& add_op = opbench::op_family("add");
  const opbench::OpVariant& wrong = opbench::op_variant("add", "wrong_sub");
  const opbench::Verification r = opbench::verify_variant(add_op, wrong, device(), 1027);
  EXPECT_FALSE(r.ok());
  EXPECT_GT(r.max_error, 0.01);
  const std::string message = typed_message<opbench::WrongResult>(
      [&] { opbench::check_variant(add_op, wrong, device(), 1027); });
  EXPECT_THAT(message, HasSubstr("op 'add', variant 'wrong_sub' on " + device().str() +
                                 " at size 1027 is WRONG: max error "));

  cli::OpBenchRequest request;
  request.words = {"add"};
  request.sizes = {1027};
  request.device = device().str();
  request.runs = 1;
  std::ostringstream out, err;
  EXPECT_EQ(cli::run_op_bench(request, out, err), 1);
  std::string wrong_line, right_line;
  std::istringstream lines(out.str());
  for (std::string line; std::getline(lines, line);) {
    if (line.find("  wrong_sub") == 0) wrong_line = line;
    if (line.find("  map_vec4") == 0) right_line = line;
  }
  EXPECT_THAT(wrong_line, HasSubstr("WRONG: max error "));
  EXPECT_THAT(wrong_line, HasSubstr("not timed"));
  EXPECT_THAT(wrong_line, Not(HasSubstr("%")));  // no time, no GB/s, no % of copy
  EXPECT_THAT(right_line, HasSubstr("exact"));
  EXPECT_THAT(right_line, HasSubstr("%"));
  EXPECT_THAT(err.str(), HasSubstr("variant 'wrong_sub'"));
  EXPECT_THAT(err.str(), HasSubstr("1 wrong variant(s) of 'add' (not timed)"));
  if (device().is_cuda() && cuda_emulated()) {
    EXPECT_THAT(out.str(), HasSubstr("emulated GPU"));
  }
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(OpRegistryVariants);

// The float4 variant of the fused MSE (none) forward + backward equals the CPU twin bit for bit,
// through the registry (aligned tensors: the pack path and its tail) and on pointers one float
// past a 16-byte boundary (the launcher's scalar fallback).
TEST(CudaOpRegistry, MseNoneVec4IsBitExactAgainstItsCpuTwin) {
  MT_SKIP_UNLESS_AVAILABLE(Device::cuda(0));
  const Device gpu = Device::cuda(0);
  const opbench::OpFamily& op = opbench::op_family("mse_none_forward_backward");
  for (int64_t n : {1, 3, 4, 5, 1027, 4099, 65536 + 3}) {
    SCOPED_TRACE(n);
    const opbench::Verification r =
        opbench::verify_variant(op, opbench::op_variant(op.name, "vec4"), gpu, n);
    EXPECT_EQ(r.max_error, 0.0) << r.where;
  }
  const int64_t n = 1027;
  Tensor pred = opbench::uniform({n + 1}, gpu, 1), target = opbench::uniform({n + 1}, gpu, 2);
  Tensor out = Tensor::empty({n + 1}, DType::Float32, gpu);
  Tensor grad = Tensor::empty({n + 1}, DType::Float32, gpu);
  on_device(
      "test", gpu, [] {},
      [&](auto stream) {
        mse_loss_none_fused_vec4_cuda<float>(out.data<float>() + 1, grad.data<float>() + 1,
                                             pred.data<float>() + 1, target.data<float>() + 1, n,
                                             2.0f, stream);
      });
  Tensor want_out = Tensor::empty({n + 1}, DType::Float32, Device::cpu());
  Tensor want_grad = Tensor::empty({n + 1}, DType::Float32, Device::cpu());
  const Tensor p = pred.to(Device::cpu()), t = target.to(Device::cpu());
  mse_loss_forward_backward_cpu<float>(want_out.data<float>() + 1, want_grad.data<float>() + 1,
                                       p.data<float>() + 1, t.data<float>() + 1, n, 1.0, 2.0f,
                                       true);
  const Tensor got_out = out.to(Device::cpu()), got_grad = grad.to(Device::cpu());
  for (int64_t i = 1; i <= n; ++i) {
    ASSERT_EQ(got_out.data<float>()[i], want_out.data<float>()[i]) << i;
    ASSERT_EQ(got_grad.data<float>()[i], want_grad.data<float>()[i]) << i;
  }
}

}  // namespace
}  // namespace minitrain
