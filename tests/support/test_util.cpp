#include "tests/support/test_util.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <random>
#include <sstream>

#include "core/stream.h"

#if MINITRAIN_CUDA_EMULATED
#include "cuda_emu/testing.h"
#endif

namespace minitrain::testing {

SlowCallerStreams::SlowCallerStreams(std::vector<Device> devices, long microseconds)
    : devices_(std::move(devices)) {
#if MINITRAIN_CUDA_EMULATED
  for (const Device& d : devices_)
    if (d.is_cuda()) mtemu::set_stream_delay(current_stream(d).native_handle(), microseconds);
#else
  (void)microseconds;
#endif
}

SlowCallerStreams::~SlowCallerStreams() {
#if MINITRAIN_CUDA_EMULATED
  for (const Device& d : devices_)
    if (d.is_cuda()) mtemu::set_stream_delay(current_stream(d).native_handle(), 0);
#endif
}

bool over_size_cap(int64_t elements) {
  static const int64_t cap = [] {
    const char* v = std::getenv("MINITRAIN_TEST_MAX_ELEMENTS");
    return v != nullptr && *v != '\0' ? std::atoll(v) : int64_t{0};
  }();
  return cap > 0 && elements > cap;
}

std::string test_data_dir() {
  const char* env = std::getenv("MINITRAIN_TEST_DATA_DIR");
  return env != nullptr && *env != '\0' ? std::string(env) : std::string(MINITRAIN_TEST_DATA_DIR);
}

std::string device_param_name(const ::testing::TestParamInfo<Device>& info) {
  return info.param.is_cpu() ? "cpu" : "cuda";
}

std::vector<float> random_floats(int64_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

std::vector<double> random_doubles(int64_t n, uint32_t seed, double lo, double hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

std::vector<float> random_small_ints(int64_t n, uint32_t seed, int lo, int hi) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<float>(dist(rng));
  return v;
}

Tensor random_tensor(const Shape& shape, uint32_t seed, Device device, DType dtype, double lo,
                     double hi) {
  if (dtype == DType::Float64)
    return Tensor::from_vector(random_doubles(shape.numel(), seed, lo, hi), shape, device);
  return Tensor::from_vector(random_floats(shape.numel(), seed, float(lo), float(hi)), shape,
                             device);
}

Tensor tensor_of(const std::vector<double>& values, const Shape& shape, Device device,
                 DType dtype) {
  if (dtype == DType::Float64) return Tensor::from_vector(values, shape, device);
  return Tensor::from_vector(std::vector<float>(values.begin(), values.end()), shape, device);
}

Tensor vector_tensor(const std::vector<double>& values, DType dtype, Device device) {
  return tensor_of(values, Shape{int64_t(values.size())}, device, dtype);
}

std::vector<double> float_exact_doubles(int64_t n, uint32_t seed, double scale) {
  std::vector<double> out;
  for (float f : random_floats(n, seed)) out.push_back(double(float(double(f) * scale)));
  return out;
}

std::vector<double> host_values(const Tensor& t) { return t.to(Device::cpu()).to_double_vector(); }

double host_max_abs(const Tensor& t) {
  double m = 0;
  for (double v : host_values(t)) m = std::max(m, std::fabs(v));
  return m;
}

Moments moments(const std::vector<double>& v) {
  Moments m;
  m.min = INFINITY;
  m.max = -INFINITY;
  for (double x : v) {
    m.mean += x;
    m.min = std::fmin(m.min, x);
    m.max = std::fmax(m.max, x);
  }
  m.mean /= double(v.size());
  for (double x : v) m.var += (x - m.mean) * (x - m.mean);
  m.var /= double(v.size());
  return m;
}

std::string error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no exception)";
}

::testing::AssertionResult allclose(const std::vector<double>& got, const std::vector<double>& want,
                                    double atol, double rtol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure()
           << "sizes differ: got " << got.size() << " values, want " << want.size();
  size_t worst = 0, bad = 0;
  double worst_excess = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = atol + rtol * std::fabs(want[i]);
    const double err = std::fabs(got[i] - want[i]);
    const bool ok = err <= tol || (std::isnan(got[i]) && std::isnan(want[i])) ||
                    (std::isinf(got[i]) && got[i] == want[i]);
    if (!ok) {
      ++bad;
      if (!(err - tol <= worst_excess) || bad == 1) {
        worst_excess = err - tol;
        worst = i;
      }
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << got.size() << " values differ beyond atol=" << atol << " rtol=" << rtol
         << "; worst at index " << worst << ": got " << got[worst] << ", want " << want[worst]
         << " (|diff| " << std::fabs(got[worst] - want[worst]) << ")";
}

::testing::AssertionResult allclose(const Tensor& got, const Tensor& want, double atol,
                                    double rtol) {
  if (got.shape() != want.shape())
    return ::testing::AssertionFailure()
           << "shapes differ: got " << got.shape() << ", want " << want.shape();
  return allclose(host_values(got), host_values(want), atol, rtol);
}

}  // namespace minitrain::testing

// ---- the gpu label and MINITRAIN_REQUIRE_GPU ----
// ctest runs one case per process, so a listener that finds something wrong turns the process's
// exit code, and the case fails with the reason on stderr.
namespace minitrain::testing {
namespace {

/// A skip for want of a GPU: MT_SKIP_UNLESS_AVAILABLE's "no CUDA device: ..." and the multi-GPU
/// cases' "... needs 2 GPUs".
bool skipped_for_want_of_a_gpu(const std::string& message) {
  return message.find("CUDA device") != std::string::npos ||
         message.find("GPUs") != std::string::npos;
}

[[noreturn]] void fail_process(const std::string& what) {
  std::fprintf(stderr, "%s", what.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

/// Checks Note [gpu label] (cmake/MinitrainHelpers.cmake) where the case runs: a case labelled
/// `cpu` must not need a GPU, and a case labelled `gpu` must need one, which shows on a machine
/// without any GPU as a skip. With MINITRAIN_REQUIRE_GPU=1 (a machine meant to have a GPU) a GPU
/// case that skips for want of one fails too: a CUDA 13 runtime on an old driver, or a container
/// without the device, must not make a "GPU run" that tested nothing look green.
class GpuLabelListener : public ::testing::EmptyTestEventListener {
 public:
  GpuLabelListener(std::string label, bool require_gpu)
      : label_(std::move(label)), require_gpu_(require_gpu) {}

  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.type() != ::testing::TestPartResult::kSkip || r.message() == nullptr) return;
    const std::string m = r.message();
    if (!skipped_for_want_of_a_gpu(m)) return;
    if (label_ == "cpu")
      mislabelled_ +=
          "labelled cpu (cmake/MinitrainHelpers.cmake, Note [gpu label]), but it skipped "
          "for want of a GPU: " +
          m + "\n";
    if (require_gpu_) missing_gpu_ += m + "\n";
  }

  void OnTestEnd(const ::testing::TestInfo& info) override {
    const ::testing::TestResult& result = *info.result();
    if (label_ == "gpu" && !result.Skipped() && !result.Failed() && cuda_device_count() == 0)
      mislabelled_ += std::string(
                          "labelled gpu (cmake/MinitrainHelpers.cmake, Note [gpu label]), "
                          "but it passed on a machine without a GPU (") +
                      cuda_unavailable_reason() +
                      "), so it does not need one: " + info.test_suite_name() + "." + info.name() +
                      "\n";
  }

  void OnTestProgramEnd(const ::testing::UnitTest&) override {
    if (!mislabelled_.empty()) fail_process("wrong ctest label:\n" + mislabelled_);
    if (!missing_gpu_.empty())
      fail_process("MINITRAIN_REQUIRE_GPU=1, but a GPU case skipped for want of a GPU:\n" +
                   missing_gpu_);
  }

 private:
  std::string label_;  ///< MINITRAIN_TEST_LABEL: cpu, gpu, or empty outside ctest
  bool require_gpu_;
  std::string mislabelled_, missing_gpu_;
};

const bool gpu_label_listener_installed = [] {
  const char* label = std::getenv("MINITRAIN_TEST_LABEL");
  const char* require = std::getenv("MINITRAIN_REQUIRE_GPU");
  const bool require_gpu = require != nullptr && std::string(require) == "1";
  if ((label != nullptr && *label != '\0') || require_gpu)
    ::testing::UnitTest::GetInstance()->listeners().Append(
        new GpuLabelListener(label != nullptr ? label : "", require_gpu));
  return true;
}();

}  // namespace
}  // namespace minitrain::testing
