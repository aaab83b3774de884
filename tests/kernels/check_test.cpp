#include <gtest/gtest.h>

#include "kernels/check.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

TEST(OperandChecks, AcceptCompatibleOperands) {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({2, 3});
  EXPECT_NO_THROW(check_compatible("op", {{"a", a}, {"b", b}}));
  EXPECT_NO_THROW(check_same_shape("op", {{"a", a}, {"b", b}}));
  EXPECT_NO_THROW(check_ndim("op", {"a", a}, 2));
}

TEST(OperandChecks, ShapeMismatchNamesTheOpAndBothShapes) {
  Tensor a = Tensor::zeros({32, 7}), b = Tensor::zeros({16, 8});
  EXPECT_THROW(check_same_shape("add", {{"a", a}, {"b", b}}), ShapeError);
  const std::string msg = testing::error_message([&] {
    check_same_shape("add", {{"a", a}, {"b", b}});
  });
  EXPECT_NE(msg.find("add"), std::string::npos) << msg;
  EXPECT_NE(msg.find("a [32, 7]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("b [16, 8]"), std::string::npos) << msg;
}

TEST(OperandChecks, DtypeMismatchIsDTypeError) {
  Tensor a = Tensor::zeros({2}), b = Tensor::zeros({2}, DType::Float64);
  EXPECT_THROW(check_compatible("mul", {{"a", a}, {"b", b}}), DTypeError);
  const std::string msg = testing::error_message([&] {
    check_compatible("mul", {{"a", a}, {"b", b}});
  });
  EXPECT_NE(msg.find("float64"), std::string::npos) << msg;
}

TEST(OperandChecks, UndefinedOperandIsNamed) {
  Tensor a = Tensor::zeros({2}), missing;
  const std::string msg = testing::error_message([&] {
    check_compatible("sub", {{"a", a}, {"grad", missing}});
  });
  EXPECT_NE(msg.find("'grad'"), std::string::npos) << msg;
}

TEST(OperandChecks, WrongRankNamesTheShape) {
  Tensor a = Tensor::zeros({2, 3, 4});
  const std::string msg = testing::error_message([&] { check_ndim("gemm", {"a", a}, 2); });
  EXPECT_NE(msg.find("[2, 3, 4]"), std::string::npos) << msg;
}

class CudaOperandChecks : public testing::DeviceTest {};

TEST_P(CudaOperandChecks, DeviceMismatchNamesBothDevices) {
  Tensor a = Tensor::zeros({3}), b = Tensor::zeros({3}, DType::Float32, device());
  const std::string msg = testing::error_message([&] {
    check_compatible("add", {{"a", a}, {"b", b}});
  });
  EXPECT_NE(msg.find("a on cpu"), std::string::npos) << msg;
  EXPECT_NE(msg.find("b on cuda:0"), std::string::npos) << msg;
}

INSTANTIATE_TEST_SUITE_P(Devices, CudaOperandChecks, ::testing::Values(Device::cuda(0)),
                         testing::device_param_name);

}  // namespace
}  // namespace minitrain
