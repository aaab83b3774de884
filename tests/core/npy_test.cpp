// .npy: files written by real NumPy (tests/fixtures/make_npy_fixtures.py) read correctly,
// minitrain's files equal NumPy's byte for byte, round trips on every device, and every malformed
// header is rejected with an IoError that names the file and the problem.

#include "core/npy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "tests/core/io_test_util.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::expect_error;
using testing::fixture;
using testing::ScratchDir;
using testing::tensor_bytes;

std::vector<double> arange(int64_t n, double scale, double shift) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(double(i) * scale + shift);
  return v;
}

// A .npy file by hand: magic, version, little-endian header length, header text, data.
std::string npy_bytes(const std::string& header, const std::string& data, int major = 1) {
  std::string out("\x93NUMPY", 6);
  out += char(major);
  out += char(0);
  const std::size_t n = header.size();
  const int length_bytes = major == 1 ? 2 : 4;
  for (int b = 0; b < length_bytes; ++b) out += char((n >> (8 * b)) & 0xFF);
  return out + header + data;
}

std::string float_bytes(std::initializer_list<float> values) {
  std::string out;
  for (float v : values) out.append(reinterpret_cast<const char*>(&v), sizeof v);
  return out;
}

// ---- files written by NumPy ----

TEST(NpyFixtures, ReadsFloat32Matrix) {
  const Tensor t = read_npy(fixture("f32_2x3.npy"));
  EXPECT_EQ(t.shape(), Shape({2, 3}));
  EXPECT_EQ(t.dtype(), DType::Float32);
  EXPECT_EQ(testing::host_values(t), arange(6, 1.0, -2.5));
}

// A test program moved off its source tree (the GPU run kit's bundle, docs/gpu_kit.md) finds the
// fixtures where MINITRAIN_TEST_DATA_DIR says, and the source tree's when it is unset or empty.
TEST(NpyFixtures, FoundThroughMinitrainTestDataDirWhenMoved) {
  const std::string source_tree = fixture("f32_2x3.npy");
  ScratchDir dir;
  std::filesystem::copy_file(source_tree, dir.path("f32_2x3.npy"));
  ASSERT_EQ(::setenv("MINITRAIN_TEST_DATA_DIR", dir.path("").c_str(), 1), 0);
  const std::string moved = fixture("f32_2x3.npy");
  const Tensor t = read_npy(moved);
  ::setenv("MINITRAIN_TEST_DATA_DIR", "", 1);
  const std::string empty = fixture("f32_2x3.npy");
  ::unsetenv("MINITRAIN_TEST_DATA_DIR");
  EXPECT_EQ(moved, dir.path("") + "/f32_2x3.npy");
  EXPECT_EQ(testing::host_values(t), arange(6, 1.0, -2.5));
  EXPECT_EQ(empty, source_tree);
  EXPECT_EQ(fixture("f32_2x3.npy"), source_tree);
}

TEST(NpyFixtures, ReadsFloat64Vector) {
  const Tensor t = read_npy(fixture("f64_5.npy"));
  EXPECT_EQ(t.shape(), Shape({5}));
  EXPECT_EQ(t.dtype(), DType::Float64);
  EXPECT_EQ(testing::host_values(t), arange(5, 0.25, 0.0));
}

TEST(NpyFixtures, ReadsZeroDimAndEmptyArrays) {
  const Tensor scalar = read_npy(fixture("f32_scalar.npy"));
  EXPECT_EQ(scalar.ndim(), 0);
  EXPECT_EQ(scalar.item(), 3.25);
  const Tensor empty = read_npy(fixture("f32_empty_0x3.npy"));
  EXPECT_EQ(empty.shape(), Shape({0, 3}));
  EXPECT_EQ(empty.numel(), 0);
}

TEST(NpyFixtures, SwapsBigEndianData) {
  const Tensor f = read_npy(fixture("f32_be_3x2.npy"));
  EXPECT_EQ(f.shape(), Shape({3, 2}));
  EXPECT_EQ(f.dtype(), DType::Float32);
  EXPECT_EQ(testing::host_values(f), arange(6, 1.0, 0.5));
  const Tensor d = read_npy(fixture("f64_be_4.npy"));
  EXPECT_EQ(d.dtype(), DType::Float64);
  EXPECT_EQ(testing::host_values(d), arange(4, 1.0, -1.25));
}

TEST(NpyFixtures, ReadsVersion2And3Headers) {
  for (const char* name : {"f32_v2_4.npy", "f32_v3_4.npy"}) {
    SCOPED_TRACE(name);
    const Tensor t = read_npy(fixture(name));
    EXPECT_EQ(t.shape(), Shape({4}));
    EXPECT_EQ(testing::host_values(t), arange(4, 2.0, 0.0));
  }
}

TEST(NpyFixtures, RejectsFortranOrderWithAdvice) {
  expect_error<IoError>([] { read_npy(fixture("f32_fortran_2x3.npy")); },
                        {"f32_fortran_2x3.npy", "Fortran", "np.ascontiguousarray"});
}

TEST(NpyFixtures, RejectsIntegerArrayWithAdvice) {
  expect_error<IoError>([] { read_npy(fixture("i64_4.npy")); },
                        {"i64_4.npy", "int64", "'<i8'", "x.astype(np.float32)"});
}

// ---- writing ----

TEST(NpyWrite, MatchesNumpyByteForByte) {
  ScratchDir dir;
  const std::vector<std::pair<const char*, Tensor>> cases = {
      {"f32_2x3.npy",
       Tensor::from_vector(std::vector<float>{-2.5f, -1.5f, -.5f, .5f, 1.5f, 2.5f}, {2, 3})},
      {"f64_5.npy", Tensor::from_vector(arange(5, 0.25, 0.0), {5})},
      {"f32_scalar.npy", Tensor::from_vector(std::vector<float>{3.25f}, Shape())},
      {"f32_empty_0x3.npy", Tensor::zeros({0, 3})},
  };
  for (const auto& [name, t] : cases) {
    SCOPED_TRACE(name);
    write_npy(dir.path(name), t);
    EXPECT_EQ(read_file_bytes(dir.path(name)), read_file_bytes(fixture(name)));
  }
}

TEST(NpyWrite, UsesVersion2WhenTheHeaderOutgrows64KiB) {
  // Only a huge shape tuple needs it: 30000 dims of extent 1 is ~90 KB of "1, ".
  ScratchDir dir;
  const Tensor t =
      Tensor::from_vector(std::vector<float>{7.f}, Shape(std::vector<int64_t>(30000, 1)));
  write_npy(dir.path("big.npy"), t);
  const std::string bytes = read_file_bytes(dir.path("big.npy"));
  EXPECT_EQ(bytes[6], 2);
  EXPECT_EQ((bytes.size() - 4) % 64, 0u);  // the data starts on a 64-byte boundary
  const Tensor back = read_npy(dir.path("big.npy"));
  EXPECT_EQ(back.shape(), t.shape());
  EXPECT_EQ(back.item(), 7.0);
}

TEST(NpyWrite, UndefinedTensorLeavesExistingFileUntouched) {
  ScratchDir dir;
  const std::string p = dir.path("x.npy");
  write_npy(p, Tensor::from_vector(std::vector<float>{1.f, 2.f}, {2}));
  const std::string before = read_file_bytes(p);
  expect_error<ValueError>([&] { write_npy(p, Tensor()); }, {"x.npy", "undefined"});
  EXPECT_EQ(read_file_bytes(p), before);
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"x.npy"});
}

TEST(NpyWrite, MissingDirectoryIsAnIoErrorNamingThePath) {
  ScratchDir dir;
  const std::string p = dir.path("no/such/dir/x.npy");
  expect_error<IoError>([&] { write_npy(p, Tensor::zeros({2})); },
                        {p, "No such file or directory"});
}

// ---- round trips on every device ----

class NpyRoundTrip : public testing::DeviceTest {};

TEST_P(NpyRoundTrip, PreservesBitsShapeAndType) {
  ScratchDir dir;
  const std::vector<Tensor> cases = {
      testing::random_tensor({7, 13}, 1, device()),
      testing::random_tensor({3, 1, 5}, 2, device(), DType::Float64),
      testing::random_tensor({1}, 3, device()),
      testing::random_tensor(Shape(), 4, device(), DType::Float64),
      Tensor::zeros({0, 3}, DType::Float32, device()),
      testing::random_tensor({2, 0, 4}, 5, device(), DType::Float64),
  };
  for (const Tensor& t : cases) {
    SCOPED_TRACE(t.shape().str() + " " + dtype_name(t.dtype()));
    const std::string p = dir.path("t.npy");
    write_npy(p, t);
    EXPECT_EQ((read_file_bytes(p).size() - t.nbytes()) % 64, 0u);  // 64-byte aligned data
    const Tensor back = read_npy(p, device());
    EXPECT_EQ(back.device(), device());
    EXPECT_EQ(back.shape(), t.shape());
    EXPECT_EQ(back.dtype(), t.dtype());
    EXPECT_EQ(tensor_bytes(back), tensor_bytes(t));
  }
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"t.npy"});  // no temporaries left
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(NpyRoundTrip);

// ---- malformed files ----

TEST(NpyMalformed, MissingFileNamesPathAndReason) {
  expect_error<IoError>([] { read_npy("/nonexistent/x.npy"); },
                        {"cannot open '/nonexistent/x.npy'", "No such file or directory"});
}

TEST(NpyMalformed, RejectsBadMagicVersionAndHeaderLength) {
  ScratchDir dir;
  const std::string good = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\n";
  const std::string one = float_bytes({1.f});
  std::string bad_magic = npy_bytes(good, one);
  bad_magic[1] = 'X';
  std::string v4 = npy_bytes(good, one);
  v4[6] = 4;
  std::string v1_1 = npy_bytes(good, one);
  v1_1[7] = 1;
  std::string long_header = npy_bytes(good, one);
  long_header[8] = char(0xFF);  // header length 0x..FF, past the end
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"\x93NUM", "not a .npy file"},
      {bad_magic, "not a .npy file"},
      {v4, "unsupported .npy format version 4.0"},
      {v1_1, "unsupported .npy format version 1.1"},
      {long_header, "runs past the end of the file"},
      {npy_bytes(good, one, 2).substr(0, 11), "ends inside the header length"},
  };
  for (const auto& [bytes, message] : cases) {
    SCOPED_TRACE(message);
    const std::string p = dir.write_raw("bad.npy", bytes);
    expect_error<IoError>([&] { read_npy(p); }, {"bad.npy", message});
  }
}

TEST(NpyMalformed, RejectsBadHeaderDicts) {
  ScratchDir dir;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"['descr', '<f4']", "expected the header to start with '{'"},
      {"{'descr': '<f4', 'fortran_order': False}", "no 'shape' key"},
      {"{'descr': '<f4', 'shape': (1,)}", "no 'fortran_order' key"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}",
       "unexpected key 'extra'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}",
       "duplicate key 'descr'"},
      {"{'descr' '<f4', 'fortran_order': False, 'shape': (1,)}", "expected ':'"},
      {"{'descr': '<f4 , 'fortran_order': False, 'shape': (1,)}", "expected ',' or '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x", "unexpected text after"},
      {"{'descr': '<f4', 'fortran_order': false, 'shape': (1,)}", "expected a string, integer"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [1]}", "'shape' must be a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1)}", "'shape' must be a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}",
       "shape entry 0 is -1 (negative)"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2.5)}", "not a float"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (True,)}", "shape entry 0 is a bool"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}",
       "integer too large"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}",
       "'fortran_order' must be True or False"},
      {"{'descr': 4, 'fortran_order': False, 'shape': (1,)}", "'descr' must be a string"},
      {"{'descr': '<x4', 'fortran_order': False, 'shape': (1,)}", "unsupported descr '<x4'"},
      {"{'descr': '<f2', 'fortran_order': False, 'shape': (1,)}", "float16"},
      {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", "structured array"},
      {"{'descr': '<f4\\n', 'fortran_order': False, 'shape': (1,)}", "escape sequences"},
      {"{'descr': '<f4", "unterminated string"},
      // Hostile: a digit run that used to overflow atoi(size) * 8, and nesting that used to
      // recurse until the stack overflowed (15,000 levels crashed the reader).
      {"{'descr': '<f4611686018427387904', 'fortran_order': False, 'shape': (1,)}",
       "unsupported descr '<f4611686018427387904'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': " + std::string(15000, '['),
       "nested more than 32 deep"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': " + std::string(33, '(') +
           std::string(33, ')') + "}",
       "nested more than 32 deep"},
  };
  for (const auto& [header, message] : cases) {
    SCOPED_TRACE(header);
    const std::string p = dir.write_raw("bad.npy", npy_bytes(header + "\n", float_bytes({1.f})));
    expect_error<IoError>([&] { read_npy(p); }, {"bad.npy", message});
  }
}

TEST(NpyMalformed, FortranOrderIsHarmlessBelowTwoDims) {
  // Fortran and C order are the same bytes for 0-d and 1-d arrays; NumPy itself never writes this.
  ScratchDir dir;
  const std::string p =
      dir.write_raw("f.npy", npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }\n",
                                       float_bytes({1.f, 2.f})));
  EXPECT_EQ(testing::host_values(read_npy(p)), (std::vector<double>{1.0, 2.0}));
}

TEST(NpyMalformed, RejectsTruncatedAndTrailingData) {
  ScratchDir dir;
  const std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }\n";
  const std::string four = float_bytes({1.f, 2.f, 3.f, 4.f});
  const std::string shorter = dir.write_raw("short.npy", npy_bytes(header, four.substr(0, 15)));
  expect_error<IoError>([&] { read_npy(shorter); },
                        {"short.npy", "truncated", "[2, 2]", "16", "15"});
  const std::string longer = dir.write_raw("long.npy", npy_bytes(header, four + "x"));
  expect_error<IoError>([&] { read_npy(longer); }, {"long.npy", "1 trailing bytes", "16"});
  // Exactly right reads.
  const std::string exact = dir.write_raw("exact.npy", npy_bytes(header, four));
  EXPECT_EQ(testing::host_values(read_npy(exact)), (std::vector<double>{1, 2, 3, 4}));
}

TEST(NpyMalformed, RejectsShapesTooLargeToAddress) {
  ScratchDir dir;
  const std::string p =
      dir.write_raw("huge.npy", npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': "
                                          "(4294967296, 4294967296), }\n",
                                          ""));
  expect_error<IoError>([&] { read_npy(p); }, {"huge.npy", "too large"});
  // A byte count that wraps int64 (but not uint64) once multiplied by the item size.
  const std::string q =
      dir.write_raw("wrap.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': "
                                          "(4611686018427387904, 1), }\n",
                                          ""));
  expect_error<IoError>([&] { read_npy(q); },
                        {"wrap.npy", "[4611686018427387904, 1]", "too large to address"});
}

TEST(NpyMalformed, NestingUpToTheLimitStillParses) {
  // 32 levels is the bound: a shape nested that deep is a wrong shape, not a parse error.
  ScratchDir dir;
  const std::string p =
      dir.write_raw("deep.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': " +
                                              std::string(31, '[') + std::string(31, ']') + "}\n",
                                          ""));
  expect_error<IoError>([&] { read_npy(p); }, {"'shape' must be a tuple"});
}

}  // namespace
}  // namespace minitrain
