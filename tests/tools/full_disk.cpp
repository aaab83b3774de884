// A test-only LD_PRELOAD library that plays a full disk for one file: write(2) to a file whose
// path contains MINITRAIN_TEST_FULL_NAME fails with ENOSPC once MINITRAIN_TEST_FULL_AFTER bytes
// (default 0) have gone to such files in this process, after writing what still fits, as a file
// system does. Paths are read from /proc/self/fd, so a temporary named after its target (the
// atomic writes' ".NAME.tmp.PID.N") counts as the target. full_disk_check.py uses it for --log
// and --save-best on any machine, without root or a small file system. Nothing of the library
// knows about it.

#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

long long g_written = 0;  // bytes written to the named files so far

bool names_the_file(int fd, const char* name) {
  char link[64], path[4096];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = ::readlink(link, path, sizeof path - 1);
  if (n <= 0) return false;
  path[n] = '\0';
  return std::strstr(path, name) != nullptr;
}

}  // namespace

extern "C" ssize_t write(int fd, const void* data, size_t bytes) {
  using Write = ssize_t (*)(int, const void*, size_t);
  static const Write real = reinterpret_cast<Write>(::dlsym(RTLD_NEXT, "write"));
  const char* name = std::getenv("MINITRAIN_TEST_FULL_NAME");
  if (name == nullptr || *name == '\0' || !names_the_file(fd, name)) return real(fd, data, bytes);
  const char* after = std::getenv("MINITRAIN_TEST_FULL_AFTER");
  const long long room = (after != nullptr ? std::atoll(after) : 0) - g_written;
  if (room <= 0) {
    errno = ENOSPC;
    return -1;
  }
  const size_t fits = static_cast<size_t>(room) < bytes ? static_cast<size_t>(room) : bytes;
  const ssize_t n = real(fd, data, fits);
  if (n > 0) g_written += n;
  return n;
}
