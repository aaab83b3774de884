// The shared-file rendezvous: bytes from rank 0 to the others (threads and a forked process),
// files of another job or an earlier run ignored, and the timeout's message.

#include "parallel/launch/file_rendezvous.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <future>
#include <thread>

#include "core/atomic_file.h"
#include "core/error.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using namespace std::chrono_literals;
using ::minitrain::testing::error_message;

// A fresh directory per test, so runs and tests never see each other's files.
std::string scratch_dir(const std::string& name) {
  const std::string dir =
      ::testing::TempDir() + "rendezvous_" + name + "_" + std::to_string(::getpid());
  std::system(("rm -rf '" + dir + "'").c_str());
  return dir;
}

ProcessEnv rank_env(int rank, int size, const std::string& job_id) {
  ProcessEnv e;
  e.rank = rank;
  e.world_size = size;
  e.local_rank = rank;
  e.local_world_size = size;
  e.master_addr = "127.0.0.1";
  e.master_port = 29511;
  e.job_id = job_id;
  e.source = "torchrun";
  return e;
}

RendezvousOptions options_in(const std::string& dir, std::chrono::milliseconds timeout = 20s) {
  RendezvousOptions o;
  o.dir = dir;
  o.timeout = timeout;
  o.poll_interval = 5ms;
  return o;
}

// 128 bytes like an NCCL id: zeros, newlines and high bytes included.
std::string id_bytes(int seed) {
  std::string s(128, '\0');
  for (int i = 0; i < 128; ++i) s[i] = static_cast<char>((i * 37 + seed * 11) % 256);
  s[5] = '\n';
  return s;
}

TEST(FileRendezvous, ThreadsOfOneJobShareRankZerosBytes) {
  const std::string dir = scratch_dir("threads");  // publish() creates it
  const std::string payload = id_bytes(1);
  std::vector<std::future<std::string>> others;
  for (int r = 1; r < 4; ++r)
    others.push_back(std::async(std::launch::async, [&, r] {
      return FileRendezvous(rank_env(r, 4, "job-a"), options_in(dir))
          .share("ignored by rank " + std::to_string(r));
    }));
  std::this_thread::sleep_for(50ms);  // the others are already polling
  FileRendezvous zero(rank_env(0, 4, "job-a"), options_in(dir));
  EXPECT_EQ(zero.share(payload), payload);
  for (auto& f : others) EXPECT_EQ(f.get(), payload);
  EXPECT_NE(zero.path().find(dir + "/minitrain-rendezvous-job-a-nccl-id"), std::string::npos)
      << zero.path();
  EXPECT_EQ(::access(zero.path().c_str(), F_OK), 0);
  zero.remove();
  EXPECT_NE(::access(zero.path().c_str(), F_OK), 0);
  zero.remove();  // already gone: fine
}

TEST(FileRendezvous, AForkedProcessReadsTheBytes) {
  const std::string dir = scratch_dir("fork");
  const std::string payload = id_bytes(2);
  const pid_t child = ::fork();
  if (child == 0) {
    // Rank 1 in another process: exit 0 only when it read exactly rank 0's bytes.
    try {
      const std::string got = FileRendezvous(rank_env(1, 2, "job-fork"), options_in(dir)).wait();
      ::_exit(got == payload ? 0 : 1);
    } catch (...) {
      ::_exit(2);
    }
  }
  ASSERT_GT(child, 0);
  std::this_thread::sleep_for(30ms);
  FileRendezvous(rank_env(0, 2, "job-fork"), options_in(dir)).publish(payload);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: wrong bytes, 2: an exception";
}

TEST(FileRendezvous, IgnoresAFileOfAnotherJobUntilRankZeroReplacesIt) {
  const std::string dir = scratch_dir("other_job");
  FileRendezvous zero(rank_env(0, 2, "job-b"), options_in(dir));
  // A file at this job's path that says it belongs to job "job-old" (same name after sanitising,
  // say).
  zero.publish("x");
  std::string text = read_file_bytes(zero.path());
  text.replace(text.find("job job-b"), 9, "job job-old");
  write_file_atomically(zero.path(), text);

  FileRendezvous one(rank_env(1, 2, "job-b"), options_in(dir, 300ms));
  const std::string msg = error_message([&] { one.wait(); });
  EXPECT_NE(msg.find("found only a file of another job (job id 'job-old')"), std::string::npos)
      << msg;

  auto waiting = std::async(std::launch::async, [&] {
    return FileRendezvous(rank_env(1, 2, "job-b"), options_in(dir)).wait();
  });
  std::this_thread::sleep_for(50ms);
  zero.publish(id_bytes(3));
  EXPECT_EQ(waiting.get(), id_bytes(3));
}

TEST(FileRendezvous, WithoutAJobIdIgnoresAFileFromBeforeThisProcessStarted) {
  const std::string dir = scratch_dir("stale");
  FileRendezvous zero(rank_env(0, 2, ""), options_in(dir));
  EXPECT_EQ(zero.job_key(), "127.0.0.1:29511");
  EXPECT_NE(zero.path().find("minitrain-rendezvous-127.0.0.1_29511-nccl-id"), std::string::npos)
      << zero.path();
  zero.publish("old run");
  // Backdate it by a day: a leftover of a run that crashed.
  std::string text = read_file_bytes(zero.path());
  const size_t at = text.find("written_unix_ns ") + 16;
  const size_t end = text.find('\n', at);
  const long long written = std::stoll(text.substr(at, end - at));
  text.replace(at, end - at, std::to_string(written - 86400LL * 1000000000LL));
  write_file_atomically(zero.path(), text);

  FileRendezvous one(rank_env(1, 2, ""), options_in(dir, 200ms));
  const std::string msg = error_message([&] { one.wait(); });
  EXPECT_NE(msg.find("found only a file written before this process started"), std::string::npos)
      << msg;

  zero.publish("this run");  // rank 0 replaces it
  EXPECT_EQ(one.wait(), "this run");
}

TEST(FileRendezvous, TimeoutNamesThePathTheWaitAndWhatToCheck) {
  const std::string dir = scratch_dir("timeout");
  FileRendezvous one(rank_env(1, 3, "job-t"), options_in(dir, 250ms));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(one.wait(), CommError);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 250ms);
  const std::string msg = error_message([&] { one.wait(); });
  EXPECT_NE(msg.find("rendezvous: rank 1 of 3 waited 0."), std::string::npos) << msg;
  EXPECT_NE(msg.find(" s for rank 0's file '" + one.path() + "' (job id 'job-t')"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("check that rank 0 is running"), std::string::npos) << msg;
  EXPECT_NE(msg.find("MINITRAIN_RENDEZVOUS_DIR"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("found only"), std::string::npos) << msg;  // nothing was there
}

TEST(FileRendezvous, IgnoresAFileThatIsNoRendezvousFile) {
  const std::string dir = scratch_dir("garbage");
  FileRendezvous one(rank_env(1, 2, "job-g"), options_in(dir, 150ms));
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "'").c_str()), 0);
  write_file_atomically(one.path(), "hello\n");
  EXPECT_NE(error_message([&] {
              one.wait();
            }).find("found only a file that is not a minitrain rendezvous file"),
            std::string::npos);
  FileRendezvous zero(rank_env(0, 2, "job-g"), options_in(dir));
  zero.publish("abc");
  std::string text = read_file_bytes(zero.path());
  write_file_atomically(zero.path(), text.substr(0, text.size() - 1));  // one payload byte short
  EXPECT_NE(error_message([&] { one.wait(); }).find("payload has 2 bytes instead of 3"),
            std::string::npos);
}

TEST(FileRendezvous, DirectoryComesFromTheEnvironmentAndMustBeWritable) {
  EXPECT_EQ(rendezvous_dir("/explicit"), "/explicit");
  ::setenv("MINITRAIN_RENDEZVOUS_DIR", "/shared/rdzv", 1);
  EXPECT_EQ(rendezvous_dir(""), "/shared/rdzv");
  EXPECT_EQ(FileRendezvous(rank_env(0, 2, "j"), RendezvousOptions{}).path(),
            "/shared/rdzv/minitrain-rendezvous-j-nccl-id");
  ::unsetenv("MINITRAIN_RENDEZVOUS_DIR");
  const char* tmpdir = std::getenv("TMPDIR");
  EXPECT_EQ(rendezvous_dir(""), tmpdir && *tmpdir ? std::string(tmpdir) : std::string("/tmp"));

  FileRendezvous nowhere(rank_env(0, 2, "j"), options_in("/nonexistent/a/b"));
  EXPECT_THROW(nowhere.publish("x"), IoError);
  EXPECT_NE(error_message([&] {
              nowhere.publish("x");
            }).find("cannot create the directory '/nonexistent/a/b'"),
            std::string::npos);
}

}  // namespace
}  // namespace minitrain
