// --gemm for train and predict (train/gemm_flag.h).

#include "train/gemm_flag.h"

#include "core/error.h"
#include "core/strings.h"
#include "kernels/gemm/gemm_registry.h"
#include "train/flag_context.h"

namespace minitrain {

void check_gemm_flag(const std::string& name, Device device) {
  if (name == "auto") return;
  const GemmBackend* b = nullptr;
  with_flag_context("--gemm", [&] { b = &gemm_backend(name); });
  if (b->device != device.type()) {
    const std::string names = join(gemm_backend_names(device.type()), ", ");
    MT_THROW(ValueError, "--gemm ", name, " runs on ",
             b->device == DeviceType::CUDA ? "CUDA" : "CPU", " tensors, but this run is on ",
             device.str(), "; for ", device.str(), " choose auto or one of: ", names);
  }
}

}  // namespace minitrain
