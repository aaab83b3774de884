#include <gtest/gtest.h>

#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"

namespace minitrain {
namespace {

TEST(DeviceParse, AcceptsTheDocumentedSpellings) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("cuda"), Device::cuda(0));
  EXPECT_EQ(Device::parse("cuda:3"), Device::cuda(3));
  EXPECT_EQ(Device::parse("cuda:3").index(), 3);
  EXPECT_TRUE(Device::parse("cuda:1").is_cuda());
}

TEST(DeviceParse, AutoPicksTheFirstGpuElseTheCpu) {
  const Device d = Device::parse("auto");
  if (cuda_device_count() > 0) {
    EXPECT_EQ(d, Device::cuda(0));
  } else {
    EXPECT_EQ(d, Device::cpu());
  }
}

TEST(DeviceParse, RejectsUnknownSpellingsNamingThem) {
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "CPU", "", "cuda:1:2"}) {
    try {
      Device::parse(bad);
      FAIL() << "accepted '" << bad << "'";
    } catch (const DeviceError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos)
          << e.what();
    }
  }
}

TEST(DeviceName, PrintsTorchStyle) {
  EXPECT_EQ(Device::cpu().str(), "cpu");
  EXPECT_EQ(Device::cuda(2).str(), "cuda:2");
}

// A runtime newer than the driver is named in plain words with the way out; one of the same major
// version as the driver, or older, is fine (minor version compatibility).
TEST(DriverAdvice, NamesTheDriverTheRuntimeNeeds) {
  EXPECT_EQ(cuda_driver_advice(13000, 12020),
            "the CUDA 13.0 runtime needs driver R580 or newer; this machine's driver supports "
            "CUDA 12.2 at most: build with a CUDA 12 toolkit, or update the driver");
  EXPECT_EQ(cuda_driver_advice(12080, 11040).substr(0, 48),
            "the CUDA 12.8 runtime needs driver R525 or newer");
  EXPECT_EQ(cuda_driver_advice(13000, 0),
            "the CUDA 13.0 runtime needs driver R580 or newer; this machine has no NVIDIA driver");
  EXPECT_EQ(cuda_driver_advice(12080, 12020), "");  // 12.8 runs on a 12.2 driver
  EXPECT_EQ(cuda_driver_advice(12020, 13000), "");
  EXPECT_EQ(cuda_driver_advice(0, 13000), "");  // no runtime: nothing to say
}

TEST(DeviceDiscovery, ReportsACountAndAReasonWhenZero) {
  const int n = cuda_device_count();
  EXPECT_GE(n, 0);
  if (n == 0) {
    EXPECT_FALSE(cuda_unavailable_reason().empty());
  }
  EXPECT_EQ(static_cast<int>(cuda_devices().size()), n);
  if (!cuda_compiled()) {
    EXPECT_EQ(n, 0);
  }
}

TEST(DeviceAvailability, MissingGpuIsAClearDeviceError) {
  const Device beyond = Device::cuda(cuda_device_count());  // one past the last GPU
  try {
    check_available(beyond);
    FAIL() << "no error for " << beyond;
  } catch (const DeviceError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(beyond.str()), std::string::npos) << msg;
  }
  EXPECT_NO_THROW(check_available(Device::cpu()));
}

TEST(DeviceAvailability, TensorOnMissingGpuThrowsDeviceError) {
  const Device beyond = Device::cuda(cuda_device_count());
  EXPECT_THROW(Tensor::empty({4}, DType::Float32, beyond), DeviceError);
  EXPECT_THROW(Tensor::from_vector(std::vector<float>{1, 2}, {2}, beyond), DeviceError);
  EXPECT_THROW(Tensor::zeros({2}).to(beyond), DeviceError);
}

TEST(DeviceVersions, PresentExactlyInCudaBuilds) {
  const CudaVersions v = cuda_versions();
  EXPECT_EQ(!v.runtime.empty(), cuda_compiled());
  EXPECT_EQ(!v.cublas.empty(), cuda_compiled());
}

}  // namespace
}  // namespace minitrain
