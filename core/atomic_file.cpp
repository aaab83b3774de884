// Atomic replacement by write-temporary-then-rename: rename(2) within one directory is atomic
// on POSIX file systems, so a reader (or a crash) sees either the old file or the whole new one.

#include "core/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace minitrain {
namespace {

std::atomic<uint64_t> temp_counter{0};

// The start of a temporary's name, before "PID.N": ".NAME.tmp." where that leaves room for the
// two numbers within NAME_MAX (255 bytes on Linux, macOS and the BSDs); for a longer NAME, its
// first bytes and a hash of all of it, so that a 252-byte --save still gets a temporary (beside
// it: rename() is only atomic within one file system) and two long names sharing a start don't
// share temporaries.
std::string temp_prefix(const std::string& name) {
  constexpr std::size_t kNameMax = 255;
  constexpr std::size_t kNumbers = 2 * 20 + 1;  // "PID.N", each up to 20 digits
  const std::string plain = "." + name + ".tmp.";
  if (plain.size() + kNumbers <= kNameMax) return plain;
  uint64_t h = 14695981039346656037ull;  // FNV-1a 64
  for (const unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(h));
  const std::size_t keep = kNameMax - kNumbers - (1 + 1 + 16 + 5);  // ".", "~", hash, ".tmp."
  return "." + name.substr(0, keep) + "~" + hash + ".tmp.";
}

std::string temp_path_for(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  return detail::concat(dir, temp_prefix(name), ::getpid(), ".", temp_counter.fetch_add(1));
}

std::string directory_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

AtomicFile::AtomicFile(const std::string& path) : path_(path), temp_path_(temp_path_for(path)) {
  MT_CHECK_AS(IoError, !path.empty() && path.back() != '/', "cannot write '", path,
              "': not a file name");
  // O_EXCL: never write through a stale temporary (or a link someone planted) of the same name.
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd_ < 0) {
    const int err = errno;
    MT_THROW(IoError, "cannot write '", path_, "': ", std::strerror(err),
             " (while creating the temporary '", temp_path_, "')");
  }
}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : path_(std::move(other.path_)), temp_path_(std::move(other.temp_path_)), fd_(other.fd_) {
  other.fd_ = -1;
  other.temp_path_.clear();
}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
  temp_path_.clear();
}

void AtomicFile::fail(const char* what) {
  const int err = errno;  // before discard() can change it
  const std::string temp = temp_path_;
  discard();
  MT_THROW(IoError, "cannot write '", path_, "': ", std::strerror(err), " (", what, " '", temp,
           "'; the existing file, if any, is unchanged)");
}

void AtomicFile::write(const void* data, std::size_t bytes) {
  MT_CHECK_AS(IoError, fd_ >= 0, "cannot write '", path_, "': the file was already committed");
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);  // may write less than asked: loop
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("while writing");
    }
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

void AtomicFile::commit() {
  MT_CHECK_AS(IoError, fd_ >= 0, "cannot write '", path_, "': the file was already committed");
  // fsync before rename: otherwise a crash can leave the new name pointing at empty blocks.
  // A file replaced keeps its permission bits (a 0600 weights file stays private); a new one gets
  // the umask's, from open(2).
  struct stat target {};
  if (::stat(path_.c_str(), &target) == 0 && S_ISREG(target.st_mode) &&
      ::fchmod(fd_, target.st_mode & 07777) != 0)
    fail("while setting the mode of");
  if (::fsync(fd_) != 0) fail("while syncing");
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("while closing");
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) fail("while renaming");
  temp_path_.clear();
  // Make the rename itself durable. Best effort: some file systems cannot fsync a directory,
  // and the data is already complete under its new name.
  const int dir = ::open(directory_of(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    (void)::fsync(dir);
    ::close(dir);
  }
}

void write_file_atomically(const std::string& path, const std::string& bytes) {
  AtomicFile file(path);
  file.write(bytes);
  file.commit();
}

void check_can_write(const std::string& path) {
  MT_CHECK_AS(IoError, !path.empty() && path.back() != '/', "cannot write '", path,
              "': not a file name");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    MT_THROW(IoError, "cannot write '", path, "': it is a directory; give a file name");
  // A probe written through AtomicFile fails exactly as the real write would (missing
  // directory, no permission, read-only file system, no space for an inode).
  AtomicFile probe(path);
}

int remove_stale_temporaries(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  const std::string dir = directory_of(path);
  const std::string prefix =
      temp_prefix(slash == std::string::npos ? path : path.substr(slash + 1));
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  int removed = 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    // ".NAME.tmp.PID.N": the writer's PID, then a counter.
    char* end = nullptr;
    const long pid = std::strtol(name.c_str() + prefix.size(), &end, 10);
    if (pid <= 0 || *end != '.') continue;
    if (pid == ::getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    if (::unlink((dir + "/" + name).c_str()) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

// ---- reading ----

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

// Inputs are regular files only: their size is known before reading, and reading them cannot
// block for ever. O_NONBLOCK keeps open() itself from waiting for a FIFO's writer; it is cleared
// once the file is known to be regular (where it has no effect anyway).
InputFile::InputFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) {
    const int err = errno;
    MT_THROW(IoError, "cannot open '", path, "': ", std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    MT_THROW(IoError, "cannot open '", path, "': ", std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    MT_THROW(IoError, "cannot read '", path, "': it is ", file_kind(st.st_mode),
             ", not a regular file; minitrain reads its inputs from files");
  }
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
  size_ = static_cast<uint64_t>(st.st_size);
}

InputFile::InputFile(InputFile&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(other.fd_),
      size_(other.size_),
      position_(other.position_) {
  other.fd_ = -1;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void InputFile::read_at(uint64_t offset, void* dst, std::size_t bytes) const {
  char* p = static_cast<char*>(dst);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd_, p, bytes, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      MT_THROW(IoError, "cannot read '", path_, "': ", std::strerror(err), " (at byte ", offset,
               ")");
    }
    MT_CHECK_AS(IoError, n > 0, "cannot read '", path_, "': the file ends at byte ", offset,
                " but ", bytes, " more bytes were expected (was it truncated while being read?)");
    p += n;
    bytes -= static_cast<std::size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
}

void InputFile::read(void* dst, std::size_t bytes) {
  read_at(position_, dst, bytes);  // the size was checked against the header: an early end means
  position_ += bytes;              // the file shrank under us, which read_at names
}

std::string read_file_bytes(const std::string& path) {
  InputFile file(path);
  std::string bytes(static_cast<std::size_t>(file.size()), '\0');
  file.read(bytes.data(), bytes.size());
  return bytes;
}

}  // namespace minitrain
