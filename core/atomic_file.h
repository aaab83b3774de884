#pragma once
// Whole-file I/O that never leaves a half-written file: AtomicFile writes a temporary beside the
// target and renames it over the target only once every byte is on disk. InputFile reads with
// checked errors. Every failure is an IoError naming the path and the system's reason.

#include <cstddef>
#include <cstdint>
#include <string>

namespace minitrain {

/// A file being written in place of `path`. Readers see the old file (or none) until commit()
/// returns, then the complete new one. Destroying it without commit() removes the temporary and
/// leaves `path` untouched, so an exception half-way through a write loses nothing. Move-only.
class AtomicFile {
 public:
  /// Creates `.NAME.tmp.PID.N` in the target's directory; throws IoError when it cannot.
  explicit AtomicFile(const std::string& path);
  ~AtomicFile();
  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&&) = delete;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, std::size_t bytes);  ///< appends; throws IoError
  void write(const std::string& bytes) { write(bytes.data(), bytes.size()); }
  /// flush, fsync, close, rename over the target, which keeps its permission bits when it existed.
  /// Throws IoError (and removes the temporary).
  void commit();

  const std::string& path() const noexcept { return path_; }
  const std::string& temp_path() const noexcept { return temp_path_; }

 private:
  [[noreturn]] void fail(const char* what);  // removes the temporary, throws IoError with errno
  void discard() noexcept;

  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
};

/// Writes `bytes` to `path` atomically (see AtomicFile).
void write_file_atomically(const std::string& path, const std::string& bytes);

/// Throws IoError unless a file can be created and written beside `path` now (its directory
/// exists, is writable and not on a read-only mount): a run checks its outputs before its first
/// step instead of failing after its last. Creates and removes a probe file.
void check_can_write(const std::string& path);

/// Removes the temporaries of `path` (`.NAME.tmp.PID.N`) that writers killed mid-write left
/// behind: those whose PID is no longer a live process on this machine. Returns how many.
int remove_stale_temporaries(const std::string& path);

/// A file open for sequential reading, with its size known up front so that formats can check
/// lengths in their headers before reading. Move-only; closes on destruction.
class InputFile {
 public:
  /// Throws IoError "cannot open 'x.npy': No such file or directory".
  explicit InputFile(const std::string& path);
  ~InputFile();
  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&&) = delete;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  uint64_t size() const noexcept { return size_; }
  uint64_t position() const noexcept { return position_; }
  const std::string& path() const noexcept { return path_; }
  /// Reads exactly `bytes` at the current position; throws IoError when the file ends first.
  void read(void* dst, std::size_t bytes);
  /// Reads exactly `bytes` at `offset` without moving the position (pread): callable from several
  /// threads at once. IoError when the file ends first.
  void read_at(uint64_t offset, void* dst, std::size_t bytes) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  uint64_t position_ = 0;
};

/// The whole file as bytes; throws IoError.
std::string read_file_bytes(const std::string& path);

}  // namespace minitrain
