// Outputs that cannot clobber each other or an input, and one run at a time on a checkpoint
// directory or log. Paths are compared resolved and by inode: `--log data.csv` once replaced the
// training table, and `--save-best d/../w.safetensors` the final weights.

#include "train/run_files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace minitrain {
namespace fs = std::filesystem;

namespace {

struct FileIdentity {
  fs::path resolved;
  bool exists = false;
  dev_t device = 0;
  ino_t inode = 0;
};

FileIdentity identify(const std::string& path) {
  FileIdentity id;
  std::error_code ec;
  id.resolved = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) id.resolved = fs::absolute(path, ec).lexically_normal();
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    id.exists = true;
    id.device = st.st_dev;
    id.inode = st.st_ino;
  }
  return id;
}

bool same_file(const FileIdentity& a, const FileIdentity& b) {
  if (a.exists && b.exists) return a.device == b.device && a.inode == b.inode;
  return a.resolved == b.resolved;
}

}  // namespace

void check_run_files(const std::vector<RunFile>& files) {
  std::vector<FileIdentity> ids;
  ids.reserve(files.size());
  for (const RunFile& f : files) ids.push_back(f.path.empty() ? FileIdentity{} : identify(f.path));
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (files[i].path.empty() || !files[i].output) continue;
    for (std::size_t j = 0; j < files.size(); ++j) {
      if (j == i || files[j].path.empty() || (files[j].output && j < i)) continue;
      if (!same_file(ids[i], ids[j])) continue;
      MT_THROW(IoError, files[i].flag, " '", files[i].path, "' and ", files[j].flag, " '",
               files[j].path, "' are the same file ('", ids[i].resolved.string(), "'): ",
               files[j].output ? "one output would overwrite the other"
                               : "the output would overwrite the input",
               "; give ", files[i].flag, " another path");
    }
  }
}

// Note [lock files removed at the end]: the holder unlinks its lock file before it lets go, so a
// finished run leaves nothing behind (a killed one leaves the file, never the lock). A run that
// opened the file just before the unlink may then lock the unlinked inode while a third run
// creates a new file and locks that: so a claim holds only if the path still names the inode
// locked; if not, it starts over.
RunLock::RunLock(const std::string& what, const std::string& lock_path) : path_(lock_path) {
  for (;;) {
    fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    MT_CHECK_AS(IoError, fd_ >= 0, what, ": cannot open the lock file '", lock_path,
                "': ", std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      char text[32] = {};
      const ssize_t n = ::pread(fd_, text, sizeof text - 1, 0);
      ::close(fd_);
      fd_ = -1;
      if (err != EWOULDBLOCK)
        MT_THROW(IoError, what, ": cannot lock '", lock_path, "': ", std::strerror(err));
      const long pid = n > 0 ? std::strtol(text, nullptr, 10) : 0;
      MT_THROW(IoError, what, " is in use by another run (",
               pid > 0 ? "pid " + std::to_string(pid) : std::string("pid not yet written"),
               ", which holds '", lock_path,
               "'); wait for it to end, or give this run other files");
    }
    struct stat held {
    }, named{};
    if (::fstat(fd_, &held) == 0 && ::stat(lock_path.c_str(), &named) == 0 &&
        held.st_dev == named.st_dev && held.st_ino == named.st_ino)
      break;
    ::close(fd_);  // the file was removed by the run that held it: claim the new one
    fd_ = -1;
  }
  // Ours: say whose it is. A failure here only loses the pid in another run's message.
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, pid.data(), pid.size(), 0);
}

RunLock::RunLock(RunLock&& other) noexcept : path_(std::move(other.path_)), fd_(other.fd_) {
  other.fd_ = -1;
}

RunLock& RunLock::operator=(RunLock&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

RunLock::~RunLock() { release(); }

void RunLock::release() noexcept {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // still locked: see Note [lock files removed at the end]
  ::close(fd_);             // closing the last descriptor releases the flock
  fd_ = -1;
}

std::string checkpoint_dir_lock_path(const std::string& dir) {
  return (fs::path(dir) / ".minitrain.lock").string();
}

std::string file_lock_path(const std::string& path) {
  const fs::path p(path);
  return (p.parent_path() / ("." + p.filename().string() + ".lock")).string();
}

}  // namespace minitrain
