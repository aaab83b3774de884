// A GPU path's first cuBLAS call, without a GPU: cublasGetProperty through minitrain's stub opens
// the library as cublasCreate would. Prints whether cuBLAS was loaded before the call (it must
// not be) and then its version and file, or the DeviceError a user would see; exit 3 on that
// error. `vendor_probe nvml` instead prints what the GPU monitor makes of NVML: "NVML loaded" or
// the one-line note a run would print (exit 0 both: NVML missing is no error).
// Run by vendor_libraries_check.sh, with the libraries visible and with them hidden.

#include <cublas_v2.h>

#include <cstdio>
#include <string>

#include "core/error.h"
#include "core/gpu_monitor.h"
#include "core/vendor/vendor_library.h"

int main(int argc, char** argv) {
  using minitrain::VendorLibrary;
  if (argc > 1 && std::string(argv[1]) == "nvml") {
    const std::string reason = minitrain::nvml_unavailable_reason();
    std::printf("%s\n", reason.empty() ? "NVML loaded" : ("NVML note: " + reason).c_str());
    return 0;
  }
  const std::string before = minitrain::vendor_library_path(VendorLibrary::cublas);
  std::printf("before the first call: %s\n", before.empty() ? "not loaded" : before.c_str());
  std::fflush(stdout);  // before any error on stderr
  try {
    int major = 0;
    if (cublasGetProperty(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS) return 2;
    std::printf("cuBLAS %d from %s\n", major,
                minitrain::vendor_library_path(VendorLibrary::cublas).c_str());
    return 0;
  } catch (const minitrain::DeviceError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 3;
  }
}
