// A GPU path's first cuBLAS call, without a GPU: cublasGetProperty through minitrain's stub opens
// the library as cublasCreate would. Prints whether cuBLAS was loaded before the call (it must
// not be) and then its version and file, or the DeviceError a user would see; exit 3 on that
// error. Run by vendor_libraries_check.sh, with the libraries visible and with them hidden.

#include <cublas_v2.h>

#include <cstdio>

#include "core/error.h"
#include "core/vendor/vendor_library.h"

int main() {
  using minitrain::VendorLibrary;
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
