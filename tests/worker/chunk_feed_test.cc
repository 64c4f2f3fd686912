// ChunkFeed (worker/chunk_feed.h) against a real DataLedger (the one PS
// shard 0 keeps), exchanged in process: batches in chunk order, each chunk
// reported once after its last batch with that batch's step, the end of the
// data, waiting under async, and a recovery giving the chunk up.
#include "worker/chunk_feed.h"

#include <optional>
#include <vector>

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

ChunkFeed::Options Batches(int64_t batch, bool may_wait = false) {
  ChunkFeed::Options options;
  options.batch_examples = batch;
  options.may_wait = may_wait;
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

TEST(ChunkFeedTest, UnderSyncAWorkerWithNoFreeChunkEndsAndUnderAsyncItWaits) {
  absl::StatusOr<DataLedger> ledger = DataLedger::Create(Spec(20, 1, 10), 2);
  ASSERT_TRUE(ledger.ok());
  ChunkFeed other(With(*ledger, 1), Batches(10));
  ASSERT_TRUE(other.Next(0).ok());  // worker 1 holds chunk 0
  ChunkFeed sync(With(*ledger, 0), Batches(10));
  ASSERT_TRUE(sync.Next(0)->has_value());  // chunk 1
  EXPECT_FALSE(sync.Next(1)->has_value()) << "sync must not wait for chunks others hold";

  absl::StatusOr<DataLedger> again = DataLedger::Create(Spec(20, 1, 10), 2);
  ASSERT_TRUE(again.ok());
  ChunkFeed holder(With(*again, 1), Batches(10));
  ASSERT_TRUE(holder.Next(0).ok());
  ChunkFeed async(With(*again, 0), Batches(10, /*may_wait=*/true));
  ASSERT_TRUE(async.Next(0)->has_value());
  // Worker 1 never reports: the async feed waits, then says what it waited for.
  absl::StatusOr<std::optional<ChunkFeed::Batch>> waited = async.Next(1);
  EXPECT_EQ(waited.status().code(), absl::StatusCode::kDeadlineExceeded);
  // Once worker 1 is lost, its chunk comes to worker 0.
  again->Release(1);
  absl::StatusOr<std::optional<ChunkFeed::Batch>> taken = async.Next(2);
  ASSERT_TRUE(taken.ok() && taken->has_value());
  EXPECT_EQ((*taken)->first, 0);
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
