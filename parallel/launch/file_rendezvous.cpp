// The shared-file rendezvous (Note [rendezvous files] in the header). The file is a few text lines
// and then the payload's bytes:
//   minitrain-rendezvous 1
//   job <job key>
//   written_unix_ns <when rank 0 wrote it, by rank 0's clock>
//   bytes <payload size>
//   <payload>

#include "parallel/launch/file_rendezvous.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/strings.h"

namespace minitrain {
namespace {

constexpr const char* kMagic = "minitrain-rendezvous 1";

int64_t unix_ns(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// When this process started, by the wall clock: /proc/self/stat's start time (clock ticks after
// boot) plus the boot time of /proc/stat. Falls back to when this library was first asked.
std::chrono::system_clock::time_point process_start_time() {
  static const std::chrono::system_clock::time_point start = [] {
    const auto fallback = std::chrono::system_clock::now();
    std::ifstream stat_file("/proc/self/stat");
    std::string stat;
    std::getline(stat_file, stat);
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos) return fallback;
    std::istringstream fields(stat.substr(paren + 2));
    std::string field;
    unsigned long long ticks = 0;
    for (int i = 3; i <= 22 && fields >> field; ++i)  // field 22 is starttime
      if (i == 22) ticks = std::strtoull(field.c_str(), nullptr, 10);
    std::ifstream proc_stat("/proc/stat");
    std::string line;
    long long boot = 0;
    while (std::getline(proc_stat, line))
      if (starts_with(line, "btime ")) boot = std::atoll(line.c_str() + 6);
    const long hz = ::sysconf(_SC_CLK_TCK);
    if (ticks == 0 || boot == 0 || hz <= 0) return fallback;
    return std::chrono::system_clock::time_point(std::chrono::seconds(boot)) +
           std::chrono::duration_cast<std::chrono::system_clock::duration>(
               std::chrono::duration<double>(static_cast<double>(ticks) / static_cast<double>(hz)));
  }();
  return start;
}

// Job ids and host names may hold characters a file name should not (':' '/' ' ').
std::string file_name_part(const std::string& s) {
  std::string out;
  for (char c : s)
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-') ? c : '_';
  if (out.size() > 80) out = out.substr(0, 64) + "_" + std::to_string(std::hash<std::string>{}(s));
  return out.empty() ? std::string("job") : out;
}

struct RendezvousFile {
  std::string job;
  int64_t written_ns = 0;
  std::string payload;
};

// The parsed file, or the reason it cannot be read as one ("" with nullopt-like empty job when
// missing).
bool read_rendezvous_file(const std::string& path, RendezvousFile& out, std::string& problem) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    problem.clear();  // not there (yet)
    return false;
  }
  std::string bytes;
  try {
    bytes = read_file_bytes(path);
  } catch (const IoError&) {
    problem.clear();  // removed between stat and open: treat as not there
    return false;
  }
  std::istringstream in(bytes);
  std::string magic, job_word, written_word, bytes_word;
  size_t size = 0;
  if (!std::getline(in, magic) || magic != kMagic || !(in >> job_word) || job_word != "job" ||
      in.get() != ' ' || !std::getline(in, out.job) || !(in >> written_word >> out.written_ns) ||
      written_word != "written_unix_ns" || !(in >> bytes_word >> size) || bytes_word != "bytes" ||
      in.get() != '\n') {
    problem = "a file that is not a minitrain rendezvous file";
    return false;
  }
  const auto offset = static_cast<size_t>(in.tellg());
  if (bytes.size() - offset != size) {
    problem = detail::concat("a file whose payload has ", bytes.size() - offset,
                             " bytes instead of ", size);
    return false;
  }
  out.payload = bytes.substr(offset);
  return true;
}

}  // namespace

std::string rendezvous_dir(const std::string& dir) {
  if (!dir.empty()) return dir;
  for (const char* var : {"MINITRAIN_RENDEZVOUS_DIR", "TMPDIR"})
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') return v;
  return "/tmp";
}

FileRendezvous::FileRendezvous(const ProcessEnv& env, RendezvousOptions options)
    : env_(env), options_(std::move(options)) {
  dir_ = rendezvous_dir(options_.dir);
  job_key_ = !env_.job_id.empty()
                 ? env_.job_id
                 : (env_.master_addr.empty() ? std::string("localhost") : env_.master_addr) + ":" +
                       std::to_string(env_.master_port);
  path_ = dir_ + "/minitrain-rendezvous-" + file_name_part(job_key_) + "-" +
          file_name_part(options_.name);
}

void FileRendezvous::publish(const std::string& payload) {
  if (::mkdir(dir_.c_str(), 0777) != 0 && errno != EEXIST)
    MT_THROW(IoError, "rendezvous: cannot create the directory '", dir_,
             "': ", std::strerror(errno),
             "; set MINITRAIN_RENDEZVOUS_DIR to a writable directory (shared by all nodes)");
  std::ostringstream text;
  text << kMagic << "\njob " << job_key_ << "\nwritten_unix_ns "
       << unix_ns(std::chrono::system_clock::now()) << "\nbytes " << payload.size() << "\n";
  write_file_atomically(path_, text.str() + payload);
}

std::string FileRendezvous::wait() {
  const auto t0 = std::chrono::steady_clock::now();
  const auto deadline = t0 + options_.timeout;
  const int64_t oldest_ns = unix_ns(process_start_time() - options_.stale_after);
  std::string ignored;  // why the last file seen was not taken, for the timeout message
  for (;;) {
    RendezvousFile file;
    std::string problem;
    if (read_rendezvous_file(path_, file, problem)) {
      if (file.job != job_key_)
        ignored = "a file of another job (job id '" + file.job + "')";
      else if (env_.job_id.empty() && file.written_ns < oldest_ns)
        ignored = "a file written before this process started (a leftover of an earlier run)";
      else
        return file.payload;
    } else if (!problem.empty()) {
      ignored = problem;
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(options_.poll_interval);
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", waited);
  MT_THROW(CommError, "rendezvous: rank ", env_.rank, " of ", env_.world_size, " waited ", secs,
           " s for rank 0's file '", path_, "' (job id '", job_key_, "')",
           ignored.empty() ? std::string() : "; found only " + ignored,
           "; check that rank 0 is running and got this far, that all ranks have the same job id "
           "(MINITRAIN_JOB_ID) and rendezvous directory (MINITRAIN_RENDEZVOUS_DIR), and, across "
           "machines, "
           "that the directory is on a file system shared by all of them");
}

std::string FileRendezvous::share(const std::string& payload) {
  if (env_.rank == 0) {
    publish(payload);
    return payload;
  }
  return wait();
}

void FileRendezvous::remove() noexcept { ::unlink(path_.c_str()); }

}  // namespace minitrain
