#include <gtest/gtest.h>

#include <cstdint>

#include "core/allocator.h"
#include "core/error.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::DeviceTest;

class TensorTest : public DeviceTest {};

TEST(TensorSizes, AByteCountBeyond64BitsIsAValueError) {
  // 2^62 float64 elements is a valid Shape, but 2^65 bytes: it used to wrap to a 0-byte block.
  EXPECT_THROW(Tensor::empty({int64_t{1} << 62}, DType::Float64), ValueError);
  // Beyond kMaxAllocationBytes (2^62): refused before any allocator rounds it up.
  EXPECT_THROW(Tensor::empty({int64_t{1} << 61}, DType::Float32), ValueError);
}

TEST_P(TensorTest, RoundTripsHostValuesOnOddSizes) {
  for (int64_t n : {1, 7, 1000, 1 << 20}) {
    const std::vector<float> values = testing::random_floats(n, 11);
    const Tensor t = Tensor::from_vector(values, {n}, device());
    EXPECT_EQ(t.device(), device());
    EXPECT_EQ(t.numel(), n);
    EXPECT_EQ(t.nbytes(), size_t(n) * 4);
    EXPECT_EQ(t.to_vector<float>(), values);
  }
}

TEST_P(TensorTest, ZerosAreZeroInBothDtypes) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    const Tensor t = Tensor::zeros({7, 13}, dt, device());
    EXPECT_EQ(t.dtype(), dt);
    for (double v : testing::host_values(t)) ASSERT_EQ(v, 0.0);
  }
}

TEST_P(TensorTest, ToDeviceAndBackPreservesDoubles) {
  const std::vector<double> values = testing::random_doubles(1001, 5);
  const Tensor host = Tensor::from_vector(values, {7, 11, 13});
  const Tensor there = host.to(device());
  EXPECT_EQ(there.shape(), Shape({7, 11, 13}));
  EXPECT_EQ(there.to(Device::cpu()).to_vector<double>(), values);
}

TEST_P(TensorTest, ToTheSameDeviceSharesStorage) {
  const Tensor t = Tensor::zeros({3}, DType::Float32, device());
  EXPECT_TRUE(t.to(device()).shares_storage_with(t));
  EXPECT_FALSE(t.clone().shares_storage_with(t));
}

TEST_P(TensorTest, CloneIsADeepCopy) {
  Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3}, device());
  Tensor b = a.clone();
  a.copy_(Tensor::from_vector(std::vector<float>{7, 8, 9}, {3}));
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{7, 8, 9}));
}

TEST_P(TensorTest, NarrowIsAViewOfRows) {
  std::vector<float> v(12);
  for (int i = 0; i < 12; ++i) v[size_t(i)] = float(i);
  Tensor t = Tensor::from_vector(v, {4, 3}, device());
  Tensor rows = t.narrow(1, 2);
  EXPECT_EQ(rows.shape(), Shape({2, 3}));
  EXPECT_EQ(rows.to_vector<float>(), (std::vector<float>{3, 4, 5, 6, 7, 8}));
  rows.copy_(Tensor::zeros({2, 3}));  // writes through to the parent
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{0, 1, 2, 0, 0, 0, 0, 0, 0, 9, 10, 11}));
  EXPECT_TRUE(rows.shares_storage_with(t));
  EXPECT_EQ(t.narrow(4, 0).numel(), 0);
}

TEST_P(TensorTest, AsyncCopyFromPinnedMemoryArrivesAfterTheStreamPassesIt) {
  const std::vector<float> values = testing::random_floats(1001, 9);
  Tensor pinned = Tensor::empty_pinned({1001});
  std::copy(values.begin(), values.end(), pinned.data<float>());
  Tensor there = Tensor::empty({1001}, DType::Float32, device());
  const Stream& s = current_stream(device());
  copy_bytes_async(there.raw_data(), device(), pinned.raw_data(), Device::cpu(), pinned.nbytes(),
                   s);
  Event done = Event::create(device());
  done.record(s);
  done.synchronize();
  EXPECT_EQ(there.to_vector<float>(), values);
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(TensorTest);

TEST(TensorBasics, PinnedTensorsAreOrdinaryCpuTensors) {
  Tensor t = Tensor::empty_pinned({7, 3}, DType::Float64);
  EXPECT_EQ(t.device(), Device::cpu());
  EXPECT_EQ(t.dtype(), DType::Float64);
  t.copy_(Tensor::zeros({7, 3}, DType::Float64));
  EXPECT_EQ(testing::host_max_abs(t), 0.0);
  EXPECT_EQ(t.clone().to_vector<double>(), std::vector<double>(21, 0.0));
}

TEST(TensorBasics, AsyncCopyRejectsAStreamOfAnotherDevice) {
  Tensor a = Tensor::zeros({4}), b = Tensor::zeros({4});
  const Device beyond = Device::cuda(cuda_device_count());
  // CPU to CPU needs no stream and completes at once.
  copy_bytes_async(a.raw_data(), Device::cpu(), b.raw_data(), Device::cpu(), a.nbytes(),
                   current_stream(Device::cpu()));
  EXPECT_THROW(copy_bytes_async(a.raw_data(), beyond, b.raw_data(), Device::cpu(), a.nbytes(),
                                current_stream(Device::cpu())),
               DeviceError);
}

TEST(TensorBasics, ReshapeSharesStorageAndInfers) {
  Tensor t = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor r = t.reshape({3, -1});
  EXPECT_EQ(r.shape(), Shape({3, 2}));
  EXPECT_TRUE(r.shares_storage_with(t));
  EXPECT_EQ(t.flatten().shape(), Shape({6}));
  EXPECT_THROW(t.reshape(std::vector<int64_t>{}), ShapeError);  // 6 elements do not fit in 0-d
  EXPECT_EQ(Tensor::zeros({1, 1}).reshape(std::vector<int64_t>{}).shape(), Shape({}));
}

TEST(TensorBasics, ReshapeRejectsWrongSizesNamingThem) {
  Tensor t = Tensor::zeros({2, 3});
  try {
    t.reshape({4, 2});
    FAIL();
  } catch (const ShapeError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("[2, 3]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[4, 2]"), std::string::npos) << msg;
  }
  EXPECT_THROW(t.reshape({-1, -1}), ShapeError);
  EXPECT_THROW(t.reshape({4, -1}), ShapeError);
  EXPECT_THROW(t.reshape({-2, 3}), ShapeError);
}

TEST(TensorBasics, NarrowRejectsOutOfRangeRows) {
  Tensor t = Tensor::zeros({4, 3});
  EXPECT_THROW(t.narrow(3, 2), ShapeError);
  EXPECT_THROW(t.narrow(-1, 1), ShapeError);
  EXPECT_THROW(Tensor::zeros({}).narrow(0, 1), ShapeError);
}

TEST(TensorBasics, FromVectorChecksTheCount) {
  try {
    Tensor::from_vector(std::vector<float>{1, 2, 3}, {2, 2});
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 2]"), std::string::npos) << e.what();
  }
}

TEST(TensorBasics, TypedAccessChecksTheDtype) {
  Tensor t = Tensor::zeros({2}, DType::Float64);
  EXPECT_NO_THROW(t.data<double>());
  EXPECT_THROW(t.data<float>(), DTypeError);
  EXPECT_THROW(t.to_vector<float>(), DTypeError);
}

TEST(TensorBasics, CopyChecksShapeAndDtype) {
  Tensor a = Tensor::zeros({2, 3});
  EXPECT_THROW(a.copy_(Tensor::zeros({3, 2})), ShapeError);
  EXPECT_THROW(a.copy_(Tensor::zeros({2, 3}, DType::Float64)), DTypeError);
  EXPECT_THROW(a.copy_(Tensor()), Error);
}

TEST(TensorBasics, UndefinedTensorThrowsOnUse) {
  Tensor t;
  EXPECT_FALSE(t.defined());
  EXPECT_THROW(t.shape(), Error);
  EXPECT_THROW(t.raw_data(), Error);
  EXPECT_EQ(t.str(), "tensor(undefined)");
}

TEST(TensorBasics, ItemReadsOneElement) {
  EXPECT_DOUBLE_EQ(Tensor::from_vector(std::vector<float>{2.5f}, {}).item(), 2.5);
  EXPECT_DOUBLE_EQ(Tensor::from_vector(std::vector<double>{-1.25}, {1, 1}).item(), -1.25);
  EXPECT_THROW(Tensor::zeros({2}).item(), ShapeError);
}

TEST(TensorBasics, DataIsAlignedForVectorLoads) {
  for (int64_t n : {1, 3, 17, 1000}) {
    Tensor t = Tensor::empty({n});
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % kCpuAlignment, 0u);
  }
}

TEST(TensorBasics, StorageLivesWhileAnyViewDoes) {
  const uint64_t before = memory_stats(Device::cpu()).live_blocks;
  Tensor view;
  {
    Tensor t = Tensor::zeros({1000});
    view = t.narrow(10, 5);
    EXPECT_EQ(memory_stats(Device::cpu()).live_blocks, before + 1);
  }
  EXPECT_EQ(memory_stats(Device::cpu()).live_blocks, before + 1);  // the view keeps it
  EXPECT_EQ(view.to_vector<float>(), std::vector<float>(5, 0.f));
  view = Tensor();
  EXPECT_EQ(memory_stats(Device::cpu()).live_blocks, before);
}

TEST(TensorPrint, PrintsTorchStyle) {
  EXPECT_EQ(Tensor::from_vector(std::vector<float>{1, -2.5f}, {2}).str(),
            "tensor([1.0000, -2.5000])");
  EXPECT_EQ(Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2}).str(),
            "tensor([[1.0000, 2.0000],\n        [3.0000, 4.0000]])");
  EXPECT_EQ(Tensor::from_vector(std::vector<double>{0.5}, {}).str(),
            "tensor(0.5000, dtype=float64)");
  EXPECT_EQ(Tensor::zeros({0, 3}).str(), "tensor([], size=[0, 3])");
}

TEST(TensorPrint, SummarisesLargeTensors) {
  std::vector<float> v(2000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i);
  const std::string s = Tensor::from_vector(v, {2000}).str();
  EXPECT_EQ(s, "tensor([0.0000, 1.0000, 2.0000, ..., 1997.0000, 1998.0000, 1999.0000])");
}

}  // namespace
}  // namespace minitrain
