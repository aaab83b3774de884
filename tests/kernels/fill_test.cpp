// fill, zero_ and copy against plain loops, on every device.

#include "kernels/fill.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/parallel_for.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::allclose;
using ::testing::HasSubstr;
using testing::host_max_abs;
using testing::host_values;
using testing::random_tensor;

class FillTest : public testing::DeviceTest {};

TEST_P(FillTest, SetsEveryElementOnOddSizes) {
  for (DType dtype : {DType::Float32, DType::Float64})
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000},
                      testing::kLargeSize}) {  // odd sizes hit the grid-stride tails
      Tensor t = Tensor::zeros({n}, dtype, device());
      fill(t, 2.5);
      ASSERT_GT(host_max_abs(t), 0.0);
      // exact: 2.5 is representable in both types and fill only stores it
      EXPECT_ALLCLOSE(host_values(t), std::vector<double>(size_t(n), 2.5), 0.0, 0.0)
          << "n=" << n << " " << dtype;
    }
}

TEST_P(FillTest, ConvertsValueToTheTensorType) {
  Tensor t = Tensor::zeros({3}, DType::Float32, device());
  fill(t, 0.1);
  // 0.1 is not a float; the stored value is its nearest float, exactly
  EXPECT_ALLCLOSE(host_values(t), std::vector<double>(3, double(0.1f)), 0.0, 0.0);
}

TEST_P(FillTest, ZeroClearsEveryElement) {
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000}, testing::kLargeSize}) {
    Tensor t = random_tensor({n}, 11, device(), DType::Float32, 1.0, 2.0);
    ASSERT_GT(host_max_abs(t), 0.0);  // so that a no-op zero_ fails
    zero_(t);
    EXPECT_EQ(host_max_abs(t), 0.0) << "n=" << n;
  }
}

TEST_P(FillTest, ZeroAllClearsEveryTensorOfAList) {
  // Sizes around the pieces it cuts (kElementwiseGrain elements), both types in one list.
  std::vector<Tensor> ts;
  for (int64_t n : {int64_t{1}, int64_t{7}, kElementwiseGrain + 1, 3 * kElementwiseGrain - 5,
                    testing::kLargeSize})
    for (DType dtype : {DType::Float32, DType::Float64}) {
      if (testing::over_size_cap(n)) continue;
      ts.push_back(Tensor::zeros({n}, dtype, device()));
      fill(ts.back(), -1.5);
    }
  Tensor kept = Tensor::zeros({5}, DType::Float32, device());
  fill(kept, 3.0);
  zero_all(ts);
  for (const Tensor& t : ts)
    EXPECT_ALLCLOSE(host_values(t), std::vector<double>(size_t(t.numel()), 0.0), 0.0, 0.0)
        << t.numel() << " " << t.dtype();
  EXPECT_ALLCLOSE(host_values(kept), std::vector<double>(5, 3.0), 0.0, 0.0);  // not in the list
  std::vector<Tensor> with_undefined = {Tensor::zeros({3}, DType::Float32, device()), Tensor()};
  EXPECT_THROW(zero_all(with_undefined), Error);
}

TEST_P(FillTest, CopyMatchesSourceOnOddSizes) {
  for (DType dtype : {DType::Float32, DType::Float64})
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000}, testing::kLargeSize}) {
      Tensor in = random_tensor({n}, 5, device(), dtype);
      Tensor out = Tensor::zeros({n}, dtype, device());
      copy(out, in);
      ASSERT_GT(host_max_abs(out), 0.0);
      EXPECT_FALSE(out.shares_storage_with(in));
      EXPECT_ALLCLOSE(out, in, 0.0, 0.0);  // a copy is bit-exact
    }
}

TEST_P(FillTest, CopyRejectsMismatchedOperands) {
  Tensor in = Tensor::zeros({2, 3}, DType::Float32, device());
  Tensor wrong_shape = Tensor::zeros({3, 2}, DType::Float32, device());
  try {
    copy(wrong_shape, in);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("copy"));
    EXPECT_THAT(e.what(), HasSubstr("[3, 2]"));
    EXPECT_THAT(e.what(), HasSubstr("[2, 3]"));
  }
  Tensor wrong_dtype = Tensor::zeros({2, 3}, DType::Float64, device());
  EXPECT_THROW(copy(wrong_dtype, in), DTypeError);
}

TEST_P(FillTest, UndefinedTensorIsAnError) {
  Tensor undefined;
  EXPECT_THROW(fill(undefined, 1.0), Error);
  Tensor in = Tensor::zeros({2}, DType::Float32, device());
  EXPECT_THROW(copy(undefined, in), Error);
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(FillTest);

}  // namespace
}  // namespace minitrain
