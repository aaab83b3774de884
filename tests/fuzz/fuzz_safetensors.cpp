// libFuzzer target: the .safetensors reader (core/safetensors.h) on arbitrary bytes. Any
// minitrain::Error is the expected answer to a malformed file; a crash, a sanitizer report,
// another exception type (an nlohmann::json one escaping, say), an allocation over
// -malloc_limit_mb or a hang is a finding.

#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "core/safetensors.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  static const minitrain::fuzz::ScratchFile file("safetensors");
  file.write(data, size);
  try {
    const minitrain::SafetensorsFile f = minitrain::read_safetensors(file.path());
    for (const auto& entry : f.tensors) minitrain::fuzz::touch(entry.second);
  } catch (const minitrain::Error&) {
    // malformed, unsupported or truncated: the reader said so with a typed error
  }
  return 0;
}
