#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/strings.h"

namespace minitrain {
namespace {

using ::testing::HasSubstr;
using Strings = std::vector<std::string>;

TEST(Strings, PrefixAndSuffix) {
  EXPECT_TRUE(ends_with("w.safetensors", ".safetensors"));
  EXPECT_TRUE(ends_with(".npy", ".npy"));
  EXPECT_FALSE(ends_with("npy", ".npy"));  // shorter than the suffix
  EXPECT_TRUE(ends_with("", ""));
  EXPECT_TRUE(starts_with("model.0.weight", "model."));
  EXPECT_FALSE(starts_with("mod", "model."));
  EXPECT_TRUE(starts_with("x", ""));
}

TEST(Strings, SplitKeepsEmptyItemsAndSpaces) {
  EXPECT_EQ(split("", ','), Strings{""});
  EXPECT_EQ(split("a", ','), Strings{"a"});
  EXPECT_EQ(split("a,b", ','), (Strings{"a", "b"}));
  EXPECT_EQ(split("a,", ','), (Strings{"a", ""}));  // a trailing comma is an empty last item
  EXPECT_EQ(split(",a,,b", ','), (Strings{"", "a", "", "b"}));
  EXPECT_EQ(split(" a , b", ','), (Strings{" a ", " b"}));  // no trimming
}

TEST(Strings, Join) {
  EXPECT_EQ(join(Strings{}, ", "), "");
  EXPECT_EQ(join(Strings{"relu"}, ", "), "relu");
  EXPECT_EQ(join(Strings{"sgd", "adam", "adamw"}, ", "), "sgd, adam, adamw");
  EXPECT_EQ(join(std::vector<int64_t>{4, 64, 1}, ","), "4,64,1");
  EXPECT_EQ(join(std::vector<int64_t>{-1}, ","), "-1");
}

TEST(Strings, BytesInTheLargestExactUnit) {
  EXPECT_EQ(bytes_str(0), "0 B");
  EXPECT_EQ(bytes_str(1000), "1000 B");
  EXPECT_EQ(bytes_str(1024), "1 KiB");
  EXPECT_EQ(bytes_str(3 * 1024 + 1), "3073 B");
  EXPECT_EQ(bytes_str(int64_t(25) << 20), "25 MiB");
  EXPECT_EQ(bytes_str((int64_t(1) << 20) + 1024), "1025 KiB");
  EXPECT_EQ(bytes_str(int64_t(4) << 30), "4096 MiB");  // as DDP's repr prints bucket_bytes
}

TEST(Strings, ParsesDeviceLists) {
  EXPECT_EQ(device_list_entries("cpu,cuda:1"), (Strings{"cpu", "cuda:1"}));
  const std::vector<Device> d = parse_device_list("cpu,cpu");
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0], Device::cpu());
  EXPECT_EQ(d[1], Device::cpu());
  EXPECT_EQ(parse_device_list("cuda:0,cuda:1")[1].index(), 1);  // parsing does not need a GPU
}

TEST(Strings, RejectsEmptyEntriesAndAutoNamingTheFlag) {
  for (const char* list : {"", "cpu,", ",cpu", "cpu,,cpu"}) {
    try {
      parse_device_list(list);
      ADD_FAILURE() << "accepted '" << list << "'";
    } catch (const ValueError& e) {
      EXPECT_EQ(std::string(e.what()).find(
                    "--devices '" + std::string(list) +
                    "': an empty entry; give a list like cpu,cpu or cuda:0,cuda:1"),
                0u)
          << e.what();
    }
  }
  try {
    device_list_entries("cpu,auto", "--stage-devices");
    ADD_FAILURE() << "accepted auto";
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("--stage-devices 'cpu,auto': name each device (cpu, cuda:N), not auto"));
  }
}

TEST(Strings, ABadDeviceNameIsTheDeviceErrorOfDeviceParse) {
  for (const char* list : {"cpu,gpu", "cpu, cpu"}) {  // a space is part of the name
    try {
      parse_device_list(list);
      ADD_FAILURE() << "accepted '" << list << "'";
    } catch (const DeviceError& e) {
      EXPECT_THAT(e.what(), HasSubstr("(expected cpu, cuda, cuda:N or auto)"));
    }
  }
  EXPECT_NO_THROW(device_list_entries("cpu,gpu"));  // entries are not device names yet
}

TEST(Strings, NonFiniteNumbersHaveNamesThatReadBack) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_STREQ(nonfinite_name(inf), "inf");
  EXPECT_STREQ(nonfinite_name(-inf), "-inf");
  EXPECT_STREQ(nonfinite_name(std::nan("")), "nan");
  EXPECT_EQ(nonfinite_value("inf"), inf);
  EXPECT_EQ(nonfinite_value("-inf"), -inf);
  EXPECT_TRUE(std::isnan(nonfinite_value("nan")));
  EXPECT_TRUE(std::isnan(nonfinite_value("")));  // a null without a name
}

// Issue 30: class names with commas, quotes and line breaks shifted predict's CSV columns.
// Issue 30: error messages and the config echo once showed --lr 16777217 as 1.67772e+07.
TEST(Strings, NumberTextIsTheShortestTextThatReadsBack) {
  EXPECT_EQ(number_text(16777217), "16777217");
  EXPECT_EQ(number_text(0.003), "0.003");
  EXPECT_EQ(number_text(0.1), "0.1");
  EXPECT_EQ(number_text(100000), "1e+05");  // shorter than 100000
  EXPECT_EQ(number_text(1e10), "1e+10");
  EXPECT_EQ(number_text(-0.5), "-0.5");
  EXPECT_EQ(number_text(0), "0");
  EXPECT_EQ(number_text(1e-8), "1e-08");
  EXPECT_EQ(number_text(1e-320), "1e-320");
  EXPECT_EQ(number_text(3e38), "3e+38");
  EXPECT_EQ(number_text(1.0000001), "1.0000001");
  for (const double v : {16777217.0, 0.1, 1.0 / 3, 6.02e23, 2.5e-7, -123.456})
    EXPECT_EQ(std::stod(number_text(v)), v) << number_text(v);
}

TEST(Strings, CsvFieldQuotesWhatAReaderWouldSplitOrTrim) {
  EXPECT_EQ(csv_field("setosa"), "setosa");
  EXPECT_EQ(csv_field(""), "");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_field("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(csv_field("cr\r"), "\"cr\r\"");
  EXPECT_EQ(csv_field(" padded"), "\" padded\"");
  EXPECT_EQ(csv_field("tab\t"), "\"tab\t\"");
}

}  // namespace
}  // namespace minitrain
