// Registry<Entry>: the one template behind every registry (layers, models,
// optimizers, schedules, strategies, transports, consistency policies, data
// sources, config checks).
#include "common/registry.h"

#include <functional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(RegistryTest, FindsWhatWasRegisteredAndListsNamesSorted) {
  Registry<std::function<int()>> registry("widget");
  EXPECT_TRUE(registry.Register("zeta", [] { return 26; }));
  EXPECT_TRUE(registry.Register("alpha", [] { return 1; }));
  absl::StatusOr<std::function<int()>> alpha = registry.Find("alpha");
  ASSERT_TRUE(alpha.ok()) << alpha.status();
  EXPECT_EQ((*alpha)(), 1);
  EXPECT_TRUE(registry.Contains("zeta"));
  EXPECT_FALSE(registry.Contains("beta"));
  EXPECT_THAT(registry.Names(), ElementsAre("alpha", "zeta"));
  EXPECT_EQ(registry.kind(), "widget");
}

TEST(RegistryTest, UnknownNameIsNotFoundListingTheKnownOnes) {
  Registry<int> registry("optimizer");
  registry.Register("sgd", 1);
  registry.Register("momentum", 2);
  absl::StatusOr<int> missing = registry.Find("momentun");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "unknown optimizer 'momentun'; known: momentum, sgd");
}

TEST(RegistryTest, AnEmptyRegistrySaysItsProviderIsMissing) {
  Registry<int> registry("transport");
  EXPECT_THAT(registry.Find("grpc").status().message(),
              HasSubstr("unknown transport 'grpc'; known: none (is the library that provides them linked?)"));
}

TEST(RegistryDeathTest, ANameRegisteredTwiceStopsTheProcessNamingIt) {
  Registry<int> registry("variable_update");
  registry.Register("allreduce", 1);
  EXPECT_DEATH(registry.Register("allreduce", 2), "variable_update 'allreduce' is registered twice");
}

}  // namespace
}  // namespace pstrain
