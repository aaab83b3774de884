// Multi-tensor optimizer steps against one per-tensor step per tensor, bit for bit, for every
// SGD and Adam variant over several steps, on lists with odd sizes, misaligned views, a tensor
// larger than several chunks and more tensors than one launch holds; and the launch schedule.

#include "kernels/optim/multi_tensor_optim.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/multi_tensor_apply.h"
#include "kernels/optim/adam_step.h"
#include "kernels/optim/optimizer_step.h"
#include "kernels/optim/sgd_step.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::error_message;
using ::testing::HasSubstr;
using testing::host_max_abs;
using testing::host_values;
using testing::random_tensor;

// 5 chunks + 3 (kMultiTensorChunk = 16384), then 1, 3, 17, 1023, 4099 over and over (slightly
// varied); with the offset-1 views below, half of them start misaligned.
std::vector<int64_t> list_sizes(int count) {
  const int64_t base[] = {1, 3, 17, 1023, 4099};
  // First a tensor over several chunks with a partial last one: five on a GPU, two on emulated GPUs
  // (thousands of times slower; two chunks and a remainder still cross every chunk boundary case).
  const int64_t chunks = MINITRAIN_CUDA_EMULATED ? 2 : 5;
  std::vector<int64_t> s = {chunks * kMultiTensorChunk + 3};
  if (testing::over_size_cap(s[0])) s[0] = 4099 + 3;  // the racecheck stage: within one chunk
  for (int i = 1; i < count; ++i) s.push_back(base[i % 5] + (i / 5) % 3);
  return s;
}

// A list of tensors; odd positions are views one element into their storage (misaligned).
std::vector<Tensor> make_list(const std::vector<int64_t>& sizes, uint32_t seed, Device d,
                              DType dtype, double lo = -1.0, double hi = 1.0) {
  std::vector<Tensor> out;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    const int64_t offset = k % 2;
    out.push_back(random_tensor({sizes[k] + offset}, seed + uint32_t(k), d, dtype, lo, hi)
                      .narrow(offset, sizes[k]));
  }
  return out;
}

std::vector<Tensor> clones(const std::vector<Tensor>& v) {
  std::vector<Tensor> out;
  for (const Tensor& t : v) out.push_back(t.clone());
  return out;
}

void expect_bitwise(const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                    const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t k = 0; k < got.size(); ++k)
    EXPECT_EQ(host_values(got[k]), host_values(want[k])) << what << " of tensor " << k;
}

// Issue 35: the optimizer's one launch for a 1024-wide model has a block for every SM of an H100
// (132: cuda_emu's "h100" profile, the SXM5 datasheet), and a small model still takes one launch.
TEST(MultiTensorPlan, A1024WideModelFillsTheSmsOfAnH100) {
  constexpr int kH100Sms = 132;
  const std::vector<int64_t> wide = {1024 * 1024, 1024, 1024 * 1024, 1024, 1024, 1};
  for (int depth : {2, 3, 4, 5}) {  // SGD (with and without momentum), Adam, amsgrad
    SCOPED_TRACE(depth);
    const auto launches = plan_multi_tensor_launches(wide, multi_tensor_max_tensors(depth),
                                                     kMultiTensorMaxBlocks, kMultiTensorChunk);
    ASSERT_EQ(launches.size(), 1u);
    EXPECT_GE(launches[0].block_tensor.size(), static_cast<std::size_t>(kH100Sms));
    const auto small =
        plan_multi_tensor_launches({64, 16, 256, 16, 16, 1}, multi_tensor_max_tensors(depth),
                                   kMultiTensorMaxBlocks, kMultiTensorChunk);
    EXPECT_EQ(small.size(), 1u);
  }
}

TEST(MultiTensorPlan, CoversEveryElementOnceAcrossSeveralLaunches) {
  const std::vector<int64_t> sizes = {0, 5, 300, 0, 1000, 7, 2, 2, 2, 2, 2, 2, 999};
  const auto launches = plan_multi_tensor_launches(sizes, /*max_tensors=*/3, /*max_blocks=*/4,
                                                   /*chunk=*/100);
  ASSERT_GT(launches.size(), 1u);
  std::vector<std::vector<int>> seen(sizes.size());
  for (std::size_t k = 0; k < sizes.size(); ++k) seen[k].assign((sizes[k] + 99) / 100, 0);
  for (const MultiTensorLaunch& l : launches) {
    EXPECT_LE(l.tensors.size(), 3u);
    EXPECT_LE(l.block_tensor.size(), 4u);
    ASSERT_EQ(l.block_tensor.size(), l.block_chunk.size());
    for (std::size_t b = 0; b < l.block_tensor.size(); ++b)
      ++seen[l.tensors[l.block_tensor[b]]][l.block_chunk[b]];
  }
  for (std::size_t k = 0; k < sizes.size(); ++k)
    for (int count : seen[k]) EXPECT_EQ(count, 1) << "tensor " << k;
}

TEST(MultiTensorPlan, RejectsBadLimits) {
  EXPECT_THAT(error_message([] { plan_multi_tensor_launches({4}, 0, 4, 100); }),
              HasSubstr("max_tensors = 0, max_blocks = 4 and chunk = 100 must all be >= 1"));
  EXPECT_THAT(error_message([] {
                plan_multi_tensor_launches({4, -1}, 2, 4, 100);
              }),
              HasSubstr("tensor 1 has size -1"));
}

class MultiTensorOptim : public testing::DeviceTest {};

TEST_P(MultiTensorOptim, SgdEqualsPerTensorStepsBitwise) {
  struct Variant {
    double momentum, dampening, weight_decay;
    bool nesterov;
  };
  const Variant variants[] = {
      {0, 0, 0, false}, {0, 0, 0.1, false}, {0.9, 0.3, 0, false}, {0.9, 0, 0.05, true}};
  for (DType dtype : {DType::Float32, DType::Float64})
    for (const Variant& v : variants)
      for (int count : {6, 100}) {  // 100 > 48 tensors: more than one launch on a GPU
        // The racecheck stage (over_size_cap): one launch's list, within one chunk.
        if (count > 6 && testing::over_size_cap(kMultiTensorChunk)) continue;
        SCOPED_TRACE("momentum " + std::to_string(v.momentum) + ", " + std::to_string(count) +
                     " tensors");
        const std::vector<int64_t> sizes = list_sizes(count);
        std::vector<Tensor> p_multi = make_list(sizes, 100, device(), dtype);
        std::vector<Tensor> p_single = clones(p_multi);
        std::vector<Tensor> b_multi, b_single;
        for (int64_t n : sizes) {
          b_multi.push_back(Tensor::empty({n}, dtype, device()));
          b_single.push_back(Tensor::empty({n}, dtype, device()));
        }
        for (int step = 0; step < 3; ++step) {
          const std::vector<Tensor> grads = make_list(sizes, 1000 + 7 * step, device(), dtype);
          SGDStepArgs args;
          args.lr = 0.1;
          args.momentum = v.momentum;
          args.dampening = v.dampening;
          args.weight_decay = v.weight_decay;
          args.nesterov = v.nesterov;
          args.first_step = step == 0;
          std::vector<Tensor> none;
          sgd_step_multi(p_multi, grads, v.momentum != 0 ? b_multi : none, args);
          for (std::size_t k = 0; k < sizes.size(); ++k)
            sgd_step(p_single[k], grads[k], b_single[k], args);
        }
        ASSERT_GT(host_max_abs(p_multi.front()), 0.0);
        expect_bitwise(p_multi, p_single, "param");
        if (v.momentum != 0) expect_bitwise(b_multi, b_single, "momentum_buffer");
      }
}

TEST_P(MultiTensorOptim, AdamAndAdamWEqualPerTensorStepsBitwise) {
  struct Variant {
    double weight_decay;
    bool decoupled, amsgrad;
  };
  const Variant variants[] = {{0, false, false},
                              {0.1, false, false},
                              {0.1, true, false},
                              {0.01, true, true},
                              {0, false, true}};
  for (DType dtype : {DType::Float32, DType::Float64})
    for (const Variant& v : variants)
      for (int count : {6, 100}) {  // 100 > 30 tensors: several launches on a GPU
        // The racecheck stage (over_size_cap): one launch's list, within one chunk.
        if (count > 6 && testing::over_size_cap(kMultiTensorChunk)) continue;
        SCOPED_TRACE("wd " + std::to_string(v.weight_decay) + (v.decoupled ? " adamw" : " adam") +
                     (v.amsgrad ? " amsgrad, " : ", ") + std::to_string(count) + " tensors");
        const std::vector<int64_t> sizes = list_sizes(count);
        std::vector<Tensor> p[2], m[2], s[2], vmax[2];
        p[0] = make_list(sizes, 200, device(), dtype);
        p[1] = clones(p[0]);
        for (int r = 0; r < 2; ++r)
          for (int64_t n : sizes) {
            m[r].push_back(Tensor::zeros({n}, dtype, device()));
            s[r].push_back(Tensor::zeros({n}, dtype, device()));
            vmax[r].push_back(Tensor::zeros({n}, dtype, device()));
          }
        for (int step = 1; step <= 3; ++step) {
          // Shrinking then growing gradients, so amsgrad's max matters.
          const double g = step == 2 ? 0.05 : 1.0;
          const std::vector<Tensor> grads =
              make_list(sizes, 2000 + 7 * step, device(), dtype, -g, g);
          const AdamStepArgs args =
              adam_step_args(0.01, 0.9, 0.999, 1e-8, v.weight_decay, v.decoupled, v.amsgrad, step);
          adam_step_multi(p[0], grads, m[0], s[0], vmax[0], args);
          for (std::size_t k = 0; k < sizes.size(); ++k)
            adam_step(p[1][k], grads[k], m[1][k], s[1][k], vmax[1][k], args);
        }
        ASSERT_GT(host_max_abs(p[0].front()), 0.0);
        expect_bitwise(p[0], p[1], "param");
        expect_bitwise(m[0], m[1], "exp_avg");
        expect_bitwise(s[0], s[1], "exp_avg_sq");
        if (v.amsgrad) expect_bitwise(vmax[0], vmax[1], "max_exp_avg_sq");
      }
}

// The generic multi-tensor step (Note [one row per optimizer]) for a row that had none before:
// RMSprop, every variant, against one fused step per tensor. Centered off with momentum on leaves
// a hole in the state (grad_avg unused, the buffer used), so the packed launch operands are
// tested too.
TEST_P(MultiTensorOptim, RmspropEqualsPerTensorStepsBitwise) {
  struct Variant {
    double weight_decay;
    bool centered;
    double momentum;
  };
  const Variant variants[] = {{0, false, 0}, {0.1, true, 0}, {0, false, 0.9}, {0.05, true, 0.5}};
  for (DType dtype : {DType::Float32, DType::Float64})
    for (const Variant& v : variants)
      for (int count : {6, 100}) {
        if (count > 6 && testing::over_size_cap(kMultiTensorChunk)) continue;
        SCOPED_TRACE("wd " + std::to_string(v.weight_decay) + (v.centered ? " centered" : "") +
                     " momentum " + std::to_string(v.momentum) + ", " + std::to_string(count) +
                     " tensors");
        const std::vector<int64_t> sizes = list_sizes(count);
        std::vector<Tensor> p[2], sq[2], ga[2], buf[2];
        p[0] = make_list(sizes, 300, device(), dtype);
        p[1] = clones(p[0]);
        for (int r = 0; r < 2; ++r)
          for (int64_t n : sizes) {
            sq[r].push_back(Tensor::zeros({n}, dtype, device()));
            if (v.centered) ga[r].push_back(Tensor::zeros({n}, dtype, device()));
            if (v.momentum > 0) buf[r].push_back(Tensor::zeros({n}, dtype, device()));
          }
        RMSpropStepArgs args;
        args.lr = 0.01, args.alpha = 0.9, args.eps = 1e-6;
        args.weight_decay = v.weight_decay, args.centered = v.centered, args.momentum = v.momentum;
        for (int step = 1; step <= 3; ++step) {
          const std::vector<Tensor> grads = make_list(sizes, 3000 + 7 * step, device(), dtype);
          optimizer_step_multi<RmspropStep>(p[0], grads, {&sq[0], &ga[0], &buf[0]}, args);
          Tensor none;
          for (std::size_t k = 0; k < sizes.size(); ++k)
            optimizer_step<RmspropStep>(
                p[1][k], grads[k],
                {&sq[1][k], v.centered ? &ga[1][k] : &none, v.momentum > 0 ? &buf[1][k] : &none},
                args);
        }
        ASSERT_GT(host_max_abs(p[0].front()), 0.0);
        expect_bitwise(p[0], p[1], "param");
        expect_bitwise(sq[0], sq[1], "square_avg");
        if (v.centered) expect_bitwise(ga[0], ga[1], "grad_avg");
        if (v.momentum > 0) expect_bitwise(buf[0], buf[1], "momentum_buffer");
      }
}

TEST_P(MultiTensorOptim, RejectsMismatchedListsBeforeWriting) {
  std::vector<Tensor> params = {Tensor::zeros({3}, DType::Float32, device()),
                                Tensor::zeros({4}, DType::Float32, device())};
  const std::vector<Tensor> grads = {Tensor::zeros({3}, DType::Float32, device()),
                                     Tensor::zeros({5}, DType::Float32, device())};
  std::vector<Tensor> none;
  SGDStepArgs args;
  EXPECT_THAT(error_message([&] { sgd_step_multi(params, {grads[0]}, none, args); }),
              HasSubstr("sgd_step_multi: grads has 1 tensors but params has 2"));
  EXPECT_THAT(error_message([&] { sgd_step_multi(params, grads, none, args); }),
              HasSubstr("sgd_step_multi: tensor 1"));
  std::vector<Tensor> m = grads, v = grads;
  EXPECT_THAT(error_message([&] {
                adam_step_multi(params, grads, m, v, none,
                                adam_step_args(0.1, 0.9, 0.999, 1e-8, 0, false, true, 1));
              }),
              HasSubstr("adam_step_multi: max_exp_avg_sqs has 0 tensors but params has 2"));
  RMSpropStepArgs centered;
  centered.centered = true;
  std::vector<Tensor> sq = grads;
  EXPECT_THAT(error_message([&] {
                optimizer_step_multi<RmspropStep>(params, grads, {&sq, nullptr, nullptr}, centered);
              }),
              HasSubstr("rmsprop_step_multi: grad_avgs has 0 tensors but params has 2"));
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(MultiTensorOptim);

}  // namespace
}  // namespace minitrain
