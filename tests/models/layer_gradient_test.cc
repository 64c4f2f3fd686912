// Every layer's backward against finite differences, on every device kind.
#include "gtest/gtest.h"
#include "tests/models/gradient_checker.h"

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
