// safetensors: the hand-built spec fixtures (tests/fixtures/make_safetensors_fixtures.py) read
// correctly, minitrain writes the same bytes, round trips on every device keep order, bits and
// metadata, F16/BF16 widen exactly, and every malformed header gets an IoError naming the problem.

#include "core/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
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

// A safetensors file by hand: 8-byte little-endian header length, header, data.
std::string st_bytes(const std::string& header, const std::string& data) {
  std::string out;
  for (int b = 0; b < 8; ++b) out += char((uint64_t(header.size()) >> (8 * b)) & 0xFF);
  return out + header + data;
}

std::vector<std::string> names_of(const SafetensorsFile& f) {
  std::vector<std::string> names;
  for (const auto& [name, t] : f.tensors) names.push_back(name);
  return names;
}

// The fixture's value of element i in layer `layer`: (i + 1) * 0.25 * (layer + 1), weights
// alternate sign.
std::vector<double> mlp_values(int layer, int n, bool weight) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i)
    v.push_back((i + 1) * 0.25 * (layer + 1) * (weight && i % 2 ? -1 : 1));
  return v;
}

std::vector<std::pair<std::string, Tensor>> mlp_tensors() {
  auto f32 = [](const std::vector<double>& v, const Shape& s) {
    return Tensor::from_vector(std::vector<float>(v.begin(), v.end()), s);
  };
  return {{"0.weight", f32(mlp_values(0, 6, true), {2, 3})},
          {"0.bias", f32(mlp_values(0, 2, false), {2})},
          {"2.weight", f32(mlp_values(1, 2, true), {1, 2})},
          {"2.bias", f32(mlp_values(1, 1, false), {1})}};
}

// ---- the spec fixtures ----

TEST(SafetensorsFixture, ReadsMlpInFileOrderWithMetadata) {
  const SafetensorsFile f = read_safetensors(fixture("mlp_3_2_1.safetensors"));
  EXPECT_EQ(names_of(f), (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(f.at("0.weight").shape(), Shape({2, 3}));
  EXPECT_EQ(f.at("2.bias").shape(), Shape({1}));
  for (const auto& [name, want] : mlp_tensors()) {
    SCOPED_TRACE(name);
    EXPECT_EQ(f.at(name).dtype(), DType::Float32);
    EXPECT_EQ(testing::host_values(f.at(name)), testing::host_values(want));
  }
  EXPECT_EQ(f.metadata,
            (std::map<std::string, std::string>{{"format", "pt"}, {"note", "hand-built"}}));
}

TEST(SafetensorsFixture, WidensF16AndBf16ToFloat32) {
  const SafetensorsFile f = read_safetensors(fixture("dtypes.safetensors"));
  const std::vector<double> want = {-1.5, -0.5, 0.5, 1.5};
  EXPECT_EQ(f.at("f64").dtype(), DType::Float64);
  EXPECT_EQ(f.at("f32").shape(), Shape({2, 2}));
  for (const char* name : {"f64", "f32", "f16", "bf16"}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(testing::host_values(f.at(name)), want);
  }
  EXPECT_EQ(f.at("f16").dtype(), DType::Float32);
  EXPECT_EQ(f.at("bf16").dtype(), DType::Float32);
  EXPECT_EQ(f.at("bf16").shape(), Shape({2, 2}));
}

TEST(SafetensorsFixture, HalfPrecisionSpecialValuesWidenExactly) {
  ScratchDir dir;
  // F16: 1, -2, 65504 (max), 2^-24 (smallest subnormal), 2^-14 (smallest normal), -0, +inf, nan;
  // BF16: 1, -2.5, inf, 2^-133 (a subnormal float32).
  const std::vector<uint16_t> f16 = {0x3C00, 0xC000, 0x7BFF, 0x0001,
                                     0x0400, 0x8000, 0x7C00, 0x7E00};
  const std::vector<uint16_t> bf16 = {0x3F80, 0xC020, 0x7F80, 0x0001};
  std::string data(reinterpret_cast<const char*>(f16.data()), 16);
  data.append(reinterpret_cast<const char*>(bf16.data()), 8);
  const std::string p = dir.write_raw(
      "h.safetensors", st_bytes(R"({"h":{"dtype":"F16","shape":[8],"data_offsets":[0,16]},)"
                                R"("b":{"dtype":"BF16","shape":[4],"data_offsets":[16,24]}})",
                                data));
  const SafetensorsFile f = read_safetensors(p);
  const std::vector<float> h = f.at("h").to_vector<float>();
  EXPECT_EQ(h[0], 1.f);
  EXPECT_EQ(h[1], -2.f);
  EXPECT_EQ(h[2], 65504.f);
  EXPECT_EQ(h[3], std::ldexp(1.f, -24));
  EXPECT_EQ(h[4], std::ldexp(1.f, -14));
  EXPECT_TRUE(h[5] == 0.f && std::signbit(h[5]));
  EXPECT_EQ(h[6], std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(h[7]));
  const std::vector<float> b = f.at("b").to_vector<float>();
  EXPECT_EQ(b[0], 1.f);
  EXPECT_EQ(b[1], -2.5f);
  EXPECT_EQ(b[2], std::numeric_limits<float>::infinity());
  EXPECT_EQ(b[3], std::ldexp(1.f, -133));
}

// ---- writing ----

TEST(SafetensorsWrite, MatchesSpecFixtureByteForByte) {
  ScratchDir dir;
  write_safetensors(dir.path("mlp.safetensors"), mlp_tensors(), {{"note", "hand-built"}});
  EXPECT_EQ(read_file_bytes(dir.path("mlp.safetensors")),
            read_file_bytes(fixture("mlp_3_2_1.safetensors")));
}

TEST(SafetensorsWrite, RejectsBadArgumentsAndKeepsTheExistingFile) {
  ScratchDir dir;
  const std::string p = dir.path("w.safetensors");
  write_safetensors(p, mlp_tensors());
  const std::string before = read_file_bytes(p);
  const Tensor x = Tensor::zeros({2});
  expect_error<ValueError>(
      [&] {
        write_safetensors(p, {{"a", x}, {"b", x}, {"a", x}});
      },
      {"w.safetensors", "two tensors are named 'a'"});
  expect_error<ValueError>([&] { write_safetensors(p, {{"", x}}); }, {"empty name"});
  expect_error<ValueError>([&] { write_safetensors(p, {{"__metadata__", x}}); }, {"reserved"});
  expect_error<ValueError>([&] { write_safetensors(p, {{"w", Tensor()}}); }, {"'w' is undefined"});
  expect_error<ValueError>(
      [&] {
        write_safetensors(p, {{"w", x}}, {{"format", "np"}});
      },
      {"\"format\" is \"np\"", "\"pt\""});
  expect_error<ValueError>([&] { write_safetensors(p, {{"bad\xff", x}}); }, {"UTF-8"});
  EXPECT_EQ(read_file_bytes(p), before);
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"w.safetensors"});
}

TEST(SafetensorsWrite, HeaderIsPaddedAndCarriesFormatPt) {
  ScratchDir dir;
  for (int name_len = 1; name_len <= 8; ++name_len) {  // every header length modulo 8
    const std::string p = dir.path("a.safetensors");
    write_safetensors(p, {{std::string(name_len, 'w'), Tensor::zeros({3})}}, {{"step", "7"}});
    const std::string bytes = read_file_bytes(p);
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    EXPECT_EQ((8 + n) % 8, 0u);
    EXPECT_EQ(bytes.size(), 8 + n + 12);
    EXPECT_EQ(bytes.substr(8, 37), R"({"__metadata__":{"format":"pt","step")");
    EXPECT_EQ(read_safetensors(p).metadata.at("step"), "7");
  }
}

// ---- round trips on every device ----

class SafetensorsRoundTrip : public testing::DeviceTest {};

TEST_P(SafetensorsRoundTrip, KeepsOrderBitsShapesAndMetadata) {
  ScratchDir dir;
  const std::vector<std::pair<std::string, Tensor>> tensors = {
      {"z.weight", testing::random_tensor({7, 13}, 1, device())},
      {"empty", Tensor::zeros({0, 3}, DType::Float32, device())},
      {"a.double", testing::random_tensor({3, 1, 5}, 2, device(), DType::Float64)},
      {"also_empty", Tensor::zeros({4, 0}, DType::Float64, device())},
      {"scalar", testing::random_tensor(Shape(), 3, device())},
      {"m.odd", testing::random_tensor({1, 1, 1, 3}, 4, device())},
  };
  const std::string p = dir.path("w.safetensors");
  write_safetensors(p, tensors, {{"epoch", "3"}, {"ünïcode", "✓"}});
  const SafetensorsFile back = read_safetensors(p, device());
  ASSERT_EQ(back.tensors.size(), tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    SCOPED_TRACE(name);
    EXPECT_EQ(back.tensors[i].first, name);  // the order given, empty tensors included
    const Tensor& got = back.tensors[i].second;
    EXPECT_EQ(got.device(), device());
    EXPECT_EQ(got.shape(), t.shape());
    EXPECT_EQ(got.dtype(), t.dtype());
    EXPECT_EQ(tensor_bytes(got), tensor_bytes(t));
  }
  EXPECT_EQ(back.metadata, (std::map<std::string, std::string>{
                               {"epoch", "3"}, {"format", "pt"}, {"ünïcode", "✓"}}));
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"w.safetensors"});
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(SafetensorsRoundTrip);

TEST(SafetensorsRead, EmptyFileListAndMissingNames) {
  ScratchDir dir;
  write_safetensors(dir.path("e.safetensors"), {});
  const SafetensorsFile f = read_safetensors(dir.path("e.safetensors"));
  EXPECT_TRUE(f.tensors.empty());
  EXPECT_EQ(f.metadata.at("format"), "pt");
  const SafetensorsFile mlp = read_safetensors(fixture("mlp_3_2_1.safetensors"));
  expect_error<ValueError>([&] { mlp.at("1.weight"); }, {"'1.weight'", "0.weight, 0.bias"});
  expect_error<IoError>([] { read_safetensors("/nonexistent/w.safetensors"); },
                        {"cannot open '/nonexistent/w.safetensors'", "No such file or directory"});
}

// ---- malformed files ----

TEST(SafetensorsMalformed, RejectsBadFraming) {
  ScratchDir dir;
  std::string huge(8, '\0');
  huge[4] = 1;  // 2^32: over the 100 MB limit
  const std::string ok = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  std::string past_end = st_bytes(ok, "abcd");
  past_end[0] = char(0xF0);  // a header length beyond the file
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"1234567", "7 bytes"},
      {huge, "over the 100 MB limit"},
      {past_end, "header length 240 runs past the end of the file"},
      {st_bytes("", ""), "does not start with '{'"},
      {st_bytes(" {}", ""), "does not start with '{'"},
      {st_bytes(R"({"a": )", ""), "not valid JSON"},
      {st_bytes("{} x", ""), "not valid JSON"},
      {st_bytes(R"({"a":1,"a":2})", ""), "the key \"a\" twice"},
      {st_bytes(R"({"a":{"dtype":"F32","dtype":"F32","shape":[],"data_offsets":[0,4]}})", "abcd"),
       "the key \"dtype\" twice"},
  };
  for (const auto& [bytes, message] : cases) {
    SCOPED_TRACE(message);
    const std::string p = dir.write_raw("bad.safetensors", bytes);
    expect_error<IoError>([&] { read_safetensors(p); }, {"bad.safetensors", message});
  }
  // Trailing spaces after the JSON are padding, not an error.
  const std::string padded = dir.write_raw("ok.safetensors", st_bytes(ok + "   ", "abcd"));
  EXPECT_EQ(read_safetensors(padded).tensors.size(), 1u);
}

TEST(SafetensorsMalformed, RejectsBadEntries) {
  ScratchDir dir;
  auto entry = [](const std::string& body) { return R"({"t":)" + body + "}"; };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {entry("[1]"), "tensor 't' is described by [1]"},
      {entry(R"({"shape":[2],"data_offsets":[0,8]})"), "tensor 't' has no \"dtype\""},
      {entry(R"({"dtype":"F32","data_offsets":[0,8]})"), "has no \"shape\""},
      {entry(R"({"dtype":"F32","shape":[2]})"), "has no \"data_offsets\""},
      {entry(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1})"), "unknown field \"x\""},
      {entry(R"({"dtype":32,"shape":[2],"data_offsets":[0,8]})"), "dtype 32, not a string"},
      {entry(R"({"dtype":"I64","shape":[1],"data_offsets":[0,8]})"), "dtype 'I64'"},
      {entry(R"({"dtype":"XYZ","shape":[2],"data_offsets":[0,8]})"), "dtype 'XYZ'"},
      {entry(R"({"dtype":"F32","shape":2,"data_offsets":[0,8]})"), "shape 2, not a list"},
      {entry(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})"), "shape[0] = -2 (negative)"},
      {entry(R"({"dtype":"F32","shape":[2.0],"data_offsets":[0,8]})"), "shape[0] = 2.0"},
      {entry(R"({"dtype":"F32","shape":["2"],"data_offsets":[0,8]})"), "shape[0] = \"2\""},
      {entry(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8,8]})"), "not a list [begin, end]"},
      {entry(R"({"dtype":"F32","shape":[2],"data_offsets":[-1,8]})"), "data_offsets[0] = -1"},
      {entry(R"({"dtype":"F32","shape":[0],"data_offsets":[8,0]})"), "[8, 0] with begin > end"},
      {entry(R"({"dtype":"F32","shape":[4],"data_offsets":[0,16]})"),
       "beyond the data buffer (8 bytes)"},
      {entry(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})"),
       "[0, 8] (8 bytes) but shape [3] of F32 needs 12 bytes"},
      {entry(R"({"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]})"),
       "too large"},
      {R"({"__metadata__":[],"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
       "\"__metadata__\" is [], not an object"},
      {R"({"__metadata__":{"step":7},"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
       "__metadata__[\"step\"] is 7, not a string"},
      // A byte count that wraps int64 but not uint64.
      {entry(R"({"dtype":"F32","shape":[4611686018427387904,1],"data_offsets":[0,8]})"),
       "shape [4611686018427387904, 1], too large to address"},
      // Hostile nesting: 100,000 levels overflowed the stack in the dump() of the error message.
      {entry(std::string(100000, '[')), "nests objects and lists more than 16 deep"},
      {R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"t":{}})", "the key \"t\" twice"},
  };
  for (const auto& [header, message] : cases) {
    SCOPED_TRACE(header);
    const std::string p = dir.write_raw("bad.safetensors", st_bytes(header, std::string(8, '\0')));
    expect_error<IoError>([&] { read_safetensors(p); }, {"bad.safetensors", message});
  }
}

TEST(SafetensorsRead, ManyEmptyTensorsKeepTheHeaderOrder) {
  // Empty tensors share an offset, so the header's key order orders them; the header is no
  // longer parsed into an insertion-ordered map (quadratic: 200,000 entries took over a minute).
  ScratchDir dir;
  std::string header = "{";
  std::vector<std::string> names;
  for (int i = 0; i < 20000; ++i) {
    names.push_back("t" + std::to_string((i * 7919) % 20000));  // not sorted
    header += (i ? "," : "") +
              ("\"" + names.back() + R"(":{"dtype":"F32","shape":[0],"data_offsets":[0,0]})");
  }
  const std::string p = dir.write_raw("many.safetensors", st_bytes(header + "}", ""));
  EXPECT_EQ(names_of(read_safetensors(p)), names);
}

TEST(SafetensorsMalformed, RejectsOverlapsHolesAndUncoveredBytes) {
  ScratchDir dir;
  auto two = [](const std::string& a, const std::string& b) {
    return R"({"a":{"dtype":"F32","shape":[1],"data_offsets":)" + a +
           R"(},"b":{"dtype":"F32","shape":[1],"data_offsets":)" + b + "}}";
  };
  const std::vector<std::tuple<std::string, int, std::string>> cases = {
      {two("[0,4]", "[2,6]"), 8, "tensors 'a' [0, 4] and 'b' [2, 6] overlap"},
      {two("[0,4]", "[0,4]"), 8, "overlap"},
      {two("[4,8]", "[8,12]"), 12, "data bytes [0, 4) belong to no tensor"},
      {two("[0,4]", "[8,12]"), 12,
       "data bytes [4, 8) belong to no tensor (a hole before tensor 'b')"},
      {two("[0,4]", "[4,8]"), 10, "data bytes [8, 10) at the end of the file belong to no tensor"},
  };
  for (const auto& [header, size, message] : cases) {
    SCOPED_TRACE(header);
    const std::string p =
        dir.write_raw("bad.safetensors", st_bytes(header, std::string(size, '\0')));
    expect_error<IoError>([&] { read_safetensors(p); }, {"bad.safetensors", message});
  }
  // A quoted value is cut short: a 100 KB "dtype" is not copied into the message.
  const std::string long_dtype =
      dir.write_raw("long.safetensors", st_bytes(R"({"t":{"dtype":)" + std::string(100000, '7') +
                                                     R"(,"shape":[2],"data_offsets":[0,8]}})",
                                                 std::string(8, '\0')));
  try {
    read_safetensors(long_dtype);
    FAIL() << "no error";
  } catch (const IoError& e) {
    EXPECT_LT(std::string(e.what()).size(), 500u) << e.what();
  }
  // Tiled out of order in the header is fine: the data order wins.
  const std::string p =
      dir.write_raw("ok.safetensors", st_bytes(two("[4,8]", "[0,4]"), std::string(8, '\0')));
  EXPECT_EQ(names_of(read_safetensors(p)), (std::vector<std::string>{"b", "a"}));
}

}  // namespace
}  // namespace minitrain
