// IntFromEnvironment (common/environment.h): the variable's integer, or the
// fallback when it is unset, not an integer, or below the minimum.
// SwitchFromEnvironment: 1 on, 0 off, the fallback for anything else.
#include "common/environment.h"

#include <cstdlib>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

constexpr char kName[] = "PSTRAIN_ENVIRONMENT_TEST_VALUE";

TEST(EnvironmentTest, AnIntegerIsReadAndAnythingElseGivesTheFallback) {
  unsetenv(kName);
  EXPECT_EQ(IntFromEnvironment(kName, 7, "things"), 7) << "unset";
  setenv(kName, "42", 1);
  EXPECT_EQ(IntFromEnvironment(kName, 7, "things"), 42);
  setenv(kName, "-5", 1);
  EXPECT_EQ(IntFromEnvironment(kName, 7, "things"), -5) << "no minimum";
  EXPECT_EQ(IntFromEnvironment(kName, 7, "things", 0), 7) << "below the minimum";
  setenv(kName, "0", 1);
  EXPECT_EQ(IntFromEnvironment(kName, 7, "things", 0), 0) << "the minimum itself";
  setenv(kName, "12abc", 1);
  EXPECT_EQ(IntFromEnvironment(kName, 7, "things"), 7) << "not an integer";
  setenv(kName, "", 1);
  EXPECT_EQ(IntFromEnvironment(kName, 7, "things"), 7) << "empty";
  unsetenv(kName);
}

TEST(EnvironmentTest, ASwitchIsOneOrZeroAndAnythingElseGivesTheFallback) {
  unsetenv(kName);
  EXPECT_TRUE(SwitchFromEnvironment(kName, true)) << "unset";
  EXPECT_FALSE(SwitchFromEnvironment(kName, false)) << "unset";
  setenv(kName, "0", 1);
  EXPECT_FALSE(SwitchFromEnvironment(kName, true));
  setenv(kName, "1", 1);
  EXPECT_TRUE(SwitchFromEnvironment(kName, false));
  for (const char* other : {"yes", "", "01", "2"}) {
    setenv(kName, other, 1);
    EXPECT_TRUE(SwitchFromEnvironment(kName, true)) << "'" << other << "'";
    EXPECT_FALSE(SwitchFromEnvironment(kName, false)) << "'" << other << "'";
  }
  unsetenv(kName);
}

}  // namespace
}  // namespace pstrain
