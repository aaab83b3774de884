// Cross-entropy (log-softmax + NLL, class weights, label smoothing, ignore_index) against a plain
// double reference for each reduction, finite differences, odd shapes and large logits, the fused
// call against forward + backward bit for bit, CUDA against the CPU, and bad input.

#include "kernels/loss/cross_entropy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/parallel_for.h"
#include "tests/core/io_test_util.h"
#include "tests/kernels/loss_test_util.h"
#include "tests/support/test_util.h"

#if MINITRAIN_CUDA_EMULATED
#include "cuda_emu/api_counts.h"
#endif

namespace minitrain {
namespace {

using testing::central_differences;
using testing::error_message;
using ::testing::HasSubstr;
using testing::host_max_abs;
using testing::host_values;
using testing::kAllReductions;
using testing::loss_total;
using testing::random_tensor;
using testing::tensor_of;

// Settings under test: weights (or none), label smoothing, ignore_index, and the share of rows
// whose target is ignore_index.
struct Setting {
  bool weights;
  double eps;
  int64_t ignore_index;
  bool some_ignored;
  std::string label() const {
    return std::string(weights ? "weights " : "") + "eps=" + std::to_string(eps) +
           " ignore=" + std::to_string(ignore_index) + (some_ignored ? " (some rows)" : "");
  }
};
const Setting kSettings[] = {
    {false, 0.0, -100, false}, {true, 0.0, -100, true}, {false, 0.2, -100, true},
    {true, 0.1, 1, true},  // ignore_index a valid class: its rows are ignored
    {true, 1.0, -100, false},
};

struct Problem {
  int64_t n, c;
  Tensor logits, classes;
  CrossEntropySpec spec;
  std::vector<double> x, y, w;  // host copies; w all 1 without weights
};

Problem make_problem(int64_t n, int64_t c, const Setting& s, uint32_t seed, Device device,
                     DType dtype, double scale = 3.0) {
  Problem p{n,  c, random_tensor({n, c}, seed, device, dtype, -scale, scale), Tensor(), {}, {},
            {}, {}};
  std::mt19937 rng(seed + 7);
  std::uniform_int_distribution<int64_t> cls(0, c - 1);
  for (int64_t i = 0; i < n; ++i) {
    const bool ignore = s.some_ignored && i % 3 == 1;
    int64_t y = cls(rng);
    if (y == s.ignore_index) y = (y + 1) % c;  // only the chosen rows are ignored
    p.y.push_back(double(ignore ? s.ignore_index : y));
  }
  p.classes = tensor_of(p.y, {n}, device, dtype);
  p.spec.label_smoothing = s.eps;
  p.spec.ignore_index = s.ignore_index;
  p.w.assign(size_t(c), 1.0);
  if (s.weights) {
    p.spec.class_weights = random_tensor({c}, seed + 3, device, dtype, 0.25, 2.0);
    p.w = host_values(p.spec.class_weights);
  }
  p.x = host_values(p.logits);
  return p;
}

// ---- the double reference: log-softmax, then torch's formula term by term ----
struct Reference {
  std::vector<double> row_loss;  // 0 for ignored rows
  double total_weight = 0;       // sum of w[y_i] over non-ignored rows
  std::vector<double> grad;      // d(sum_i g_i loss_i)/dx for per-row g (for none), scaled below
};

Reference reference(const Problem& p, const std::vector<double>& g_rows) {
  Reference r;
  r.row_loss.assign(size_t(p.n), 0.0);
  r.grad.assign(size_t(p.n * p.c), 0.0);
  const double eps = p.spec.label_smoothing;
  for (int64_t i = 0; i < p.n; ++i) {
    if (p.y[size_t(i)] == double(p.spec.ignore_index)) continue;
    const int64_t y = int64_t(p.y[size_t(i)]);
    const double* x = &p.x[size_t(i * p.c)];
    double m = x[0];
    for (int64_t j = 0; j < p.c; ++j) m = std::max(m, x[j]);
    double z = 0;
    for (int64_t j = 0; j < p.c; ++j) z += std::exp(x[j] - m);
    std::vector<double> logp(size_t(p.c)), prob(size_t(p.c));
    for (int64_t j = 0; j < p.c; ++j) {
      logp[size_t(j)] = x[j] - m - std::log(z);
      prob[size_t(j)] = std::exp(logp[size_t(j)]);
    }
    double smooth = 0;
    for (int64_t j = 0; j < p.c; ++j) smooth += -p.w[size_t(j)] * logp[size_t(j)];
    const double nll = -p.w[size_t(y)] * logp[size_t(y)];
    r.row_loss[size_t(i)] = (1 - eps) * nll + eps / double(p.c) * smooth;
    r.total_weight += p.w[size_t(y)];
    // d nll/dx_j = w_y (p_j - [j == y]); d smooth/dx_j = sum_c w_c (p_j - [j == c])
    double wsum = 0;
    for (double w : p.w) wsum += w;
    for (int64_t j = 0; j < p.c; ++j) {
      const double dnll = p.w[size_t(y)] * (prob[size_t(j)] - (j == y ? 1 : 0));
      const double dsmooth = wsum * prob[size_t(j)] - p.w[size_t(j)];
      r.grad[size_t(i * p.c + j)] =
          g_rows[size_t(i)] * ((1 - eps) * dnll + eps / double(p.c) * dsmooth);
    }
  }
  return r;
}

double reduce(const std::vector<double>& rows, Reduction r, double total_weight) {
  double s = 0;
  for (double v : rows) s += v;
  return r == Reduction::Mean ? s / total_weight : s;
}

class CrossEntropyTest : public testing::DeviceTest {};

const std::pair<int64_t, int64_t> kShapes[] = {{1, 1},   {1, 5},    {7, 3},
                                               {37, 10}, {5, 1000}, {66, 33}};

TEST_P(CrossEntropyTest, ForwardMatchesReferenceForEachReductionAndSetting) {
  for (const Setting& s : kSettings)
    for (DType dtype : {DType::Float32, DType::Float64})
      for (auto [n, c] : kShapes) {
        if (testing::over_size_cap(n * c)) continue;
        const Problem p = make_problem(n, c, s, 101, device(), dtype);
        const Reference ref = reference(p, std::vector<double>(size_t(n), 1.0));
        // float: log-softmax of logits in [-3, 3] in float (exp to an ulp, sums in double):
        // ~1e-7 relative per term; C terms of one sign in the smoothing sum keep that bound
        const double rtol = dtype == DType::Float32 ? 2e-6 : 1e-12;
        const double atol = dtype == DType::Float32 ? 2e-6 : 1e-12;
        const std::string where = s.label() + " [" + std::to_string(n) + ", " + std::to_string(c) +
                                  "] " + dtype_name(dtype);
        Tensor none = cross_entropy_forward(p.logits, p.classes, p.spec, Reduction::None);
        ASSERT_EQ(none.shape(), (Shape{n}));
        EXPECT_ALLCLOSE(host_values(none), ref.row_loss, atol, rtol) << where;
        for (Reduction r : {Reduction::Mean, Reduction::Sum}) {
          Tensor l = cross_entropy_forward(p.logits, p.classes, p.spec, r);
          ASSERT_EQ(l.ndim(), 0);
          EXPECT_ALLCLOSE(host_values(l),
                          std::vector<double>{reduce(ref.row_loss, r, ref.total_weight)}, atol,
                          rtol)
              << where << " " << reduction_name(r);
        }
        if (c > 1) {
          ASSERT_GT(host_max_abs(none), 0.0);
        }
      }
}

TEST_P(CrossEntropyTest, BackwardMatchesReferenceForEachReduction) {
  for (const Setting& s : kSettings)
    for (DType dtype : {DType::Float32, DType::Float64})
      for (auto [n, c] : kShapes) {
        if (testing::over_size_cap(n * c)) continue;
        const Problem p = make_problem(n, c, s, 201, device(), dtype);
        Tensor g_rows = random_tensor({n}, 203, device(), dtype, 0.5, 1.5);
        for (Reduction r : kAllReductions) {
          std::vector<double> g(size_t(n), 0.75);
          if (r == Reduction::None) g = host_values(g_rows);
          Reference ref = reference(p, g);
          if (r == Reduction::Mean)
            for (double& v : ref.grad) v /= ref.total_weight;
          Tensor grad_out = r == Reduction::None ? g_rows : tensor_of({0.75}, {}, device(), dtype);
          Tensor grad = cross_entropy_backward(grad_out, p.logits, p.classes, p.spec, r);
          ASSERT_EQ(grad.shape(), (Shape{n, c}));
          const double tol = dtype == DType::Float32 ? 1e-6 : 1e-13;
          EXPECT_ALLCLOSE(host_values(grad), ref.grad, tol, tol)
              << s.label() << " [" << n << ", " << c << "] " << reduction_name(r);
        }
      }
}

TEST_P(CrossEntropyTest, BackwardMatchesFiniteDifferencesWithWeightsSmoothingAndIgnore) {
  const Setting s{true, 0.15, 2, true};  // weights, smoothing and ignored rows together
  const int64_t n = 5, c = 4;
  const Problem p = make_problem(n, c, s, 301, device(), DType::Float64);
  Tensor g_rows = random_tensor({n}, 303, device(), DType::Float64, 0.5, 1.5);
  const std::vector<double> gr = host_values(g_rows);
  const double h = 1e-6;
  for (Reduction r : kAllReductions) {
    const std::vector<double> want = central_differences(
        [&](const std::vector<double>& x) {
          return loss_total(
              cross_entropy_forward(Tensor::from_vector(x, {n, c}, device()), p.classes, p.spec, r),
              gr);
        },
        p.x, h);
    Tensor g = r == Reduction::None ? g_rows : tensor_of({1.0}, {}, device(), DType::Float64);
    Tensor grad = cross_entropy_backward(g, p.logits, p.classes, p.spec, r);
    ASSERT_GT(host_max_abs(grad), 0.0);
    // smooth in x: truncation h^2 f''' ~ 1e-12, rounding eps * loss / h ~ 1e-10
    EXPECT_ALLCLOSE(host_values(grad), want, 1e-8, 1e-7) << reduction_name(r);
  }
}

TEST_P(CrossEntropyTest, OneClassGivesZeroLossAndGradient) {
  const Problem p = make_problem(4, 1, {true, 0.3, -100, false}, 401, device(), DType::Float32);
  EXPECT_EQ(cross_entropy_forward(p.logits, p.classes, p.spec, Reduction::Sum).item(), 0.0);
  Tensor g = cross_entropy_backward(tensor_of({1.0}, {}, device(), DType::Float32), p.logits,
                                    p.classes, p.spec, Reduction::Mean);
  EXPECT_EQ(host_max_abs(g), 0.0);
}

TEST_P(CrossEntropyTest, AllRowsIgnoredGivesNaNMeanZeroSumAndZeroGradient) {
  for (bool weights : {false, true}) {
    Problem p = make_problem(3, 4, {weights, 0.1, -100, false}, 501, device(), DType::Float32);
    p.classes = tensor_of({-100, -100, -100}, {3}, device(), DType::Float32);
    // as torch: mean = 0 / 0
    EXPECT_TRUE(std::isnan(cross_entropy_forward(p.logits, p.classes, p.spec).item()));
    EXPECT_EQ(cross_entropy_forward(p.logits, p.classes, p.spec, Reduction::Sum).item(), 0.0);
    EXPECT_EQ(host_values(cross_entropy_forward(p.logits, p.classes, p.spec, Reduction::None)),
              (std::vector<double>{0, 0, 0}));
    Tensor loss = Tensor::empty({}, DType::Float32, device());
    Tensor grad = Tensor::empty({3, 4}, DType::Float32, device());
    cross_entropy_forward_backward(loss, grad, p.logits, p.classes, p.spec, Reduction::Mean);
    EXPECT_EQ(host_values(grad), std::vector<double>(12, 0.0));  // no NaN from 1 / 0
  }
}

TEST_P(CrossEntropyTest, EmptyBatchGivesNaNMeanAndZeroSum) {
  Tensor logits = Tensor::zeros({0, 3}, DType::Float32, device());
  Tensor classes = Tensor::zeros({0}, DType::Float32, device());
  EXPECT_TRUE(std::isnan(cross_entropy_forward(logits, classes, {}).item()));
  EXPECT_EQ(cross_entropy_forward(logits, classes, {}, Reduction::Sum).item(), 0.0);
  EXPECT_EQ(cross_entropy_forward(logits, classes, {}, Reduction::None).shape(), (Shape{0}));
}

TEST_P(CrossEntropyTest, LogitsOf1e4StayFiniteAndExact) {
  // row 0: [1e4, 0, -1e4], target 1: log-softmax of class 1 is -1e4 (exp(-1e4) vanishes), so
  // the loss is 1e4; row 1: [1e4, 1e4, 1e4], target 2: log 3. A naive exp(1e4) is inf.
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Tensor logits = tensor_of({1e4, 0, -1e4, 1e4, 1e4, 1e4}, {2, 3}, device(), dtype);
    Tensor classes = tensor_of({1, 2}, {2, 1}, device(), dtype);  // [N, 1] targets too
    const std::vector<double> none =
        host_values(cross_entropy_forward(logits, classes, {}, Reduction::None));
    EXPECT_ALLCLOSE(none, (std::vector<double>{1e4, std::log(3.0)}), 0.0, 1e-7);
    CrossEntropySpec smooth;
    smooth.label_smoothing = 0.1;
    const double l = cross_entropy_forward(logits, classes, smooth, Reduction::Sum).item();
    EXPECT_TRUE(std::isfinite(l));
    // row 0 smoothing term: eps/3 * (0 + 1e4 + 2e4); row 1: eps/3 * 3 log 3
    const double want = 0.9 * (1e4 + std::log(3.0)) + 0.1 / 3 * (3e4 + 3 * std::log(3.0));
    EXPECT_NEAR(l, want, want * 2e-7);  // float: half an ulp of 1e4 is 5e-8 relative
    const std::vector<double> g = host_values(cross_entropy_backward(
        tensor_of({1.0}, {}, device(), dtype), logits, classes, smooth, Reduction::Sum));
    for (double v : g) EXPECT_TRUE(std::isfinite(v));
    EXPECT_NEAR(g[0], 1 - 0.1 / 3, 1e-6);  // softmax 1 minus the smoothed share
    EXPECT_NEAR(g[1], -(0.9 + 0.1 / 3), 1e-6);
  }
}

TEST_P(CrossEntropyTest, FusedEqualsForwardThenBackwardBitForBit) {
  for (const Setting& s : kSettings)
    for (DType dtype : {DType::Float32, DType::Float64})
      for (auto [n, c] : kShapes) {
        if (testing::over_size_cap(n * c)) continue;
        const Problem p = make_problem(n, c, s, 601, device(), dtype);
        for (Reduction r : kAllReductions) {
          const Shape loss_shape = r == Reduction::None ? Shape{n} : Shape{};
          Tensor ones = tensor_of(std::vector<double>(size_t(loss_shape.numel()), 1.0), loss_shape,
                                  device(), dtype);
          Tensor loss = Tensor::empty(loss_shape, dtype, device());
          Tensor grad = Tensor::empty({n, c}, dtype, device());
          cross_entropy_forward_backward(loss, grad, p.logits, p.classes, p.spec, r);
          EXPECT_EQ(host_values(loss),
                    host_values(cross_entropy_forward(p.logits, p.classes, p.spec, r)))
              << s.label() << " " << reduction_name(r);
          EXPECT_EQ(host_values(grad),
                    host_values(cross_entropy_backward(ones, p.logits, p.classes, p.spec, r)))
              << s.label() << " " << reduction_name(r);
        }
      }
}

TEST_P(CrossEntropyTest, GradientMayOverwriteTheLogits) {
  const Problem p = make_problem(9, 40, {true, 0.1, -100, true}, 651, device(), DType::Float32);
  Tensor want_loss = cross_entropy_forward(p.logits, p.classes, p.spec);
  Tensor want_grad = cross_entropy_backward(tensor_of({1.0}, {}, device(), DType::Float32),
                                            p.logits, p.classes, p.spec);
  Tensor loss = Tensor::empty({}, DType::Float32, device());
  Tensor in_place = p.logits.clone();
  cross_entropy_forward_backward(loss, in_place, in_place, p.classes, p.spec);
  EXPECT_EQ(loss.item(), want_loss.item());
  EXPECT_EQ(host_values(in_place), host_values(want_grad));
}

TEST_P(CrossEntropyTest, DeviceMatchesCpuWithinFloatRounding) {
  for (const Setting& s : kSettings)
    for (auto [n, c] : kShapes) {
      if (testing::over_size_cap(n * c)) continue;
      const Problem p = make_problem(n, c, s, 701, device(), DType::Float32);
      const Problem q = make_problem(n, c, s, 701, Device::cpu(), DType::Float32);
      for (Reduction r : kAllReductions) {
        const Shape loss_shape = r == Reduction::None ? Shape{n} : Shape{};
        Tensor loss = Tensor::empty(loss_shape, DType::Float32, device());
        Tensor grad = Tensor::empty({n, c}, DType::Float32, device());
        cross_entropy_forward_backward(loss, grad, p.logits, p.classes, p.spec, r);
        Tensor loss_cpu = Tensor::empty(loss_shape);
        Tensor grad_cpu = Tensor::empty({n, c});
        cross_entropy_forward_backward(loss_cpu, grad_cpu, q.logits, q.classes, q.spec, r);
        // the same float exp per element; row sums in double in another order (lanes, then a
        // butterfly): a last-bit difference at most, after rounding to float
        EXPECT_ALLCLOSE(host_values(loss), host_values(loss_cpu), 1e-7, 1e-6)
            << s.label() << " " << reduction_name(r);
        EXPECT_ALLCLOSE(host_values(grad), host_values(grad_cpu), 1e-8, 1e-6)
            << s.label() << " " << reduction_name(r);
      }
    }
}

TEST_P(CrossEntropyTest, SumIsBitIdenticalAcrossThreadCounts) {
  // enough rows for the CPU to split them over threads (grain kElementwiseGrain / C rows)
  const int64_t n = MINITRAIN_CUDA_EMULATED ? 600 : 8000;
  const Problem p = make_problem(n, 9, {true, 0.1, -100, true}, 801, device(), DType::Float32);
  const double first = cross_entropy_forward(p.logits, p.classes, p.spec).item();
  const int saved = num_threads();
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    EXPECT_EQ(cross_entropy_forward(p.logits, p.classes, p.spec).item(), first) << threads;
  }
  set_num_threads(saved);
}

TEST_P(CrossEntropyTest, BadClassIndexNamesRowValueAndC) {
  Tensor logits = Tensor::zeros({4, 5}, DType::Float32, device());
  for (double bad : {5.0, -1.0, 2.5, double(NAN)}) {
    Tensor classes = tensor_of({0, 4, -100, bad}, {4}, device(), DType::Float32);
    EXPECT_THROW(cross_entropy_forward(logits, classes, {}), ValueError) << bad;
    const std::string msg = error_message([&] { cross_entropy_forward(logits, classes, {}); });
    EXPECT_THAT(msg, HasSubstr("row 3"));
    EXPECT_THAT(msg, HasSubstr("C = 5"));
    EXPECT_THAT(msg, HasSubstr("ignore_index (-100)"));
  }
  Tensor classes = tensor_of({0, 4, -100, 7}, {4}, device(), DType::Float32);
  EXPECT_THAT(error_message([&] { cross_entropy_forward(logits, classes, {}); }),
              HasSubstr("has target 7"));
}

TEST_P(CrossEntropyTest, RejectsBadShapesAndSettings) {
  Tensor logits = Tensor::zeros({4, 5}, DType::Float32, device());
  Tensor classes = Tensor::zeros({4}, DType::Float32, device());
  EXPECT_THROW(cross_entropy_forward(logits, Tensor::zeros({3}, DType::Float32, device()), {}),
               ShapeError);
  EXPECT_THROW(cross_entropy_forward(logits, Tensor::zeros({4, 2}, DType::Float32, device()), {}),
               ShapeError);
  EXPECT_THROW(cross_entropy_forward(Tensor::zeros({5}, DType::Float32, device()), classes, {}),
               ShapeError);
  CrossEntropySpec three;
  three.class_weights = Tensor::zeros({3}, DType::Float32, device());
  EXPECT_THROW(cross_entropy_forward(logits, classes, three), ShapeError);
  const std::string msg = error_message([&] { cross_entropy_forward(logits, classes, three); });
  EXPECT_THAT(msg, HasSubstr("class_weights [3]"));
  EXPECT_THAT(msg, HasSubstr("[4, 5]"));
  CrossEntropySpec negative;
  negative.class_weights = tensor_of({1, 1, -1, 1, 1}, {5}, device(), DType::Float32);
  EXPECT_THROW(cross_entropy_forward(logits, classes, negative), ValueError);
  CrossEntropySpec too_smooth;
  too_smooth.label_smoothing = 1.5;
  EXPECT_THAT(error_message([&] { cross_entropy_forward(logits, classes, too_smooth); }),
              HasSubstr("label_smoothing must be in [0, 1] but is 1.5"));
  Tensor not_scalar = Tensor::zeros({1}, DType::Float32, device());
  EXPECT_THROW(cross_entropy_backward(not_scalar, logits, classes, {}, Reduction::Mean),
               ShapeError);
  EXPECT_THROW(cross_entropy_forward(logits, Tensor::zeros({4}, DType::Float64, device()), {}),
               DTypeError);
}

// Note [cross_entropy's targets on the device]: with a target_check the CUDA call copies nothing
// to the host, and its loss and gradient are the host-checked call's bit for bit: without weights
// the divisor is a count, exact in any order; with weights it is a sum of doubles (random weights
// in [0.25, 2): every addition rounds), which one device thread adds in the host's row order,
// and the weights' total (label smoothing's W) in class order: odd row counts, up to 301. On
// the CPU the check is the host's, the same bits trivially.
TEST_P(CrossEntropyTest, TargetsCheckedOnTheDeviceGiveTheHostCheckedBits) {
  const Setting settings[] = {{false, 0.0, -100, false}, {false, 0.2, -100, true},
                              {false, 0.0, 1, true},     {true, 0.0, -100, true},
                              {true, 0.1, 1, true},      {true, 1.0, -100, false}};
  const std::vector<std::pair<int64_t, int64_t>> all(std::begin(kShapes), std::end(kShapes));
  // Weighted: the row order is what matters, so odd row counts, the longest 301.
  const std::vector<std::pair<int64_t, int64_t>> rows = {{1, 5}, {7, 3}, {37, 10}, {301, 7}};
  for (const Setting& s : settings)
    for (DType dtype : {DType::Float32, DType::Float64})
      for (auto [n, c] : s.weights ? rows : all) {
        if (testing::over_size_cap(n * c)) continue;
        Problem p = make_problem(n, c, s, 811, device(), dtype);
        for (Reduction r : kAllReductions) {
          const Shape loss_shape = r == Reduction::None ? Shape{n} : Shape{};
          Tensor want_loss = Tensor::empty(loss_shape, dtype, device());
          Tensor want_grad = Tensor::empty({n, c}, dtype, device());
          cross_entropy_forward_backward(want_loss, want_grad, p.logits, p.classes, p.spec, r);
          CrossEntropySpec on_device = p.spec;
          on_device.target_check = Tensor::zeros({3}, DType::Float64, device());
          EXPECT_EQ(cross_entropy_checks_on_device(p.logits, on_device), device().is_cuda());
          Tensor loss = Tensor::empty(loss_shape, dtype, device());
          Tensor grad = Tensor::empty({n, c}, dtype, device());
#if MINITRAIN_CUDA_EMULATED
          const uint64_t copies_before = mtemu::api_counts().device_to_host_copies;
#endif
          cross_entropy_forward_backward(loss, grad, p.logits, p.classes, on_device, r);
#if MINITRAIN_CUDA_EMULATED
          if (device().is_cuda()) {
            EXPECT_EQ(mtemu::api_counts().device_to_host_copies, copies_before)
                << "the call read its targets";
          }
#endif
          EXPECT_EQ(host_values(loss), host_values(want_loss))
              << s.label() << " " << n << "x" << c << reduction_name(r);
          EXPECT_EQ(host_values(grad), host_values(want_grad))
              << s.label() << " " << n << "x" << c << reduction_name(r);
          EXPECT_EQ(host_values(on_device.target_check), (std::vector<double>{0, 0, 0}));
          Tensor fwd = cross_entropy_forward(p.logits, p.classes, on_device, r);
          EXPECT_EQ(host_values(fwd), host_values(want_loss));
        }
      }
}

TEST_P(CrossEntropyTest, ABadTargetCheckedOnTheDeviceIsNamedWhenRead) {
  if (!device().is_cuda()) GTEST_SKIP() << "the CPU checks on the host (BadClassIndex...)";
  Tensor logits = Tensor::zeros({4, 5}, DType::Float32, device());
  for (double bad : {7.0, -1.0, 2.5}) {
    CrossEntropySpec spec;
    spec.target_check = Tensor::zeros({3}, DType::Float64, device());
    Tensor classes = tensor_of({0, 4, -100, bad}, {4}, device(), DType::Float32);
    Tensor loss = cross_entropy_forward(logits, classes, spec);  // no throw: nothing was read
    EXPECT_TRUE(std::isnan(loss.item())) << bad;
    // A later call's bad row does not replace the first one recorded.
    cross_entropy_forward(logits, tensor_of({9, 0, 0, 0}, {4}, device(), DType::Float32), spec);
    const std::vector<double> check = host_values(spec.target_check);
    EXPECT_EQ(check, (std::vector<double>{1, 3, bad}));
    const std::string msg = error_message(
        [&] { throw_bad_cross_entropy_target("cross_entropy_forward", check.data(), 5, -100); });
    EXPECT_THAT(msg, HasSubstr("row 3"));
    EXPECT_THAT(msg, HasSubstr("C = 5"));
    EXPECT_THAT(msg, HasSubstr("ignore_index (-100)"));
    // The host check's message, word for word.
    EXPECT_EQ(msg, error_message([&] { cross_entropy_forward(logits, classes, {}); }));
    EXPECT_THROW(throw_bad_cross_entropy_target("cross_entropy_forward", check.data(), 5, -100),
                 ValueError);
  }
  // A weighted call: the weights are checked there too, before the targets (as on the host).
  for (const std::vector<double>& w :
       {std::vector<double>{1, 2, -0.5, 1, 1}, {1, 2, std::nan(""), 1, -1}}) {
    CrossEntropySpec spec;
    spec.class_weights = tensor_of(w, {5}, device(), DType::Float32);
    spec.target_check = Tensor::zeros({3}, DType::Float64, device());
    Tensor classes = tensor_of({0, 4, -100, 7}, {4}, device(), DType::Float32);
    cross_entropy_forward(logits, classes, spec);  // no throw: nothing was read
    const std::vector<double> check = host_values(spec.target_check);
    EXPECT_EQ(check[0], 2.0);
    EXPECT_EQ(check[1], 2.0);
    CrossEntropySpec on_host = spec;
    on_host.target_check = Tensor();
    const std::string want =
        error_message([&] { cross_entropy_forward(logits, classes, on_host); });
    EXPECT_THAT(want, HasSubstr("class_weights[2] must be >= 0"));
    EXPECT_EQ(error_message([&] {
                throw_bad_cross_entropy_target("cross_entropy_forward", check.data(), 5, -100);
              }),
              want);
  }
  {  // good weights, a bad target: the target is named, as on the host
    CrossEntropySpec spec;
    spec.class_weights = tensor_of({1, 2, 0.5, 1, 1}, {5}, device(), DType::Float32);
    spec.target_check = Tensor::zeros({3}, DType::Float64, device());
    Tensor classes = tensor_of({0, 4, 6, -100}, {4}, device(), DType::Float32);
    cross_entropy_forward(logits, classes, spec);
    EXPECT_EQ(host_values(spec.target_check), (std::vector<double>{1, 2, 6}));
  }
  const double none[3] = {0, 0, 0};
  EXPECT_NO_THROW(throw_bad_cross_entropy_target("cross_entropy_forward", none, 5, -100));
  CrossEntropySpec wrong;
  wrong.target_check = Tensor::zeros({2}, DType::Float64, device());
  EXPECT_THROW(cross_entropy_forward(logits, Tensor::zeros({4}, DType::Float32, device()), wrong),
               ShapeError);
}

// Note [a batch that counts nothing, on the device]: with a batch count, a call whose mean
// divisor is 0 (every row ignore_index, or of a class weighted 0) gives a loss of 0 and a zero
// gradient instead of torch's NaN, adds nothing to the count and sets the skip flag; a call with a
// row to count gives the host-checked call's bits, adds 1 and clears the flag.
TEST_P(CrossEntropyTest, ABatchCountOnTheDeviceCountsTheBatchesWithARowToCount) {
  if (!device().is_cuda()) GTEST_SKIP() << "the CPU checks on the host";
  const Tensor logits = random_tensor({4, 3}, 17, device());
  struct Call {
    std::vector<double> classes, weights;
    bool counts;
  };
  const Call calls[] = {{{-100, -100, -100, -100}, {}, false},
                        {{1, 1, -100, 1}, {0.3, 0.0, 0.9}, false},
                        {{0, -100, 2, 1}, {}, true},
                        {{1, 0, 1, 1}, {0.3, 0.0, 0.9}, true},
                        {{-100, -100, -100, -100}, {0.3, 0.0, 0.9}, false}};
  for (Reduction r : {Reduction::Mean, Reduction::Sum}) {
    CrossEntropySpec spec;
    spec.target_check = Tensor::zeros({3}, DType::Float64, device());
    spec.batch_count = Tensor::zeros({1}, DType::Float64, device());
    spec.skip_flag = Tensor::zeros({1}, DType::Float32, device());
    double want_count = 0;
    for (const Call& c : calls) {
      SCOPED_TRACE(std::string(reduction_name(r)) + ", counts " + (c.counts ? "yes" : "no"));
      CrossEntropySpec with = spec, on_host;
      if (!c.weights.empty())
        with.class_weights = on_host.class_weights =
            tensor_of(c.weights, {3}, device(), DType::Float32);
      const Tensor classes = tensor_of(c.classes, {4}, device(), DType::Float32);
      Tensor loss = Tensor::empty({}, DType::Float32, device());
      Tensor grad = Tensor::empty({4, 3}, DType::Float32, device());
      cross_entropy_forward_backward(loss, grad, logits, classes, with, r);
      want_count += c.counts ? 1 : 0;
      EXPECT_EQ(host_values(spec.batch_count), std::vector<double>{want_count});
      EXPECT_EQ(host_values(spec.skip_flag), std::vector<double>{want_count == 0 ? 1.0 : 0.0});
      if (!c.counts) {
        EXPECT_EQ(host_values(loss), std::vector<double>{0.0});
        EXPECT_EQ(host_max_abs(grad), 0.0);
        continue;
      }
      Tensor want_loss = Tensor::empty({}, DType::Float32, device());
      Tensor want_grad = Tensor::empty({4, 3}, DType::Float32, device());
      cross_entropy_forward_backward(want_loss, want_grad, logits, classes, on_host, r);
      EXPECT_EQ(testing::tensor_bytes(loss.to(Device::cpu())),
                testing::tensor_bytes(want_loss.to(Device::cpu())));
      EXPECT_EQ(testing::tensor_bytes(grad.to(Device::cpu())),
                testing::tensor_bytes(want_grad.to(Device::cpu())));
    }
    EXPECT_EQ(host_values(spec.target_check), (std::vector<double>{0, 0, 0}));
  }
  // Only where the targets are checked on the device, and with the right shapes.
  CrossEntropySpec no_check;
  no_check.batch_count = Tensor::zeros({1}, DType::Float64, device());
  const Tensor classes = tensor_of({0, 1, 2, 0}, {4}, device(), DType::Float32);
  EXPECT_THROW(cross_entropy_forward(logits, classes, no_check), ValueError);
  CrossEntropySpec wrong;
  wrong.target_check = Tensor::zeros({3}, DType::Float64, device());
  wrong.batch_count = Tensor::zeros({2}, DType::Float64, device());
  EXPECT_THROW(cross_entropy_forward(logits, classes, wrong), ShapeError);
}

// The top-1 counts against a plain host count (the first maximum wins ties, as torch.argmax), and
// the top-2 counts against the rank of each row's class (ties to the smaller index).
TEST_P(CrossEntropyTest, CountCorrectIsTheFirstMaximumsCount) {
  for (DType dtype : {DType::Float32, DType::Float64})
    for (auto [n, c] : kShapes) {
      if (testing::over_size_cap(n * c)) continue;
      // Whole numbers in [0, 3): many ties.
      std::vector<double> x(static_cast<size_t>(n * c)), y(static_cast<size_t>(n));
      std::mt19937 rng(uint32_t(n * 31 + c));
      for (double& v : x) v = double(rng() % 3);
      for (int64_t i = 0; i < n; ++i) y[size_t(i)] = i % 5 == 4 ? -100.0 : double(rng() % c);
      if (n > 2) y[1] = double(c);  // not a class: counted, never correct
      double correct = 0, counted = 0, top2 = 0;
      for (int64_t i = 0; i < n; ++i) {
        if (y[size_t(i)] == -100) continue;
        counted += 1;
        const int64_t t = int64_t(y[size_t(i)]);
        if (t >= c) continue;
        int64_t first = 0;
        for (int64_t j = 1; j < c; ++j)
          if (x[size_t(i * c + j)] > x[size_t(i * c + first)]) first = j;
        correct += first == t;
        int64_t rank = 0;
        for (int64_t j = 0; j < c; ++j) {
          const double xj = x[size_t(i * c + j)], xt = x[size_t(i * c + t)];
          rank += xj > xt || (xj == xt && j < t);
        }
        top2 += rank < 2;
      }
      Tensor counts = tensor_of({10, 20}, {2}, device(), DType::Float64);  // added to
      cross_entropy_count_correct(counts, tensor_of(x, {n, c}, device(), dtype),
                                  tensor_of(y, {n}, device(), dtype), -100);
      EXPECT_EQ(host_values(counts), (std::vector<double>{10 + correct, 20 + counted}))
          << n << "x" << c;
      Tensor topk = tensor_of({5}, {1}, device(), DType::Float64);
      cross_entropy_count_correct(counts, tensor_of(x, {n, c}, device(), dtype),
                                  tensor_of(y, {n}, device(), dtype), -100, 2, &topk);
      EXPECT_EQ(host_values(counts), (std::vector<double>{10 + 2 * correct, 20 + 2 * counted}))
          << n << "x" << c;
      EXPECT_EQ(host_values(topk), (std::vector<double>{5 + top2})) << n << "x" << c;
      if (c <= 2 && n > 0) {
        EXPECT_EQ(top2, counted - (n > 2 ? 1 : 0)) << "every class is top-2";
      }
    }
  Tensor counts = Tensor::zeros({2}, DType::Float64, device());
  EXPECT_THROW(cross_entropy_count_correct(counts, Tensor::zeros({4, 3}, DType::Float32, device()),
                                           Tensor::zeros({3}, DType::Float32, device()), -100),
               ShapeError);
  Tensor wrong_topk = Tensor::zeros({2}, DType::Float64, device());
  EXPECT_THROW(cross_entropy_count_correct(counts, Tensor::zeros({4, 3}, DType::Float32, device()),
                                           Tensor::zeros({4}, DType::Float32, device()), -100, 2,
                                           &wrong_topk),
               ShapeError);
  Tensor three = Tensor::zeros({3}, DType::Float64, device());
  EXPECT_THROW(cross_entropy_count_correct(three, Tensor::zeros({4, 3}, DType::Float32, device()),
                                           Tensor::zeros({4}, DType::Float32, device()), -100),
               ShapeError);
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(CrossEntropyTest);

}  // namespace
}  // namespace minitrain
