// PinnedStaging: several threads stage batches at once, each in a buffer of its own; a buffer
// still being filled is never handed to another thread, and a buffer is refilled only after its
// copy has completed, so every device batch holds what its own fill wrote.

#include "data/pinned_staging.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "core/allocator.h"
#include "core/error.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::host_values;

void fill_with(Tensor& t, float v) {
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = v;
}

TEST(PinnedStagingCuda, ABufferBeingFilledIsNeverHandedOut) {
  if (cuda_device_count() < 1) GTEST_SKIP() << "needs a CUDA device: " << cuda_unavailable_reason();
  const Device gpu = Device::cuda(0);
  // Two buffers: while thread A holds one (its fill waits), thread B stages twice, so the round
  // robin comes back to A's buffer and must pass it by.
  PinnedStaging staging(gpu, current_stream(gpu), /*rows=*/4, /*in_dim=*/3, /*out_dim=*/1, 2);
  std::mutex mu;
  std::condition_variable cv;
  bool a_inside = false, b_done = false;
  Tensor ax, ay;
  std::thread a([&] {
    staging.stage(
        4,
        [&](Tensor& x, Tensor& y) {
          fill_with(x, 1.f);
          fill_with(y, 1.f);
          std::unique_lock<std::mutex> lock(mu);
          a_inside = true;
          cv.notify_all();
          cv.wait(lock, [&] { return b_done; });
        },
        ax, ay);
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return a_inside; });
  }
  std::vector<Tensor> bx(2), by(2);
  for (int k = 0; k < 2; ++k)
    staging.stage(
        3,
        [&](Tensor& x, Tensor& y) {
          fill_with(x, float(2 + k));
          fill_with(y, float(2 + k));
        },
        bx[k], by[k]);
  {
    std::lock_guard<std::mutex> lock(mu);
    b_done = true;
  }
  cv.notify_all();
  a.join();
  EXPECT_EQ(host_values(ax), std::vector<double>(12, 1.0));
  EXPECT_EQ(host_values(bx[0]), std::vector<double>(9, 2.0));
  EXPECT_EQ(host_values(bx[1]), std::vector<double>(9, 3.0));
  EXPECT_EQ(ax.device(), gpu);
}

TEST(PinnedStagingCuda, AFailedFillFreesItsBuffer) {
  if (cuda_device_count() < 1) GTEST_SKIP() << "needs a CUDA device: " << cuda_unavailable_reason();
  const Device gpu = Device::cuda(0);
  PinnedStaging staging(gpu, current_stream(gpu), 2, 1, 1, /*count=*/1);
  Tensor x, y;
  EXPECT_THROW(staging.stage(
                   2, [](Tensor&, Tensor&) { throw IoError("unreadable"); }, x, y),
               IoError);
  staging.stage(
      2,
      [](Tensor& hx, Tensor& hy) {
        fill_with(hx, 5.f);
        fill_with(hy, 6.f);
      },
      x, y);  // the one buffer is free again
  EXPECT_EQ(host_values(x), std::vector<double>(2, 5.0));
  EXPECT_EQ(host_values(y), std::vector<double>(2, 6.0));
}

// The device batches are the buffers' own, allocated with them (Note [buffers that live across
// steps] in core/buffer_slot.h): a batch nobody holds any more is rewritten by a later one with no
// allocation, a partial batch is a view of the same memory, and a batch still held keeps its
// values (the buffer then allocates anew).
TEST(PinnedStagingCuda, DeviceBatchesAreRewrittenOnlyWhenNoOneHoldsThem) {
  if (cuda_device_count() < 1) GTEST_SKIP() << "needs a CUDA device: " << cuda_unavailable_reason();
  const Device gpu = Device::cuda(0);
  PinnedStaging staging(gpu, current_stream(gpu), /*rows=*/4, /*in_dim=*/3, /*out_dim=*/1,
                        /*count=*/1);
  auto stage = [&](int64_t k, float v, Tensor& x, Tensor& y) {
    staging.stage(
        k,
        [&](Tensor& xh, Tensor& yh) {
          fill_with(xh, v);
          fill_with(yh, v);
        },
        x, y);
  };
  const int64_t before = memory_stats(gpu).allocations;
  Tensor x1, y1;
  stage(4, 1.f, x1, y1);
  const void* first = x1.raw_data();
  x1 = Tensor();
  y1 = Tensor();
  Tensor x2, y2;
  stage(3, 2.f, x2, y2);  // a partial batch: the first rows of the same buffer
  EXPECT_EQ(x2.raw_data(), first);
  EXPECT_EQ(x2.shape(), (Shape{3, 3}));
  EXPECT_EQ(memory_stats(gpu).allocations, before);  // nothing new since construction

  Tensor x3, y3;
  stage(4, 3.f, x3, y3);  // x2 is still held: new memory, x2 keeps its rows
  EXPECT_NE(x3.raw_data(), first);
  EXPECT_EQ(memory_stats(gpu).allocations, before + 2);
  EXPECT_EQ(host_values(x2), std::vector<double>(9, 2.0));
  EXPECT_EQ(host_values(y2), std::vector<double>(3, 2.0));
  EXPECT_EQ(host_values(x3), std::vector<double>(12, 3.0));
}

}  // namespace
}  // namespace minitrain
