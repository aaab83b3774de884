#pragma once
// The NVIDIA libraries minitrain calls (cuBLAS, cuBLASLt, cuDNN, NCCL, and the driver's NVML for
// the GPU utilisation of the metrics: core/gpu_monitor.h), opened with dlopen on first use instead
// of linked: a CUDA build then starts, runs on the CPU and prints `info` without them, as fast and
// as small as a CPU-only build, and says what is missing only when a GPU path asks for it. Real
// CUDA builds only (not the emulated GPUs, which have no vendor libraries).
//
// Note [vendor stubs]: core/vendor/*_stubs.cpp define the libraries' C functions that minitrain
// uses (cublasSgemm_v2, ncclAllReduce, ...) with the vendor headers' own prototypes, so the
// compiler checks every signature, and each forwards to the real function, looked up once by
// vendor_symbol. Call sites stay plain vendor API calls. A function minitrain starts to use needs
// one line there; until then the link fails naming it.

#include <string>
#include <vector>

namespace minitrain {

enum class VendorLibrary { cublas, cublaslt, cudnn, nccl, nvml };
inline constexpr VendorLibrary kVendorLibraries[] = {VendorLibrary::cublas, VendorLibrary::cublaslt,
                                                     VendorLibrary::cudnn, VendorLibrary::nccl,
                                                     VendorLibrary::nvml};

/// Where one library is looked for: `soname` as the dynamic loader finds it (LD_LIBRARY_PATH,
/// the ld.so cache, the system directories), then `soname` in each of `directories` (where the
/// build found it). `without` says what a user can do without it.
struct VendorLibrarySpec {
  std::string name;    ///< "cuBLAS"
  std::string soname;  ///< "libcublas.so.13": the major version the build compiled against
  std::vector<std::string> directories;
  std::string without;
};

/// The spec of one of minitrain's vendor libraries in this build.
const VendorLibrarySpec& vendor_library_spec(VendorLibrary library);

/// dlopen's handle for `spec`, trying the places in order. Throws DeviceError naming the library,
/// every place tried with the loader's reason, and what to do.
void* open_vendor_library(const VendorLibrarySpec& spec);

/// The address of `symbol` in `library`, opening the library on first use (once per process).
/// Throws DeviceError when the library cannot be opened or lacks the symbol (too old a version).
void* vendor_symbol(VendorLibrary library, const char* symbol);

/// The file `library` was loaded from, or "" while it is not loaded. Loads nothing.
std::string vendor_library_path(VendorLibrary library);

}  // namespace minitrain
