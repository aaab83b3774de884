// GradScaler (optim/grad_scaler.h): torch.amp.GradScaler's defaults and update rule (back off by
// half on an inf/NaN, grow by 2 after growth_interval finite steps in a row, never to inf), its
// state round trip, the unscale of a model whose parameters live on several devices, and bad
// options and state refused naming the value.

#include "optim/grad_scaler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

TEST(GradScaler, DefaultsAreTorchs) {
  const GradScaler s;
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.options().growth_factor, 2.0);
  EXPECT_EQ(s.options().backoff_factor, 0.5);
  EXPECT_EQ(s.options().growth_interval, 2000);
  EXPECT_EQ(s.growth_tracker(), 0);
}

// The rule over a sequence of steps, against the scale worked out by hand.
TEST(GradScaler, BacksOffOnOverflowAndGrowsAfterTheIntervalOfFiniteSteps) {
  GradScalerOptions o;
  o.init_scale = 1024;
  o.growth_interval = 3;
  GradScaler s(o);
  const bool found_inf[] = {true, false, false, false, false, true, false, false, false};
  const double want[] = {512, 512, 512, 1024, 1024, 512, 512, 512, 1024};
  for (std::size_t i = 0; i < std::size(found_inf); ++i) {
    s.update(found_inf[i]);
    EXPECT_EQ(s.scale(), want[i]) << "after step " << i + 1;
  }
  EXPECT_EQ(s.growth_tracker(), 0);
  s.update(false);
  EXPECT_EQ(s.growth_tracker(), 1);
}

TEST(GradScaler, GrowthThatWouldOverflowFloat32KeepsTheScale) {
  GradScalerOptions o;
  o.init_scale = std::ldexp(1.0, 127);
  o.growth_interval = 1;
  GradScaler s(o);
  s.update(false);
  EXPECT_EQ(s.scale(), std::ldexp(1.0, 127));  // 2^128 is inf in float32, as torch's scale is
  EXPECT_EQ(s.growth_tracker(), 0);
}

TEST(GradScaler, StateRoundTripsExactlyAndBadStateChangesNothing) {
  GradScalerOptions o;
  o.init_scale = 3.0e4;  // not a power of two: the text must keep every bit
  o.growth_interval = 5;
  GradScaler a(o);
  a.update(false);
  a.update(false);
  a.update(true);
  a.update(false);
  GradScaler b(o);
  b.load_state(a.state());
  EXPECT_EQ(b.scale(), a.scale());
  EXPECT_EQ(b.growth_tracker(), a.growth_tracker());

  for (const auto& bad :
       {std::map<std::string, std::string>{{"scale", "2"}},
        std::map<std::string, std::string>{{"scale", "-1"}, {"growth_tracker", "0"}},
        std::map<std::string, std::string>{{"scale", "nan"}, {"growth_tracker", "0"}},
        std::map<std::string, std::string>{{"scale", "2"}, {"growth_tracker", "x"}}}) {
    GradScaler c(o);
    EXPECT_THROW(c.load_state(bad), ValueError);
    EXPECT_EQ(c.scale(), 3.0e4) << "a refused state changed the scale";
  }
}

TEST(GradScaler, RefusesOptionsTorchRefusesNamingTheValue) {
  const auto message = [](GradScalerOptions o) {
    try {
      GradScaler s(o);
    } catch (const ValueError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  GradScalerOptions o;
  o.init_scale = 0;
  EXPECT_NE(message(o).find("init_scale must be a finite value > 0, got 0"), std::string::npos);
  o = {};
  o.init_scale = std::numeric_limits<double>::infinity();
  EXPECT_NE(message(o).find("init_scale"), std::string::npos);
  o = {};
  o.growth_factor = 1.0;
  EXPECT_NE(message(o).find("growth_factor must be > 1, got 1"), std::string::npos);
  o = {};
  o.backoff_factor = 1.0;
  EXPECT_NE(message(o).find("backoff_factor must be in (0, 1), got 1"), std::string::npos);
  o = {};
  o.growth_interval = 0;
  EXPECT_NE(message(o).find("growth_interval must be >= 1, got 0"), std::string::npos);
}

// Parameters with gradients on two devices (a model-parallel model), one without a gradient:
// each device's gradients are unscaled, and an inf on either device is found.
class GradScalerDevices : public testing::DeviceTest {};

TEST_P(GradScalerDevices, UnscalesEveryDevicesGradientsAndFindsAnInfOnAny) {
  GradScalerOptions o;
  o.init_scale = 8;
  const GradScaler s(o);
  Parameter on_cpu, on_device, no_grad;
  on_cpu.grad = Tensor::from_vector(std::vector<float>{8, -16, 4}, {3});
  on_device.grad = Tensor::from_vector(std::vector<float>{24, 0.5f}, {2}, device());
  const NamedParameters params{{"a", &on_cpu}, {"b", &on_device}, {"c", &no_grad}};
  EXPECT_TRUE(s.unscale(params));
  EXPECT_EQ(testing::host_values(on_cpu.grad), (std::vector<double>{1, -2, 0.5}));
  EXPECT_EQ(testing::host_values(on_device.grad), (std::vector<double>{3, 0.0625}));
  on_device.grad = Tensor::from_vector(
      std::vector<float>{1, std::numeric_limits<float>::infinity()}, {2}, device());
  EXPECT_FALSE(s.unscale(params));
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(GradScalerDevices);

}  // namespace
}  // namespace minitrain
