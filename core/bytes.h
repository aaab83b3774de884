#pragma once
// Byte counts as people write them: "1.50 GiB" out, "4GiB" / "512MiB" / "1000000" in.

#include <cstdint>
#include <string>

namespace minitrain {
std::string format_bytes(uint64_t bytes);
/// Accepts a plain integer or one with B, KiB, MiB, GiB, TiB, KB, MB, GB, TB; throws ValueError.
uint64_t parse_bytes(const std::string& text);
}  // namespace minitrain
