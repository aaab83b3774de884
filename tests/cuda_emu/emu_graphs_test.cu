// Stream capture and CUDA graphs on the emulated GPU: a captured sequence replays with the eager
// sequence's bits, arguments are captured by value, forks into other streams must join back, the
// rules a GPU enforces during capture give CUDA's errors and invalidate the capture, and a replay
// is asynchronous like any other stream work (docs/emulator_graphs.md).

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <functional>
#include <thread>
#include <vector>

#include "emu_test_util.h"

namespace minitrain::emu_testing {
namespace {

// Float steps whose rounding depends on their order: a replay in another order, or with other
// arguments, changes bits.
__global__ void axpb_kernel(float* x, float a, float b, int n) {
  for (int i = int(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += int(gridDim.x * blockDim.x))
    x[i] = x[i] * a + b;
}

__global__ void accumulate_square_kernel(float* acc, const float* x, int n) {
  for (int i = int(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += int(gridDim.x * blockDim.x))
    acc[i] += x[i] * x[i] / 3.f;
}

struct Affine {
  float scale, shift;
};
__global__ void affine_kernel(float* x, Affine f, int n) {
  for (int i = int(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += int(gridDim.x * blockDim.x))
    x[i] = x[i] * f.scale + f.shift;
}

__global__ void add_kernel(float* dst, const float* a, const float* b, int n) {
  for (int i = int(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += int(gridDim.x * blockDim.x))
    dst[i] = a[i] + b[i];
}

__global__ void wait_for_flag_kernel(volatile int* flag, int* out) {
  while (atomicAdd(const_cast<int*>(flag), 0) == 0) {
  }
  *out += 7;
}

constexpr int kN = 300;  // not a multiple of the block: the tails run too
constexpr std::size_t kBytes = kN * sizeof(float);

std::vector<float> ramp() {
  std::vector<float> v(kN);
  for (int i = 0; i < kN; ++i) v[std::size_t(i)] = 0.01f * float(i) - 1.3f;
  return v;
}

// One step of the sequence: two kernels, a device copy and a memset, all on `s`.
void step(cudaStream_t s, float* x, float* acc, float* copy, float* scratch) {
  axpb_kernel<<<3, 64, 0, s>>>(x, 1.0001f, 0.37f, kN);
  accumulate_square_kernel<<<2, 128, 0, s>>>(acc, x, kN);
  cudaMemcpyAsync(copy, acc, kBytes, cudaMemcpyDeviceToDevice, s);
  cudaMemsetAsync(scratch, 0, kBytes, s);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

cudaStream_t make_stream(unsigned flags = cudaStreamNonBlocking) {
  cudaStream_t s = nullptr;
  cudaStreamCreateWithFlags(&s, flags);
  return s;
}

TEST(CudaEmuGraphs, ReplaysEqualTheEagerSequenceBitForBit) {
  constexpr int kSteps = 5;
  cudaStream_t s = make_stream();
  DeviceBuffer<float> x(ramp()), acc(std::vector<float>(kN, 0.f)), copy(kN), scratch(kN);
  for (int i = 0; i < kSteps; ++i) step(s, x.get(), acc.get(), copy.get(), scratch.get());
  EMU_OK(cudaStreamSynchronize(s));
  const std::vector<float> eager_x = x.to_host(), eager_copy = copy.to_host();
  ASSERT_NE(eager_copy[1], 0.f);  // not silently zero

  DeviceBuffer<float> gx(ramp()), gacc(std::vector<float>(kN, 0.f)), gcopy(kN), gscratch(kN);
  EMU_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  step(s, gx.get(), gacc.get(), gcopy.get(), gscratch.get());
  cudaGraph_t graph = nullptr;
  EMU_OK(cudaStreamEndCapture(s, &graph));
  ASSERT_NE(graph, nullptr);
  EXPECT_TRUE(same_bits(gx.to_host(), ramp())) << "capture ran the work instead of recording it";
  std::size_t nodes = 0;
  EMU_OK(cudaGraphGetNodes(graph, nullptr, &nodes));
  EXPECT_EQ(nodes, 4u);
  cudaGraphExec_t exec = nullptr;
  EMU_OK(cudaGraphInstantiate(&exec, graph, 0));
  EMU_OK(cudaGraphDestroy(graph));  // the executable graph keeps its own copy
  for (int i = 0; i < kSteps; ++i) EMU_OK(cudaGraphLaunch(exec, s));
  EMU_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(same_bits(gx.to_host(), eager_x));
  EXPECT_TRUE(same_bits(gcopy.to_host(), eager_copy));
  EXPECT_EQ(gscratch.to_host(), std::vector<float>(kN, 0.f));
  EMU_OK(cudaGraphExecDestroy(exec));
  EMU_OK(cudaStreamDestroy(s));
}

TEST(CudaEmuGraphs, KernelArgumentsAreCapturedByValue) {
  cudaStream_t s = make_stream();
  DeviceBuffer<float> x(std::vector<float>(kN, 1.f));
  Affine f{2.f, 1.f};
  float b = 0.5f;
  EMU_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  affine_kernel<<<2, 64, 0, s>>>(x.get(), f, kN);
  axpb_kernel<<<2, 64, 0, s>>>(x.get(), 1.f, b, kN);
  cudaGraph_t graph = nullptr;
  EMU_OK(cudaStreamEndCapture(s, &graph));
  f = Affine{100.f, 100.f};  // changed after the capture: the graph keeps what it saw
  b = 1000.f;
  cudaGraphExec_t exec = nullptr;
  EMU_OK(cudaGraphInstantiateWithFlags(&exec, graph, 0));
  EMU_OK(cudaGraphLaunch(exec, s));
  EMU_OK(cudaGraphLaunch(exec, s));
  EMU_OK(cudaStreamSynchronize(s));
  EXPECT_EQ(x.to_host(), std::vector<float>(kN, (3.5f * 2.f + 1.f) + 0.5f));  // (1*2+1+.5)*2+1+.5
  EMU_OK(cudaGraphExecDestroy(exec));
  EMU_OK(cudaGraphDestroy(graph));
  EMU_OK(cudaStreamDestroy(s));
}

// Runs `breaking` during a capture on `s` and checks that it returns `want`, that the capture is
// then invalidated and that ending it says so and gives no graph.
void expect_breaks_capture(cudaStream_t s, cudaError_t want, const char* what,
                           const std::function<cudaError_t()>& breaking,
                           cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal) {
  SCOPED_TRACE(what);
  DeviceBuffer<float> x(std::vector<float>(kN, 1.f));
  EMU_OK(cudaStreamBeginCapture(s, mode));
  axpb_kernel<<<1, 64, 0, s>>>(x.get(), 2.f, 0.f, kN);
  EXPECT_EQ(breaking(), want) << cudaGetErrorString(want);
  (void)cudaGetLastError();
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  EMU_OK(cudaStreamIsCapturing(s, &status));
  EXPECT_EQ(status, cudaStreamCaptureStatusInvalidated);
  axpb_kernel<<<1, 64, 0, s>>>(x.get(), 2.f, 0.f, kN);  // refused: the capture is broken
  EXPECT_EQ(cudaGetLastError(), cudaErrorStreamCaptureInvalidated);
  cudaGraph_t graph = reinterpret_cast<cudaGraph_t>(&status);
  EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);
  (void)cudaGetLastError();
  EMU_OK(cudaStreamIsCapturing(s, &status));
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);
  EMU_OK(cudaStreamSynchronize(s));  // the stream works again, and nothing ran
  EXPECT_EQ(x.to_host(), std::vector<float>(kN, 1.f));
}

TEST(CudaEmuGraphs, SynchronisingCallsDuringAGlobalCaptureFailAndInvalidateIt) {
  cudaStream_t s = make_stream();
  expect_breaks_capture(s, cudaErrorStreamCaptureUnsupported, "cudaStreamSynchronize",
                        [&] { return cudaStreamSynchronize(s); });
  expect_breaks_capture(s, cudaErrorStreamCaptureUnsupported, "cudaStreamQuery",
                        [&] { return cudaStreamQuery(s); });
  expect_breaks_capture(s, cudaErrorStreamCaptureUnsupported, "cudaDeviceSynchronize",
                        [] { return cudaDeviceSynchronize(); });
  expect_breaks_capture(s, cudaErrorStreamCaptureUnsupported, "cudaMalloc", [] {
    void* p = nullptr;
    return cudaMalloc(&p, 64);
  });
  DeviceBuffer<float> dev(kN);
  std::vector<float> host(kN, 0.f);
  expect_breaks_capture(s, cudaErrorStreamCaptureUnsupported, "synchronous cudaMemcpy", [&] {
    return cudaMemcpy(host.data(), dev.get(), kBytes, cudaMemcpyDeviceToHost);
  });
  // Another thread's unsafe call breaks a global capture too.
  expect_breaks_capture(s, cudaErrorStreamCaptureUnsupported, "cudaMalloc on another thread", [] {
    cudaError_t e = cudaSuccess;
    std::thread([&] {
      void* p = nullptr;
      e = cudaMalloc(&p, 64);
    }).join();
    return e;
  });
  EMU_OK(cudaStreamDestroy(s));
}

TEST(CudaEmuGraphs, ThreadLocalAndRelaxedCapturesAllowWhatTheirModeAllows) {
  cudaStream_t s = make_stream();
  // Thread-local: the capturing thread may not allocate, another thread may.
  expect_breaks_capture(
      s, cudaErrorStreamCaptureUnsupported, "thread-local, same thread",
      [] {
        void* p = nullptr;
        return cudaMalloc(&p, 64);
      },
      cudaStreamCaptureModeThreadLocal);
  EMU_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  cudaError_t other = cudaErrorUnknown;
  std::thread([&] {
    void* p = nullptr;
    other = cudaMalloc(&p, 64);
    cudaFree(p);
  }).join();
  EXPECT_EQ(other, cudaSuccess);
  cudaGraph_t graph = nullptr;
  EMU_OK(cudaStreamEndCapture(s, &graph));
  EMU_OK(cudaGraphDestroy(graph));
  // Relaxed: allocating is allowed, synchronising the capturing stream never is.
  EMU_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  void* p = nullptr;
  EMU_OK(cudaMalloc(&p, 64));
  EMU_OK(cudaStreamEndCapture(s, &graph));
  EMU_OK(cudaGraphDestroy(graph));
  EMU_OK(cudaFree(p));
  expect_breaks_capture(
      s, cudaErrorStreamCaptureUnsupported, "relaxed, stream sync",
      [&] { return cudaStreamSynchronize(s); }, cudaStreamCaptureModeRelaxed);
  EMU_OK(cudaStreamDestroy(s));
}

TEST(CudaEmuGraphs, TheLegacyStreamBesideACapturingBlockingStreamIsAnImplicitDependency) {
  cudaStream_t blocking = make_stream(cudaStreamDefault);
  DeviceBuffer<float> y(std::vector<float>(kN, 1.f));
  expect_breaks_capture(blocking, cudaErrorStreamCaptureImplicit, "launch on stream 0", [&] {
    axpb_kernel<<<1, 64>>>(y.get(), 2.f, 0.f, kN);
    return cudaGetLastError();
  });
  EXPECT_EQ(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal),
            cudaErrorStreamCaptureUnsupported);
  (void)cudaGetLastError();
  // A non-blocking capturing stream has no implicit tie to stream 0, whose work runs.
  cudaStream_t s = make_stream();
  EMU_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  axpb_kernel<<<1, 64>>>(y.get(), 2.f, 0.f, kN);
  EMU_OK(cudaGetLastError());
  cudaGraph_t graph = nullptr;
  EMU_OK(cudaStreamEndCapture(s, &graph));
  EMU_OK(cudaGraphDestroy(graph));
  EXPECT_EQ(y.to_host(), std::vector<float>(kN, 2.f));
  EMU_OK(cudaStreamDestroy(s));
  EMU_OK(cudaStreamDestroy(blocking));
}

TEST(CudaEmuGraphs, CopiesWithPageableMemoryCannotBeCapturedPinnedOnesCan) {
  cudaStream_t s = make_stream();
  DeviceBuffer<float> dev(std::vector<float>(kN, 3.f));
  std::vector<float> pageable(kN, 0.f);
  expect_breaks_capture(s, cudaErrorStreamCaptureUnsupported, "pageable to device", [&] {
    return cudaMemcpyAsync(dev.get(), pageable.data(), kBytes, cudaMemcpyHostToDevice, s);
  });
  expect_breaks_capture(s, cudaErrorStreamCaptureUnsupported, "device to pageable", [&] {
    return cudaMemcpyAsync(pageable.data(), dev.get(), kBytes, cudaMemcpyDeviceToHost, s);
  });
  float* pinned = nullptr;
  EMU_OK(cudaHostAlloc(reinterpret_cast<void**>(&pinned), kBytes, cudaHostAllocDefault));
  pinned[0] = -1.f;
  EMU_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  EMU_OK(cudaMemcpyAsync(pinned, dev.get(), kBytes, cudaMemcpyDeviceToHost, s));
  cudaGraph_t graph = nullptr;
  EMU_OK(cudaStreamEndCapture(s, &graph));
  EXPECT_EQ(pinned[0], -1.f);  // recorded, not run
  cudaGraphExec_t exec = nullptr;
  EMU_OK(cudaGraphInstantiate(&exec, graph, 0));
  EMU_OK(cudaGraphLaunch(exec, s));
  EMU_OK(cudaStreamSynchronize(s));
  EXPECT_EQ(pinned[kN - 1], 3.f);
  EMU_OK(cudaGraphExecDestroy(exec));
  EMU_OK(cudaGraphDestroy(graph));
  EMU_OK(cudaFreeHost(pinned));
  EMU_OK(cudaStreamDestroy(s));
}

// s1 forks s2 with an event, both work, s1 joins s2 back: one graph with a diamond.
TEST(CudaEmuGraphs, AForkedStreamJoinsTheCaptureAndMustJoinBack) {
  for (bool join : {true, false}) {
    SCOPED_TRACE(join ? "joined" : "not joined");
    cudaStream_t s1 = make_stream(), s2 = make_stream();
    cudaEvent_t forked, done;
    EMU_OK(cudaEventCreateWithFlags(&forked, cudaEventDisableTiming));
    EMU_OK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    DeviceBuffer<float> a(std::vector<float>(kN, 1.f)), b(std::vector<float>(kN, 10.f)),
        c(std::vector<float>(kN, 2.f)), sum(kN);
    EMU_OK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    axpb_kernel<<<2, 64, 0, s1>>>(a.get(), 1.f, 1.f, kN);  // a = 2
    EMU_OK(cudaEventRecord(forked, s1));
    EMU_OK(cudaStreamWaitEvent(s2, forked, 0));
    cudaStreamCaptureStatus status1, status2;
    unsigned long long id1 = 0, id2 = 0;
    EMU_OK(cudaStreamGetCaptureInfo(s1, &status1, &id1));
    EMU_OK(cudaStreamGetCaptureInfo(s2, &status2, &id2));
    EXPECT_EQ(status2, cudaStreamCaptureStatusActive);
    EXPECT_EQ(id1, id2);
    add_kernel<<<2, 64, 0, s2>>>(b.get(), b.get(), a.get(), kN);  // b = 12, after a
    axpb_kernel<<<2, 64, 0, s1>>>(c.get(), 3.f, 0.f, kN);         // c = 6, beside b
    if (join) {
      EMU_OK(cudaEventRecord(done, s2));
      EMU_OK(cudaStreamWaitEvent(s1, done, 0));
    }
    add_kernel<<<2, 64, 0, s1>>>(sum.get(), c.get(), b.get(), kN);  // 18 once joined
    cudaGraph_t graph = nullptr;
    if (!join) {
      EXPECT_EQ(cudaStreamEndCapture(s1, &graph), cudaErrorStreamCaptureUnjoined);
      EXPECT_EQ(graph, nullptr);
      (void)cudaGetLastError();
      EMU_OK(cudaStreamIsCapturing(s2, &status2));
      EXPECT_EQ(status2, cudaStreamCaptureStatusNone);  // the failed capture released s2 too
    } else {
      EMU_OK(cudaStreamEndCapture(s1, &graph));
      std::size_t nodes = 0;
      EMU_OK(cudaGraphGetNodes(graph, nullptr, &nodes));
      EXPECT_EQ(nodes, 4u);  // events make edges, not nodes
      cudaGraphExec_t exec = nullptr;
      EMU_OK(cudaGraphInstantiate(&exec, graph, 0));
      EMU_OK(cudaGraphLaunch(exec, s2));  // any stream may launch it
      EMU_OK(cudaStreamSynchronize(s2));
      EXPECT_EQ(sum.to_host(), std::vector<float>(kN, 18.f));
      EMU_OK(cudaGraphExecDestroy(exec));
      EMU_OK(cudaGraphDestroy(graph));
    }
    EMU_OK(cudaEventDestroy(forked));
    EMU_OK(cudaEventDestroy(done));
    EMU_OK(cudaStreamDestroy(s1));
    EMU_OK(cudaStreamDestroy(s2));
  }
}

TEST(CudaEmuGraphs, WaitingForWorkOutsideTheCaptureIsAnIsolationError) {
  cudaStream_t s = make_stream(), other = make_stream();
  cudaEvent_t outside;
  EMU_OK(cudaEventCreate(&outside));
  EMU_OK(cudaEventRecord(outside, other));
  expect_breaks_capture(s, cudaErrorStreamCaptureIsolation, "wait for an outside event",
                        [&] { return cudaStreamWaitEvent(s, outside, 0); });
  EMU_OK(cudaEventDestroy(outside));
  EMU_OK(cudaStreamDestroy(s));
  EMU_OK(cudaStreamDestroy(other));
}

std::atomic<int> host_calls{0};
void count_host_call(void*) { ++host_calls; }

TEST(CudaEmuGraphs, HostFunctionsAreNodesRunAtEveryReplay) {
  cudaStream_t s = make_stream();
  host_calls = 0;
  EMU_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  EMU_OK(cudaLaunchHostFunc(s, count_host_call, nullptr));
  cudaGraph_t graph = nullptr;
  EMU_OK(cudaStreamEndCapture(s, &graph));
  EXPECT_EQ(host_calls.load(), 0);
  cudaGraphExec_t exec = nullptr;
  EMU_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 3; ++i) EMU_OK(cudaGraphLaunch(exec, s));
  EMU_OK(cudaStreamSynchronize(s));
  EXPECT_EQ(host_calls.load(), 3);
  EMU_OK(cudaGraphExecDestroy(exec));
  EMU_OK(cudaGraphDestroy(graph));
  EMU_OK(cudaStreamDestroy(s));
}

// The launch returns while the graph's kernel still waits for the host, as other stream work does.
TEST(CudaEmuGraphs, AReplayIsAsynchronousWithRespectToTheHost) {
  cudaStream_t s = make_stream();
  int* flag = nullptr;
  EMU_OK(cudaHostAlloc(reinterpret_cast<void**>(&flag), sizeof(int), cudaHostAllocPortable));
  __atomic_store_n(flag, 0, __ATOMIC_SEQ_CST);
  DeviceBuffer<int> out(std::vector<int>{0});
  EMU_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  wait_for_flag_kernel<<<1, 1, 0, s>>>(flag, out.get());
  cudaGraph_t graph = nullptr;
  EMU_OK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec = nullptr;
  EMU_OK(cudaGraphInstantiate(&exec, graph, 0));
  EMU_OK(cudaGraphLaunch(exec, s));
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);
  __atomic_store_n(flag, 1, __ATOMIC_SEQ_CST);
  EMU_OK(cudaStreamSynchronize(s));
  EXPECT_EQ(out.to_host()[0], 7);
  EMU_OK(cudaGraphExecDestroy(exec));
  EMU_OK(cudaGraphDestroy(graph));
  EMU_OK(cudaFreeHost(flag));
  EMU_OK(cudaStreamDestroy(s));
}

__global__ void increment_kernel(int* x) { *x += 1; }

// Launches of one executable graph run one after another, even from two streams: the launch on s2
// waits for the launch on s1, which is queued behind a kernel that waits for the host.
TEST(CudaEmuGraphs, LaunchesOfOneGraphFromTwoStreamsRunInOrder) {
  cudaStream_t s1 = make_stream(), s2 = make_stream();
  int* flag = nullptr;
  EMU_OK(cudaHostAlloc(reinterpret_cast<void**>(&flag), sizeof(int), cudaHostAllocPortable));
  __atomic_store_n(flag, 0, __ATOMIC_SEQ_CST);
  DeviceBuffer<int> count(std::vector<int>{0}), waited(std::vector<int>{0});
  EMU_OK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  increment_kernel<<<1, 1, 0, s1>>>(count.get());
  cudaGraph_t graph = nullptr;
  EMU_OK(cudaStreamEndCapture(s1, &graph));
  cudaGraphExec_t exec = nullptr;
  EMU_OK(cudaGraphInstantiate(&exec, graph, 0));
  wait_for_flag_kernel<<<1, 1, 0, s1>>>(flag, waited.get());
  EMU_OK(cudaGraphLaunch(exec, s1));
  EMU_OK(cudaGraphLaunch(exec, s2));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // time for s2 to overtake, if it may
  EXPECT_EQ(cudaStreamQuery(s2), cudaErrorNotReady) << "s2's launch ran before s1's";
  __atomic_store_n(flag, 1, __ATOMIC_SEQ_CST);
  EMU_OK(cudaStreamSynchronize(s2));
  EXPECT_EQ(cudaStreamQuery(s1), cudaSuccess);
  EXPECT_EQ(count.to_host()[0], 2);
  EMU_OK(cudaGraphExecDestroy(exec));
  EMU_OK(cudaGraphDestroy(graph));
  EMU_OK(cudaFreeHost(flag));
  EMU_OK(cudaStreamDestroy(s1));
  EMU_OK(cudaStreamDestroy(s2));
}

TEST(CudaEmuGraphs, DebugDotPrintWritesTheNodesAndTheirEdges) {
  cudaStream_t s = make_stream();
  DeviceBuffer<float> x(std::vector<float>(kN, 1.f)), acc(kN);
  EMU_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  axpb_kernel<<<1, 64, 0, s>>>(x.get(), 2.f, 0.f, kN);
  accumulate_square_kernel<<<1, 64, 0, s>>>(acc.get(), x.get(), kN);
  cudaGraph_t graph = nullptr;
  EMU_OK(cudaStreamEndCapture(s, &graph));
  const std::string path = ::testing::TempDir() + "emu_graph.dot";
  EMU_OK(cudaGraphDebugDotPrint(graph, path.c_str(), 0));
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("kernel 'axpb_kernel'"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("n0 -> n1"), std::string::npos) << text.str();
  std::remove(path.c_str());
  EMU_OK(cudaGraphDestroy(graph));
  EMU_OK(cudaStreamDestroy(s));
}

}  // namespace
}  // namespace minitrain::emu_testing
