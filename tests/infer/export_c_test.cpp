// `minitrain export --format c` as a library call (infer/export_c.h): names that are not C
// identifiers, string literals that must survive any class name, and outputs that must not be
// half-written or clobber the weights. Compiling the C and comparing it with predict is
// tests/tools/export_check.py's job.

#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "nn/mlp.h"
#include "nn/state_dict.h"
#include "tests/core/io_test_util.h"
#include "tests/support/test_util.h"
#include "infer/export_c.h"

namespace minitrain {
namespace {

using testing::ScratchDir;
namespace fs = std::filesystem;

TEST(ExportC, StringLiteralsEscapeEverythingCWouldReadOtherwise) {
  EXPECT_EQ(c_string_literal("red"), "\"red\"");
  EXPECT_EQ(c_string_literal("a,b"), "\"a,b\"");
  EXPECT_EQ(c_string_literal("say \"hi\""), "\"say \\\"hi\\\"\"");
  EXPECT_EQ(c_string_literal("back\\slash"), "\"back\\\\slash\"");
  // "??/" would be the trigraph for a backslash (written here as two literals for the same reason)
  EXPECT_EQ(c_string_literal("what?"
                             "?/"),
            "\"what\\?\\?/\"");
  EXPECT_EQ(c_string_literal("two\nlines\tand tab"), "\"two\\nlines\\tand tab\"");
  EXPECT_EQ(c_string_literal("caf\xc3\xa9"), "\"caf\\303\\251\"");
  EXPECT_EQ(c_string_literal(std::string("\x01") + "7"), "\"\\0017\"");  // 3 digits: 7 stays out
  EXPECT_EQ(c_string_literal(std::string(1, '\0')), "\"\\000\"");
}

TEST(ExportC, NamesMustBeCIdentifiers) {
  for (const char* ok : {"m", "minitrain_model", "_x9", "Model2"})
    EXPECT_NO_THROW(check_c_identifier(ok)) << ok;
  const std::pair<const char*, const char*> bad[] = {{"9x", "m_9x"},
                                                     {"", "m_"},
                                                     {"my-model", "my_model"},
                                                     {"a b", "a_b"},
                                                     {"caf\xc3\xa9", "caf__"}};
  for (const auto& [name, suggested] : bad)
    testing::expect_error<ValueError>([&] { check_c_identifier(name); },
                                      {"--name '" + std::string(name) + "' is not a C identifier",
                                       std::string("e.g. --name ") + suggested});
}

ExportCConfig saved_model(const ScratchDir& dir) {
  Generator gen(3);
  auto model = make_mlp({3, 5, 2}, Activation::Tanh, gen);
  save_weights(dir.path("w.safetensors"), *model, {{"model", "mlp:3,5,2"}, {"activation", "tanh"}});
  ExportCConfig c;
  c.weights = dir.path("w.safetensors");
  c.out_dir = dir.path("out");
  return c;
}

TEST(ExportC, WritesTheHeaderAndTheSourceWithTheModelsSymbols) {
  ScratchDir dir;
  ExportCConfig c = saved_model(dir);
  c.name = "tiny";
  const auto written = export_c(c);
  ASSERT_EQ(written.size(), 2u);
  const std::string h = read_file_bytes(dir.path("out/tiny.h"));
  const std::string src = read_file_bytes(dir.path("out/tiny.c"));
  EXPECT_NE(h.find("#define tiny_INPUTS 3"), std::string::npos) << h;
  EXPECT_NE(h.find("#define tiny_OUTPUTS 2"), std::string::npos) << h;
  EXPECT_NE(h.find("void tiny_forward(const float *x, float *y, long rows);"), std::string::npos);
  EXPECT_EQ(h.find("predict_class"), std::string::npos) << "a regression has no class";
  EXPECT_NE(src.find("static const float tiny_w0[15]"), std::string::npos) << src;
  EXPECT_NE(src.find("tanhf("), std::string::npos) << src;
}

TEST(ExportC, NothingIsWrittenWhenTheNameTheDirectoryOrTheWeightsAreWrong) {
  ScratchDir dir;
  ExportCConfig c = saved_model(dir);
  c.name = "9x";
  testing::expect_error<ValueError>([&] { export_c(c); }, {"--name '9x' is not a C identifier"});
  EXPECT_FALSE(fs::exists(c.out_dir));
  // An --out that is a file.
  c.name = "m";
  c.out_dir = dir.write_raw("plain", "x");
  testing::expect_error<IoError>([&] { export_c(c); }, {"exists and is not a directory"});
  // Weights without metadata name the missing field, and nothing appears.
  Generator gen(3);
  auto model = make_mlp({3, 5, 2}, Activation::Tanh, gen);
  save_weights(dir.path("bare.safetensors"), *model, {});
  c.weights = dir.path("bare.safetensors");
  c.out_dir = dir.path("out2");
  testing::expect_error<ValueError>([&] { export_c(c); }, {"no 'model' in its metadata"});
  EXPECT_FALSE(fs::exists(c.out_dir));
}

TEST(ExportC, RefusesToOverwriteTheWeights) {
  ScratchDir dir;
  ExportCConfig c = saved_model(dir);
  const std::string before = read_file_bytes(c.weights);
  // --name w with the weights renamed w.h: the header would be the weights file.
  fs::rename(c.weights, dir.path("w.h"));
  c.weights = dir.path("w.h");
  c.out_dir = dir.path("");
  c.name = "w";
  testing::expect_error<ValueError>([&] { export_c(c); }, {"is the --weights file", "overwrite"});
  EXPECT_EQ(read_file_bytes(c.weights), before);
}

}  // namespace
}  // namespace minitrain
