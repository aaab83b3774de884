// train/device_totals.h: the steps' losses and gradient norms kept on the device and read
// together, on the CPU and on cuda:0 (the emulated GPUs in CI).

#include "train/device_totals.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "kernels/fill.h"
#include "tests/core/io_test_util.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::DeviceTest;

Tensor scalar(float v, Device d) { return Tensor::from_vector(std::vector<float>{v}, {}).to(d); }

class DeviceTotalsTest : public DeviceTest {};

// Each step's slot holds its batches' float32 losses summed in float64 in batch order (what the
// host's `sum += loss.item()` gave) divided by its batch count, and its gradients' norm; a read
// empties the slots, so the next steps start from zero.
TEST_P(DeviceTotalsTest, ReadsEveryWaitingStepInOrderThenStartsAfresh) {
  DeviceTotals totals(device(), 4);
  const float a = 0.1f, b = 0.2f, c = 3.0f;
  totals.begin_step(2);
  totals.add_loss(scalar(a, device()));
  totals.add_loss(scalar(b, device()));
  totals.begin_step(1);
  totals.add_loss(scalar(c, device()));
  totals.add_grad_sum_sq(Tensor::from_vector(std::vector<double>{16.0}, {}).to(device()));
  EXPECT_EQ(totals.pending(), 2);
  const std::vector<StepTotals> got = totals.read();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].loss, (0.0 + double(a) + double(b)) / 2.0);  // bit for bit
  EXPECT_LT(got[0].grad_norm, 0.0);                             // none added
  EXPECT_EQ(got[1].loss, double(c));
  EXPECT_EQ(got[1].grad_norm, 4.0);
  EXPECT_EQ(totals.pending(), 0);
  EXPECT_TRUE(totals.read().empty());

  totals.begin_step(1);
  totals.add_loss(scalar(1.5f, device()));
  const std::vector<StepTotals> again = totals.read();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].loss, 1.5);  // not added to the first read's values
}

TEST_P(DeviceTotalsTest, RefusesAStepPastItsCapacityAndALossWithoutAStep) {
  DeviceTotals totals(device(), 2);
  testing::expect_error<Error>([&] { totals.add_loss(scalar(1.0f, device())); },
                               {"no step is open"});
  totals.begin_step(1);
  totals.begin_step(1);
  EXPECT_TRUE(totals.full());
  testing::expect_error<Error>([&] { totals.begin_step(1); }, {"all 2 slots wait to be read"});
  testing::expect_error<ShapeError>(
      [&] { totals.add_loss(Tensor::zeros({2}, DType::Float32, device())); }, {"is not one value"});
  totals.read();
  EXPECT_FALSE(totals.full());
  testing::expect_error<ValueError>([] { DeviceTotals(Device::cpu(), 0); },
                                    {"capacity must be >= 1, got 0"});
}

// A classifier's counts and label check written elsewhere (GraphStep's scratch) join the open
// slot in one add, and read back as class_counts()' and target_check()'s would.
TEST_P(DeviceTotalsTest, AddsAClassifiersCountsAndCheckToTheOpenStep) {
  DeviceTotals totals(device(), 2);
  totals.begin_step(1);
  totals.add_loss(scalar(0.5f, device()));
  totals.add_class_totals(
      Tensor::from_vector(std::vector<double>{3, 8, 0, 0, 0}, {5}).to(device()));
  totals.begin_step(1);
  totals.add_class_totals(
      Tensor::from_vector(std::vector<double>{1, 4, 1, 2, 9}, {5}).to(device()));
  const std::vector<StepTotals> got = totals.read();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(got[0].counted_rows);
  EXPECT_EQ(got[0].correct, 3.0);
  EXPECT_EQ(got[0].counted, 8.0);
  EXPECT_EQ(got[0].target_check[0], 0.0);
  EXPECT_EQ(got[0].loss, 0.5);
  EXPECT_EQ(got[1].correct, 1.0);
  EXPECT_EQ(got[1].counted, 4.0);
  EXPECT_EQ(got[1].target_check[0], 1.0);  // a bad label: row 2, label 9
  EXPECT_EQ(got[1].target_check[1], 2.0);
  EXPECT_EQ(got[1].target_check[2], 9.0);
  testing::expect_error<Error>(
      [&] { totals.add_class_totals(Tensor::zeros({5}, DType::Float64, device())); },
      {"no step is open"});
  totals.begin_step(1);
  testing::expect_error<DTypeError>(
      [&] { totals.add_class_totals(Tensor::zeros({5}, DType::Float32, device())); },
      {"want float64 [5] or [6], got float32"});
}

// A classifier whose batches may count nothing (Note [a batch that counts nothing, on the
// device]): the step's loss is its sum over the device's count of batches that counted, 0/0 when
// none did; the count comes through batch_count() or as the sixth of add_class_totals' fields.
TEST_P(DeviceTotalsTest, DividesTheLossByTheBatchesCountedOnTheDevice) {
  DeviceTotals totals(device(), 3);
  totals.begin_step(3);  // 3 batches, 2 of which counted
  totals.add_loss(scalar(0.5f, device()));
  totals.add_loss(scalar(0.0f, device()));
  totals.add_loss(scalar(0.25f, device()));
  Tensor batches = totals.batch_count();
  fill(batches, 2.0);
  totals.begin_step(1);  // counted nothing
  totals.add_loss(scalar(0.0f, device()));
  totals.add_class_totals(
      Tensor::from_vector(std::vector<double>{0, 3, 0, 0, 0, 0}, {6}).to(device()));
  totals.begin_step(1);  // the host's divisor: no count handed out
  totals.add_loss(scalar(0.5f, device()));
  const std::vector<StepTotals> got = totals.read();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_TRUE(got[0].batches_on_device);
  EXPECT_EQ(got[0].counted_batches, 2.0);
  EXPECT_EQ(got[0].loss, 0.75 / 2.0);
  EXPECT_TRUE(got[1].batches_on_device);
  EXPECT_EQ(got[1].counted_batches, 0.0);
  EXPECT_TRUE(std::isnan(got[1].loss));
  EXPECT_EQ(got[1].counted, 3.0);
  EXPECT_FALSE(got[2].batches_on_device);
  EXPECT_EQ(got[2].loss, 0.5);
}

// DeviceSums (the held-out evaluation's): float32 values widened and added in order, the bits of
// the host's `sum += value.item()`; one read brings every sum back and starts them afresh.
TEST_P(DeviceTotalsTest, DeviceSumsAddInOrderAndReadTogether) {
  DeviceSums sums(device(), 3);
  const float a = 0.1f, b = 0.2f;
  sums.add(0, scalar(a, device()));
  sums.add(0, scalar(b, device()));
  sums.add(2, Tensor::from_vector(std::vector<double>{0.3}, {}).to(device()));
  Tensor middle = sums.view(1, 1);
  EXPECT_EQ(middle.device(), device());
  const std::vector<double> got = sums.read();
  EXPECT_EQ(got, (std::vector<double>{0.0 + double(a) + double(b), 0.0, 0.3}));  // bit for bit
  EXPECT_EQ(sums.read(), (std::vector<double>{0, 0, 0}));
  testing::expect_error<ShapeError>(
      [&] { sums.add(1, Tensor::zeros({2}, DType::Float32, device())); }, {"is not one value"});
  testing::expect_error<ValueError>([&] { sums.view(2, 2); }, {"sums [2, 4) of 3"});
  testing::expect_error<ValueError>([] { DeviceSums(Device::cpu(), 0); },
                                    {"want >= 1 sums, got 0"});
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(DeviceTotalsTest);

}  // namespace
}  // namespace minitrain
