// Atomic writes: a completed write replaces the target; any failure (missing directory, an
// exception half-way through, a rename that cannot happen) leaves the old file byte-identical
// and no temporary behind.

#include "core/atomic_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.h"
#include "tests/core/io_test_util.h"

namespace minitrain {
namespace {

using testing::expect_error;
using testing::ScratchDir;

TEST(AtomicFile, WritesThenReplacesWithoutLeavingTemporaries) {
  ScratchDir dir;
  const std::string p = dir.path("w.bin");
  write_file_atomically(p, "first");
  EXPECT_EQ(read_file_bytes(p), "first");
  write_file_atomically(p, std::string("sec\0nd", 6));  // binary-safe
  EXPECT_EQ(read_file_bytes(p), std::string("sec\0nd", 6));
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"w.bin"});
}

// Issue 30 (medium): re-saving a 0600 weights file made it 0644 (the temporary's mode): a file
// replaced keeps its permission bits; a new one gets the umask's, as open(2) gives.
TEST(AtomicFile, ReplacingAFileKeepsItsMode) {
  ScratchDir dir;
  const std::string p = dir.path("w.safetensors");
  write_file_atomically(p, "first");
  ASSERT_EQ(::chmod(p.c_str(), 0600), 0);
  write_file_atomically(p, "second");
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(read_file_bytes(p), "second");
}

TEST(AtomicFile, TemporarySitsBesideTheTargetUntilCommit) {
  ScratchDir dir;
  const std::string p = dir.path("W.safetensors");
  AtomicFile f(p);
  EXPECT_EQ(f.temp_path().rfind(dir.path(".W.safetensors.tmp."), 0), 0u) << f.temp_path();
  f.write("abc");
  EXPECT_EQ(dir.listing().size(), 1u);
  EXPECT_NE(dir.listing()[0], "W.safetensors");  // the target does not exist yet
  f.commit();
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"W.safetensors"});
  expect_error<IoError>([&] { f.write("more"); }, {"already committed"});
}

// A target name near NAME_MAX (issue 30: a 252-byte --save failed on its temporary's longer
// name): the temporary's name fits in 255 bytes, starts like the target's, and differs between
// two long names that share their first 200 bytes; the write commits; stale ones are found.
TEST(AtomicFile, ATargetNameNearNameMaxGetsATemporaryThatFits) {
  ScratchDir dir;
  const std::string name = std::string(240, 'w') + ".safetensors";  // 252 bytes
  AtomicFile f(dir.path(name));
  const std::string temp = f.temp_path().substr(f.temp_path().rfind('/') + 1);
  EXPECT_LE(temp.size(), 255u) << temp;
  EXPECT_EQ(temp.rfind("." + name.substr(0, 100), 0), 0u) << temp;
  AtomicFile g(dir.path(std::string(240, 'w') + ".safetensorz"));
  const std::string other = g.temp_path().substr(g.temp_path().rfind('/') + 1);
  EXPECT_NE(temp.substr(0, temp.find(".tmp.")), other.substr(0, other.find(".tmp."))) << other;
  f.write("abc");
  f.commit();
  EXPECT_EQ(read_file_bytes(dir.path(name)), "abc");
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);
  const std::string prefix = temp.substr(0, temp.find(".tmp.") + 5);
  write_file_atomically(dir.path(prefix + std::to_string(child) + ".1"), "x");
  EXPECT_EQ(remove_stale_temporaries(dir.path(name)), 1);
}

TEST(AtomicFile, AbandonedWriteLeavesTargetByteIdentical) {
  ScratchDir dir;
  const std::string p = dir.path("w.bin");
  write_file_atomically(p, "old contents");
  try {
    AtomicFile f(p);
    f.write("new contents, half");
    throw std::runtime_error("the writer failed half-way");  // e.g. a device copy failing
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(read_file_bytes(p), "old contents");
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"w.bin"});
}

TEST(AtomicFile, MissingDirectoryThrowsIoErrorNamingThePath) {
  ScratchDir dir;
  const std::string p = dir.path("missing/w.bin");
  expect_error<IoError>([&] { write_file_atomically(p, "x"); },
                        {"cannot write '" + p + "'", "No such file or directory"});
  EXPECT_TRUE(dir.listing().empty());
}

TEST(AtomicFile, FailedRenameRemovesTheTemporary) {
  // A directory where the file should go: everything succeeds until rename(), which cannot
  // replace a directory with a file.
  ScratchDir dir;
  const std::string p = dir.path("target");
  std::filesystem::create_directory(p);
  expect_error<IoError>([&] { write_file_atomically(p, "data"); },
                        {"cannot write '" + p + "'", "renaming", "unchanged"});
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"target"});
  EXPECT_TRUE(std::filesystem::is_directory(p));
}

TEST(AtomicFile, ReadingMissingOrDirectoryNamesPathAndReason) {
  ScratchDir dir;
  expect_error<IoError>([&] { read_file_bytes(dir.path("x.npy")); },
                        {"cannot open '" + dir.path("x.npy") + "': No such file or directory"});
  expect_error<IoError>([&] { read_file_bytes(dir.path("")); },
                        {"it is a directory, not a regular file"});
}

TEST(InputFile, AFifoIsRefusedInsteadOfBlockingForever) {
  // open() of a FIFO with no writer used to block for ever (--data, --init, --config).
  ScratchDir dir;
  const std::string fifo = dir.path("x.npy");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_error<IoError>([&] { InputFile f(fifo); },
                        {fifo, "it is a FIFO (named pipe), not a regular file"});
  expect_error<IoError>([&] { read_file_bytes("/dev/null"); }, {"it is a character device"});
}

TEST(CheckCanWrite, FindsUnwritableTargetsAndLeavesNothingBehind) {
  ScratchDir dir;
  check_can_write(dir.path("w.safetensors"));
  EXPECT_TRUE(dir.listing().empty());  // the probe is gone
  expect_error<IoError>([&] { check_can_write(dir.path("missing/w.safetensors")); },
                        {"missing/w.safetensors", "No such file or directory"});
  write_file_atomically(dir.path("plain"), "x");
  expect_error<IoError>([&] { check_can_write(dir.path("plain/w.safetensors")); },
                        {"Not a directory"});
  expect_error<IoError>([&] { check_can_write(dir.path("")); }, {"not a file name"});
  ::mkdir(dir.path("sub").c_str(), 0700);
  expect_error<IoError>([&] { check_can_write(dir.path("sub")); }, {"it is a directory"});
  // /proc refuses new files even to root, as a read-only mount would.
  expect_error<IoError>([&] { check_can_write("/proc/minitrain-probe"); },
                        {"/proc/minitrain-probe"});
}

TEST(RemoveStaleTemporaries, RemovesOnlyThoseOfDeadWriters) {
  ScratchDir dir;
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);  // `child` is now a pid no live process has
  const std::string dead = ".w.safetensors.tmp." + std::to_string(child) + ".3";
  const std::string mine = ".w.safetensors.tmp." + std::to_string(::getpid()) + ".0";
  const std::string other =
      ".v.safetensors.tmp." + std::to_string(child) + ".0";  // another target's
  for (const std::string& name : {dead, mine, other, std::string("w.safetensors")})
    write_file_atomically(dir.path(name), "x");
  EXPECT_EQ(remove_stale_temporaries(dir.path("w.safetensors")), 1);
  EXPECT_EQ(dir.listing(), (std::vector<std::string>{other, mine, "w.safetensors"}));  // sorted
  EXPECT_EQ(remove_stale_temporaries(dir.path("w.safetensors")), 0);
}

}  // namespace
}  // namespace minitrain
