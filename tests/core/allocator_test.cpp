#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "core/allocator.h"
#include "core/error.h"
#include "core/tensor.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

TEST(CpuAllocator, TracksInUseAndPeak) {
  Allocator& a = allocator_for(Device::cpu());
  const MemoryStats before = a.stats();
  void* p = a.allocate(1000);  // rounded to 1024 for alignment
  EXPECT_EQ(a.stats().in_use, before.in_use + 1024);
  EXPECT_GE(a.stats().peak, before.in_use + 1024);
  a.deallocate(p);
  EXPECT_EQ(a.stats().in_use, before.in_use);
}

TEST(CpuAllocator, ZeroBytesGiveAUniqueBlock) {
  Allocator& a = allocator_for(Device::cpu());
  void* p = a.allocate(0);
  void* q = a.allocate(0);
  EXPECT_NE(p, nullptr);
  EXPECT_NE(p, q);
  a.deallocate(p);
  a.deallocate(q);
}

TEST(CpuAllocator, CapRaisesOutOfMemoryNamingTheValues) {
  Allocator& a = allocator_for(Device::cpu());
  const uint64_t in_use = a.stats().in_use;
  a.set_cap(in_use + (1 << 20));
  try {
    Tensor::empty({1 << 20});  // 4 MiB > 1 MiB of headroom
    a.set_cap(0);
    FAIL() << "cap not enforced";
  } catch (const OutOfMemory& e) {
    a.set_cap(0);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("4.00 MiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cap"), std::string::npos) << msg;
  }
  EXPECT_NO_THROW(Tensor::empty({1 << 20}));
}

TEST(CpuAllocator, ManyThreadsAllocateAtOnce) {
  Allocator& a = allocator_for(Device::cpu());
  const uint64_t before = a.stats().live_blocks;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&a] {
      for (int i = 0; i < 2000; ++i) a.deallocate(a.allocate(size_t(64 + i)));
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(a.stats().live_blocks, before);
}

class CudaAllocatorTest : public testing::DeviceTest {};

TEST_P(CudaAllocatorTest, CachesFreedBlocks) {
  const Device d = device();
  { Tensor t = Tensor::empty({1 << 20}, DType::Float32, d); }
  const uint64_t raw = memory_stats(d).raw_allocs;
  const uint64_t cached = memory_stats(d).cached;
  EXPECT_GE(cached, uint64_t(4) << 20);
  { Tensor t = Tensor::empty({1 << 20}, DType::Float32, d); }
  EXPECT_EQ(memory_stats(d).raw_allocs, raw);
  empty_cache(d);
  EXPECT_EQ(memory_stats(d).cached, 0u);
}

TEST_P(CudaAllocatorTest, CapRaisesOutOfMemory) {
  const Device d = device();
  empty_cache(d);
  set_memory_cap(d, memory_stats(d).in_use + (8u << 20));
  EXPECT_THROW(Tensor::empty({4 << 20}, DType::Float32, d), OutOfMemory);  // 16 MiB
  set_memory_cap(d, 0);
}

TEST_P(CudaAllocatorTest, ImpossibleAllocationIsOutOfMemoryNotACrash) {
  EXPECT_THROW(Tensor::empty({int64_t(1) << 50}, DType::Float32, device()), OutOfMemory);
}

// Runs only where a GPU exists: the CPU instance would test nothing the tests above don't.
INSTANTIATE_TEST_SUITE_P(Devices, CudaAllocatorTest, ::testing::Values(Device::cuda(0)),
                         testing::device_param_name);

}  // namespace
}  // namespace minitrain
