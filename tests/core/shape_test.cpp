#include <gtest/gtest.h>

#include "core/error.h"
#include "core/shape.h"

namespace minitrain {
namespace {

TEST(Shape, NumelAndNdim) {
  EXPECT_EQ(Shape({}).numel(), 1);  // 0-d holds one element
  EXPECT_EQ(Shape({}).ndim(), 0);
  EXPECT_EQ(Shape({3, 0, 5}).numel(), 0);
  EXPECT_EQ(Shape({7, 13}).numel(), 91);
  EXPECT_EQ(Shape({7, 13}).ndim(), 2);
}

TEST(Shape, IndexesFromBothEnds) {
  const Shape s{2, 3, 4};
  EXPECT_EQ(s[0], 2);
  EXPECT_EQ(s[-1], 4);
  EXPECT_EQ(s[-3], 2);
  EXPECT_THROW(s[3], ShapeError);
  EXPECT_THROW(s[-4], ShapeError);
}

TEST(Shape, AnElementCountBeyond64BitsIsAValueErrorNamingTheShape) {
  // 4 x 2^62 wrapped to 0 before: a tiny block the initialiser then overran.
  try {
    Shape({4, int64_t{1} << 62, 1});
    FAIL() << "no error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("[4, 4611686018427387904, 1]"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(Shape({int64_t{1} << 62, 0}).numel(), 0);  // a zero extent: no overflow
  EXPECT_EQ(Shape({int64_t{1} << 31, int64_t{1} << 31}).numel(), int64_t{1} << 62);
  EXPECT_EQ(dims_str({-1, int64_t{1} << 62}), "[-1, 4611686018427387904]");  // no validation
}

TEST(Excerpt, CutsLongTextAtACharacterBoundary) {
  EXPECT_EQ(excerpt("short", 80), "short");
  EXPECT_EQ(excerpt(std::string(100, 'k'), 80), std::string(80, 'k') + "...");
  // "ab" then a 2-byte character (é): a cut at 3 bytes would split it, so it moves back to 2.
  EXPECT_EQ(excerpt("ab\xc3\xa9"
                    "cdef",
                    3),
            "ab...");
  EXPECT_EQ(excerpt("ab\xc3\xa9"
                    "cdef",
                    4),
            "ab\xc3\xa9"
            "...");
}

TEST(Shape, PrintsLikeAList) {
  EXPECT_EQ(Shape({32, 7}).str(), "[32, 7]");
  EXPECT_EQ(Shape({}).str(), "[]");
}

TEST(Shape, RejectsNegativeExtents) {
  try {
    Shape s{3, -2};
    FAIL() << "no error for " << s;
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("-2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace minitrain
