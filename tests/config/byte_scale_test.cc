// --byte_scale: refused where it cannot apply, naming the flag; links and
// in-host copies as much slower as bytes are fewer.
#include "common/config/byte_scale.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

ExperimentConfig Emulated() {
  ExperimentConfig c;
  c.set_device("emulated");
  c.mutable_emulation()->set_device_profile("p100");
  c.mutable_emulation()->set_time_scale(5);
  return c;
}

TEST(ByteScale, IsCheckedNamingTheFlag) {
  EXPECT_TRUE(CheckByteScale(Emulated(), 4).ok());
  EXPECT_TRUE(CheckByteScale(Emulated(), 1).ok());
  EXPECT_THAT(CheckByteScale(Emulated(), 0.5).message(), HasSubstr("--byte_scale 0.5: expected a number in [1, 1000]"));
  EXPECT_THAT(CheckByteScale(Emulated(), 2000).message(), HasSubstr("--byte_scale 2000: expected a number in"));
  ExperimentConfig real;
  real.set_device("cpu");
  EXPECT_TRUE(CheckByteScale(real, 1).ok());
  EXPECT_THAT(CheckByteScale(real, 4).message(), HasSubstr("--byte_scale 4: expected 1 with device 'cpu'"));
  ExperimentConfig tables = Emulated();
  tables.mutable_model()->add_tables()->set_name("t");
  EXPECT_THAT(CheckByteScale(tables, 4).message(), HasSubstr("expected 1 with model.tables"));
  EXPECT_EQ(CheckByteScale(tables, 4).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ByteScale, AppliesToEmulatedDevicesOnly) {
  EXPECT_TRUE(ByteScaleInRange(1));
  EXPECT_TRUE(ByteScaleInRange(1000));
  EXPECT_FALSE(ByteScaleInRange(0.5));
  EXPECT_FALSE(ByteScaleInRange(1001));
  EXPECT_EQ(ByteScale(Emulated(), 4), 4);
  ExperimentConfig real;
  real.set_device("cpu");
  EXPECT_EQ(ByteScale(real, 4), 1);
}

TEST(ByteScale, LinksAreAsMuchSlowerAsBytesAreFewer) {
  EXPECT_EQ(LinkDilation(Emulated(), 4), 20);
  EXPECT_EQ(LinkDilation(Emulated(), 1), 5);
  ExperimentConfig real;
  real.set_device("cpu");
  EXPECT_EQ(LinkDilation(real, 4), 1);  // neither scale applies to a real device
}

}  // namespace
}  // namespace pstrain
