// The caching logic of the CUDA allocator, run against host memory posing as a device of known
// capacity, so reuse, statistics, the cap and out-of-memory errors are tested without a GPU.

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "core/caching_allocator.h"
#include "core/error.h"

namespace minitrain {
namespace {

struct FakeDeviceState {
  uint64_t capacity = 0, used = 0;
  int raw_allocs = 0, raw_frees = 0, syncs = 0;
  bool fail_next_free = false;
  const void* stream = nullptr;
  std::set<void*> live;
  // hold: raw_alloc waits (inside the allocator's lock) until hold is false again; waiting tells
  // that it is there.
  std::mutex gate_mutex;
  std::condition_variable gate;
  bool hold = false, waiting = false;
};

class FakeDevice final : public RawMemory {
 public:
  explicit FakeDevice(FakeDeviceState* s) : s_(s) {}
  void* raw_alloc(std::size_t bytes) override {
    {
      std::unique_lock<std::mutex> lock(s_->gate_mutex);
      if (s_->hold) {
        s_->waiting = true;
        s_->gate.notify_all();
        s_->gate.wait(lock, [&] { return !s_->hold; });
        s_->waiting = false;
      }
    }
    if (s_->used + bytes > s_->capacity) return nullptr;
    void* p = std::malloc(bytes);
    s_->used += bytes;
    ++s_->raw_allocs;
    s_->live.insert(p);
    sizes_[p] = bytes;
    return p;
  }
  void raw_free(void* p) override {
    const bool fail =
        s_->fail_next_free;  // as cudaFree after a fault: the block is gone, and it says so
    s_->fail_next_free = false;
    s_->used -= sizes_.at(p);
    sizes_.erase(p);
    s_->live.erase(p);
    ++s_->raw_frees;
    std::free(p);
    if (fail) throw std::runtime_error("raw_free failed");
  }
  uint64_t device_free_bytes() override { return s_->capacity - s_->used; }
  const void* current_stream() override { return s_->stream; }
  void synchronize() override { ++s_->syncs; }

 private:
  FakeDeviceState* s_;
  std::map<void*, std::size_t> sizes_;
};

constexpr uint64_t kMiB = 1 << 20;

class CachingAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state.capacity = 64 * kMiB;
    alloc = std::make_unique<CachingAllocator>("fake:0", std::make_unique<FakeDevice>(&state));
  }
  FakeDeviceState state;
  std::unique_ptr<CachingAllocator> alloc;
};

TEST_F(CachingAllocatorTest, RoundsSmallTo512AndLargeTo2MiB) {
  EXPECT_EQ(CachingAllocator::round_size(0), 512u);
  EXPECT_EQ(CachingAllocator::round_size(1), 512u);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024u);
  EXPECT_EQ(CachingAllocator::round_size(kMiB), 2 * kMiB);
  EXPECT_EQ(CachingAllocator::round_size(5 * kMiB + 1), 6 * kMiB);
}

TEST_F(CachingAllocatorTest, ReusesAFreedBlockWithoutTouchingTheDevice) {
  void* a = alloc->allocate(1000);
  alloc->deallocate(a);
  void* b = alloc->allocate(900);  // same 1 KiB class
  EXPECT_EQ(a, b);
  EXPECT_EQ(state.raw_allocs, 1);
  // Both handouts count as allocations (what a training step asks for), one of them raw.
  EXPECT_EQ(alloc->stats().allocations, 2u);
  EXPECT_EQ(alloc->stats().raw_allocs, 1u);
  alloc->deallocate(b);
}

TEST_F(CachingAllocatorTest, KeepsStatistics) {
  void* a = alloc->allocate(3 * kMiB);  // 4 MiB block
  void* b = alloc->allocate(100);       // 512 B block
  MemoryStats s = alloc->stats();
  EXPECT_EQ(s.in_use, 4 * kMiB + 512);
  EXPECT_EQ(s.cached, 0u);
  EXPECT_EQ(s.live_blocks, 2u);
  alloc->deallocate(a);
  s = alloc->stats();
  EXPECT_EQ(s.in_use, 512u);
  EXPECT_EQ(s.cached, 4 * kMiB);
  EXPECT_EQ(s.peak, 4 * kMiB + 512);
  alloc->reset_peak();
  EXPECT_EQ(alloc->stats().peak, 512u);
  alloc->empty_cache();
  EXPECT_EQ(alloc->stats().cached, 0u);
  EXPECT_EQ(state.used, 512u);
  alloc->deallocate(b);
}

TEST_F(CachingAllocatorTest, DoesNotServeSmallRequestsFromHugeBlocks) {
  void* big = alloc->allocate(16 * kMiB);
  alloc->deallocate(big);
  void* small = alloc->allocate(1000);
  EXPECT_NE(small, big);
  EXPECT_EQ(state.raw_allocs, 2);
  alloc->deallocate(small);
}

TEST_F(CachingAllocatorTest, ReusesBlocksOnlyOnTheirOwnStream) {
  int s1 = 0, s2 = 0;
  state.stream = &s1;
  void* a = alloc->allocate(4096);
  alloc->deallocate(a);
  state.stream = &s2;
  void* b = alloc->allocate(4096);
  EXPECT_NE(a, b);  // the first stream's kernels may still be reading `a`
  alloc->deallocate(b);
  state.stream = &s1;
  void* c = alloc->allocate(4096);
  EXPECT_EQ(c, a);
  alloc->deallocate(c);
}

TEST_F(CachingAllocatorTest, FreesTheCacheBeforeGivingUp) {
  void* a = alloc->allocate(20 * kMiB);
  alloc->deallocate(a);                  // 20 MiB cached (too small to serve 50), 44 MiB free
  void* b = alloc->allocate(50 * kMiB);  // fits only once the cache is returned
  EXPECT_NE(b, nullptr);
  EXPECT_EQ(state.raw_frees, 1);
  EXPECT_GE(state.syncs, 1);  // waited for queued work before returning blocks
  alloc->deallocate(b);
}

TEST_F(CachingAllocatorTest, OutOfMemoryNamesRequestedFreeAndCap) {
  void* a = alloc->allocate(40 * kMiB);
  try {
    alloc->allocate(30 * kMiB);
    FAIL() << "no error";
  } catch (const OutOfMemory& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("fake:0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("30.00 MiB"), std::string::npos) << msg;  // requested
    EXPECT_NE(msg.find("in use 40.00 MiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("device free 24.00 MiB"), std::string::npos) << msg;
  }
  alloc->deallocate(a);
}

TEST_F(CachingAllocatorTest, EnforcesTheCap) {
  alloc->set_cap(10 * kMiB);
  void* a = alloc->allocate(6 * kMiB);
  try {
    alloc->allocate(6 * kMiB);
    FAIL() << "the cap was not enforced";
  } catch (const OutOfMemory& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("cap 10.00 MiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("free under cap 4.00 MiB"), std::string::npos) << msg;
  }
  EXPECT_EQ(alloc->stats().cap, 10 * kMiB);
  alloc->deallocate(a);
  alloc->set_cap(0);
  void* b = alloc->allocate(12 * kMiB);  // no cap: fits on the device
  alloc->deallocate(b);
}

TEST_F(CachingAllocatorTest, IgnoresForeignPointers) {
  int not_ours = 0;
  alloc->deallocate(&not_ours);
  alloc->deallocate(nullptr);
  EXPECT_EQ(alloc->stats().live_blocks, 0u);
}

TEST_F(CachingAllocatorTest, ReturnsEverythingOnDestruction) {
  void* a = alloc->allocate(kMiB);
  alloc->deallocate(a);
  alloc.reset();
  EXPECT_TRUE(state.live.empty());
}

// A free that fails while the cache is returned (a fault reported by cudaFree) leaves the books
// consistent: every block is still given back, none stays listed as cached, so a later release
// never frees one twice; the failure reaches the caller.
TEST_F(CachingAllocatorTest, AFreeThatFailsMidReleaseLeavesTheCacheConsistent) {
  void* a = alloc->allocate(1000);
  void* b = alloc->allocate(3000);
  alloc->deallocate(a);
  alloc->deallocate(b);
  ASSERT_EQ(state.raw_frees, 0);
  state.fail_next_free = true;
  EXPECT_THROW(alloc->empty_cache(), std::runtime_error);
  EXPECT_EQ(alloc->stats().cached, 0u);
  EXPECT_NO_THROW(alloc->empty_cache());
  EXPECT_EQ(state.raw_frees, 2);
  EXPECT_TRUE(state.live.empty());
}

}  // namespace
}  // namespace minitrain

namespace minitrain {
namespace {

// Note [graph memory pool]: what a capture takes stays the graph's until the pool is released.
TEST_F(CachingAllocatorTest, AGraphPoolKeepsItsBlocksFromEveryoneElseUntilReleased) {
  int capture_stream = 0, other_stream = 0;
  state.stream = &capture_stream;
  void* warm = alloc->allocate(1000);  // a warm-up step's temporary, cached on its stream
  alloc->deallocate(warm);
  const uint64_t pool = alloc->begin_pool(&capture_stream);
  void* a = alloc->allocate(900);  // taken from the cache into the pool
  EXPECT_EQ(a, warm);
  EXPECT_EQ(state.raw_allocs, 1);
  alloc->deallocate(a);  // back to the pool: the capture's next request reuses it
  void* b = alloc->allocate(1000);
  EXPECT_EQ(b, a);
  void* kept = alloc->allocate(600);  // a block of the graph that outlives the capture (new)
  EXPECT_EQ(state.raw_allocs, 2);
  alloc->deallocate(b);
  state.stream = &other_stream;
  void* elsewhere = alloc->allocate(1000);  // another stream's request: never the pool's
  EXPECT_NE(elsewhere, a);
  alloc->deallocate(elsewhere);
  state.stream = &capture_stream;
  void* worker = nullptr;  // another thread on the capturing stream (a loader's worker): neither
  std::thread([&] { worker = alloc->allocate(1000); }).join();
  EXPECT_NE(worker, a);
  alloc->deallocate(worker);
  alloc->end_pool_capture(pool);
  EXPECT_EQ(alloc->pool_bytes(pool), 2048u);  // a's 1 KiB block free in the pool, kept's live
  // After the capture, eager work on the capturing stream gets none of the graph's blocks.
  void* eager = alloc->allocate(1000);
  EXPECT_NE(eager, a);
  alloc->deallocate(eager);
  alloc->deallocate(kept);  // the graph's, freed: it stays in the pool
  void* eager2 = alloc->allocate(600);
  EXPECT_NE(eager2, kept);
  alloc->deallocate(eager2);
  alloc->empty_cache();  // the pool's blocks are not the cache's to give back
  EXPECT_EQ(alloc->pool_bytes(pool), 2048u);
  EXPECT_EQ(alloc->stats().cached, 2048u);
  EXPECT_EQ(state.live.size(), 2u);
  alloc->release_pool(pool);  // the graph is gone: its blocks serve everyone again
  EXPECT_EQ(alloc->pool_bytes(pool), 0u);
  void* after = alloc->allocate(1000);
  EXPECT_EQ(after, a);
  alloc->deallocate(after);
  EXPECT_EQ(alloc->stats().in_use, 0u);
  alloc->empty_cache();
  EXPECT_TRUE(state.live.empty());
}

// A capture's request takes the closest fit among its pool's free blocks and the cache's, as the
// eager step's request takes the closest among all the blocks its step freed: a looser pool block
// taken for a small request would leave a later, larger request of the capture without a block,
// a cudaMalloc that the capture refuses (the float16 step with clipping captured by GraphStep hit
// it: docs/cuda_graph.md).
TEST_F(CachingAllocatorTest, ACaptureTakesTheClosestFitOfItsPoolAndTheCache) {
  int s = 0;
  state.stream = &s;
  void* small = alloc->allocate(1024);  // a warm-up step's two temporaries, cached
  void* large = alloc->allocate(2048);
  alloc->deallocate(small);
  alloc->deallocate(large);
  const uint64_t pool = alloc->begin_pool(&s);
  void* big = alloc->allocate(2048);  // from the cache into the pool, then free in the pool
  EXPECT_EQ(big, large);
  alloc->deallocate(big);
  void* one = alloc->allocate(1024);  // the cache's 1 KiB block is closer than the pool's 2 KiB
  EXPECT_EQ(one, small);
  void* two = alloc->allocate(2048);  // so the 2 KiB request still finds its block
  EXPECT_EQ(two, large);
  EXPECT_EQ(state.raw_allocs, 2);
  alloc->deallocate(one);
  alloc->deallocate(two);
  alloc->end_pool_capture(pool);
  EXPECT_EQ(alloc->pool_bytes(pool), 3072u);
  alloc->release_pool(pool);
  alloc->empty_cache();
  EXPECT_TRUE(state.live.empty());
}

TEST_F(CachingAllocatorTest, ABlockLiveWhenItsPoolIsReleasedReturnsToTheCache) {
  int s = 0;
  state.stream = &s;
  const uint64_t pool = alloc->begin_pool(&s);
  void* p = alloc->allocate(4096);
  alloc->end_pool_capture(pool);
  alloc->release_pool(pool);
  alloc->deallocate(p);
  void* q = alloc->allocate(4096);
  EXPECT_EQ(q, p);
  alloc->deallocate(q);
  EXPECT_EQ(alloc->stats().cached, 4096u);
}

}  // namespace
}  // namespace minitrain

namespace minitrain {
namespace {

// Runs `query` on another thread while a third thread is inside allocate() (holding the
// allocator's lock, waiting in raw_alloc); true when the query returned while the lock was held.
// A query that takes the lock would wait for the allocation, which waits for this function: the
// wait is bounded, and the allocation then let go, so a failure fails instead of hanging.
bool answers_while_the_lock_is_held(FakeDeviceState& state, CachingAllocator& alloc,
                                    const std::function<void()>& query) {
  {
    std::lock_guard<std::mutex> lock(state.gate_mutex);
    state.hold = true;
  }
  void* block = nullptr;
  std::thread holder([&] { block = alloc.allocate(1 << 20); });  // a new block: raw_alloc
  {
    std::unique_lock<std::mutex> lock(state.gate_mutex);
    state.gate.wait(lock, [&] { return state.waiting; });
  }
  std::future<void> answered = std::async(std::launch::async, query);
  const bool in_time = answered.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  {
    std::lock_guard<std::mutex> lock(state.gate_mutex);
    state.hold = false;
  }
  state.gate.notify_all();
  holder.join();
  answered.get();
  alloc.deallocate(block);
  alloc.empty_cache();  // the next call's request reaches raw_alloc again
  return in_time;
}

// Note [capture_pool_here without the lock]: while no pool captures, capture_pool_here (every
// BufferSlot::get asks it) and pool_alive answer without the allocator's mutex; during a capture
// they answer as before: the pool for the capturing thread on its stream, 0 for anyone else, and
// 0 again once the capture ends or its pool is released mid-capture (an aborted capture).
TEST_F(CachingAllocatorTest, CapturePoolHereTakesNoLockWhileNothingCaptures) {
  int s = 0, other = 0;
  state.stream = &s;
  uint64_t here = 99;
  bool alive = true;
  EXPECT_TRUE(answers_while_the_lock_is_held(state, *alloc, [&] {
    here = alloc->capture_pool_here();
    alive = alloc->pool_alive(1);
  }));
  EXPECT_EQ(here, 0u);
  EXPECT_FALSE(alive);

  const uint64_t pool = alloc->begin_pool(&s);
  EXPECT_EQ(alloc->capture_pool_here(), pool);  // the capturing thread on its stream
  EXPECT_TRUE(alloc->pool_alive(pool));
  state.stream = &other;
  EXPECT_EQ(alloc->capture_pool_here(), 0u);  // another stream of that thread
  state.stream = &s;
  uint64_t on_another_thread = 99;
  std::thread([&] { on_another_thread = alloc->capture_pool_here(); }).join();
  EXPECT_EQ(on_another_thread, 0u);
  alloc->end_pool_capture(pool);
  alloc->end_pool_capture(pool);  // twice: counted once
  EXPECT_EQ(alloc->capture_pool_here(), 0u);
  EXPECT_TRUE(alloc->pool_alive(pool));  // the graph lives: a slot keeps its buffers for it
  EXPECT_TRUE(
      answers_while_the_lock_is_held(state, *alloc, [&] { here = alloc->capture_pool_here(); }));
  EXPECT_EQ(here, 0u);
  alloc->release_pool(pool);
  EXPECT_FALSE(alloc->pool_alive(pool));

  // A capture that fails is released while still capturing: nothing captures afterwards.
  const uint64_t aborted = alloc->begin_pool(&s);
  EXPECT_EQ(alloc->capture_pool_here(), aborted);
  alloc->release_pool(aborted);
  EXPECT_EQ(alloc->capture_pool_here(), 0u);
  EXPECT_TRUE(answers_while_the_lock_is_held(state, *alloc, [&] {
    here = alloc->capture_pool_here();
    alive = alloc->pool_alive(aborted);
  }));
  EXPECT_EQ(here, 0u);
  EXPECT_FALSE(alive);
}

}  // namespace
}  // namespace minitrain
