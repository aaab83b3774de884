#pragma once
// What every fuzz target shares: the input as a file (npy, safetensors and CSV reading take a
// path, not bytes), a check that a returned tensor's bytes are really there, and a check macro
// whose failure is a finding. A minitrain::Error is the expected answer to a malformed input; the
// targets catch it and nothing else, so any other exception escapes and libFuzzer reports it.

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/tensor.h"

/// A broken invariant on a successfully read input: print it and abort, which libFuzzer records
/// as a crash with the input that caused it.
#define FUZZ_CHECK(cond, what)                                                                 \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      std::fprintf(stderr, "fuzz check failed at %s:%d: %s (%s)\n", __FILE__, __LINE__, #cond, \
                   what);                                                                      \
      std::abort();                                                                            \
    }                                                                                          \
  } while (0)

namespace minitrain::fuzz {

/// One file per fuzzer process, rewritten with each input and removed at exit. Its directory is
/// $TMPDIR (or /tmp); the name carries the target and the pid, so parallel runs never share it.
class ScratchFile {
 public:
  explicit ScratchFile(const std::string& suffix) {
    const char* tmp = std::getenv("TMPDIR");
    path_ = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/minitrain_fuzz." +
            std::to_string(::getpid()) + "." + suffix;
  }
  ~ScratchFile() { std::remove(path_.c_str()); }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  const std::string& path() const noexcept { return path_; }

  /// Replaces the file's contents with `size` bytes. A failure here is the harness's, not the
  /// reader's: it aborts with the reason.
  void write(const uint8_t* data, std::size_t size) const {
    std::FILE* f = std::fopen(path_.c_str(), "wb");
    FUZZ_CHECK(f != nullptr, path_.c_str());
    FUZZ_CHECK(size == 0 || std::fwrite(data, 1, size, f) == size, path_.c_str());
    FUZZ_CHECK(std::fclose(f) == 0, path_.c_str());
  }

 private:
  std::string path_;
};

/// Reads every byte a tensor claims to hold, so AddressSanitizer sees an allocation smaller than
/// the shape says (a wrapped size computation), and checks that shape, dtype and bytes agree.
inline void touch(const Tensor& t) {
  FUZZ_CHECK(t.defined(), "a reader returned an undefined tensor");
  FUZZ_CHECK(t.numel() >= 0, t.shape().str().c_str());
  if (t.numel() == 0) return;
  const auto* p = static_cast<const unsigned char*>(t.raw_data());
  unsigned sum = 0;
  for (std::size_t i = 0; i < t.nbytes(); ++i) sum += p[i];
  volatile unsigned sink = sum;  // keeps the loop from being optimised away
  (void)sink;
}

}  // namespace minitrain::fuzz
