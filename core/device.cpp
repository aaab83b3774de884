#include "core/device.h"

#include <cstdlib>
#include <mutex>

#include "core/error.h"

#if MINITRAIN_WITH_CUDA
#include <cuda_runtime_api.h>
#endif
#if MINITRAIN_WITH_CUDA_LIBS
#include <cublas_v2.h>
#include <cudnn.h>
#include <nccl.h>

#include "core/vendor/vendor_library.h"
#endif

namespace minitrain {

Device Device::parse(const std::string& spec) {
  if (spec == "cpu") return cpu();
  if (spec == "auto") return cuda_device_count() > 0 ? cuda(0) : cpu();
  if (spec == "cuda") return cuda(0);
  const std::string prefix = "cuda:";
  if (spec.compare(0, prefix.size(), prefix) == 0 && spec.size() > prefix.size()) {
    const std::string digits = spec.substr(prefix.size());
    bool all_digits = digits.size() <= 4;
    for (char c : digits) all_digits = all_digits && c >= '0' && c <= '9';
    if (all_digits) return cuda(std::atoi(digits.c_str()));
  }
  MT_THROW(DeviceError, "unknown device '", spec, "' (expected cpu, cuda, cuda:N or auto)");
}

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index_);
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

bool cuda_compiled() noexcept { return MINITRAIN_WITH_CUDA != 0; }
bool cuda_emulated() noexcept { return MINITRAIN_CUDA_EMULATED != 0; }

namespace {
struct Discovery {
  int count = 0;
  std::string reason;
};

// Asked once per process: the answer cannot change while it runs, and asking a missing driver
// repeatedly costs time on every tensor creation.
const Discovery& discovery() {
  static Discovery d;
  static std::once_flag once;
  std::call_once(once, [] {
#if MINITRAIN_WITH_CUDA
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess) {
      d.count = n;
      if (n == 0) d.reason = "no CUDA device found";
    } else {
      (void)cudaGetLastError();  // clear the error so later calls start clean
      d.reason = std::string(e == cudaErrorInsufficientDriver ? "no usable CUDA driver"
                             : e == cudaErrorNoDevice         ? "no CUDA device found"
                                                              : "CUDA unavailable") +
                 " (" + cudaGetErrorString(e) + ")";
      int runtime = 0, driver = 0;
      (void)cudaRuntimeGetVersion(&runtime);
      (void)cudaDriverGetVersion(&driver);
      const std::string advice = cuda_driver_advice(runtime, driver);
      if (!advice.empty()) d.reason += ": " + advice;
    }
#else
    d.reason = "minitrain was compiled without CUDA";
#endif
  });
  return d;
}
}  // namespace

int cuda_device_count() noexcept {
  try {
    return discovery().count;
  } catch (...) {
    return 0;
  }
}

std::string cuda_unavailable_reason() { return discovery().reason; }

void check_available(Device d) {
  if (d.is_cpu()) return;
  const int n = cuda_device_count();
  if (n == 0)
    MT_THROW(DeviceError, "device ", d,
             " requested but CUDA is not available: ", cuda_unavailable_reason(),
             "; use --device cpu (or auto)");
  MT_CHECK_AS(DeviceError, d.index() >= 0 && d.index() < n, "device ", d,
              " requested but this machine has ", n, " CUDA device", n == 1 ? "" : "s", " (cuda:0",
              n > 1 ? " .. cuda:" + std::to_string(n - 1) : std::string(), ")");
}

std::vector<CudaDeviceInfo> cuda_devices() {
  std::vector<CudaDeviceInfo> out;
#if MINITRAIN_WITH_CUDA
  int previous = 0;
  if (cuda_device_count() > 0 && cudaGetDevice(&previous) != cudaSuccess) previous = 0;
  for (int i = 0; i < cuda_device_count(); ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    CudaDeviceInfo info;
    info.index = i;
    info.name = p.name;
    info.compute_major = p.major;
    info.compute_minor = p.minor;
    info.multiprocessors = p.multiProcessorCount;
    info.total_bytes = p.totalGlobalMem;
    size_t free_b = 0, total_b = 0;
    if (cudaSetDevice(i) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
      info.free_bytes = free_b;
    out.push_back(info);
  }
  if (!out.empty()) (void)cudaSetDevice(previous);
  (void)cudaGetLastError();
#endif
  return out;
}

namespace {
[[maybe_unused]] std::string dotted(int major, int minor, int patch) {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}
}  // namespace

std::string cuda_driver_advice(int runtime_version, int driver_version) {
  const int runtime_major = runtime_version / 1000, driver_major = driver_version / 1000;
  if (runtime_version <= 0 || driver_major >= runtime_major) return "";
  // The first driver branch of each CUDA major version (NVIDIA's CUDA release notes, table 3).
  const char* branch = runtime_major >= 13   ? "R580"
                       : runtime_major == 12 ? "R525"
                       : runtime_major == 11 ? "R450"
                                             : "one of its time";
  std::string text = "the CUDA " + std::to_string(runtime_major) + "." +
                     std::to_string(runtime_version % 1000 / 10) + " runtime needs driver " +
                     branch + " or newer; ";
  if (driver_version <= 0)
    text += "this machine has no NVIDIA driver";
  else
    text += "this machine's driver supports CUDA " + std::to_string(driver_major) + "." +
            std::to_string(driver_version % 1000 / 10) + " at most: build with a CUDA " +
            std::to_string(driver_major) + " toolkit, or update the driver";
  return text;
}

CudaVersions cuda_versions([[maybe_unused]] bool open_libraries) {
  CudaVersions v;
#if MINITRAIN_CUDA_EMULATED
  v.runtime = "emulated (cuda_emu: CPU threads)";
  v.driver = "none needed";
  v.cublas = v.cudnn = v.nccl = "absent on emulated GPUs";
#elif MINITRAIN_WITH_CUDA
  int rt = 0, drv = 0;
  if (cudaRuntimeGetVersion(&rt) == cudaSuccess) v.runtime = dotted(rt / 1000, rt % 1000 / 10, 0);
  if (cudaDriverGetVersion(&drv) == cudaSuccess && drv > 0)
    v.driver = dotted(drv / 1000, drv % 1000 / 10, 0);
  else
    v.driver = "none";
  // Note [lazy CUDA libraries] in core/CMakeLists.txt: without a GPU nothing would use the vendor
  // libraries, so they are not opened just to print versions; the versions compiled against are
  // given instead.
  if (cuda_device_count() == 0 && !open_libraries) {
    v.cublas = dotted(CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR, CUBLAS_VER_PATCH);
    v.cudnn = dotted(CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL);
    v.nccl = dotted(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
    v.vendor_note = "compiled against; opened on first GPU use";
    return v;
  }
  std::string missing;
  // Each query opens its library; one that cannot be opened is named, the others still report.
  auto query = [&](auto version) -> std::string {
    try {
      return version();
    } catch (const DeviceError& e) {
      // The loader's first two lines: what is missing, and the first place it looked.
      std::string what = e.what();
      const std::size_t first = what.find('\n');
      if (first != std::string::npos) what = what.substr(0, what.find('\n', first + 1));
      for (std::size_t at; (at = what.find("\n  ")) != std::string::npos;) what.replace(at, 3, " ");
      missing += (missing.empty() ? "" : "; ") + what;
      return "missing";
    }
  };
  v.cublas = query([] {
    int ma = 0, mi = 0, pa = 0;
    if (cublasGetProperty(MAJOR_VERSION, &ma) != CUBLAS_STATUS_SUCCESS ||
        cublasGetProperty(MINOR_VERSION, &mi) != CUBLAS_STATUS_SUCCESS ||
        cublasGetProperty(PATCH_LEVEL, &pa) != CUBLAS_STATUS_SUCCESS)
      return std::string("unknown");
    return dotted(ma, mi, pa);
  });
  v.cudnn = query([] {
    const size_t dnn = cudnnGetVersion();  // major*10000 + minor*100 + patch since cuDNN 9
    return dotted(int(dnn / 10000), int(dnn % 10000 / 100), int(dnn % 100));
  });
  v.nccl = query([] {
    int nccl = 0;
    if (ncclGetVersion(&nccl) != ncclSuccess) return std::string("unknown");
    return dotted(nccl / 10000, nccl % 10000 / 100, nccl % 100);
  });
  std::string paths;
  for (VendorLibrary library : kVendorLibraries)
    if (const std::string path = vendor_library_path(library); !path.empty())
      paths += (paths.empty() ? "" : ", ") + path;
  v.vendor_note = "loaded: " + (paths.empty() ? std::string("none") : paths);
  if (!missing.empty()) v.vendor_note += "; " + missing;
  v.vendor_missing = !missing.empty();
#endif
  return v;
}

}  // namespace minitrain
