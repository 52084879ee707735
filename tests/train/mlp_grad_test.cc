// The MLP's backward pass against central finite differences (in double, where they are
// accurate to ~1e-10), and the properties data-parallel training relies on.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "mlp.h"

namespace fmnist {
namespace {

template <class Scalar>
RowMatrix<Scalar> random_batch(int rows, int cols, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  RowMatrix<Scalar> x(rows, cols);
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = static_cast<Scalar>(u(rng));
  return x;
}

// Every parameter random, biases included, so that no bias gradient is trivially checked.
template <class Scalar>
void randomize(Mlp<Scalar>& net, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n(0.0, 0.5);
  for (Scalar& p : net.params()) p = static_cast<Scalar>(n(rng));
}

double loss(Mlp<double>& net, const RowMatrix<double>& x, const std::vector<std::uint8_t>& y) {
  return net.evaluate(x, y).loss_sum;
}

TEST(MlpGradient, MatchesCentralDifferences) {
  Mlp<double> net({6, 5, 4, 3});
  randomize(net, 11);
  const RowMatrix<double> x = random_batch<double>(7, 6, 12);
  const std::vector<std::uint8_t> y{0, 1, 2, 2, 1, 0, 1};
  std::vector<double> grad(net.num_params());
  const BatchStats stats = net.loss_and_gradient(x, y, grad);
  EXPECT_EQ(stats.count, 7);
  EXPECT_NEAR(stats.loss_sum, loss(net, x, y), 1e-12);

  constexpr double h = 1e-5;
  int checked = 0;
  for (std::size_t i = 0; i < net.num_params(); ++i) {
    double& p = net.params()[i];
    const double saved = p;
    p = saved + h;
    const double up = loss(net, x, y);
    p = saved - h;
    const double down = loss(net, x, y);
    p = saved;
    const double numeric = (up - down) / (2 * h);
    ASSERT_NEAR(grad[i], numeric, 1e-7 * std::max(1.0, std::abs(numeric)))
        << "parameter " << i << " of " << net.num_params();
    ++checked;
  }
  EXPECT_EQ(checked, 6 * 5 + 5 + 5 * 4 + 4 + 4 * 3 + 3);
}

// The float network of the example computes the same gradient as the double one.
TEST(MlpGradient, FloatAgreesWithDouble) {
  Mlp<double> d({20, 16, 12, 10});
  Mlp<float> f({20, 16, 12, 10});
  randomize(d, 21);
  for (std::size_t i = 0; i < d.num_params(); ++i)
    f.params()[i] = static_cast<float>(d.params()[i]);
  const RowMatrix<double> xd = random_batch<double>(9, 20, 22);
  const RowMatrix<float> xf = xd.cast<float>();
  const std::vector<std::uint8_t> y{0, 1, 2, 3, 4, 5, 6, 7, 9};
  std::vector<double> gd(d.num_params());
  std::vector<float> gf(f.num_params());
  const BatchStats sd = d.loss_and_gradient(xd, y, gd);
  const BatchStats sf = f.loss_and_gradient(xf, y, gf);
  EXPECT_NEAR(sf.loss_sum, sd.loss_sum, 1e-4 * std::abs(sd.loss_sum));
  EXPECT_EQ(sf.correct, sd.correct);
  double scale = 0;
  for (double g : gd) scale = std::max(scale, std::abs(g));
  for (std::size_t i = 0; i < gd.size(); ++i) {
    ASSERT_NEAR(gf[i], gd[i], 1e-4 * scale) << "parameter " << i;
  }
}

// The summed-loss gradient of a batch is the sum over any split of its rows: what makes one
// all_reduce(sum) of the ranks' gradients equal to the single-rank gradient.
TEST(MlpGradient, AddsOverRowSplits) {
  Mlp<double> net({8, 6, 4});
  randomize(net, 31);
  const RowMatrix<double> x = random_batch<double>(10, 8, 32);
  const std::vector<std::uint8_t> y{0, 1, 2, 3, 0, 1, 2, 3, 0, 1};
  std::vector<double> whole(net.num_params()), a(net.num_params()), b(net.num_params());
  const BatchStats sw = net.loss_and_gradient(x, y, whole);
  const RowMatrix<double> top = x.topRows(3), bottom = x.bottomRows(7);
  const BatchStats sa =
      net.loss_and_gradient(top, std::vector<std::uint8_t>(y.begin(), y.begin() + 3), a);
  const BatchStats sb =
      net.loss_and_gradient(bottom, std::vector<std::uint8_t>(y.begin() + 3, y.end()), b);
  EXPECT_NEAR(sa.loss_sum + sb.loss_sum, sw.loss_sum, 1e-12);
  EXPECT_EQ(sa.correct + sb.correct, sw.correct);
  for (std::size_t i = 0; i < whole.size(); ++i) ASSERT_NEAR(a[i] + b[i], whole[i], 1e-12) << i;
}

TEST(MlpGradient, EmptyBatchGivesZero) {
  Mlp<float> net({4, 3, 2});
  net.init(1);
  std::vector<float> grad(net.num_params(), 7.0f);
  const BatchStats s = net.loss_and_gradient(RowMatrix<float>(0, 4), {}, grad);
  EXPECT_EQ(s.count, 0);
  for (float g : grad) ASSERT_EQ(g, 0.0f);
}

// All-zero parameters: uniform softmax, loss log(10) per row.
TEST(MlpLoss, UniformAtZero) {
  Mlp<float> net({784, 256, 128, 10});
  EXPECT_EQ(net.num_params(), std::size_t{784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10});
  const RowMatrix<float> x = random_batch<float>(5, 784, 41);
  const BatchStats s = net.evaluate(x, std::vector<std::uint8_t>{1, 2, 3, 4, 5});
  EXPECT_NEAR(s.loss_sum, 5 * std::log(10.0), 1e-4);
}

}  // namespace
}  // namespace fmnist
