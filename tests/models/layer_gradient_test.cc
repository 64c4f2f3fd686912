// Every layer's backward against finite differences, on every device kind.
#include "gtest/gtest.h"
#include "tests/models/gradient_checker.h"
#include "tests/models/layer_specs.h"

namespace pstrain::testing {
namespace {

template <typename D>
class LayerGradientTest : public DeviceTest<D> {};
TYPED_TEST_SUITE(LayerGradientTest, AllDevices, DeviceNames);

TYPED_TEST(LayerGradientTest, Dense) {
  EXPECT_TRUE(LayerGradientsMatch(LayerSpec{"dense"}.Int("units", 5), this->ctx(), {{4, 7}}));
}

TYPED_TEST(LayerGradientTest, DenseFlattensFourDimensionalInput) {
  EXPECT_TRUE(LayerGradientsMatch(LayerSpec{"dense"}.Int("units", 3), this->ctx(), {{3, 2, 3, 4}}));
}

TYPED_TEST(LayerGradientTest, DenseBatchOfOne) {
  EXPECT_TRUE(LayerGradientsMatch(LayerSpec{"dense"}.Int("units", 4), this->ctx(), {{1, 6}}));
}

TYPED_TEST(LayerGradientTest, Relu) {
  GradientCheckOptions options;
  options.input_min_abs = 0.05;  // away from the kink at 0
  EXPECT_TRUE(LayerGradientsMatch(LayerSpec{"relu"}, this->ctx(), {{4, 9}}, options));
  EXPECT_TRUE(LayerGradientsMatch(LayerSpec{"relu"}, this->ctx(), {{2, 3, 4, 5}}, options));
}

TYPED_TEST(LayerGradientTest, Flatten) {
  EXPECT_TRUE(LayerGradientsMatch(LayerSpec{"flatten"}, this->ctx(), {{2, 3, 2, 2}}));
}

TYPED_TEST(LayerGradientTest, Add) {
  EXPECT_TRUE(LayerGradientsMatch(LayerSpec{"add"}, this->ctx(), {{3, 4}, {3, 4}, {3, 4}}));
}

// relu(x_0 + x_1), the end of a residual block (Layer::Fuse). The kink is
// where the sum is 0, which input_min_abs cannot keep away: a short step,
// and a draw (seed 2) with no sum within it.
TYPED_TEST(LayerGradientTest, AddWithFusedRelu) {
  GradientCheckOptions options;
  options.fuse_next = LayerSpec{"relu"};
  options.step = 1e-3;
  options.seed = 2;
  EXPECT_TRUE(LayerGradientsMatch(LayerSpec{"add"}, this->ctx(), {{2, 8, 3, 3}, {2, 8, 3, 3}}, options));
}

// ---- conv2d ----

TYPED_TEST(LayerGradientTest, Conv2dSamePaddingWithBias) {
  EXPECT_TRUE(LayerGradientsMatch(Conv(6, {3, 3}, {1, 1}, {1, 1}), this->ctx(), {{2, 4, 5, 5}}));
}

TYPED_TEST(LayerGradientTest, Conv2dStridedNoBias) {
  EXPECT_TRUE(LayerGradientsMatch(Conv(5, {3, 3}, {2, 2}, {1, 1}, 1, /*bias=*/0), this->ctx(), {{2, 3, 7, 6}}));
}

TYPED_TEST(LayerGradientTest, Conv2dRectangularKernelUnevenStridePadding) {
  EXPECT_TRUE(LayerGradientsMatch(Conv(4, {3, 2}, {2, 1}, {1, 0}), this->ctx(), {{2, 3, 6, 5}}));
}

TYPED_TEST(LayerGradientTest, Conv2dGroups) {
  EXPECT_TRUE(LayerGradientsMatch(Conv(6, {3, 3}, {1, 1}, {1, 1}, /*groups=*/2), this->ctx(), {{2, 4, 4, 4}}));
  EXPECT_TRUE(LayerGradientsMatch(Conv(4, {3, 3}, {1, 1}, {0, 0}, /*groups=*/4, 0), this->ctx(), {{2, 4, 5, 5}}));
}

TYPED_TEST(LayerGradientTest, Conv2dOneByOneWideChannels) {
  // 16 channels in and out: the blocked (nChw8c) formats on AVX2 CPUs.
  EXPECT_TRUE(LayerGradientsMatch(Conv(16, {1, 1}, {1, 1}, {0, 0}), this->ctx(), {{2, 16, 3, 3}}));
}

TYPED_TEST(LayerGradientTest, Conv2dDefaultsAndSingleIntAttributes) {
  EXPECT_TRUE(LayerGradientsMatch(LayerSpec{"conv2d"}.Int("filters", 3).Int("kernel", 2), this->ctx(), {{1, 2, 4, 3}}));
}

// ---- batch_norm (training mode: batch statistics) ----

TYPED_TEST(LayerGradientTest, BatchNormSpatial) {
  EXPECT_TRUE(LayerGradientsMatch(LayerSpec{"batch_norm"}, this->ctx(), {{4, 3, 3, 3}}));
}

TYPED_TEST(LayerGradientTest, BatchNormFeatures) {
  EXPECT_TRUE(LayerGradientsMatch(LayerSpec{"batch_norm"}.Float("epsilon", 1e-5), this->ctx(), {{8, 5}}));
}

TYPED_TEST(LayerGradientTest, BatchNormWideChannels) {
  EXPECT_TRUE(LayerGradientsMatch(LayerSpec{"batch_norm"}, this->ctx(), {{3, 16, 2, 2}}));
}

// ---- pooling ----

// Max pooling is piecewise linear: a small step keeps the finite differences
// from swapping two near-equal maxima (the loss is exact there anyway).
GradientCheckOptions MaxPoolOptions() {
  GradientCheckOptions options;
  options.step = 1e-3;
  return options;
}

TYPED_TEST(LayerGradientTest, MaxPoolNonOverlapping) {
  EXPECT_TRUE(LayerGradientsMatch(Pool("max_pool", 2, 2, 0), this->ctx(), {{2, 3, 4, 6}}, MaxPoolOptions()));
}

TYPED_TEST(LayerGradientTest, MaxPoolOverlappingPadded) {
  EXPECT_TRUE(LayerGradientsMatch(Pool("max_pool", 3, 2, 1), this->ctx(), {{2, 3, 7, 7}}, MaxPoolOptions()));
  EXPECT_TRUE(LayerGradientsMatch(Pool("max_pool", 3, 2, 0), this->ctx(), {{2, 2, 6, 6}}, MaxPoolOptions()));
}

TYPED_TEST(LayerGradientTest, AvgPool) {
  EXPECT_TRUE(LayerGradientsMatch(Pool("avg_pool", 2, 2, 0), this->ctx(), {{2, 3, 4, 4}}));
  EXPECT_TRUE(LayerGradientsMatch(Pool("avg_pool", 3, 2, 1), this->ctx(), {{2, 3, 6, 5}}));  // overlapping, padded
  EXPECT_TRUE(LayerGradientsMatch(Pool("avg_pool", 3, 1, 1), this->ctx(), {{1, 2, 4, 4}}));
}

TYPED_TEST(LayerGradientTest, GlobalAvgPool) {
  EXPECT_TRUE(LayerGradientsMatch(LayerSpec{"global_avg_pool"}, this->ctx(), {{2, 4, 3, 5}}));
}

// ---- lrn ----

TYPED_TEST(LayerGradientTest, LrnAlexNetParameters) {
  EXPECT_TRUE(LayerGradientsMatch(LayerSpec{"lrn"}.Float("k", 2.0), this->ctx(), {{2, 7, 3, 3}}));
}

TYPED_TEST(LayerGradientTest, LrnStronglyNonlinear) {
  // A large alpha makes the normalisation, not the identity, dominate.
  EXPECT_TRUE(
      LayerGradientsMatch(LayerSpec{"lrn"}.Int("size", 3).Float("alpha", 2.0).Float("beta", 0.75).Float("k", 1.0),
                          this->ctx(), {{2, 6, 2, 3}}));
}

// ---- concat ----

TYPED_TEST(LayerGradientTest, ConcatThreeInputs) {
  EXPECT_TRUE(LayerGradientsMatch(LayerSpec{"concat"}, this->ctx(), {{2, 2, 3, 3}, {2, 3, 3, 3}, {2, 1, 3, 3}}));
}

TYPED_TEST(LayerGradientTest, ConcatFeatures) {
  EXPECT_TRUE(LayerGradientsMatch(LayerSpec{"concat"}, this->ctx(), {{3, 4}, {3, 2}}));
}

// ---- dropout: with rate 0 the mask is all ones (the rest is in the
// device-specific tests, which check the mask itself) ----

TYPED_TEST(LayerGradientTest, DropoutRateZeroIsIdentity) {
  EXPECT_TRUE(LayerGradientsMatch(LayerSpec{"dropout"}.Float("rate", 0.0), this->ctx(), {{3, 2, 2, 2}}));
}

// ---- CPU-only layers of the sparse models (slice, dot_interaction): the
// cuda instantiation skips (they are unavailable there) ----

TYPED_TEST(LayerGradientTest, Slice) {
  if (TypeParam::kKind != DeviceKind::kCpu) GTEST_SKIP() << "slice is CPU only";
  // Middle, first and last columns; a 4-D input read as [N, K]. The garbage
  // the checker pre-fills catches columns left unwritten outside the slice.
  EXPECT_TRUE(LayerGradientsMatch(LayerSpec{"slice"}.Int("begin", 2).Int("size", 3), this->ctx(), {{3, 7}}));
  EXPECT_TRUE(LayerGradientsMatch(LayerSpec{"slice"}.Int("size", 4), this->ctx(), {{2, 1, 1, 6}}));
  EXPECT_TRUE(LayerGradientsMatch(LayerSpec{"slice"}.Int("begin", 5).Int("size", 1), this->ctx(), {{2, 6}}));
  EXPECT_TRUE(LayerGradientsMatch(LayerSpec{"slice"}.Int("begin", 0).Int("size", 6), this->ctx(), {{1, 2, 3}}));
}

TYPED_TEST(LayerGradientTest, DotInteraction) {
  if (TypeParam::kKind != DeviceKind::kCpu) GTEST_SKIP() << "dot_interaction is CPU only";
  EXPECT_TRUE(LayerGradientsMatch(LayerSpec{"dot_interaction"}.Int("features", 2), this->ctx(), {{3, 6}}));
  EXPECT_TRUE(LayerGradientsMatch(LayerSpec{"dot_interaction"}.Int("features", 4), this->ctx(), {{3, 12}}));
  EXPECT_TRUE(LayerGradientsMatch(LayerSpec{"dot_interaction"}.Int("features", 5), this->ctx(), {{2, 1, 1, 5}}));
}

TYPED_TEST(LayerGradientTest, SoftmaxCrossEntropy) {
  EXPECT_TRUE(LossGradientsMatch(this->ctx(), /*batch=*/5, /*classes=*/7));
  EXPECT_TRUE(LossGradientsMatch(this->ctx(), /*batch=*/1, /*classes=*/2));
}

// The checker itself must be able to fail: a wrong analytic gradient (relu
// across its kink, where finite differences see the slope change) is caught.
TYPED_TEST(LayerGradientTest, CheckerCatchesAWrongGradient) {
  GradientCheckOptions options;
  options.step = 0.5;  // straddles relu's kink for many inputs
  auto report = CheckLayerGradients(LayerSpec{"relu"}, this->ctx(), {{4, 16}}, options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_GT(report->max_relative_error, 0.1) << report->ToString();
  EXPECT_EQ(report->elements_checked, 64);
}

TYPED_TEST(LayerGradientTest, CheckerReportsSetupErrors) {
  auto report = CheckLayerGradients(LayerSpec{"dense"}, this->ctx(), {{2, 3}});  // no "units"
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pstrain::testing
