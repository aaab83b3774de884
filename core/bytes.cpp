#include "core/bytes.h"

#include <cctype>
#include <cstdio>
#include <utility>

#include "core/error.h"

namespace minitrain {

std::string format_bytes(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return buf;
}

uint64_t parse_bytes(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  MT_CHECK_AS(ValueError, i > 0, "cannot read '", text, "' as a byte count (e.g. 4GiB, 512MiB)");
  double value = 0;
  try {
    value = std::stod(text.substr(0, i));
  } catch (const std::exception&) {
    MT_THROW(ValueError, "cannot read '", text, "' as a byte count (e.g. 4GiB, 512MiB)");
  }
  std::string unit = text.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  static const std::pair<const char*, double> units[] = {{"", 1},
                                                         {"B", 1},
                                                         {"KiB", 1024.0},
                                                         {"MiB", 1048576.0},
                                                         {"GiB", 1073741824.0},
                                                         {"TiB", 1099511627776.0},
                                                         {"KB", 1e3},
                                                         {"MB", 1e6},
                                                         {"GB", 1e9},
                                                         {"TB", 1e12}};
  // 2^63 bytes (8 EiB) is beyond any machine; the bound also keeps the double-to-integer
  // conversion defined (a larger value used to wrap to 0 and read as "0 bytes").
  constexpr double kMaxBytes = 9223372036854775808.0;
  for (const auto& [name, scale] : units) {
    if (unit != name) continue;
    const double bytes = value * scale + 0.5;
    MT_CHECK_AS(ValueError, bytes < kMaxBytes, "byte count '", text,
                "' is too large (at most 8 EiB)");
    return static_cast<uint64_t>(bytes);
  }
  MT_THROW(ValueError, "unknown unit '", unit, "' in byte count '", text,
           "' (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)");
}

}  // namespace minitrain
