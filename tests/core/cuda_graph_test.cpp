// CudaGraph: capture a piece of code's device work once, replay it, and a DeviceError that names
// the CUDA error when the code does what a capture forbids. Runs on real and emulated GPUs.

#include "core/cuda_graph.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

std::vector<float> values(int64_t n, float first) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = first + 0.25f * float(i);
  return v;
}

void copy_on(const Stream& s, const Tensor& dst, const Tensor& src) {
  copy_bytes_async(dst.raw_data(), dst.device(), src.raw_data(), src.device(), src.nbytes(), s);
}

TEST(CudaGraph, ReplaysTheCapturedWorkWithTheValuesOfEachReplay) {
  MT_SKIP_UNLESS_CUDA_DEVICES(1);
  const Device gpu = Device::cuda(0);
  constexpr int64_t n = 257;
  Stream s = Stream::create(gpu);
  Tensor a = Tensor::from_vector(values(n, 1.f), {n}, gpu);
  Tensor b = Tensor::zeros({n}, DType::Float32, gpu);
  Tensor c = Tensor::zeros({n}, DType::Float32, gpu);
  synchronize(gpu);
  CudaGraph graph = CudaGraph::capture(s, [&] {
    copy_on(s, b, a);
    copy_on(s, c, b);
  });
  EXPECT_EQ(graph.node_count(), 2u);
  EXPECT_EQ(c.to(Device::cpu()).to_vector<float>(), std::vector<float>(n, 0.f))
      << "the capture ran the work instead of recording it";
  for (float first : {5.f, -3.f, 11.f}) {
    a.copy_(Tensor::from_vector(values(n, first), {n}));
    synchronize(gpu);
    graph.replay(s);
    s.synchronize();
    EXPECT_EQ(c.to(Device::cpu()).to_vector<float>(), values(n, first));
  }
  CudaGraph moved = std::move(graph);
  moved.replay(s);
  s.synchronize();
}

TEST(CudaGraph, AnAllocationInsideTheCaptureIsADeviceErrorNamingTheCudaError) {
  MT_SKIP_UNLESS_CUDA_DEVICES(1);
  const Device gpu = Device::cuda(0);
  Stream s = Stream::create(gpu);
  // A size no earlier test cached: the caching allocator must ask cudaMalloc.
  const std::string msg = testing::error_message([&] {
    CudaGraph::capture(s, [&] { (void)Tensor::empty({777777 + 13}, DType::Float32, gpu); });
  });
  EXPECT_NE(msg.find("cudaErrorStreamCaptureUnsupported"), std::string::npos) << msg;
  EXPECT_NE(msg.find("CudaGraph::capture on cuda:0"), std::string::npos) << msg;
  EXPECT_THROW(CudaGraph::capture(s, [&] { s.synchronize(); }), DeviceError);
  // The stream is usable again, for eager work and for a new capture.
  Tensor a = Tensor::from_vector(values(8, 2.f), {8}, gpu);
  Tensor b = Tensor::zeros({8}, DType::Float32, gpu);
  synchronize(gpu);
  CudaGraph graph = CudaGraph::capture(s, [&] { copy_on(s, b, a); });
  graph.replay(s);
  s.synchronize();
  EXPECT_EQ(b.to(Device::cpu()).to_vector<float>(), values(8, 2.f));
}

// Note [graph memory pool]: a temporary of the capture, freed inside it, is written again by every
// replay; its block must not be handed to a tensor made after the capture.
TEST(CudaGraph, ATensorMadeAfterTheCaptureIsNotWrittenByAReplay) {
  MT_SKIP_UNLESS_CUDA_DEVICES(1);
  const Device gpu = Device::cuda(0);
  constexpr int64_t n = 333;  // a size of its own: 1.5 KiB blocks
  Stream s = Stream::create(gpu);
  StreamGuard current(s);
  Tensor a = Tensor::from_vector(values(n, 1.f), {n}, gpu);
  Tensor b = Tensor::zeros({n}, DType::Float32, gpu);
  auto work = [&] {
    Tensor temp = Tensor::empty({n}, DType::Float32, gpu);
    copy_on(s, temp, a);
    copy_on(s, b, temp);
  };
  work();  // warm-up: the cache now holds a block of temp's size on s
  s.synchronize();
  CudaGraph graph = CudaGraph::capture(s, work);
  EXPECT_GE(graph.pool_bytes(), uint64_t(n) * 4);
  Tensor mine = Tensor::from_vector(values(n, 7.f), {n}, gpu);  // eager, after the capture
  Tensor other = Tensor::empty({n}, DType::Float32, gpu);
  copy_on(s, other, mine);
  graph.replay(s);
  graph.replay(s);
  s.synchronize();
  EXPECT_EQ(b.to(Device::cpu()).to_vector<float>(), values(n, 1.f));
  EXPECT_EQ(mine.to(Device::cpu()).to_vector<float>(), values(n, 7.f));
  EXPECT_EQ(other.to(Device::cpu()).to_vector<float>(), values(n, 7.f))
      << "a replay wrote into a block handed out after the capture";
}

TEST(CudaGraph, AForkThatDoesNotJoinBackIsADeviceErrorNamingTheCudaError) {
  MT_SKIP_UNLESS_CUDA_DEVICES(1);
  const Device gpu = Device::cuda(0);
  Stream s = Stream::create(gpu), side = Stream::create(gpu);
  Event forked = Event::create(gpu), joined = Event::create(gpu);
  Tensor a = Tensor::from_vector(values(16, 1.f), {16}, gpu);
  Tensor b = Tensor::zeros({16}, DType::Float32, gpu);
  Tensor c = Tensor::zeros({16}, DType::Float32, gpu);
  synchronize(gpu);
  for (bool join : {true, false}) {
    auto work = [&] {
      forked.record(s);
      side.wait_for(forked);  // side joins the capture
      copy_on(side, b, a);
      copy_on(s, c, a);
      if (join) {
        joined.record(side);
        s.wait_for(joined);
      }
    };
    if (join) {
      CudaGraph graph = CudaGraph::capture(s, work);
      EXPECT_EQ(graph.node_count(), 2u);
      graph.replay(s);
      s.synchronize();
      EXPECT_EQ(b.to(Device::cpu()).to_vector<float>(), values(16, 1.f));
    } else {
      const std::string msg = testing::error_message([&] { CudaGraph::capture(s, work); });
      EXPECT_NE(msg.find("cudaErrorStreamCaptureUnjoined"), std::string::npos) << msg;
    }
  }
}

TEST(GraphCapture, NeedsAStreamOfACudaDevice) {
  Stream cpu = Stream::create(Device::cpu());
  const std::string msg = testing::error_message([&] { CudaGraph::capture(cpu, [] {}); });
  EXPECT_NE(msg.find("needs a stream of a CUDA device, not cpu"), std::string::npos) << msg;
}

}  // namespace
}  // namespace minitrain
