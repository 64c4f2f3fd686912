// ChunkFeed (worker/chunk_feed.h) against a real DataLedger (the one PS
// shard 0 keeps), exchanged in process: batches in chunk order, each chunk
// reported once after its last batch with that batch's step, the end of the
// data, pausing while others hold the last chunks (and resuming at the step
// the resume hook names when a lost worker's chunk comes back), and a
// recovery giving the chunk up.
#include "worker/chunk_feed.h"

#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps/shard/data_ledger.h"

namespace pstrain {
namespace {

LedgerSpec Spec(int64_t per_epoch, int64_t epochs, int64_t chunk) {
  LedgerSpec spec;
  spec.set_examples_per_epoch(per_epoch);
  spec.set_epochs(epochs);
  spec.set_chunk_examples(chunk);
  return spec;
}

// Worker `worker`'s exchange with `ledger`.
ChunkFeed::Exchange With(DataLedger& ledger, int worker) {
  return [&ledger, worker](const std::vector<CompletedChunk>& completed) -> absl::StatusOr<ChunkResponse> {
    ChunkRequest request;
    for (const CompletedChunk& c : completed) *request.add_completed() = c;
    return ledger.Exchange(worker, request);
  };
}

ChunkFeed::Options Batches(int64_t batch) {
  ChunkFeed::Options options;
  options.batch_examples = batch;
  options.poll = absl::Milliseconds(1);
  options.wait_limit = absl::Milliseconds(200);
  return options;
}

TEST(ChunkFeedTest, HandsOutEveryBatchOfTheRunThenEnds) {
  absl::StatusOr<DataLedger> ledger = DataLedger::Create(Spec(40, 2, 20), 1);
  ASSERT_TRUE(ledger.ok());
  ChunkFeed feed(With(*ledger, 0), Batches(10));
  std::vector<std::pair<int64_t, int64_t>> batches;
  for (int64_t step = 0;; ++step) {
    absl::StatusOr<std::optional<ChunkFeed::Batch>> b = feed.Next(step);
    ASSERT_TRUE(b.ok()) << b.status();
    if (!b->has_value()) break;
    batches.emplace_back((*b)->epoch, (*b)->first);
  }
  EXPECT_EQ(batches, (std::vector<std::pair<int64_t, int64_t>>{
                         {0, 0}, {0, 10}, {0, 20}, {0, 30}, {1, 0}, {1, 10}, {1, 20}, {1, 30}}));
  EXPECT_EQ(feed.examples(), 80);
  // Each chunk was reported with the step of its last batch.
  EXPECT_EQ(ledger->Report().examples_done(0), 40);
  EXPECT_EQ(ledger->Report().examples_done(1), 40);
  EXPECT_EQ(ledger->State(4).completed_size(), 2);  // chunks whose last batch trained at steps 1 and 3
}

TEST(ChunkFeedTest, AWorkerWithNoFreeChunkPausesAndTrainsALostWorkersChunkWhereResumeSays) {
  absl::StatusOr<DataLedger> ledger = DataLedger::Create(Spec(20, 1, 10), 2);
  ASSERT_TRUE(ledger.ok());
  ChunkFeed holder(With(*ledger, 1), Batches(10));
  ASSERT_TRUE(holder.Next(0)->has_value());  // worker 1 holds chunk 0
  std::vector<std::string> calls;
  ChunkFeed::Options options = Batches(10);
  options.pause = [&calls] {
    calls.push_back("pause");
    return absl::OkStatus();
  };
  options.resume = [&calls](int64_t step) -> absl::StatusOr<int64_t> {
    calls.push_back("resume at " + std::to_string(step));
    return step + 40;  // the others went on meanwhile (sync)
  };
  // Worker 1 is lost while worker 0 waits: on worker 0's third request.
  int requests = 0;
  ChunkFeed::Exchange exchange = [&](const std::vector<CompletedChunk>& completed) {
    if (++requests == 4) ledger->Release(1);
    return With(*ledger, 0)(completed);
  };
  ChunkFeed waiting(exchange, options);
  ASSERT_TRUE(waiting.Next(0)->has_value());  // chunk 1
  absl::StatusOr<std::optional<ChunkFeed::Batch>> taken = waiting.Next(1);
  ASSERT_TRUE(taken.ok() && taken->has_value()) << taken.status();
  EXPECT_EQ((*taken)->first, 0);
  EXPECT_EQ((*taken)->step, 41);
  EXPECT_EQ(calls, (std::vector<std::string>{"pause", "resume at 1"}));
  EXPECT_EQ(ledger->Report().chunks_reassigned(), 1);
  // Reported with the step it trained at; then the data is done.
  absl::StatusOr<std::optional<ChunkFeed::Batch>> end = waiting.Next(42);
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_FALSE(end->has_value());
  EXPECT_EQ(ledger->Report().examples_done(0), 20);
  EXPECT_EQ(ledger->State(42).completed_size(), 2);  // chunk 1 (step 0) and chunk 0 (step 41)
  EXPECT_EQ(ledger->State(41).completed_size(), 1);
}

TEST(ChunkFeedTest, AWorkerWaitsNoLongerThanItsLimitSayingWhatItWaitedFor) {
  absl::StatusOr<DataLedger> ledger = DataLedger::Create(Spec(20, 1, 10), 2);
  ASSERT_TRUE(ledger.ok());
  ChunkFeed holder(With(*ledger, 1), Batches(10));
  ASSERT_TRUE(holder.Next(0)->has_value());
  int pauses = 0;
  ChunkFeed::Options options = Batches(10);
  options.pause = [&pauses] {
    ++pauses;
    return absl::OkStatus();
  };
  ChunkFeed waiting(With(*ledger, 0), options);
  ASSERT_TRUE(waiting.Next(0)->has_value());
  absl::StatusOr<std::optional<ChunkFeed::Batch>> waited = waiting.Next(1);
  EXPECT_EQ(waited.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(waited.status().message()), ::testing::HasSubstr("chunks held by other workers"));
  EXPECT_EQ(pauses, 1);
}

TEST(ChunkFeedTest, AWaitingWorkerEndsWhenTheHolderReports) {
  absl::StatusOr<DataLedger> ledger = DataLedger::Create(Spec(20, 1, 10), 2);
  ASSERT_TRUE(ledger.ok());
  ChunkFeed holder(With(*ledger, 1), Batches(10));
  ASSERT_TRUE(holder.Next(0)->has_value());
  int pauses = 0;
  ChunkFeed::Options options = Batches(10);
  options.wait_limit = absl::Seconds(30);
  options.pause = [&] {
    ++pauses;
    // Meanwhile the holder finishes its chunk and reports it.
    EXPECT_FALSE(holder.Next(1)->has_value());
    return absl::OkStatus();
  };
  ChunkFeed waiting(With(*ledger, 0), options);
  ASSERT_TRUE(waiting.Next(0)->has_value());
  absl::StatusOr<std::optional<ChunkFeed::Batch>> end = waiting.Next(1);
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_FALSE(end->has_value());
  EXPECT_EQ(pauses, 1);
  EXPECT_EQ(ledger->Report().examples_done(0), 20);
}

TEST(ChunkFeedTest, AfterARecoveryTheChunkInHandIsNotReported) {
  absl::StatusOr<DataLedger> ledger = DataLedger::Create(Spec(20, 1, 20), 1);
  ASSERT_TRUE(ledger.ok());
  ChunkFeed feed(With(*ledger, 0), Batches(10));
  ASSERT_TRUE(feed.Next(0)->has_value());
  ASSERT_TRUE(feed.Next(1)->has_value());
  feed.Forget();  // the shards were restored: train the chunk again
  absl::StatusOr<std::optional<ChunkFeed::Batch>> b = feed.Next(2);
  ASSERT_TRUE(b.ok() && b->has_value());
  EXPECT_EQ((*b)->first, 0);
  EXPECT_EQ(ledger->Report().examples_done(0), 0);
}

}  // namespace
}  // namespace pstrain
