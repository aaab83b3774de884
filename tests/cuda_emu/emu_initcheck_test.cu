// initcheck on emulated GPUs (cuda_emu/initcheck.h, docs/emulator_checks.md): a kernel load of
// device memory that no kernel store, copy or memset wrote is a device fault naming the kernel,
// the thread, the load's file:line and the allocation; so is a copy of such bytes to the host.
// Each case turns initcheck on for its own allocations (InitcheckOn) and checks the fault's text.

#include <cuda_runtime.h>
#include <gmock/gmock.h>

#include <string>
#include <vector>

#include "cuda_emu/allocator_hooks.h"
#include "cuda_emu/initcheck.h"
#include "emu_test_util.h"

namespace minitrain::emu_testing {
namespace {

/// initcheck on for the allocations a case makes; off (and every allocation forgotten) after.
class CudaEmuInitcheck : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(mtemu::initcheck_enable(true)); }
  void TearDown() override {
    (void)fault_after_sync();
    mtemu::initcheck_enable(false);
  }
};

__global__ void sum_kernel(const float* in, int n, float* out) {
  float s = 0.f;
  for (int i = 0; i < n; ++i) s += in[i];  // the load initcheck reports
  *out = s;
}
__global__ void fill_kernel(float* out, int from, int to, float v) {
  const int i = from + int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < to) out[i] = v;
}
__global__ void read_at_kernel(const float* in, int i, float* out) {
  if (threadIdx.x == 3) *out = in[i];
}

TEST_F(CudaEmuInitcheck, AReadOfMemoryNothingWroteIsAFaultNamingTheKernelAndTheLoad) {
  DeviceBuffer<float> in(100), out(1);
  read_at_kernel<<<2, 32>>>(in.get(), 5, out.get());
  cudaError_t code = cudaSuccess;
  const std::string text = fault_after_sync(&code);
  EXPECT_EQ(code, cudaErrorLaunchFailure);
  // Thread 3 of both blocks reads; whichever block ran first reports.
  EXPECT_THAT(text, ::testing::ContainsRegex(
                        "kernel 'read_at_kernel' \\(launched at emu_initcheck_test\\.cu:[0-9]+\\) "
                        "block \\([01],0,0\\) thread \\(3,0,0\\): uninitialized __global__ memory "
                        "read of size 4 bytes at 0x[0-9a-f]+ in read_at_kernel[^ ]* at "
                        "emu_initcheck_test\\.cu:39: byte 20 of the 400-byte allocation at "
                        "0x[0-9a-f]+ \\(cudaMalloc on cuda:0\\), which nothing has written since "
                        "it was allocated"))
      << text;
}

TEST_F(CudaEmuInitcheck, KernelStoresCopiesAndMemsetsInitialise) {
  const int n = 96;
  DeviceBuffer<float> in(n), out(1);
  EMU_OK(cudaMemset(in.get(), 0, 32 * sizeof(float)));  // [0, 32) by memset
  const std::vector<float> ones(32, 1.f);
  EMU_OK(cudaMemcpy(in.get() + 32, ones.data(), 32 * sizeof(float), cudaMemcpyHostToDevice));
  fill_kernel<<<1, 32>>>(in.get(), 64, n, 2.f);  // [64, 96) by a kernel
  sum_kernel<<<1, 1>>>(in.get(), n, out.get());
  EXPECT_EQ(fault_after_sync(), "");
  EXPECT_EQ(out.to_host()[0], 32.f + 64.f);
  EXPECT_EQ(fault_after_sync(), "") << "the copy back reads only written bytes";
}

// A reduction over n elements of a buffer of which only n - 1 were cleared: the read of the last
// is reported, with its offset.
TEST_F(CudaEmuInitcheck, AReductionReadingPastWhatWasMemsetIsReported) {
  const int n = 64;
  DeviceBuffer<float> in(n), out(1);
  EMU_OK(cudaMemset(in.get(), 0, (n - 1) * sizeof(float)));
  sum_kernel<<<1, 1>>>(in.get(), n, out.get());
  const std::string text = fault_after_sync();
  EXPECT_THAT(text, ::testing::HasSubstr("byte 252 of the 256-byte allocation")) << text;
  EXPECT_THAT(text, ::testing::HasSubstr("kernel 'sum_kernel'")) << text;
}

TEST_F(CudaEmuInitcheck, ACopyToTheHostOfUnwrittenBytesIsReported) {
  DeviceBuffer<float> buf(16);
  fill_kernel<<<1, 32>>>(buf.get(), 0, 10, 1.f);  // 10 of 16 written
  std::vector<float> host(16);
  const cudaError_t e =
      cudaMemcpy(host.data(), buf.get(), 16 * sizeof(float), cudaMemcpyDeviceToHost);
  EXPECT_EQ(e, cudaErrorLaunchFailure);
  const std::string text = cudaGetErrorString(e);
  EXPECT_THAT(text, ::testing::HasSubstr("a copy to the host reads uninitialized device memory: "
                                         "24 of its 64 source bytes"))
      << text;
  EXPECT_THAT(text, ::testing::HasSubstr("the first at byte 40 of the 64-byte allocation")) << text;
  (void)fault_after_sync();
  // The written part alone copies without a report.
  EMU_OK(cudaMemcpy(host.data(), buf.get(), 10 * sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_EQ(host[9], 1.f);
}

TEST_F(CudaEmuInitcheck, ADeviceToDeviceCopyCarriesTheBytesStateAlong) {
  DeviceBuffer<float> a(8), b(8), out(1);
  fill_kernel<<<1, 32>>>(a.get(), 0, 4, 1.f);  // a[0..4) written, a[4..8) not
  EMU_OK(cudaMemcpy(b.get(), a.get(), 8 * sizeof(float), cudaMemcpyDeviceToDevice));
  EXPECT_EQ(fault_after_sync(), "") << "copying unwritten bytes between devices is no read";
  read_at_kernel<<<1, 32>>>(b.get(), 3, out.get());
  EXPECT_EQ(fault_after_sync(), "");
  read_at_kernel<<<1, 32>>>(b.get(), 4, out.get());
  EXPECT_THAT(fault_after_sync(), ::testing::HasSubstr("byte 16 of the 32-byte allocation"));
}

// The caching allocator hands a block out again through mtemu::limit_access: what its earlier
// tensor wrote does not count as the new tensor's.
TEST_F(CudaEmuInitcheck, ABlockHandedOutAgainIsUninitialised) {
  float* block = nullptr;
  EMU_OK(cudaMalloc(reinterpret_cast<void**>(&block), 64 * sizeof(float)));
  DeviceBuffer<float> out(1);
  EMU_OK(mtemu::limit_access(block, 64 * sizeof(float), nullptr));  // first handout
  fill_kernel<<<1, 64>>>(block, 0, 64, 1.f);
  read_at_kernel<<<1, 32>>>(block, 7, out.get());
  EXPECT_EQ(fault_after_sync(), "");
  EMU_OK(mtemu::limit_access(block, 0, nullptr));                   // back to the cache
  EMU_OK(mtemu::limit_access(block, 32 * sizeof(float), nullptr));  // the next tensor's
  read_at_kernel<<<1, 32>>>(block, 7, out.get());
  const std::string text = fault_after_sync();
  EXPECT_THAT(text, ::testing::HasSubstr("byte 28 of the 256-byte allocation")) << text;
  EXPECT_THAT(text, ::testing::HasSubstr("since the caching allocator handed the block out again"))
      << text;
  EMU_OK(cudaFree(block));
}

__global__ void accumulate_kernel(float* acc, const float* x, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) atomicAdd(&acc[0], x[i]);
}

TEST_F(CudaEmuInitcheck, AnAtomicOnUnwrittenMemoryIsAReadOfIt) {
  DeviceBuffer<float> acc(1), x(std::vector<float>(32, 1.f));
  accumulate_kernel<<<1, 32>>>(acc.get(), x.get(), 32);
  // The load is inside the emulator's atomicAdd; the report names the kernel's line.
  EXPECT_THAT(fault_after_sync(),
              ::testing::ContainsRegex("kernel 'accumulate_kernel' .* in accumulate_kernel[^ ]* at "
                                       "emu_initcheck_test\\.cu:[0-9]+: byte 0 of the 4-byte"));
  EMU_OK(cudaMemset(acc.get(), 0, sizeof(float)));
  accumulate_kernel<<<1, 32>>>(acc.get(), x.get(), 32);
  EXPECT_EQ(fault_after_sync(), "");
  EXPECT_EQ(acc.to_host()[0], 32.f);
}

__global__ void count_kernel(int* counter) { atomicAdd(counter, 1); }
__global__ void flag_kernel(int* flag, float* f) {
  atomicExch(flag, 1);
  atomicExch(f, 2.f);
}

TEST_F(CudaEmuInitcheck, IntegerAtomicsReadAndExchangesOnlyWrite) {
  DeviceBuffer<int> counter(1), flag(1);
  DeviceBuffer<float> f(1);
  count_kernel<<<1, 32>>>(counter.get());
  EXPECT_THAT(fault_after_sync(),
              ::testing::ContainsRegex("kernel 'count_kernel' .* in "
                                       "count_kernel[^ ]* at "
                                       "emu_initcheck_test\\.cu:[0-9]+: byte 0"));
  flag_kernel<<<1, 1>>>(flag.get(), f.get());
  EXPECT_EQ(fault_after_sync(), "") << "an exchange into unwritten memory reads nothing";
  EXPECT_EQ(flag.to_host()[0], 1);
  EXPECT_EQ(f.to_host()[0], 2.f);
  EXPECT_EQ(fault_after_sync(), "");
}

// ---- the provenance check (MINITRAIN_EMU_PROVENANCE)

class CudaEmuProvenance : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(mtemu::provenance_enable(true)); }
  void TearDown() override {
    (void)fault_after_sync();
    mtemu::provenance_enable(false);
  }
};

__global__ void store_at_kernel(float* out, long long i) { out[i] = 1.f; }

// A garbage index that lands inside another allocation, beyond the redzones: the address is
// valid, so AddressSanitizer says nothing; no pointer the kernel was given reaches that buffer.
TEST_F(CudaEmuProvenance, AnIndexLandingInAnotherAllocationIsAFault) {
  DeviceBuffer<float> mine(64), other(64);
  EMU_OK(cudaMemset(other.get(), 0, 64 * sizeof(float)));
  const long long garbage = (other.get() - mine.get()) + 3;
  store_at_kernel<<<1, 1>>>(mine.get(), garbage);
  cudaError_t code = cudaSuccess;
  const std::string text = fault_after_sync(&code);
  EXPECT_EQ(code, cudaErrorIllegalAddress);
  EXPECT_THAT(text,
              ::testing::ContainsRegex(
                  "kernel 'store_at_kernel' .* block \\(0,0,0\\) thread \\(0,0,0\\): "
                  "__global__ write of size 4 bytes at 0x[0-9a-f]+ in store_at_kernel[^ ]* at "
                  "emu_initcheck_test\\.cu:[0-9]+ lands in byte 12 of the 256-byte "
                  "allocation .*which none of the kernel's pointers reaches"))
      << text;
  store_at_kernel<<<1, 1>>>(mine.get(), 63);  // its own buffer, last element
  EXPECT_EQ(fault_after_sync(), "");
}

struct Pair {
  const float* x;
  float* y;
};
__global__ void through_struct_kernel(Pair p) { p.y[threadIdx.x] = p.x[threadIdx.x]; }
__global__ void through_table_kernel(float* const* table, int n) {
  for (int i = 0; i < n; ++i) table[1][i] = table[0][i] * 2.f;
}

// Pointers in a struct argument, and pointers the kernel loads from device memory, reach their
// allocations: no report.
TEST_F(CudaEmuProvenance, PointersInStructsAndInDeviceMemoryReach) {
  DeviceBuffer<float> x(std::vector<float>(32, 1.f)), y(32);
  through_struct_kernel<<<1, 32>>>(Pair{x.get(), y.get()});
  EXPECT_EQ(fault_after_sync(), "");
  const std::vector<float*> host_table = {x.get(), y.get()};
  DeviceBuffer<float*> table(host_table);
  through_table_kernel<<<1, 1>>>(table.get(), 32);
  EXPECT_EQ(fault_after_sync(), "");
  EXPECT_EQ(y.to_host()[31], 2.f);
}

TEST(CudaEmuInitcheckOff, UnwrittenMemoryIsNotReportedWhenInitcheckIsOff) {
  ASSERT_FALSE(mtemu::initcheck_enabled());
  DeviceBuffer<float> in(100), out(1);
  read_at_kernel<<<1, 32>>>(in.get(), 5, out.get());
  EXPECT_EQ(fault_after_sync(), "");
}

}  // namespace
}  // namespace minitrain::emu_testing
