// The emulated GPU's memory and race checks, each proved by a kernel with the bug it is for. The
// memory checks are the emu preset's AddressSanitizer and UBSan, the race checks the emu-tsan
// preset's ThreadSanitizer (cuda_emu/src/sanitizer.h): a report stops the program, so each case
// runs in a child process (a gtest death test) and expects the report and the kernel's name.

#include <cuda_runtime.h>

#include <cstdlib>
#include <vector>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include "core/stream.h"
#include "cuda_emu/counters.h"
#include "core/tensor.h"
#include "emu_test_util.h"

namespace minitrain::emu_testing {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressChecks = true;
#else
constexpr bool kAddressChecks = false;
#endif
#if defined(__SANITIZE_THREAD__)
constexpr bool kRaceChecks = true;
#else
constexpr bool kRaceChecks = false;
#endif

class CudaEmuChecks : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

#define SKIP_UNLESS(flag, preset) \
  if (!(flag)) GTEST_SKIP() << "this check needs the " preset " preset's sanitizer"

// ---- memory ----

__global__ void read_one_past_the_end_kernel(float* out, const float* in, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i <= n) out[0] += in[i];  // `<=`: thread n reads one past the end
}

void read_one_past_the_end() {
  DeviceBuffer<float> in(std::vector<float>(100, 1.f)), out(1);
  read_one_past_the_end_kernel<<<1, 128>>>(out.get(), in.get(), 100);
  cudaDeviceSynchronize();
}

TEST_F(CudaEmuChecks, AReadOnePastTheEndOfDeviceMemoryIsReported) {
  SKIP_UNLESS(kAddressChecks, "emu");
  // The stack frame names the kernel and its source line (the emulated presets build with -g1);
  // "[^\n]*": on that frame's line, not the emulator's "launched at" note.
  EXPECT_DEATH(read_one_past_the_end(),
               "heap-buffer-overflow.*in [^\n]*read_one_past_the_end_kernel[^\n]* "
               "[^\n]*emu_checks_test\\.cu:[0-9]+");
}

__global__ void shared_overrun_kernel(float* out) {
  __shared__ float tile[64];
  tile[threadIdx.x] = 1.f;  // launched with 65 threads
  __syncthreads();
  out[threadIdx.x] = tile[threadIdx.x];
}

void shared_overrun() {
  DeviceBuffer<float> out(65);
  shared_overrun_kernel<<<1, 65>>>(out.get());
  cudaDeviceSynchronize();
}

TEST_F(CudaEmuChecks, AWritePastASharedArrayIsReported) {
  SKIP_UNLESS(kAddressChecks, "emu");
  // UBSan sees the constant bound first; ASan the heap block behind it where UBSan cannot.
  EXPECT_DEATH(shared_overrun(), "(heap-buffer-overflow|out of bounds).*shared_overrun_kernel");
}

__global__ void misaligned_float4_kernel(float* out, const float* in) {
  const float4 v = *reinterpret_cast<const float4*>(in + 1);  // 4 bytes past a 256-byte boundary
  out[0] = v.x + v.y + v.z + v.w;
}

void misaligned_float4() {
  DeviceBuffer<float> in(std::vector<float>(16, 1.f)), out(1);
  misaligned_float4_kernel<<<1, 1>>>(out.get(), in.get());
  cudaDeviceSynchronize();
}

TEST_F(CudaEmuChecks, AMisalignedVectorLoadIsReported) {
  SKIP_UNLESS(kAddressChecks, "emu");
  EXPECT_DEATH(misaligned_float4(), "misaligned address.*misaligned_float4_kernel");
}

// minitrain's caching allocator rounds a 100-float tensor (400 bytes) up to a 512-byte block: a
// read one past the tensor's end lands in the block's slack, which the allocator marks in the
// order of its stream. A block back in the cache is marked whole, so a late read is caught too.
void read_past_a_tensor_in_its_blocks_slack() {
  const Device gpu = Device::cuda(0);
  DeviceGuard on(gpu);
  Tensor in = Tensor::from_vector(std::vector<float>(100, 1.f), Shape({100}), gpu);
  Tensor out = Tensor::zeros(Shape({1}), DType::Float32, gpu);
  read_one_past_the_end_kernel<<<1, 128, 0, current_stream(gpu).native_handle()>>>(
      out.data<float>(), in.data<float>(), 100);
  synchronize(gpu);
}

void read_a_tensor_after_it_went_back_to_the_cache() {
  const Device gpu = Device::cuda(0);
  DeviceGuard on(gpu);
  Tensor in = Tensor::from_vector(std::vector<float>(64, 1.f), Shape({64}), gpu);
  Tensor out = Tensor::zeros(Shape({1}), DType::Float32, gpu);
  const float* stale = in.data<float>();
  in = Tensor();  // its block is cached, not freed: without the mark a read would succeed
  read_one_past_the_end_kernel<<<1, 128, 0, current_stream(gpu).native_handle()>>>(
      out.data<float>(), stale, 10);
  synchronize(gpu);
}

TEST_F(CudaEmuChecks, AReadIntoTheCachingAllocatorsRoundingSlackIsReported) {
  SKIP_UNLESS(kAddressChecks, "emu");
  EXPECT_DEATH(read_past_a_tensor_in_its_blocks_slack(),
               "use-after-poison.*read_one_past_the_end_kernel");
}

TEST_F(CudaEmuChecks, AReadOfATensorWhoseBlockWentBackToTheCacheIsReported) {
  SKIP_UNLESS(kAddressChecks, "emu");
  EXPECT_DEATH(read_a_tensor_after_it_went_back_to_the_cache(),
               "use-after-poison.*read_one_past_the_end_kernel");
}

// ---- the same reports while a checker routes memory (Note [accesses routed to the checkers]) ----
// With the counters (or initcheck, or racecheck) on, device and shared memory carry the routing's
// shadow marks and every access takes ASan's report path into the emulator; a genuine error must
// still be ASan's own report, naming the same bug and kernel.

template <class F>
void with_counters_on(F bug) {
  mtemu::counters_collect(true);
  bug();
}

TEST_F(CudaEmuChecks, WithTheCountersOnAReadOnePastTheEndIsStillReported) {
  SKIP_UNLESS(kAddressChecks, "emu");
  EXPECT_DEATH(with_counters_on(read_one_past_the_end),
               "heap-buffer-overflow.*in [^\n]*read_one_past_the_end_kernel[^\n]* "
               "[^\n]*emu_checks_test\\.cu:[0-9]+");
}

TEST_F(CudaEmuChecks, WithTheCountersOnAWritePastASharedArrayIsStillReported) {
  SKIP_UNLESS(kAddressChecks, "emu");
  EXPECT_DEATH(with_counters_on(shared_overrun),
               "(heap-buffer-overflow|out of bounds).*shared_overrun_kernel");
}

TEST_F(CudaEmuChecks, WithTheCountersOnAReadIntoTheCachingAllocatorsSlackIsStillReported) {
  SKIP_UNLESS(kAddressChecks, "emu");
  EXPECT_DEATH(with_counters_on(read_past_a_tensor_in_its_blocks_slack),
               "use-after-poison.*read_one_past_the_end_kernel");
  EXPECT_DEATH(with_counters_on(read_a_tensor_after_it_went_back_to_the_cache),
               "use-after-poison.*read_one_past_the_end_kernel");
}

#if defined(__SANITIZE_ADDRESS__)
// The routing's marks exist only while a checker is on: with all of them off a kernel runs on
// ASan's inline check alone, and its memory reads as addressable to ASan.
TEST_F(CudaEmuChecks, DeviceMemoryIsRoutedOnlyWhileACheckerIsOn) {
  DeviceBuffer<float> before(std::vector<float>(37, 1.f));
  const auto poisoned = [](const float* p, int n) {
    return __asan_region_is_poisoned(const_cast<float*>(p), sizeof(float) * std::size_t(n)) !=
           nullptr;
  };
  EXPECT_FALSE(poisoned(before.get(), 37));
  mtemu::counters_collect(true);
  DeviceBuffer<float> during(std::vector<float>(37, 2.f));  // allocated and copied into while on
  EXPECT_TRUE(poisoned(before.get(), 37));
  EXPECT_TRUE(poisoned(during.get(), 37));
  EXPECT_EQ(during.to_host(), std::vector<float>(37, 2.f));  // the emulator's copies still work
  mtemu::counters_collect(false);
  (void)mtemu::counters_take();
  EXPECT_FALSE(poisoned(before.get(), 37));
  EXPECT_FALSE(poisoned(during.get(), 37));
  // ASan's own marks survive the round trip: the byte after each allocation is still a redzone.
  EXPECT_TRUE(poisoned(before.get() + 37, 1));
  EXPECT_TRUE(poisoned(during.get() + 37, 1));
}
#endif

// ---- deadlocks ----

// Each of two blocks waits for the other's flag before setting its own: a deadlock on any GPU.
// The threads spin, so no barrier check sees it; the watchdog reports the kernel after
// MINITRAIN_EMU_WATCHDOG_S seconds instead of hanging.
__global__ void blocks_wait_for_each_other_kernel(int* flags) {
  if (threadIdx.x != 0) return;
  const int other = 1 - int(blockIdx.x);
  while (atomicAdd(&flags[other], 0) == 0) {
  }
  atomicExch(&flags[blockIdx.x], 1);
}

void blocks_wait_for_each_other() {
  setenv("MINITRAIN_EMU_WATCHDOG_S", "1", 1);
  DeviceBuffer<int> flags(std::vector<int>{0, 0});
  blocks_wait_for_each_other_kernel<<<2, 32>>>(flags.get());
  cudaDeviceSynchronize();
}

// The same between two threads of one block, on shared memory.
__global__ void threads_wait_for_each_other_kernel(int* out) {
  __shared__ int flags[2];
  if (threadIdx.x < 2) flags[threadIdx.x] = 0;
  __syncthreads();
  if (threadIdx.x < 2) {
    const int other = 1 - int(threadIdx.x);
    while (atomicAdd(&flags[other], 0) == 0) {
    }
    atomicExch(&flags[threadIdx.x], 1);
  }
  out[threadIdx.x] = 1;
}

void threads_wait_for_each_other() {
  setenv("MINITRAIN_EMU_WATCHDOG_S", "1", 1);
  DeviceBuffer<int> out(32);
  threads_wait_for_each_other_kernel<<<1, 32>>>(out.get());
  cudaDeviceSynchronize();
}

TEST_F(CudaEmuChecks, BlocksOrThreadsWaitingForEachOtherAreReportedAsADeadlock) {
  EXPECT_DEATH(blocks_wait_for_each_other(),
               "watchdog.*blocks_wait_for_each_other_kernel.*not finished after 1 s");
  EXPECT_DEATH(threads_wait_for_each_other(),
               "watchdog.*threads_wait_for_each_other_kernel.*not finished after 1 s");
}

// ---- races ----

// Each thread writes its slot and reads its neighbour's, with the barrier between them missing.
__global__ void missing_syncthreads_kernel(int* out) {
  __shared__ int slots[64];
  slots[threadIdx.x] = int(threadIdx.x);
  out[threadIdx.x] = slots[(threadIdx.x + 1) % 64];
}

void missing_syncthreads() {
  DeviceBuffer<int> out(64);
  missing_syncthreads_kernel<<<1, 64>>>(out.get());
  cudaDeviceSynchronize();
}

// Without ThreadSanitizer the same bug still shows: a block's threads take turns only at
// barriers and collectives, so a reader runs before the neighbour that should have written its
// slot, and reads the 0xff bytes shared memory starts with.
TEST_F(CudaEmuChecks, AMissingSyncthreadsGivesAWrongResult) {
  if (kRaceChecks) GTEST_SKIP() << "under emu-tsan this bug is a reported race (the next case)";
  DeviceBuffer<int> out(64);
  missing_syncthreads_kernel<<<1, 64>>>(out.get());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<int> got = out.to_host();
  int wrong = 0;
  for (int i = 0; i < 64; ++i) wrong += got[i] != (i + 1) % 64;
  EXPECT_GT(wrong, 0) << "every thread read its neighbour's slot after it was written";
}

TEST_F(CudaEmuChecks, AMissingSyncthreadsIsAReportedRace) {
  SKIP_UNLESS(kRaceChecks, "emu-tsan");
  EXPECT_DEATH(missing_syncthreads(), "data race.*missing_syncthreads_kernel");
}

// Every thread increments one shared counter and then meets the others at a barrier: the
// increments race with each other (the barrier comes after them, not between them).
__global__ void race_before_a_barrier_kernel(int* out) {
  __shared__ int count;
  if (threadIdx.x == 0) count = 0;
  __syncthreads();
  count++;
  __syncthreads();
  if (threadIdx.x == 0) out[0] = count;
}

void race_before_a_barrier() {
  DeviceBuffer<int> out(1);
  race_before_a_barrier_kernel<<<1, 64>>>(out.get());
  cudaDeviceSynchronize();
}

TEST_F(CudaEmuChecks, ARaceFollowedByABarrierIsReported) {
  SKIP_UNLESS(kRaceChecks, "emu-tsan");
  EXPECT_DEATH(race_before_a_barrier(), "data race.*race_before_a_barrier_kernel");
}

// The same within a warp: lanes increment one counter, then __syncwarp().
__global__ void race_before_a_syncwarp_kernel(int* out) {
  __shared__ int count;
  if (threadIdx.x == 0) count = 0;
  __syncwarp();
  count++;
  __syncwarp();
  if (threadIdx.x == 0) out[0] = count;
}

void race_before_a_syncwarp() {
  DeviceBuffer<int> out(1);
  race_before_a_syncwarp_kernel<<<1, 32>>>(out.get());
  cudaDeviceSynchronize();
}

TEST_F(CudaEmuChecks, ARaceFollowedByASyncwarpIsReported) {
  SKIP_UNLESS(kRaceChecks, "emu-tsan");
  EXPECT_DEATH(race_before_a_syncwarp(), "data race.*race_before_a_syncwarp_kernel");
}

// Barriers between every write and read, over many phases: no race, nothing reported.
__global__ void barrier_phases_kernel(int* out) {
  __shared__ int slots[64];
  int sum = 0;
  for (int phase = 0; phase < 8; ++phase) {
    slots[threadIdx.x] = int(threadIdx.x) + phase;
    __syncthreads();
    sum += slots[(threadIdx.x + 1 + phase) % 64];
    __syncthreads();
  }
  out[threadIdx.x] = sum;
}

TEST_F(CudaEmuChecks, BarriersBetweenPhasesOrderThem) {
  DeviceBuffer<int> out(64);
  barrier_phases_kernel<<<1, 64>>>(out.get());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<int> got = out.to_host();
  for (int t = 0; t < 64; ++t) {
    int want = 0;
    for (int phase = 0; phase < 8; ++phase) want += (t + 1 + phase) % 64 + phase;
    EXPECT_EQ(got[t], want) << "thread " << t;
  }
}

__global__ void scale_kernel(float* dst, const float* src, int n) {
  for (int i = int(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += int(gridDim.x * blockDim.x))
    dst[i] = 2.f * src[i];
}

// A copy on s1 into `staged`, read by a kernel on s2 without waiting for s1's event.
void copy_without_event_wait() {
  constexpr int n = 64;
  cudaStream_t s1, s2;
  cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
  DeviceBuffer<float> src(std::vector<float>(n, 1.f)), staged(n), out(n);
  cudaDeviceSynchronize();
  mtemu::set_stream_delay(s1, 20000);
  cudaMemcpyAsync(staged.get(), src.get(), n * sizeof(float), cudaMemcpyDeviceToDevice, s1);
  scale_kernel<<<1, 64, 0, s2>>>(out.get(), staged.get(), n);  // no cudaStreamWaitEvent
  cudaStreamSynchronize(s2);
  cudaStreamSynchronize(s1);
}

TEST_F(CudaEmuChecks, ACopyWhoseEventWaitIsRemovedIsAReportedRace) {
  SKIP_UNLESS(kRaceChecks, "emu-tsan");
  EXPECT_DEATH(copy_without_event_wait(), "data race.*scale_kernel");
}

}  // namespace
}  // namespace minitrain::emu_testing
