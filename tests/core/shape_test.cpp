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
