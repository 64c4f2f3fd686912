// The in-worker reductions across replicas, on CPU replicas (the owner-device
// reduction only uses the DeviceContext interface, so it runs here exactly as
// on GPUs, minus the peer copies).
#include "worker/local_reduce.h"

#include <algorithm>
#include <set>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "worker/overlapped_reduce.h"
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

// pscpu and none run variable by variable as every replica's gradient of a
// variable becomes final (OverlappedReduce, on its own thread): a variable
// is reduced once all replicas announced it, before the step ends and
// before the others are announced, each exactly once; Finish() leaves the
// mean in every replica, the variables no hook announced included.
TEST(OverlappedReduceTest, EachVariableIsReducedOnceEveryReplicaAnnouncedIt) {
  for (const char* spec : {"pscpu", "none"}) {
    SCOPED_TRACE(spec);
    auto replicas = MlpReplicas(3);
    ASSERT_NE(replicas, nullptr);
    FillGradients(*replicas);
    absl::StatusOr<LocalReduceEntry> entry = LocalReduceRegistry().Find(spec);
    ASSERT_TRUE(entry.ok() && entry->reduce_one) << spec << " reduces variable by variable";
    absl::Mutex mu;
    std::vector<int> reduced;  // in the order they ran
    OverlappedReduce overlapped(*replicas, [&](ReplicaSet& set, int variable) {
      entry->reduce_one(set, variable);
      absl::MutexLock lock(&mu);
      reduced.push_back(variable);
    });
    const int last = static_cast<int>(replicas->variables(0).size()) - 1;
    // The last variable first, as backward finalises it; replica 2 last.
    for (int r = 0; r < 3; ++r) overlapped.HookFor(r)(last);
    {
      absl::MutexLock lock(&mu);
      ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(
                                          +[](std::vector<int>* done) { return !done->empty(); }, &reduced),
                                      absl::Seconds(30)))
          << "announced by every replica, yet not reduced";
      EXPECT_EQ(reduced, std::vector<int>{last});
    }
    // Variable 0 announced by two of three replicas only: reduced by Finish.
    for (int r = 0; r < 2; ++r) overlapped.HookFor(r)(0);
    overlapped.Finish();
    {
      absl::MutexLock lock(&mu);
      std::vector<int> sorted = reduced;
      std::sort(sorted.begin(), sorted.end());
      std::vector<int> each(last + 1);
      for (int v = 0; v <= last; ++v) each[v] = v;
      EXPECT_EQ(sorted, each) << "every variable once";
    }
    for (int r = 0; r < 3; ++r) {
      const std::vector<Variable>& vars = replicas->variables(r);
      for (size_t v = 0; v < vars.size(); ++v) {
        const float mean = static_cast<float>((1 + 2 + 3) * (v + 1)) / 3;
        for (float x : vars[v].grad.span()) ASSERT_FLOAT_EQ(x, mean) << "replica " << r << " " << vars[v].name;
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
