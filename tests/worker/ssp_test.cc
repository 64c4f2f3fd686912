// Stale synchronous parallel: a fast worker is held back exactly when the
// slowest live worker is more than `staleness` steps behind it.
#include "absl/synchronization/notification.h"
#include "common/metrics/result_json.h"
#include "common/transport/frame.h"
#include "gtest/gtest.h"
#include "ps/shard/shard.h"
#include "tests/worker/in_process_cluster.h"

namespace pstrain {
namespace {

class SspShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PsShardOptions options;
    options.num_workers = 2;
    options.consistency = "ssp";
    options.staleness = 2;
    options.optimizer.set_name("sgd");
    options.optimizer.set_learning_rate(0.1f);
    shard_ = *PsShard::Create(options);
    InitRequest init;
    TensorHeader* h = init.add_tensors();
    h->set_name("w");
    h->add_shape(2);
    h->set_num_bytes(8);
    OutgoingFrame frame = OutgoingFrame::FromHeader(init);
    auto values = std::make_shared<std::vector<float>>(std::vector<float>{1, 1});
    frame.chunks.push_back({values->data(), 8, values});
    IncomingFrame in = IncomingFrame::FromOutgoing(std::move(frame));
    InitResponse response;
    ASSERT_TRUE(shard_->Init(init, in, &response).ok());
  }

  // Worker `worker` finishes local step `local_step`.
  void Push(int worker, int64_t local_step) {
    PushRequest push;
    push.set_worker(worker);
    push.set_step(0);
    push.set_local_step(local_step);
    TensorHeader* h = push.add_tensors();
    h->set_name("w");
    h->add_shape(2);
    h->set_num_bytes(8);
    OutgoingFrame frame = OutgoingFrame::FromHeader(push);
    auto grad = std::make_shared<std::vector<float>>(std::vector<float>{1, 1});
    frame.chunks.push_back({grad->data(), 8, grad});
    IncomingFrame in = IncomingFrame::FromOutgoing(std::move(frame));
    PushResponse response;
    ASSERT_TRUE(shard_->Push(push, in, &response).ok());
  }

  // Starts a pull by `worker` about to run `local_step`; `answered` fires
  // when the shard responds.
  void Pull(int worker, int64_t local_step, absl::Notification* answered, absl::Status* status) {
    PullRequest pull;
    pull.set_worker(worker);
    pull.set_local_step(local_step);
    pull.set_timeout_ms(60000);
    shard_->Pull(pull, [answered, status](absl::Status s, OutgoingFrame) {
      *status = s;
      answered->Notify();
    });
  }

  std::unique_ptr<PsShard> shard_;
};

TEST_F(SspShardTest, FastWorkerWaitsOnlyWhenMoreThanStalenessAhead) {
  // Worker 0 completes steps 0..2 while worker 1 has completed none.
  for (int t = 0; t < 3; ++t) Push(0, t);
  // Step 2 may start: worker 1 has completed 0 >= 2 - 2 steps.
  absl::Notification step2;
  absl::Status status2;
  Pull(0, 2, &step2, &status2);
  EXPECT_TRUE(step2.HasBeenNotified());
  // Step 3 must wait: worker 1 needs 1 completed step.
  absl::Notification step3;
  absl::Status status3;
  Pull(0, 3, &step3, &status3);
  EXPECT_FALSE(step3.HasBeenNotified());
  Push(1, 0);  // the laggard completes its step 0
  ASSERT_TRUE(step3.HasBeenNotified());
  EXPECT_TRUE(status3.ok()) << status3;
  EXPECT_EQ(shard_->Stats().load().ssp_blocked_pulls(), 1);
}

TEST_F(SspShardTest, ExpiredWaitNamesTheLaggard) {
  for (int t = 0; t < 4; ++t) Push(0, t);
  PullRequest pull;
  pull.set_worker(0);
  pull.set_local_step(4);
  pull.set_timeout_ms(1);
  absl::Notification answered;
  absl::Status status;
  shard_->Pull(pull, [&](absl::Status s, OutgoingFrame) {
    status = s;
    answered.Notify();
  });
  absl::SleepFor(absl::Milliseconds(5));
  ASSERT_TRUE(shard_->Check(absl::Now()).ok());
  ASSERT_TRUE(answered.HasBeenNotified());
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(std::string(status.message()).find("workers [1]"), std::string::npos) << status;
}

TEST_F(SspShardTest, FinishedWorkerNoLongerHoldsOthersBack) {
  for (int t = 0; t < 5; ++t) Push(0, t);
  absl::Notification answered;
  absl::Status status;
  Pull(0, 5, &answered, &status);
  EXPECT_FALSE(answered.HasBeenNotified());
  DoneRequest done;
  done.mutable_report()->set_worker(1);
  ASSERT_TRUE(shard_->Done(done).ok());
  EXPECT_TRUE(answered.HasBeenNotified());
}

TEST(SspClusterTest, FourWorkersTrainWithStalenessTwo) {
  ExperimentConfig config;
  config.mutable_model()->set_name("mlp");
  config.mutable_model()->add_hidden_units(16);
  config.mutable_data()->set_source("synthetic");
  config.mutable_data()->set_synthetic_examples(512);
  config.mutable_optimizer()->set_name("sgd");
  config.mutable_optimizer()->set_learning_rate(0.01f);
  config.mutable_train()->set_steps(15);
  config.mutable_train()->set_batch_size_per_device(8);
  config.mutable_train()->set_evaluate(false);
  config.set_consistency("ssp");
  config.set_staleness(2);
  SetInProcessHosts(&config, 2, 4);
  absl::StatusOr<ClusterRun> run = RunInProcessCluster(config);
  ASSERT_TRUE(run.ok()) << run.status();
  int64_t applied = 0;
  for (const auto& load : run->chief.ps_load()) applied += load.applied_updates();
  EXPECT_EQ(applied, 4 * 15 * 4);  // every push applied: 4 workers x 15 steps x 4 variables
  // The shards' ssp statistics reach the chief's result.json.
  EXPECT_NE(ToJson(run->chief).find("\"ssp_blocked_pulls\": "), std::string::npos) << ToJson(run->chief);
}

}  // namespace
}  // namespace pstrain
