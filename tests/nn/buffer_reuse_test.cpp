// Buffers that live across steps (Note [buffers that live across steps], core/buffer_slot.h):
// a BufferSlot hands its buffer out again only when nothing else holds it, so the layers and
// losses that write into them allocate nothing after their first step, and a caller who keeps a
// tensor never sees it rewritten. On the CPU and on cuda:0 (emulated GPUs in CI).

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/buffer_slot.h"
#include "core/stream.h"
#include "core/cuda_graph.h"
#include "kernels/cast.h"
#include "kernels/fill.h"
#include "nn/activation_layer.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/sequential.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::host_values;
using testing::random_tensor;

class BufferSlotOnDevice : public testing::DeviceTest {};

TEST_P(BufferSlotOnDevice, HandsTheSameBufferBackWhenNothingElseHoldsIt) {
  BufferSlot slot;
  const void* first = slot.get(Shape{4, 3}, DType::Float32, device()).raw_data();
  const int64_t before = memory_stats(device()).allocations;
  for (int i = 0; i < 3; ++i) {
    Tensor t = slot.get(Shape{4, 3}, DType::Float32, device());
    EXPECT_EQ(t.raw_data(), first);
    EXPECT_EQ(t.shape(), (Shape{4, 3}));
  }
  EXPECT_EQ(memory_stats(device()).allocations, before);  // no handout of the allocator
  EXPECT_EQ(slot.size(), 1u);
}

TEST_P(BufferSlotOnDevice, AKeptTensorOrAViewOfItIsNeverHandedOutAgain) {
  BufferSlot slot;
  Tensor kept = slot.get(Shape{4}, DType::Float32, device());
  fill(kept, 7.0);
  Tensor other = slot.get(Shape{4}, DType::Float32, device());
  EXPECT_NE(other.raw_data(), kept.raw_data());
  fill(other, 1.0);
  EXPECT_EQ(host_values(kept), std::vector<double>(4, 7.0));

  // A view holds the storage as the tensor does.
  const void* was = other.raw_data();
  const Tensor view = other.narrow(1, 2);
  other = Tensor();
  Tensor third = slot.get(Shape{4}, DType::Float32, device());
  EXPECT_NE(third.raw_data(), was);
  EXPECT_NE(third.raw_data(), kept.raw_data());
  EXPECT_EQ(slot.size(), 3u);
}

TEST_P(BufferSlotOnDevice, AnotherKindGetsItsOwnBufferAndTheOldestMakesRoom) {
  BufferSlot slot(2);
  const void* a = slot.get(Shape{8}, DType::Float32, device()).raw_data();
  const void* b = slot.get(Shape{2}, DType::Float32, device()).raw_data();  // a partial batch
  EXPECT_NE(a, b);
  EXPECT_EQ(slot.get(Shape{8}, DType::Float32, device()).raw_data(), a);
  EXPECT_EQ(slot.get(Shape{2}, DType::Float32, device()).raw_data(), b);
  Tensor f64 = slot.get(Shape{8}, DType::Float64, device());  // full: replaces {8} float32
  EXPECT_EQ(f64.dtype(), DType::Float64);
  EXPECT_EQ(slot.size(), 2u);
  EXPECT_EQ(slot.get(Shape{2}, DType::Float32, device()).raw_data(), b);  // kept
  f64 = Tensor();
  slot.clear();
  EXPECT_EQ(slot.size(), 0u);
}

TEST(BufferSlot, KeepsAtLeastOneBuffer) { EXPECT_THROW((void)BufferSlot(0), ValueError); }

// mlp:3,8,8,2 with the given activation: Linear + activation pairs (fused on a GPU and on the
// CPU's OpenBLAS path), a last Linear, and MSE.
std::unique_ptr<Sequential> small_mlp(Activation act, Device device) {
  Generator gen(11);
  auto model = std::make_unique<Sequential>();
  model->add(std::make_unique<Linear>(3, 8, gen, true, device));
  model->add(std::make_unique<ActivationLayer>(act));
  model->add(std::make_unique<Linear>(8, 8, gen, true, device));
  model->add(std::make_unique<ActivationLayer>(act));
  model->add(std::make_unique<Linear>(8, 2, gen, true, device));
  model->set_needs_input_grad(true);  // every layer writes its input gradient
  return model;
}

class BufferReuseOnDevice : public testing::DeviceTest {};

// What a step returns is rewritten by a later step only when the caller let go of it: outputs,
// input gradients and the loss's value and gradient that a caller keeps keep their values.
TEST_P(BufferReuseOnDevice, KeptOutputsAndGradientsAreNotOverwrittenByTheNextStep) {
  for (Activation act : {Activation::ReLU, Activation::Tanh}) {
    for (DType precision : {DType::Float32, DType::Float16}) {
      SCOPED_TRACE(activation_name(act));
      SCOPED_TRACE(dtype_name(precision));
      auto model = small_mlp(act, device());
      model->set_precision(precision);
      auto loss = make_loss({"mse"});
      struct Step {
        Tensor out, loss, grad_pred, grad_x;
      };
      std::vector<Step> kept;
      std::vector<std::vector<double>> want;
      for (uint32_t s = 0; s < 4; ++s) {
        const Tensor x = random_tensor(Shape{5, 3}, 100 + s, device());
        const Tensor y = random_tensor(Shape{5, 2}, 200 + s, device());
        Step st;
        st.out = model->forward(x);
        const Tensor pred = is_half(st.out.dtype()) ? cast(st.out, DType::Float32) : st.out;
        st.loss = loss->forward_backward(pred, y, st.grad_pred);
        st.grad_x = model->backward(is_half(st.out.dtype()) ? cast(st.grad_pred, st.out.dtype())
                                                            : st.grad_pred);
        ASSERT_TRUE(st.grad_x.defined());
        std::vector<double> values;
        for (const Tensor* t : {&st.out, &st.loss, &st.grad_pred, &st.grad_x}) {
          const std::vector<double> v = host_values(*t);
          values.insert(values.end(), v.begin(), v.end());
        }
        kept.push_back(st);
        want.push_back(values);
      }
      for (std::size_t s = 0; s < kept.size(); ++s) {
        std::vector<double> got;
        for (const Tensor* t : {&kept[s].out, &kept[s].loss, &kept[s].grad_pred, &kept[s].grad_x}) {
          const std::vector<double> v = host_values(*t);
          got.insert(got.end(), v.begin(), v.end());
        }
        EXPECT_EQ(got, want[s]) << "step " << s;
      }
    }
  }
}

// A step that keeps nothing: after the first two steps (the layers' caches hold the last step's
// buffers while the next one writes its own), forward, loss and backward ask the allocator for
// nothing, and compute what a model that allocates every tensor anew computes.
TEST_P(BufferReuseOnDevice, AStepThatKeepsNothingAllocatesNothingAfterWarmUp) {
  for (Activation act : {Activation::ReLU, Activation::GELU}) {
    for (DType precision : {DType::Float32, DType::Float16}) {
      SCOPED_TRACE(activation_name(act));
      SCOPED_TRACE(dtype_name(precision));
      auto model = small_mlp(act, device());
      model->set_precision(precision);
      auto loss = make_loss({"mse"});
      const Tensor x = random_tensor(Shape{5, 3}, 1, device());
      const Tensor y = random_tensor(Shape{5, 2}, 2, device());
      const Tensor out16 = Tensor::empty(Shape{5, 2}, precision, device());
      std::vector<double> first;
      int64_t before = 0;
      for (int step = 0; step < 5; ++step) {
        if (step == 2) before = memory_stats(device()).allocations;
        Tensor out = model->forward(x);
        Tensor pred = out;
        if (is_half(out.dtype())) {  // the trainer's widening, into a tensor kept here
          pred = Tensor::empty(out.shape(), DType::Float32, device());
          cast(pred, out);
        }
        Tensor grad;
        const Tensor l = loss->forward_backward(pred, y, grad);
        if (is_half(out.dtype())) {
          Tensor g16 = out16;
          cast(g16, grad);
          grad = g16;
        }
        const Tensor gx = model->backward(grad);
        std::vector<double> values = host_values(gx);
        values.push_back(host_values(l)[0]);
        if (step == 0) first = values;
        EXPECT_EQ(values, first) << "step " << step;  // no update: every step the same bits
      }
      if (precision == DType::Float32) {
        EXPECT_EQ(memory_stats(device()).allocations, before);
      } else {
        // the test's own widening of the output: one allocation a step
        EXPECT_EQ(memory_stats(device()).allocations, before + 3);
      }
    }
  }
}

// Every loss's forward (an evaluation's call) and forward_backward (a step's) take their value and
// reduction scratch from the loss's slots (issue 35): a value or gradient a caller keeps is never
// rewritten by a later call, and calls that keep nothing ask the allocator for nothing after the
// first two.
TEST_P(BufferReuseOnDevice, LossesKeepWhatACallerHoldsAndAllocateNothingOnceWarm) {
  const int64_t n = 6, c = 3;
  // Targets in (0, 1), as kl_div's probabilities and bce's labels want; class indices 0..2.
  auto values = [&](int shift) {
    std::vector<float> v(static_cast<std::size_t>(n * c));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.05f + 0.1f * float((i + shift) % 9);
    return Tensor::from_vector(v, Shape{n, c}).to(device());
  };
  auto classes = [&](int shift) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = float((i + shift) % c);
    return Tensor::from_vector(v, Shape{n}).to(device());
  };
  for (const std::string& name : loss_names()) {
    for (Reduction reduction : {Reduction::Mean, Reduction::None}) {
      SCOPED_TRACE(name);
      SCOPED_TRACE(reduction_name(reduction));
      LossOptions options;
      options.name = name;
      options.reduction = reduction;
      const std::unique_ptr<Loss> loss = make_loss(options);
      const bool indices = loss->target_kind() == TargetKind::ClassIndices;
      const Tensor p1 = random_tensor(Shape{n, c}, 1, device());
      const Tensor p2 = random_tensor(Shape{n, c}, 2, device());
      const Tensor t1 = indices ? classes(0) : values(0);
      const Tensor t2 = indices ? classes(1) : values(4);

      const Tensor v1 = loss->forward(p1, t1);
      const std::vector<double> want_v1 = host_values(v1);
      Tensor g1;
      const Tensor f1 = loss->forward_backward(p1, t1, g1);
      const std::vector<double> want_f1 = host_values(f1), want_g1 = host_values(g1);
      Tensor g2;
      const Tensor v2 = loss->forward(p2, t2);
      const Tensor f2 = loss->forward_backward(p2, t2, g2);
      EXPECT_NE(v2.raw_data(), v1.raw_data());
      EXPECT_NE(f2.raw_data(), f1.raw_data());
      EXPECT_NE(v2.raw_data(), f1.raw_data());
      EXPECT_NE(g2.raw_data(), g1.raw_data());
      EXPECT_NE(host_values(v2), want_v1);  // the inputs differ, so a rewrite would show
      EXPECT_EQ(host_values(v1), want_v1);
      EXPECT_EQ(host_values(f1), want_f1);
      EXPECT_EQ(host_values(g1), want_g1);
      EXPECT_EQ(host_values(f1), want_v1);  // forward_backward's value is forward's

      int64_t before = 0;
      for (int call = 0; call < 4; ++call) {
        if (call == 2) before = static_cast<int64_t>(memory_stats(device()).allocations);
        Tensor g;
        const Tensor f = loss->forward_backward(p1, t1, g);
        const Tensor v = loss->forward(p2, t2);
      }
      EXPECT_EQ(static_cast<int64_t>(memory_stats(device()).allocations), before);
    }
  }
}

// Note [a slot under capture]: a buffer handed out under a capture is the graph's while it lives,
// so eager work meanwhile (a partial last batch) never gets a buffer the replays write; once the
// graph is destroyed the slot hands it out again.
TEST(CudaBufferSlot, ABufferTakenByACaptureIsTheGraphsWhileTheGraphLives) {
  MT_SKIP_UNLESS_CUDA_DEVICES(1);
  const Device gpu = Device::cuda(0);
  Stream s = Stream::create(gpu);
  StreamGuard on(s);
  BufferSlot slot;
  const void* kept = slot.get({8}, DType::Float32, gpu).raw_data();  // released: free to reuse
  {
    Tensor captured;
    CudaGraph graph = CudaGraph::capture(s, [&] {
      captured = slot.get({8}, DType::Float32, gpu);
      fill(captured, 2.0);
    });
    EXPECT_EQ(captured.raw_data(), kept) << "a capture takes a kept buffer: no device allocation";
    captured = Tensor();  // the layer lets go; the graph still writes it at every replay
    const void* eager = slot.get({8}, DType::Float32, gpu).raw_data();
    EXPECT_NE(eager, kept) << "eager work got the buffer a live graph writes";
    EXPECT_EQ(slot.size(), 2u);
    graph.replay(s);
  }
  s.synchronize();
  EXPECT_EQ(slot.get({8}, DType::Float32, gpu).raw_data(), kept)
      << "the graph is gone: its buffer is the slot's again";
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(BufferSlotOnDevice);
MT_INSTANTIATE_DEVICE_TEST_SUITE(BufferReuseOnDevice);

}  // namespace
}  // namespace minitrain
