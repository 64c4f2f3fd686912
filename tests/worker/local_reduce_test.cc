// The in-worker reductions across replicas, on CPU replicas (the owner-device
// reduction only uses the DeviceContext interface, so it runs here exactly as
// on GPUs, minus the peer copies).
#include "worker/local_reduce.h"

#include <algorithm>
#include <set>

#include "gtest/gtest.h"
#include "worker/replica_set.h"

namespace pstrain {
namespace {

std::unique_ptr<ReplicaSet> MlpReplicas(int n) {
  ModelConfig config;
  config.set_name("mlp");
  config.add_hidden_units(32);
  config.add_hidden_units(16);
  for (int d : {1, 28, 28}) config.add_input_shape(d);
  config.set_num_classes(10);
  auto replicas = ReplicaSet::Create(config, n);
  EXPECT_TRUE(replicas.ok()) << replicas.status();
  return replicas.ok() ? std::move(*replicas) : nullptr;
}

// Replica r's gradient of variable v is filled with (r + 1) * (v + 1).
void FillGradients(ReplicaSet& replicas) {
  for (int r = 0; r < replicas.size(); ++r) {
    std::vector<Variable>& vars = replicas.device_variables(r);
    for (size_t v = 0; v < vars.size(); ++v) {
      for (float& x : vars[v].grad.span()) x = static_cast<float>((r + 1) * (v + 1));
    }
  }
}

TEST(GradientOwnersTest, GreedyByBytesSpreadsTheLoad) {
  auto replicas = MlpReplicas(3);
  ASSERT_NE(replicas, nullptr);
  const std::vector<int> owners = GradientOwners(*replicas);
  const std::vector<Variable>& vars = replicas->device_variables(0);
  ASSERT_EQ(owners.size(), vars.size());
  // The largest variable (hidden1 weights, 784x32) gets a replica to itself.
  const size_t largest =
      std::max_element(vars.begin(), vars.end(),
                       [](const Variable& a, const Variable& b) { return a.grad.num_bytes() < b.grad.num_bytes(); }) -
      vars.begin();
  for (size_t v = 0; v < vars.size(); ++v) {
    if (v != largest) {
      EXPECT_NE(owners[v], owners[largest]) << vars[v].name;
    }
  }
  EXPECT_EQ(std::set<int>(owners.begin(), owners.end()).size(), 3u) << "every replica owns something";
}

TEST(ReduceGradientsTest, OwnerDevicesLeaveTheMeanInReplicaZero) {
  auto replicas = MlpReplicas(3);
  ASSERT_NE(replicas, nullptr);
  FillGradients(*replicas);
  ASSERT_TRUE(ReduceGradients("owner_device", *replicas).ok());
  const std::vector<Variable>& vars = replicas->variables(0);
  for (size_t v = 0; v < vars.size(); ++v) {
    const float mean = static_cast<float>((1 + 2 + 3) * (v + 1)) / 3;
    for (float x : vars[v].grad.span()) ASSERT_FLOAT_EQ(x, mean) << vars[v].name;
  }
}

TEST(ReduceGradientsTest, HostAndCopyLeaveTheMeanInEveryReplica) {
  for (const char* spec : {"pscpu", "none"}) {
    auto replicas = MlpReplicas(2);
    ASSERT_NE(replicas, nullptr);
    FillGradients(*replicas);
    ASSERT_TRUE(ReduceGradients(spec, *replicas).ok()) << spec;
    for (int r = 0; r < 2; ++r) {
      const std::vector<Variable>& vars = replicas->variables(r);
      for (size_t v = 0; v < vars.size(); ++v) {
        const float mean = static_cast<float>(3 * (v + 1)) / 2;
        for (float x : vars[v].grad.span()) ASSERT_FLOAT_EQ(x, mean) << spec << " replica " << r;
      }
    }
  }
}

TEST(ReduceGradientsTest, UnknownSpecIsRefusedNamingIt) {
  auto replicas = MlpReplicas(2);
  ASSERT_NE(replicas, nullptr);
  absl::Status s = ReduceGradients("ring", *replicas);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("'ring'"), std::string::npos) << s;
}

}  // namespace
}  // namespace pstrain
