// dlopen of the vendor libraries: each one once per process, on the first call into it, from the
// first place that has it. A failure is not cached: a later call tries again (and throws again).

#include "core/vendor/vendor_library.h"

#include <cublas_v2.h>  // CUBLAS_VER_MAJOR (cublas_api.h alone is refused by CUDA 12)
#include <cudnn_version.h>
#include <dlfcn.h>
#include <link.h>
#include <nccl.h>

#include <array>
#include <mutex>

#include "core/error.h"

// The directories where CMake found the libraries at configure time (core/CMakeLists.txt).
#ifndef MINITRAIN_CUDA_LIBRARY_DIR
#define MINITRAIN_CUDA_LIBRARY_DIR ""
#endif
#ifndef MINITRAIN_CUDNN_LIBRARY_DIR
#define MINITRAIN_CUDNN_LIBRARY_DIR ""
#endif
#ifndef MINITRAIN_NCCL_LIBRARY_DIR
#define MINITRAIN_NCCL_LIBRARY_DIR ""
#endif

// "libcublas.so." "13": the sonames as literals, so that `strings` on a build shows which major
// versions it will open (scripts/check_cuda12.sh checks them).
#define MT_STRINGIFY_VALUE(x) #x
#define MT_SONAME(stem, major) stem ".so." MT_STRINGIFY_VALUE(major)

namespace minitrain {

namespace {

std::vector<std::string> nonempty(std::initializer_list<const char*> dirs) {
  std::vector<std::string> out;
  for (const char* d : dirs)
    if (d && *d) out.emplace_back(d);
  return out;
}

// Loaded handles, by VendorLibrary. Only ever set, never closed: the functions stay in use until
// exit, and unloading cuDNN or NCCL while their threads run is unsafe.
// The mutex is recursive: a library's constructors, run inside dlopen, may call into another
// vendor library, whose stub then opens that one under the same lock (in a shared build, where
// minitrain's stubs interpose on calls between the vendor libraries).
struct Loaded {
  std::recursive_mutex mutex;
  std::array<void*, std::size(kVendorLibraries)> handles{};
};

Loaded& loaded() {
  static Loaded l;
  return l;
}

}  // namespace

const VendorLibrarySpec& vendor_library_spec(VendorLibrary library) {
  static const std::array<VendorLibrarySpec, std::size(kVendorLibraries)> specs = {{
      {"cuBLAS", MT_SONAME("libcublas", CUBLAS_VER_MAJOR), nonempty({MINITRAIN_CUDA_LIBRARY_DIR}),
       "it serves the cuBLAS GEMM backends, the default on a GPU: choose a hand-written kernel "
       "instead, e.g. --gemm warptile"},
      {"cuBLASLt", MT_SONAME("libcublasLt", CUBLAS_VER_MAJOR),
       nonempty({MINITRAIN_CUDA_LIBRARY_DIR}),
       "it serves the cublaslt GEMM backend and cuBLAS itself: choose a hand-written kernel "
       "instead, e.g. --gemm warptile"},
      {"cuDNN", MT_SONAME("libcudnn", CUDNN_MAJOR), nonempty({MINITRAIN_CUDNN_LIBRARY_DIR}),
       "only the cuDNN activation baselines of the benchmarks use it"},
      {"NCCL", MT_SONAME("libnccl", NCCL_MAJOR), nonempty({MINITRAIN_NCCL_LIBRARY_DIR}),
       "it serves --parallel ddp on GPUs, whose ranks talk through NCCL: --parallel dp over "
       "one machine's GPUs needs no NCCL, nor does --parallel ddp --device cpu under mpirun"},
      // The driver installs NVML beside itself, in the loader's path: no build directory to add.
      // Its soname has stayed .so.1 across every driver.
      {"NVML",
       "libnvidia-ml.so.1",
       {},
       "it comes with the NVIDIA driver, and only the GPU utilisation and memory of the metrics "
       "use it: they are left out"},
  }};
  return specs[static_cast<std::size_t>(library)];
}

void* open_vendor_library(const VendorLibrarySpec& spec) {
  std::vector<std::string> candidates{spec.soname};
  for (const std::string& dir : spec.directories) candidates.push_back(dir + "/" + spec.soname);
  std::string tried;
  for (const std::string& file : candidates) {
    // RTLD_LOCAL: the library's symbols do not join the global scope, where they could shadow
    // minitrain's forwarding stubs for later-loaded objects.
    if (void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
    const char* error = dlerror();
    std::string why = error ? error : "not found";
    // dlerror() starts with the file name, which the line already gives.
    if (why.rfind(file + ": ", 0) == 0) why.erase(0, file.size() + 2);
    tried += detail::concat("\n  ", file, ": ", why);
  }
  MT_THROW(DeviceError, spec.name, " (", spec.soname,
           ") could not be loaded; minitrain opens it on first use, and looked in:", tried,
           "\nInstall it (from a CUDA toolkit of the same major version, or NVIDIA's pip wheels) "
           "and put its lib directory on LD_LIBRARY_PATH; without it: ",
           spec.without);
}

void* vendor_symbol(VendorLibrary library, const char* symbol) {
  const VendorLibrarySpec& spec = vendor_library_spec(library);
  void* handle = nullptr;
  {
    Loaded& l = loaded();
    std::lock_guard<std::recursive_mutex> lock(l.mutex);
    void*& slot = l.handles[static_cast<std::size_t>(library)];
    if (slot == nullptr) slot = open_vendor_library(spec);
    handle = slot;
  }
  void* address = dlsym(handle, symbol);
  MT_CHECK_AS(DeviceError, address != nullptr, spec.name, " at ", vendor_library_path(library),
              " has no function ", symbol, ": it is older than the ", spec.name,
              " this build was compiled against (", spec.soname,
              "); install a newer one or put it first on LD_LIBRARY_PATH");
  return address;
}

std::string vendor_library_path(VendorLibrary library) {
  Loaded& l = loaded();
  std::lock_guard<std::recursive_mutex> lock(l.mutex);
  void* handle = l.handles[static_cast<std::size_t>(library)];
  if (handle == nullptr) return "";
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr || map->l_name == nullptr)
    return vendor_library_spec(library).soname;
  return map->l_name;
}

}  // namespace minitrain
