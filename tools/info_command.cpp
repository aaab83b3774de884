#include "tools/info_command.h"

#include <thread>

#include "core/allocator.h"
#include "core/bytes.h"
#include "core/cpu_features.h"
#include "core/device.h"
#include "core/parallel_for.h"
#include "core/thread_policy.h"
#include "core/version.h"
#include "kernels/gemm/openblas_core.h"

namespace minitrain::cli {
namespace {

// What --precision and --allow-tf32 get on a GPU of this compute capability. Every device takes
// every precision (16-bit values are stored in 16 bits and widened for arithmetic); what differs
// is which tensor-core paths exist.
std::string gpu_precisions(const CudaDeviceInfo& d) {
  if (d.compute_major >= 8)
    return "fp32, bf16, fp16; tensor cores: tf32 (--allow-tf32, --gemm tc_tf32), bf16 (--gemm "
           "tc_bf16)";
  if (d.compute_major == 7)
    return "fp32, bf16, fp16; tensor cores: fp16 only (bf16 and tf32 need compute 8.0)";
  return "fp32, bf16, fp16; no tensor cores (compute 7.0 or newer has them)";
}

}  // namespace

int run_info(std::ostream& out, bool open_libraries) {
  out << "minitrain " << MINITRAIN_VERSION << " ("
      << (cuda_emulated()   ? "CUDA build on emulated GPUs"
          : cuda_compiled() ? "CUDA build"
                            : "CPU-only build")
      << ")\n";
  out << "cpu: " << std::thread::hardware_concurrency() << " hardware threads, "
      << available_cores() << " available to this process (affinity, cgroup quota), "
      << num_threads() << " used by minitrain (OMP_NUM_THREADS sets it); threads wait "
      << thread_wait_policy() << " (OMP_WAIT_POLICY)\n";
  const CpuFeatures& features = cpu_features();
  out << "cpu model: " << features.model_name << " (" << features.vendor << ", family "
      << features.family << " model " << features.model << ")\n";
  out << "cpu features: " << features.list() << "\n";
  out << "cpu peak fp32: " << cpu_peak_fp32().describe() << "\n";
  const OpenBlasSelection& blas = select_openblas_core();
  out << "blas: " << blas.config << "\n";
  out << "blas kernels: " << blas.core << " (" << blas.reason << ")\n";
  out << "cpu precisions: fp32, bf16, fp16 (--precision: 16-bit activations, float32 arithmetic "
         "and master weights)\n";

  int code = 0;
  if (cuda_compiled()) {
    const CudaVersions v = cuda_versions(open_libraries);
    out << "CUDA runtime " << v.runtime << ", driver " << v.driver << "\n";
    out << "cuBLAS " << v.cublas << ", cuDNN " << v.cudnn << ", NCCL " << v.nccl;
    if (!v.vendor_note.empty()) out << " (" << v.vendor_note << ")";
    out << "\n";
    if (open_libraries && v.vendor_missing) code = 1;
  }
  const int n = cuda_device_count();
  if (n == 0) {
    out << "GPUs: none (" << cuda_unavailable_reason() << "); everything runs on the CPU\n";
    return code;
  }
  out << "GPUs: " << n << "\n";
  for (const CudaDeviceInfo& d : cuda_devices()) {
    out << "  cuda:" << d.index << "  " << d.name << ", compute " << d.compute_major << "."
        << d.compute_minor << ", " << d.multiprocessors << " SMs, " << format_bytes(d.total_bytes)
        << " total, " << format_bytes(d.free_bytes) << " free\n";
    out << "          precisions: " << gpu_precisions(d) << "\n";
  }
  return code;
}

}  // namespace minitrain::cli
