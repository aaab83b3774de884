// The report helpers shared by initcheck and racecheck (check_report.h).

#include "check_report.h"

#include <cstdio>
#include <cstring>

#include "runtime.h"
#include "sanitizer.h"

namespace mtemu::detail {

std::string hex(uintptr_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string idx3(uint3 v) {
  return "(" + std::to_string(v.x) + "," + std::to_string(v.y) + "," + std::to_string(v.z) + ")";
}

uint3 unlinear(uint32_t i, dim3 d) { return uint3{i % d.x, i / d.x % d.y, i / (d.x * d.y)}; }

std::string source_of(uintptr_t pc) {
#if MTEMU_ASAN
  // One "function|file:line" per inlined frame, innermost first, each ended by a NUL.
  char frames[4096] = {};
  __sanitizer_symbolize_pc(reinterpret_cast<void*>(pc - 1), "%f|%s:%l", frames, sizeof frames - 1);
  std::string chosen;
  for (const char* f = frames; *f != '\0' && f < frames + sizeof frames; f += std::strlen(f) + 1) {
    chosen = f;
    if (chosen.find("/cuda_emu/include/") == std::string::npos) break;
  }
  const auto bar = chosen.find('|');
  if (bar == std::string::npos) return "pc " + hex(pc);
  std::string file = chosen.substr(bar + 1);
  if (const auto slash = file.find_last_of('/'); slash != std::string::npos)
    file = file.substr(slash + 1);
  return chosen.substr(0, bar) + " at " + file;
#else
  return "pc " + hex(pc);
#endif
}

std::string device_place(uintptr_t a) {
  const Region r = find_region(reinterpret_cast<const void*>(a));
  if (r.space != Space::Device) return {};
  const auto lo = reinterpret_cast<uintptr_t>(r.base);
  return "byte " + std::to_string(a - lo) + " of the " + std::to_string(r.bytes) +
         "-byte allocation at " + hex(lo) + " (cudaMalloc on cuda:" + std::to_string(r.device) +
         ")";
}

}  // namespace mtemu::detail
