// The update rules on small buffers, against their formulas worked by hand.
#include "optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace fmnist {
namespace {

TEST(Optimizer, SgdMomentumFollowsTheFormula) {
  SgdMomentum sgd(2, 0.1f, 0.9f);
  std::vector<float> p{1.0f, -2.0f};
  const std::vector<float> summed{4.0f, -8.0f};  // a sum over 4 rows: mean {1, -2}
  sgd.step(p, summed, 0.25f);                    // v = g
  EXPECT_FLOAT_EQ(p[0], 1.0f - 0.1f * 1.0f);
  EXPECT_FLOAT_EQ(p[1], -2.0f + 0.1f * 2.0f);
  sgd.step(p, summed, 0.25f);  // v = 0.9 g + g
  EXPECT_FLOAT_EQ(p[0], 0.9f - 0.1f * 1.9f);
  EXPECT_FLOAT_EQ(p[1], -1.8f + 0.1f * 3.8f);
}

// Adam's first step moves every parameter by lr against the sign of its gradient.
TEST(Optimizer, AdamFirstStepIsLrTimesSign) {
  Adam adam(3, 0.01f);
  std::vector<float> p{0.0f, 0.0f, 1.0f};
  adam.step(p, std::vector<float>{2.0f, -0.5f, 1e-3f}, 0.5f);
  EXPECT_NEAR(p[0], -0.01f, 1e-6f);
  EXPECT_NEAR(p[1], 0.01f, 1e-6f);
  EXPECT_NEAR(p[2], 1.0f - 0.01f, 1e-5f);
}

TEST(Optimizer, MakeByName) {
  EXPECT_NE(dynamic_cast<SgdMomentum*>(make_optimizer("sgd", 1, 0.1f, 0.9f).get()), nullptr);
  EXPECT_NE(dynamic_cast<Adam*>(make_optimizer("adam", 1, 0.1f, 0.9f).get()), nullptr);
  EXPECT_THROW(make_optimizer("lbfgs", 1, 0.1f, 0.9f), std::invalid_argument);
}

}  // namespace
}  // namespace fmnist
