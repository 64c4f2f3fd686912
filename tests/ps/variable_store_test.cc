// VariableStore on its own (ps/shard/variable_store.h): generations, the
// first publication, and a restore in place that replaces all or nothing.
#include "ps/shard/variable_store.h"

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

// Every variable gets a fresh state, counted.
struct CountingState : ConsistencyState {
  explicit CountingState(int n) : number(n) {}
  int number;
};

class CountingPolicy : public ConsistencyPolicy {
 public:
  std::unique_ptr<ConsistencyState> NewState(const ShardVariable& var) const override {
    return std::make_unique<CountingState>(++made_);
  }
  absl::StatusOr<PushOutcome> Push(ShardVariable& var, int worker, int64_t step, IncomingFrame& payload,
                                   const VariableUpdater& updater) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(var.mu) {
    return PushOutcome::kDropped;
  }
  bool LostWorkerIsFatal() const override { return false; }

 private:
  mutable int made_ = 0;
};

std::unique_ptr<ShardVariable> Variable(const std::string& name, Shape shape, float value, int64_t version) {
  auto var = std::make_unique<ShardVariable>();
  var->name = name;
  var->shape = std::move(shape);
  var->n = NumElements(var->shape);
  var->version = version;
  absl::MutexLock lock(&var->mu);
  var->value = Buffer::Allocate(var->bytes());
  std::vector<float> values(var->n, value);
  std::memcpy(var->value->data(), values.data(), var->bytes());
  var->slots.assign(1, std::vector<float>(var->n, value));
  return var;
}

VariableMap Variables(float value, int64_t version, Shape b_shape = {3}) {
  VariableMap variables;
  variables["a"] = Variable("a", {2, 2}, value, version);
  variables["b"] = Variable("b", std::move(b_shape), value, version);
  return variables;
}

float FirstValue(ShardVariable& var) {
  absl::MutexLock lock(&var.mu);
  return static_cast<const float*>(var.value->data())[0];
}

void Publish(VariableStore& store, VariableMap variables, int64_t generation) {
  OptimizerConfig sgd;
  sgd.set_name("sgd");
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = CreateOptimizer(sgd);
  ASSERT_TRUE(optimizer.ok()) << optimizer.status();
  absl::StatusOr<LearningRateSchedule> schedule = LearningRateSchedule::Create(sgd, 10);
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  store.Publish(std::move(variables), *std::move(optimizer), *std::move(schedule), generation);
}

TEST(VariableStoreTest, BeforeInitItHoldsNothingAndRefusesRequestsOfAGeneration) {
  VariableStore store(4);
  EXPECT_FALSE(store.initialized());
  EXPECT_EQ(store.generation(), 0);
  EXPECT_EQ(store.MinVersion(), 0);
  EXPECT_EQ(store.NewestVersion(), 0);
  EXPECT_EQ(store.ValueBytes(), 0);
  EXPECT_TRUE(store.CheckGeneration(0).ok());  // a request of no generation
  const absl::Status restarted = store.CheckGeneration(2);
  EXPECT_EQ(restarted.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(restarted.message(), HasSubstr("PS shard 4 has restarted"));
  EXPECT_THAT(restarted.message(), HasSubstr("(request of generation 2)"));
}

TEST(VariableStoreTest, PublishingMakesTheVariablesAndTheirGenerationVisible) {
  VariableStore store(4);
  VariableMap variables = Variables(1.0f, 0);
  variables["b"]->version = 3;
  Publish(store, std::move(variables), 2);
  ASSERT_TRUE(store.initialized());
  EXPECT_EQ(store.generation(), 2);
  EXPECT_EQ(store.variables().size(), 2u);
  ASSERT_NE(store.Find("b"), nullptr);
  EXPECT_EQ(store.Find("b")->name, "b");
  EXPECT_EQ(store.Find("c"), nullptr);
  EXPECT_EQ(store.MinVersion(), 0);
  EXPECT_EQ(store.NewestVersion(), 3);
  EXPECT_EQ(store.ValueBytes(), (4 + 3) * 4);
  EXPECT_EQ(store.updater().num_slots(), 0);  // plain SGD

  EXPECT_TRUE(store.CheckGeneration(2).ok());
  const absl::Status other = store.CheckGeneration(1);
  EXPECT_EQ(other.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(other.message(), "PS shard 4 was restored (generation 2); this request is of generation 1");
}

TEST(VariableStoreTest, ARestoreReplacesEveryVariablesStateInPlace) {
  VariableStore store(0);
  Publish(store, Variables(1.0f, 7), 1);
  ShardVariable* a = store.Find("a");
  {
    absl::MutexLock lock(&a->mu);
    a->encoded = Buffer::Allocate(8);
    a->encoded_version = 7;
  }
  CountingPolicy policy;
  ASSERT_TRUE(store.Replace(Variables(5.0f, 3), 2, policy).ok());
  EXPECT_EQ(store.generation(), 2);
  EXPECT_EQ(store.Find("a"), a);  // the same variable, new state
  EXPECT_EQ(a->version.load(), 3);
  EXPECT_EQ(FirstValue(*a), 5.0f);
  EXPECT_EQ(store.NewestVersion(), 3);
  absl::MutexLock lock(&a->mu);
  EXPECT_EQ(a->slots[0][0], 5.0f);
  EXPECT_EQ(a->encoded, nullptr);  // no pull gets the old generation's encoding
  EXPECT_EQ(a->encoded_version, -1);
  ASSERT_NE(a->consistency, nullptr);
  EXPECT_EQ(static_cast<CountingState*>(a->consistency.get())->number, 1);
}

TEST(VariableStoreTest, ARestoreOfOtherVariablesChangesNothing) {
  VariableStore store(6);
  Publish(store, Variables(1.0f, 7), 1);
  CountingPolicy policy;

  VariableMap missing = Variables(5.0f, 3);
  missing.erase("b");
  absl::Status s = store.Replace(std::move(missing), 2, policy);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "init of generation 2: shard 6's variable b is missing");

  s = store.Replace(Variables(5.0f, 3, /*b_shape=*/{4}), 2, policy);
  EXPECT_EQ(s.message(), "init of generation 2: shard 6's variable b has another shape");

  VariableMap extra = Variables(5.0f, 3);
  extra["c"] = Variable("c", {1}, 5.0f, 3);
  s = store.Replace(std::move(extra), 2, policy);
  EXPECT_EQ(s.message(), "init of generation 2: 3 variables for a shard holding 2");

  EXPECT_EQ(store.generation(), 1);
  EXPECT_EQ(store.MinVersion(), 7);
  EXPECT_EQ(FirstValue(*store.Find("a")), 1.0f);
}

}  // namespace
}  // namespace pstrain
