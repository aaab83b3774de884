#include "tests/support/test_util.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
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
  return Tensor::from_vector(random_floats(shape.numel(), seed, float(lo), float(hi)), shape, device);
}

std::vector<double> host_values(const Tensor& t) {
  const Tensor h = t.to(Device::cpu());
  if (h.dtype() == DType::Float64) return h.to_vector<double>();
  const std::vector<float> f = h.to_vector<float>();
  return std::vector<double>(f.begin(), f.end());
}

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
         << bad << " of " << got.size() << " values differ beyond atol=" << atol
         << " rtol=" << rtol << "; worst at index " << worst << ": got " << got[worst]
         << ", want " << want[worst] << " (|diff| " << std::fabs(got[worst] - want[worst]) << ")";
}

::testing::AssertionResult allclose(const Tensor& got, const Tensor& want, double atol, double rtol) {
  if (got.shape() != want.shape())
    return ::testing::AssertionFailure()
           << "shapes differ: got " << got.shape() << ", want " << want.shape();
  return allclose(host_values(got), host_values(want), atol, rtol);
}

}  // namespace minitrain::testing

// ---- MINITRAIN_REQUIRE_GPU ----
// On a machine meant to have a GPU, a GPU case that skips for want of one is a failure, not a
// skip: a CUDA 13 runtime on an old driver, or a container without the device, must not make a
// "GPU run" that tested nothing look green. ctest runs one case per process, so the listener
// turns the process's exit code.
namespace minitrain::testing {
namespace {
class RequireGpuListener : public ::testing::EmptyTestEventListener {
 public:
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.type() != ::testing::TestPartResult::kSkip || r.message() == nullptr) return;
    const std::string m = r.message();
    if (m.find("CUDA device") != std::string::npos || m.find("GPUs") != std::string::npos)
      missing_ += m + "\n";
  }
  void OnTestProgramEnd(const ::testing::UnitTest&) override {
    if (missing_.empty()) return;
    std::fprintf(stderr, "MINITRAIN_REQUIRE_GPU=1, but a GPU case skipped for want of a GPU:\n%s", missing_.c_str());
    std::fflush(stderr);
    std::_Exit(1);
  }

 private:
  std::string missing_;
};

const bool require_gpu_installed = [] {
  const char* v = std::getenv("MINITRAIN_REQUIRE_GPU");
  if (v != nullptr && std::string(v) == "1")
    ::testing::UnitTest::GetInstance()->listeners().Append(new RequireGpuListener);
  return true;
}();
}  // namespace
}  // namespace minitrain::testing
