// Copies between two GPUs (Tensor::to): finished when `to` returns, as core/tensor.h promises,
// so the source may be dropped at once; and peer access is switched on for the pair.
//
// The copy runs on the destination's stream, which is slowed down here (on emulated GPUs); the
// source's block goes back to the cache on the source's stream and a fill kernel there takes it
// straight away. A copy still queued when `to` returned would read the fill's values.

#include <gtest/gtest.h>

#include <vector>

#include "core/stream.h"
#include "core/tensor.h"
#include "kernels/fill.h"
#include "tests/support/test_util.h"

#if MINITRAIN_CUDA_EMULATED
#include "cuda_emu/testing.h"
#endif

namespace minitrain {
namespace {

TEST(DeviceCopyCuda, GpuToGpuCopyIsDoneWhenToReturns) {
  if (cuda_device_count() < 2)
    GTEST_SKIP() << "needs 2 CUDA devices, found " << cuda_device_count() << " "
                 << cuda_unavailable_reason();
  const Device src_device = Device::cuda(0), dst_device = Device::cuda(1);
  const Tensor host = testing::random_tensor(Shape({1000}), 5);
  Tensor moved;
  {
    testing::SlowCallerStreams slow({dst_device}, 20000);
    Tensor src = host.to(src_device);
    moved = src.to(dst_device);
    src = Tensor();  // its block is cached on cuda:0's stream now
    Tensor reuse = Tensor::empty(Shape({1000}), DType::Float32, src_device);
    fill(reuse, 7.0);
    synchronize(src_device);
  }
  EXPECT_EQ(testing::host_values(moved), testing::host_values(host));
#if MINITRAIN_CUDA_EMULATED
  EXPECT_TRUE(mtemu::peer_access_enabled(1, 0)) << "cuda:1 may read cuda:0's memory directly";
#endif
}

}  // namespace
}  // namespace minitrain
