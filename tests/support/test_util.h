#pragma once
// Test support: device-parameterised fixtures, random inputs, and tensor comparisons.
//
// A test written against DeviceTest runs once per device: /cpu always, /cuda where a GPU exists;
// elsewhere the /cuda instance reports GTEST_SKIP with the reason (see Note [gpu label] in
// cmake/MinitrainHelpers.cmake for how ctest labels it).

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"

namespace minitrain::testing {

/// Skips the current test (GTEST_SKIP) when `d` is a CUDA device this machine cannot use.
#define MT_SKIP_UNLESS_AVAILABLE(d)                                                 \
  do {                                                                              \
    if ((d).is_cuda() && ::minitrain::cuda_device_count() == 0)                     \
      GTEST_SKIP() << "no CUDA device: " << ::minitrain::cuda_unavailable_reason(); \
  } while (0)

/// Skips the current test (GTEST_SKIP), saying why, on a machine with fewer than `n` CUDA devices.
#define MT_SKIP_UNLESS_CUDA_DEVICES(n)                             \
  do {                                                             \
    if (::minitrain::cuda_device_count() < (n))                    \
      GTEST_SKIP() << "needs " << (n) << " CUDA device(s), found " \
                   << ::minitrain::cuda_device_count() << " "      \
                   << ::minitrain::cuda_unavailable_reason();      \
  } while (0)

class DeviceTest : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override { MT_SKIP_UNLESS_AVAILABLE(GetParam()); }
  Device device() const { return GetParam(); }
};

std::string device_param_name(const ::testing::TestParamInfo<Device>& info);

/// Instantiates a DeviceTest-derived suite for cpu and cuda:0.
#define MT_INSTANTIATE_DEVICE_TEST_SUITE(Suite)                                                    \
  INSTANTIATE_TEST_SUITE_P(                                                                        \
      Devices, Suite, ::testing::Values(::minitrain::Device::cpu(), ::minitrain::Device::cuda(0)), \
      ::minitrain::testing::device_param_name)

/// For a scope, the calling thread's current stream on each of `devices` sleeps `microseconds`
/// before every operation (emulated GPUs only; elsewhere it does nothing), so that work another
/// thread queues on its own stream overtakes this thread's unless something orders the two: a
/// missing wait then gives a wrong result instead of a lucky right one.
class SlowCallerStreams {
 public:
  SlowCallerStreams(std::vector<Device> devices, long microseconds);
  ~SlowCallerStreams();
  SlowCallerStreams(const SlowCallerStreams&) = delete;
  SlowCallerStreams& operator=(const SlowCallerStreams&) = delete;

 private:
  std::vector<Device> devices_;
};

/// The "large" size of the kernel tests (many blocks, several waves of a vectorized loop): 1 << 20
/// elements, and 1 << 14 where the CUDA kernels run on emulated GPUs, thousands of times slower
/// (still 64 blocks of 256 threads). Emulated builds test their CPU cases at this size too; the
/// release and cpu presets test the CPU at full size.
inline constexpr int64_t kLargeSize = MINITRAIN_CUDA_EMULATED ? int64_t{1} << 14 : int64_t{1} << 20;

/// True where MINITRAIN_TEST_MAX_ELEMENTS is set and `elements` exceeds it: a kernel test's size
/// loop skips that size (`if (testing::over_size_cap(n)) continue;`). The racecheck stage
/// (scripts/racecheck_kernels.sh) sets 4096: racecheck's cost is per access, and a larger size
/// runs the same code (more blocks, more grid-stride rounds) as the odd sizes below it. Unset:
/// every size runs.
bool over_size_cap(int64_t elements);

/// Host values drawn from U(lo, hi) with std::mt19937 (independent of minitrain's own RNG).
std::vector<float> random_floats(int64_t n, uint32_t seed, float lo = -1.f, float hi = 1.f);
std::vector<double> random_doubles(int64_t n, uint32_t seed, double lo = -1.0, double hi = 1.0);
/// Small integers in [lo, hi] as floats: sums and products of them are exact in float32.
std::vector<float> random_small_ints(int64_t n, uint32_t seed, int lo = -4, int hi = 4);

/// A tensor of U(lo, hi) values (float32 or float64) on `device`.
Tensor random_tensor(const Shape& shape, uint32_t seed, Device device = Device::cpu(),
                     DType dtype = DType::Float32, double lo = -1.0, double hi = 1.0);

/// `values` (numel of shape many) as a float32 or float64 tensor on `device`.
Tensor tensor_of(const std::vector<double>& values, const Shape& shape, Device device, DType dtype);

/// `values` as a 1-D float32 or float64 tensor on `device`.
Tensor vector_tensor(const std::vector<double>& values, DType dtype, Device device);
/// `n` U(-1, 1) draws times `scale`, rounded to float32 and held as doubles: values that a float32
/// and a float64 tensor both hold exactly, so one double reference serves both dtypes.
std::vector<double> float_exact_doubles(int64_t n, uint32_t seed, double scale = 1.0);

/// The tensor's values as doubles, on the host, whatever its device and dtype.
std::vector<double> host_values(const Tensor& t);
/// The largest |value| of a tensor, on the host (named apart from kernels/reduce.h max_abs).
double host_max_abs(const Tensor& t);

/// Mean, (population) variance, min and max of `v`, accumulated in double: for checking the
/// distribution of random draws.
struct Moments {
  double mean = 0, var = 0, min = 0, max = 0;
};
Moments moments(const std::vector<double>& v);

/// The folder of tests/fixtures: $MINITRAIN_TEST_DATA_DIR when set and not empty (a test program
/// moved off its source tree, as in the GPU run kit's bundle: docs/gpu_kit.md), else the source
/// tree's, fixed at compile time.
std::string test_data_dir();

/// The what() of the minitrain::Error that f throws, or "(no exception)": for checking that a
/// message names the values involved.
std::string error_message(const std::function<void()>& f);

/// |got - want| <= atol + rtol * |want| elementwise, same shape; the message names the worst
/// element. Use as EXPECT_TRUE(allclose(...)) or via EXPECT_ALLCLOSE.
::testing::AssertionResult allclose(const Tensor& got, const Tensor& want, double atol,
                                    double rtol);
::testing::AssertionResult allclose(const std::vector<double>& got, const std::vector<double>& want,
                                    double atol, double rtol);

}  // namespace minitrain::testing

#define EXPECT_ALLCLOSE(got, want, atol, rtol) \
  EXPECT_TRUE(::minitrain::testing::allclose((got), (want), (atol), (rtol)))
#define ASSERT_ALLCLOSE(got, want, atol, rtol) \
  ASSERT_TRUE(::minitrain::testing::allclose((got), (want), (atol), (rtol)))
