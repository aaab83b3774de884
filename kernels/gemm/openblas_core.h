#pragma once
// Which of OpenBLAS's kernel sets ("cores") runs the CPU GEMMs, and choosing the right one.
//
// Note [OpenBLAS core]: a DYNAMIC_ARCH OpenBLAS (Debian's) picks its kernels at load time from the
// CPUID family and model. A CPU newer than the library, or a cloud VM that masks its model
// ("Intel(R) Xeon(R) Processor", family 6 model 207 on this project's machines), is not in its
// table, and OpenBLAS 0.3.21 then falls back to Prescott: SSE3 kernels from 2004 on a CPU with
// AVX-512, a quarter of the vector width and no FMA (the CPU GEMMs ran at 40-50 GFLOP/s of a
// measured ~390 GFLOP/s peak). OpenBLAS reads OPENBLAS_CORETYPE when it selects, and its selection
// can be run again (gotoblas_dynamic_quit, then gotoblas_dynamic_init: the two exported calls its
// own start-up makes); so select_openblas_core() names the kernel set from the CPU's *features*
// (which the VM does not mask) and re-selects, before the first GEMM. The user's own
// OPENBLAS_CORETYPE always wins, and a core at least as capable as the features allow is kept.

#include <string>

#include "core/cpu_features.h"

namespace minitrain {

/// The instruction level of an OpenBLAS x86-64 core name: 1 SSE (Prescott, Core2, Nehalem, ...),
/// 2 AVX (SandyBridge, Bulldozer), 3 AVX2 + FMA (Haswell, Zen), 4 AVX-512 (SkylakeX),
/// 5 AVX-512 + BF16 (Cooperlake), 6 AMX (SapphireRapids); 0 for a name it does not know.
int openblas_core_level(const std::string& core);

/// The most capable x86-64 OpenBLAS core whose instructions `cpu` runs ("" when none beats SSE:
/// nothing to choose). Depends on the features only, never on the model number.
std::string openblas_core_for(const CpuFeatures& cpu);

/// What select_openblas_core() found and did.
struct OpenBlasSelection {
  std::string config;    ///< openblas_get_config(): version and build options
  std::string found;     ///< the core OpenBLAS had selected
  std::string core;      ///< the core it runs now
  std::string reason;    ///< why: "OPENBLAS_CORETYPE set by the user", "selected by minitrain
                         ///< (OpenBLAS chose Prescott for ...)", "OpenBLAS's own choice", ...
  bool dynamic = false;  ///< a DYNAMIC_ARCH build (its core can be chosen at run time)
};

/// Once per process: re-selects OpenBLAS's kernels for this CPU where it fell back to a core
/// below what the CPU runs and OPENBLAS_CORETYPE is not set. It runs during the static
/// initialisation of any program that links minitrain's GEMM, while the program is still
/// single-threaded (it sets OPENBLAS_CORETYPE for OpenBLAS's selection and removes it again, which
/// is not safe while another thread reads the environment or is inside OpenBLAS); later calls
/// return what it found and chose (the same object every time).
const OpenBlasSelection& select_openblas_core();

/// The OpenBLAS core in use now (openblas_get_corename()).
std::string openblas_core();

}  // namespace minitrain
