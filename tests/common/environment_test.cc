// IntFromEnvironment (common/environment.h): the variable's integer, or the
// fallback when it is unset, not an integer, or below the minimum.
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

}  // namespace
}  // namespace pstrain
