// Accuracy counts: argmax's tie rule, top-k, ignored rows, on hand-made logits.

#include <gtest/gtest.h>

#include <vector>

#include "train/class_metrics.h"

namespace minitrain {
namespace {

TEST(ClassMetrics, CountsTopOneAndTopKWithArgmaxTies) {
  // Row 0: label 2 is the max. Row 1: label 0 is second. Row 2: a tie between 0 and 1, label 1
  // loses it (argmax takes the first). Row 3: ignored. Row 4: label 1 is last of three.
  const Tensor logits =
      Tensor::from_vector(std::vector<float>{0, 1, 5, 3, 4, 0, 2, 2, 1, 9, 9, 9, 3, 1, 2}, {5, 3});
  const Tensor labels = Tensor::from_vector(std::vector<float>{2, 0, 1, -100, 1}, {5});
  const ClassCounts top2 = count_correct(logits, labels, 2, -100);
  EXPECT_EQ(top2.counted, 4);
  EXPECT_EQ(top2.correct, 1);       // row 0
  EXPECT_EQ(top2.topk_correct, 3);  // rows 0, 1, 2
  const ClassCounts top3 = count_correct(logits, labels, 3, -100);
  EXPECT_EQ(top3.topk_correct, 4);
  // Label 0 in the tied row wins the tie, as torch.argmax gives 0.
  const ClassCounts tie =
      count_correct(logits.narrow(2, 1), Tensor::from_vector(std::vector<float>{0}, {1}), 1, -100);
  EXPECT_EQ(tie.correct, 1);
}

TEST(ClassMetrics, ShapesThatDoNotFitAreAShapeError) {
  EXPECT_THROW(count_correct(Tensor::zeros({4, 3}), Tensor::zeros({3}), 1, -100), ShapeError);
  EXPECT_THROW(count_correct(Tensor::zeros({4}), Tensor::zeros({4}), 1, -100), ShapeError);
}

}  // namespace
}  // namespace minitrain
