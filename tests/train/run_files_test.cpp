// check_run_files and RunLock (train/run_files.h): an output is compared with every other file
// by resolved path and inode, whatever its spelling; a lock refuses a second run while the first
// holds it and is free again once the holder is gone.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "tests/core/io_test_util.h"
#include "train/run_files.h"

namespace minitrain {
namespace {

using testing::expect_error;
using testing::ScratchDir;
namespace fs = std::filesystem;

TEST(RunFiles, AnOutputSpeltAnotherWayIsTheSameFile) {
  ScratchDir dir;
  fs::create_directory(dir.path("sub"));
  // Neither file exists yet: compared by resolved path.
  expect_error<IoError>(
      [&] {
        check_run_files({{"--save", dir.path("w.safetensors"), true},
                         {"--save-best", dir.path("sub/../w.safetensors"), true}});
      },
      {"--save '", "and --save-best '", "sub/../w.safetensors' are the same file",
       "one output would overwrite the other"});
  // An input and an output through a symlinked directory and "./".
  dir.write_raw("t.csv", "a,y\n1,2\n");
  fs::create_directory_symlink(dir.path(""), dir.path("link"));
  expect_error<IoError>(
      [&] {
        check_run_files(
            {{"--data", dir.path("t.csv"), false}, {"--log", dir.path("link/./t.csv"), true}});
      },
      {"--log '", "and --data '", "the output would overwrite the input"});
}

TEST(RunFiles, AHardLinkIsTheSameFile) {
  ScratchDir dir;
  dir.write_raw("w0.safetensors", "x");
  fs::create_hard_link(dir.path("w0.safetensors"), dir.path("other.safetensors"));
  expect_error<IoError>(
      [&] {
        check_run_files({{"--init", dir.path("w0.safetensors"), false},
                         {"--save", dir.path("other.safetensors"), true}});
      },
      {"--save '", "other.safetensors' and --init '", "are the same file"});
}

TEST(RunFiles, DistinctFilesAndRepeatedInputsPass) {
  ScratchDir dir;
  dir.write_raw("t.csv", "a,y\n1,2\n");
  EXPECT_NO_THROW(check_run_files({{"--data", dir.path("t.csv"), false},
                                   {"--val-data", dir.path("./t.csv"), false},  // read twice: fine
                                   {"--save", dir.path("w.safetensors"), true},
                                   {"--save-best", dir.path("best.safetensors"), true},
                                   {"--log", "", true}}));  // not given
}

TEST(RunLock, ASecondClaimIsRefusedUntilTheFirstEnds) {
  ScratchDir dir;
  const std::string lock = checkpoint_dir_lock_path(dir.path("ck"));
  fs::create_directory(dir.path("ck"));
  {
    RunLock first("--checkpoint-dir ck", lock);
    // Another open file description, as another run's would be (flock is per description).
    expect_error<IoError>([&] { RunLock second("--checkpoint-dir ck", lock); },
                          {"--checkpoint-dir ck is in use by another run",
                           "pid " + std::to_string(::getpid()), ".minitrain.lock"});
  }
  EXPECT_FALSE(fs::exists(lock));  // a finished claim leaves no file
  {
    RunLock again("--checkpoint-dir ck", lock);  // released with the holder
    EXPECT_TRUE(fs::exists(lock));
  }
  // A file left by a killed run holds no lock: claimed as if new.
  dir.write_raw("ck/.minitrain.lock", "999999999\n");
  EXPECT_NO_THROW(RunLock after_a_crash("--checkpoint-dir ck", lock));
  EXPECT_EQ(file_lock_path("runs/m.jsonl"), "runs/.m.jsonl.lock");
  EXPECT_EQ(file_lock_path("m.jsonl"), ".m.jsonl.lock");
}

}  // namespace
}  // namespace minitrain
