// Choosing OpenBLAS's kernels from the CPU's features (Note [OpenBLAS core]).

#include "kernels/gemm/openblas_core.h"

#include <cblas.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <vector>

// Exported by DYNAMIC_ARCH builds only (its load-time selection, and the reset before it is run
// again); weak, so that a build for one fixed core links and simply cannot choose.
extern "C" void gotoblas_dynamic_init(void) __attribute__((weak));
extern "C" void gotoblas_dynamic_quit(void) __attribute__((weak));

namespace minitrain {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// A product big enough for OpenBLAS to split over all its threads.
void warm_up_openblas_threads() {
  constexpr int kSize = 384;
  std::vector<float> a(kSize * kSize, 1.f), c(kSize * kSize);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kSize, kSize, kSize, 1.f, a.data(), kSize,
              a.data(), kSize, 0.f, c.data(), kSize);
}

}  // namespace

int openblas_core_level(const std::string& core) {
  static const std::pair<const char*, int> levels[] = {
      {"katmai", 1},       {"coppermine", 1},    {"northwood", 1},  {"prescott", 1},
      {"banias", 1},       {"atom", 1},          {"core2", 1},      {"penryn", 1},
      {"dunnington", 1},   {"nehalem", 1},       {"athlon", 1},     {"opteron", 1},
      {"opteron_sse3", 1}, {"barcelona", 1},     {"nano", 1},       {"bobcat", 1},
      {"sandybridge", 2},  {"bulldozer", 2},     {"piledriver", 2}, {"steamroller", 2},
      {"excavator", 2},    {"haswell", 3},       {"zen", 3},        {"skylakex", 4},
      {"cooperlake", 5},   {"sapphirerapids", 6}};
  const std::string name = lower(core);
  for (const auto& [n, level] : levels)
    if (name == n) return level;
  return 0;
}

std::string openblas_core_for(const CpuFeatures& cpu) {
  // SapphireRapids (AMX) is not named: its kernels add bf16/int8 tile paths that float32 GEMMs
  // do not use, and OpenBLAS builds without it fall back to Cooperlake anyway.
  if (cpu.avx512_skylake()) return cpu.avx512_bf16 ? "Cooperlake" : "SkylakeX";
  if (cpu.avx2 && cpu.fma) return "Haswell";
  if (cpu.avx) return "Sandybridge";
  return "";
}

std::string openblas_core() {
  const char* name = openblas_get_corename();
  return name != nullptr ? name : "unknown";
}

const OpenBlasSelection& select_openblas_core() {
  static const OpenBlasSelection selection = [] {
    OpenBlasSelection s;
    const char* config = openblas_get_config();
    s.config = config != nullptr ? config : "";
    s.dynamic = s.config.find("DYNAMIC_ARCH") != std::string::npos &&
                gotoblas_dynamic_init != nullptr && gotoblas_dynamic_quit != nullptr;
    // Linked statically, OpenBLAS starts after this program's static initialisation (where this
    // runs): no core yet. Its own selection first, as its start-up would make it (which then
    // keeps whatever is selected here).
    const bool openblas_started = !(s.dynamic && openblas_core() == "Unknown");
    if (!openblas_started) gotoblas_dynamic_init();
    s.found = s.core = openblas_core();
    s.config = openblas_get_config();
    const char* user = std::getenv("OPENBLAS_CORETYPE");
    if (user != nullptr && *user != '\0') {
      s.reason = "OPENBLAS_CORETYPE=" + std::string(user) + " set by the user";
      if (lower(user) != lower(s.core))  // OpenBLAS falls back from a name it does not know
        s.reason += ", which OpenBLAS does not run: it chose " + s.core;
      return s;
    }
    const std::string want = openblas_core_for(cpu_features());
    const int have_level = openblas_core_level(s.found);
    if (want.empty() || have_level == 0 || have_level >= openblas_core_level(want)) {
      s.reason = have_level == 0 ? "OpenBLAS's own choice (a core minitrain does not rank)"
                                 : "OpenBLAS's own choice (the best this CPU's features allow)";
      return s;
    }
    if (!s.dynamic) {
      s.reason = "OpenBLAS was built for " + s.found + " alone (no DYNAMIC_ARCH): this CPU runs " +
                 want + "'s kernels, install an OpenBLAS built for it";
      return s;
    }
    // Between gotoblas_dynamic_quit and _init OpenBLAS has no kernel table, and a worker thread
    // that is still starting reads it (blas_thread_server's buffer offsets): a test program
    // segfaulted at start-up once in a loaded suite. One product on all of OpenBLAS's threads
    // first: when it returns, every worker has started and waits for work, which reads nothing.
    if (openblas_started) warm_up_openblas_threads();
    // OpenBLAS reads the variable inside its selection; it is set for that call alone, so that
    // child processes make their own choice and a user's variable is never invented.
    setenv("OPENBLAS_CORETYPE", want.c_str(), 1);
    gotoblas_dynamic_quit();
    gotoblas_dynamic_init();
    unsetenv("OPENBLAS_CORETYPE");
    s.core = openblas_core();
    s.config = openblas_get_config();  // it names the core in use
    s.reason = "selected by minitrain: OpenBLAS chose " + s.found + " for this CPU (\"" +
               cpu_features().model_name + "\", family " + std::to_string(cpu_features().family) +
               " model " + std::to_string(cpu_features().model) + "), whose features run " + want;
    return s;
  }();
  return selection;
}

namespace {
// The selection sets and removes an environment variable, which races with getenv on other
// threads (glibc may reallocate the environment under them: a test that trained three DataParallel
// replicas crashed once when their first GEMMs selected). So it runs during static initialisation,
// while the program is single-threaded and after OpenBLAS's own start-up (a shared OpenBLAS is
// initialised before the programs that use it; a static one finds its selection made and keeps
// it); the first GEMM's call then only returns it.
[[maybe_unused]] const bool selected_at_load = (select_openblas_core(), true);
}  // namespace

}  // namespace minitrain
