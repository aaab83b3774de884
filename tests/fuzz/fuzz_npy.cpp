// libFuzzer target: the .npy reader (core/npy.h) on arbitrary bytes. Any minitrain::Error is the
// expected answer to a malformed file; a crash, a sanitizer report, another exception type, an
// allocation over -malloc_limit_mb or a hang is a finding.

#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "core/npy.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  static const minitrain::fuzz::ScratchFile file("npy");
  file.write(data, size);
  try {
    const minitrain::Tensor t = minitrain::read_npy(file.path());
    minitrain::fuzz::touch(t);
  } catch (const minitrain::Error&) {
    // malformed, unsupported or truncated: the reader said so with a typed error
  }
  return 0;
}
