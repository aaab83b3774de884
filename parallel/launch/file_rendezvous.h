#pragma once
// A shared-file rendezvous: rank 0 publishes a few bytes (the 128-byte NCCL unique id) as a file,
// the other ranks poll until it appears and read it. The bytes travel through a file system that
// every rank can see (the system's temporary directory on one machine; a shared file system such
// as NFS or Lustre across machines): minitrain has no network transport of its own.
//
// Note [rendezvous files]: the file is `DIR/minitrain-rendezvous-KEY-NAME`, KEY being the job id
// (MINITRAIN_JOB_ID, TORCHELASTIC_RUN_ID or SLURM_JOB_ID, see ProcessEnv::job_id) or, when the job
// has none, MASTER_ADDR_MASTER_PORT. The file is written atomically (temporary name, fsync,
// rename), so a reader sees the whole file or none. It records the job id and when it was written;
// a reader ignores a file of another job id, and, when the job has no id, a file written more than
// `stale_after` before this process started (a leftover of an earlier run on the same address and
// port). Rank 0 replaces whatever file is there. Setting a job id (minitrain launch does) is the
// robust way: without one, a run restarted within `stale_after` of a crash could read the old id.

#include <chrono>
#include <string>

#include "parallel/launch/process_env.h"

namespace minitrain {

struct RendezvousOptions {
  /// "": the MINITRAIN_RENDEZVOUS_DIR variable, else the system's temporary directory (TMPDIR or
  /// /tmp).
  std::string dir;
  std::string name = "nccl-id";  ///< what is exchanged; part of the file name
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
  std::chrono::milliseconds poll_interval{20};
  /// Without a job id: how much older than this process a file may be and still count as this
  /// job's.
  std::chrono::milliseconds stale_after{std::chrono::seconds(30)};
};

class FileRendezvous {
 public:
  /// The rendezvous of `env`'s job (its rank, job id, master address and port).
  explicit FileRendezvous(const ProcessEnv& env, RendezvousOptions options = {});

  /// The file all ranks of this job use.
  const std::string& path() const noexcept { return path_; }
  /// The job id written into the file: env.job_id, else "MASTER_ADDR:MASTER_PORT".
  const std::string& job_key() const noexcept { return job_key_; }

  /// Rank 0: writes `payload` atomically, replacing any file there (creates the directory if
  /// needed).
  void publish(const std::string& payload);
  /// Other ranks: the payload of this job's file, polled until it appears. CommError at the timeout
  /// naming the path, the seconds waited, any file that was ignored and why, and what to check.
  std::string wait();
  /// publish(payload) on rank 0 and returns it; wait() on the other ranks.
  std::string share(const std::string& payload);
  /// Rank 0, once every rank has read the file: removes it (a missing file is fine).
  void remove() noexcept;

 private:
  ProcessEnv env_;
  RendezvousOptions options_;
  std::string dir_;
  std::string path_;
  std::string job_key_;
};

/// The directory `dir` stands for: itself, else MINITRAIN_RENDEZVOUS_DIR, else TMPDIR, else /tmp.
std::string rendezvous_dir(const std::string& dir);

}  // namespace minitrain
