#include <gtest/gtest.h>

#include "core/bytes.h"
#include "core/error.h"

namespace minitrain {
namespace {

TEST(Bytes, FormatsWithBinaryUnits) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(uint64_t(3) << 30), "3.00 GiB");
}

TEST(Bytes, ParsesUnits) {
  EXPECT_EQ(parse_bytes("1000000"), 1000000u);
  EXPECT_EQ(parse_bytes("512MiB"), uint64_t(512) << 20);
  EXPECT_EQ(parse_bytes("4GiB"), uint64_t(4) << 30);
  EXPECT_EQ(parse_bytes("1.5 KiB"), 1536u);
  EXPECT_EQ(parse_bytes("2GB"), 2000000000u);
}

TEST(Bytes, RejectsNonsense) {
  EXPECT_THROW(parse_bytes(""), ValueError);
  EXPECT_THROW(parse_bytes("GiB"), ValueError);
  try {
    parse_bytes("4 parsecs");
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("parsecs"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace minitrain
