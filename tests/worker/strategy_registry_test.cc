// Strategies describe themselves: every registered variable_update says what
// it reads from the config and needs from the worker, and config validation
// and the trainer ask it instead of spelling strategy names.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/strategy.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsSupersetOf;

ExperimentConfig Config(const std::string& variable_update, int workers, int ps) {
  ExperimentConfig c;
  c.set_variable_update(variable_update);
  for (int i = 0; i < workers; ++i) c.mutable_cluster()->add_worker_hosts("w" + std::to_string(i) + ":1");
  for (int i = 0; i < ps; ++i) c.mutable_cluster()->add_ps_hosts("p" + std::to_string(i) + ":1");
  return c;
}

TEST(StrategyRegistryTest, EveryStrategyDescribesItself) {
  const std::vector<std::string> names = StrategyRegistry().Names();
  EXPECT_THAT(names,
              IsSupersetOf({"allreduce", "distributed_replicated", "independent", "parameter_server", "replicated"}));
  for (const std::string& name : names) {
    absl::StatusOr<StrategyEntry> entry = StrategyRegistry().Find(name);
    ASSERT_TRUE(entry.ok()) << entry.status();
    EXPECT_FALSE(entry->summary.empty()) << name;
    EXPECT_TRUE(entry->needs != nullptr) << name;
    EXPECT_TRUE(entry->create != nullptr) << name;
  }
}

TEST(StrategyRegistryTest, NeedsFollowTheConfig) {
  absl::StatusOr<StrategyNeeds> ps = NeedsOf(Config("parameter_server", 2, 1));
  ASSERT_TRUE(ps.ok()) << ps.status();
  EXPECT_TRUE(ps->parameter_servers);
  EXPECT_EQ(ps->max_workers, 0);
  EXPECT_TRUE(ps->host_mirrors);
  EXPECT_TRUE(ps->download_gradients);
  EXPECT_EQ(ps->collective, "");

  // Variables summed on the owner GPUs: only the sum is downloaded.
  ExperimentConfig on_gpus = Config("parameter_server", 1, 1);
  on_gpus.set_device("gpu");
  on_gpus.set_local_parameter_device("gpu");
  on_gpus.set_devices_per_worker(2);
  absl::StatusOr<StrategyNeeds> owner = NeedsOf(on_gpus);
  ASSERT_TRUE(owner.ok()) << owner.status();
  EXPECT_FALSE(owner->download_gradients);

  ExperimentConfig nccl = Config("replicated", 1, 0);
  nccl.set_device("gpu");
  nccl.set_all_reduce_spec("nccl");
  absl::StatusOr<StrategyNeeds> replicated = NeedsOf(nccl);
  ASSERT_TRUE(replicated.ok()) << replicated.status();
  EXPECT_EQ(replicated->max_workers, 1);
  EXPECT_FALSE(replicated->host_mirrors);
  EXPECT_THAT(replicated->devices, ElementsAre("gpu"));
  EXPECT_EQ(replicated->collective, "nccl");

  absl::StatusOr<StrategyNeeds> gloo = NeedsOf(Config("allreduce", 3, 0));
  ASSERT_TRUE(gloo.ok()) << gloo.status();
  EXPECT_FALSE(gloo->parameter_servers);
  EXPECT_TRUE(gloo->host_mirrors);
  EXPECT_EQ(gloo->collective, "gloo");
  ExperimentConfig gpu_allreduce = Config("allreduce", 3, 0);
  gpu_allreduce.set_device("gpu");
  absl::StatusOr<StrategyNeeds> horovod = NeedsOf(gpu_allreduce);
  ASSERT_TRUE(horovod.ok()) << horovod.status();
  EXPECT_FALSE(horovod->host_mirrors);
  EXPECT_EQ(horovod->collective, "nccl");
}

TEST(StrategyRegistryTest, TheGenericNeedsAreCheckedInOnePlace) {
  // One worker only (replicated and independent alike), checked from needs.
  for (const char* name : {"replicated", "independent"}) {
    absl::StatusOr<StrategyNeeds> needs = NeedsOf(Config(name, 2, 0), "exp.yaml");
    ASSERT_FALSE(needs.ok()) << name;
    EXPECT_THAT(needs.status().message(),
                HasSubstr(absl::StrCat("exp.yaml: field 'cluster.worker_hosts': expected one worker for "
                                       "variable_update ",
                                       name)));
  }
  for (const char* name : {"parameter_server", "distributed_replicated"}) {
    absl::StatusOr<StrategyNeeds> needs = NeedsOf(Config(name, 1, 0), "exp.yaml");
    ASSERT_FALSE(needs.ok()) << name;
    EXPECT_EQ(needs.status().message(),
              absl::StrCat("exp.yaml: field 'cluster.ps_hosts': expected at least one host:port when "
                           "variable_update is ",
                           name, ", got none"));
  }
  absl::StatusOr<StrategyNeeds> unknown = NeedsOf(Config("mirrored", 1, 0), "exp.yaml");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("field 'variable_update': expected one of allreduce, "));
}

}  // namespace
}  // namespace pstrain
