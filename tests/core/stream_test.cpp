#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <utility>

#include "core/error.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "tests/support/test_util.h"

#if MINITRAIN_CUDA_EMULATED
#include "cuda_emu/testing.h"
#endif

namespace minitrain {
namespace {

class StreamTest : public testing::DeviceTest {};

TEST_P(StreamTest, EventsTimeWorkInOrder) {
  const Device d = device();
  Event start = Event::create(d), stop = Event::create(d);
  const Stream& s = current_stream(d);
  start.record(s);
  Tensor t = Tensor::zeros({1 << 20}, DType::Float32, d);
  stop.record(s);
  stop.synchronize();
  EXPECT_TRUE(stop.query());
  EXPECT_GE(stop.elapsed_ms_since(start), 0.0);
}

TEST_P(StreamTest, GuardSwitchesTheCurrentStreamForAScope) {
  const Device d = device();
  const Stream& before = current_stream(d);
  Stream side = Stream::create(d);
  {
    StreamGuard g(side);
    if (d.is_cuda()) {
      EXPECT_EQ(current_stream(d).native_handle(), side.native_handle());
    }
    Tensor t = Tensor::zeros({1000}, DType::Float32, d);  // queued on `side`
    EXPECT_EQ(testing::host_max_abs(t), 0.0);
  }
  EXPECT_EQ(&current_stream(d), &before);
}

TEST_P(StreamTest, EachThreadHasItsOwnStream) {
  const Device d = device();
  CUstream_st* main_handle = current_stream(d).native_handle();
  CUstream_st* other_handle = nullptr;
  std::thread([&] { other_handle = current_stream(d).native_handle(); }).join();
  if (d.is_cuda()) {
    EXPECT_NE(main_handle, other_handle);
  } else {
    EXPECT_EQ(main_handle, nullptr);
  }
}

TEST_P(StreamTest, WaitForOrdersTwoStreams) {
  const Device d = device();
  Stream producer = Stream::create(d), consumer = Stream::create(d);
  Event done = Event::create(d);
  Tensor src = testing::random_tensor({1 << 16}, 3, d);
  Tensor dst = Tensor::empty({1 << 16}, DType::Float32, d);
  {
    StreamGuard g(producer);
    dst.copy_(src);
    done.record(producer);
  }
  consumer.wait_for(done);
  consumer.synchronize();
  EXPECT_EQ(testing::host_values(dst), testing::host_values(src));
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(StreamTest);

TEST(StreamErrors, MismatchedDevicesAreRejected) {
  const Device beyond = Device::cuda(cuda_device_count());
  EXPECT_THROW(Stream::create(beyond), DeviceError);
  EXPECT_THROW(Event::create(beyond), DeviceError);
  EXPECT_THROW(DeviceGuard{beyond}, DeviceError);
}

#if MINITRAIN_CUDA_EMULATED
// After a device fault the runtime's calls return the fault, cudaSetDevice included. Destroying a
// stream of the faulted device from another current device must not throw (which would end the
// process in a destructor); the fault is reported by the next call that checks.
TEST(StreamCuda, DestroyingAStreamAfterADeviceFaultReportsTheFaultInsteadOfTerminating) {
  if (cuda_device_count() < 2)
    GTEST_SKIP() << "needs 2 CUDA devices, found " << cuda_device_count();
  DeviceGuard on0(Device::cuda(0));
  {
    Stream s = Stream::create(Device::cuda(1));
    mtemu::inject_device_fault(1, "a kernel read out of bounds");
    Stream other = Stream::create(Device::cuda(0));
    s = std::move(other);  // move-assignment destroys the faulted device's stream first
  }
  const std::string msg = testing::error_message([] { DeviceGuard on1(Device::cuda(1)); });
  mtemu::clear_device_fault(1);
  EXPECT_NE(msg.find("a kernel read out of bounds"), std::string::npos) << msg;
}
#endif

}  // namespace
}  // namespace minitrain
