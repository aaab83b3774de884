#pragma once
// Helpers shared by the file-format tests: a fresh scratch directory per test, raw file bytes,
// and an assertion that a call throws a given error type whose message names given things.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/tensor.h"
#include "tests/support/test_util.h"

namespace minitrain::testing {

/// An empty directory of its own under ::testing::TempDir(), removed when it goes out of scope.
/// Named after the running test and the pid, so parallel ctest processes stay apart.
class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string(info->test_suite_name()) + "_" + info->name();
    for (char& c : name)
      if (c == '/') c = '_';
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("minitrain_io_" + std::to_string(::getpid()) + "_" + name);
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string path(const std::string& file) const { return (dir_ / file).string(); }
  /// The names in the directory, sorted: proves that no temporary was left behind.
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir_))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  /// Writes `bytes` to `file` in the directory and returns its path.
  std::string write_raw(const std::string& file, const std::string& bytes) const {
    std::ofstream(path(file), std::ios::binary) << bytes;
    return path(file);
  }

 private:
  std::filesystem::path dir_;
};

inline std::string fixture(const std::string& name) {
  return ::minitrain::testing::test_data_dir() + "/" + name;
}

/// The tensor's bytes, copied to the host (for bit-exact comparisons).
inline std::string tensor_bytes(const Tensor& t) {
  const Tensor host = t.to(Device::cpu());
  return host.nbytes() ? std::string(static_cast<const char*>(host.raw_data()), host.nbytes()) : "";
}

/// Expects `call` to throw exactly an `E` (or subclass) whose message contains every part.
template <typename E, typename F>
void expect_error(F&& call, std::initializer_list<std::string> parts) {
  try {
    call();
    ADD_FAILURE() << "expected an exception mentioning '" << *parts.begin() << "', got none";
  } catch (const E& e) {
    const std::string what = e.what();
    for (const std::string& part : parts)
      EXPECT_NE(what.find(part), std::string::npos) << "message lacks '" << part << "': " << what;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

}  // namespace minitrain::testing
