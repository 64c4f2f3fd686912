#include "optim/loss_scaler.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

LossScalingConfig Dynamic(float initial, int growth_interval) {
  LossScalingConfig config;
  config.set_mode(LossScalingConfig::dynamic);
  config.set_initial_scale(initial);
  config.set_growth_interval(growth_interval);
  return config;
}

TEST(LossScalerTest, NoneKeepsScaleOneAndSkipsNothing) {
  absl::StatusOr<LossScaler> scaler = LossScaler::Create(LossScalingConfig());
  ASSERT_TRUE(scaler.ok()) << scaler.status();
  EXPECT_FALSE(scaler->enabled());
  EXPECT_EQ(scaler->scale(), 1.0f);
  EXPECT_TRUE(scaler->Update(/*overflowed=*/true));
  EXPECT_EQ(scaler->skipped_steps(), 0);
  EXPECT_EQ(scaler->scale(), 1.0f);
}

TEST(LossScalerTest, StaticSkipsOverflowedStepsButKeepsItsScale) {
  LossScalingConfig config;
  config.set_mode(LossScalingConfig::static_);
  config.set_initial_scale(1024);
  absl::StatusOr<LossScaler> scaler = LossScaler::Create(config);
  ASSERT_TRUE(scaler.ok()) << scaler.status();
  EXPECT_FALSE(scaler->Update(true));
  for (int i = 0; i < 5000; ++i) EXPECT_TRUE(scaler->Update(false));
  EXPECT_EQ(scaler->scale(), 1024.0f);
  EXPECT_EQ(scaler->skipped_steps(), 1);
}

TEST(LossScalerTest, DynamicBacksOffOnOverflowAndGrowsAfterCleanSteps) {
  absl::StatusOr<LossScaler> scaler = LossScaler::Create(Dynamic(65536, 3));
  ASSERT_TRUE(scaler.ok()) << scaler.status();
  EXPECT_FALSE(scaler->Update(true));
  EXPECT_EQ(scaler->scale(), 32768.0f);
  EXPECT_TRUE(scaler->Update(false));
  EXPECT_TRUE(scaler->Update(false));
  EXPECT_EQ(scaler->scale(), 32768.0f);  // two clean steps: not yet
  EXPECT_TRUE(scaler->Update(false));
  EXPECT_EQ(scaler->scale(), 65536.0f);  // the third grows it
  // An overflow restarts the count of clean steps.
  EXPECT_TRUE(scaler->Update(false));
  EXPECT_TRUE(scaler->Update(false));
  EXPECT_FALSE(scaler->Update(true));
  EXPECT_EQ(scaler->scale(), 32768.0f);
  EXPECT_TRUE(scaler->Update(false));
  EXPECT_TRUE(scaler->Update(false));
  EXPECT_EQ(scaler->scale(), 32768.0f);
  EXPECT_EQ(scaler->skipped_steps(), 2);
}

TEST(LossScalerTest, DynamicScaleStaysWithinItsBounds) {
  absl::StatusOr<LossScaler> scaler = LossScaler::Create(Dynamic(4, 1));
  ASSERT_TRUE(scaler.ok()) << scaler.status();
  for (int i = 0; i < 10; ++i) scaler->Update(true);
  EXPECT_EQ(scaler->scale(), LossScaler::kMinScale);
  for (int i = 0; i < 300; ++i) scaler->Update(false);
  EXPECT_EQ(scaler->scale(), LossScaler::kMaxScale);
  EXPECT_EQ(scaler->skipped_steps(), 10);
}

TEST(LossScalerTest, BadFieldsAreNamed) {
  LossScalingConfig config = Dynamic(0.5f, 10);
  EXPECT_THAT(LossScaler::Create(config).status().message(), HasSubstr("'loss_scaling.initial_scale'"));
  config = Dynamic(65536, 0);
  EXPECT_THAT(LossScaler::Create(config).status().message(), HasSubstr("'loss_scaling.growth_interval'"));
  config = Dynamic(65536, 10);
  config.set_growth_factor(1);
  EXPECT_THAT(LossScaler::Create(config).status().message(), HasSubstr("'loss_scaling.growth_factor'"));
  config = Dynamic(65536, 10);
  config.set_backoff_factor(1);
  EXPECT_THAT(LossScaler::Create(config).status().message(), HasSubstr("'loss_scaling.backoff_factor'"));
}

}  // namespace
}  // namespace pstrain
