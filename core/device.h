#pragma once
// Where a tensor lives: the CPU or one CUDA device. A small value, cheap to copy and compare.

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace minitrain {

enum class DeviceType : uint8_t { CPU, CUDA };

class Device {
 public:
  constexpr Device() = default;  ///< the CPU
  static constexpr Device cpu() { return Device(DeviceType::CPU, 0); }
  static constexpr Device cuda(int index = 0) { return Device(DeviceType::CUDA, index); }
  /// "cpu", "cuda", "cuda:N" or "auto" (first GPU if one exists, else the CPU). Throws
  /// DeviceError for anything else; does not check that the device exists (see check_available).
  static Device parse(const std::string& spec);

  constexpr DeviceType type() const noexcept { return type_; }
  constexpr int index() const noexcept { return index_; }
  constexpr bool is_cpu() const noexcept { return type_ == DeviceType::CPU; }
  constexpr bool is_cuda() const noexcept { return type_ == DeviceType::CUDA; }
  std::string str() const;  ///< "cpu", "cuda:0"

  constexpr bool operator==(const Device& o) const noexcept {
    return type_ == o.type_ && index_ == o.index_;
  }
  constexpr bool operator!=(const Device& o) const noexcept { return !(*this == o); }

 private:
  constexpr Device(DeviceType t, int i) : type_(t), index_(i) {}
  DeviceType type_ = DeviceType::CPU;
  int index_ = 0;
};

std::ostream& operator<<(std::ostream& os, const Device& d);

// ---- runtime discovery ----

/// True when this build compiled the CUDA code in.
bool cuda_compiled() noexcept;
/// True when the CUDA devices are minitrain's emulated GPUs (cuda_emu/), not real ones: the
/// kernels run on CPU threads, and cuBLAS, cuDNN and NCCL are absent.
bool cuda_emulated() noexcept;
/// Number of usable CUDA devices: 0 in a CPU-only build, without a driver, or without a GPU.
int cuda_device_count() noexcept;
/// Why cuda_device_count() is 0 ("CPU-only build", "no CUDA driver", ...); empty when it is not.
std::string cuda_unavailable_reason();
/// Throws DeviceError (naming the device, what exists, and what to do) when `d` cannot be used.
void check_available(Device d);

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  int compute_major = 0, compute_minor = 0;
  std::size_t total_bytes = 0, free_bytes = 0;
  int multiprocessors = 0;
};
std::vector<CudaDeviceInfo> cuda_devices();

/// Versions compiled in and found at run time; empty strings in a CPU-only build. The vendor
/// libraries' (cuBLAS, cuDNN, NCCL) are the loaded ones where a GPU exists, else those compiled
/// against: without a GPU they are not opened (Note [lazy CUDA libraries], core/CMakeLists.txt).
struct CudaVersions {
  std::string runtime, driver, cublas, cudnn, nccl;
  std::string vendor_note;  ///< which of the two, where the libraries were found, what is missing
  bool vendor_missing = false;  ///< a vendor library could not be opened
};
/// `open_libraries`: open the vendor libraries (and report what they are) even without a GPU.
CudaVersions cuda_versions(bool open_libraries = false);

/// Why a CUDA runtime cannot start on a driver, in plain words, or "" where it can. Versions as
/// cudaRuntimeGetVersion / cudaDriverGetVersion give them (12020: CUDA 12.2; the driver's is the
/// newest CUDA it supports, 0 without a driver). A runtime runs on any driver of its major version
/// or newer (CUDA's minor version compatibility), so only the major versions are compared.
std::string cuda_driver_advice(int runtime_version, int driver_version);

}  // namespace minitrain
