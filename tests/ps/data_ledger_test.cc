// DataLedger on its own (ps/shard/data_ledger.h): chunks handed out in order, each
// counted once when its holder reports it, a lost worker's chunk handed to
// another, late reports refused, the run's end, and checkpoint state.
#include "ps/shard/data_ledger.h"

#include <map>
#include <random>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

LedgerSpec Spec(int64_t per_epoch, int64_t epochs, int64_t chunk, int64_t total = 0) {
  LedgerSpec spec;
  spec.set_examples_per_epoch(per_epoch);
  spec.set_epochs(epochs);
  spec.set_chunk_examples(chunk);
  spec.set_total_examples(total);
  return spec;
}

ChunkRequest Report(const std::vector<std::pair<uint64_t, int64_t>>& done) {
  ChunkRequest request;
  for (const auto& [id, step] : done) {
    CompletedChunk* c = request.add_completed();
    c->set_id(id);
    c->set_last_step(step);
  }
  return request;
}

TEST(DataLedgerTest, HandsOutEveryChunkOfEveryEpochInOrderThenEnds) {
  absl::StatusOr<DataLedger> ledger = DataLedger::Create(Spec(100, 2, 40), 1);
  ASSERT_TRUE(ledger.ok()) << ledger.status();
  std::vector<std::vector<int64_t>> seen;  // epoch, first, count
  ChunkResponse r = ledger->Exchange(0, ChunkRequest());
  while (r.has_chunk()) {
    seen.push_back({r.chunk().epoch(), r.chunk().first(), r.chunk().count()});
    r = ledger->Exchange(0, Report({{r.chunk().id(), 0}}));
  }
  EXPECT_TRUE(r.end());
  EXPECT_EQ(seen, (std::vector<std::vector<int64_t>>{
                      {0, 0, 40}, {0, 40, 40}, {0, 80, 20}, {1, 0, 40}, {1, 40, 40}, {1, 80, 20}}));
  EXPECT_THAT(ledger->Report().examples_done(), ElementsAre(100, 100));
  EXPECT_THAT(ledger->Report().examples_by_worker(), ElementsAre(200));
}

TEST(DataLedgerTest, TotalExamplesStopsTheLastEpochPartWay) {
  absl::StatusOr<DataLedger> ledger = DataLedger::Create(Spec(100, 2, 40, 160), 1);
  ASSERT_TRUE(ledger.ok()) << ledger.status();
  int64_t handed = 0;
  ChunkResponse r = ledger->Exchange(0, ChunkRequest());
  while (r.has_chunk()) {
    handed += r.chunk().count();
    r = ledger->Exchange(0, Report({{r.chunk().id(), 0}}));
  }
  EXPECT_EQ(handed, 160);
  EXPECT_THAT(ledger->Report().examples_done(), ElementsAre(100, 60));
  EXPECT_EQ(ledger->Report().total_examples(), 160);
}

TEST(DataLedgerTest, ALostWorkersChunkGoesToTheNextAskerAndItsLateReportIsRefused) {
  absl::StatusOr<DataLedger> ledger = DataLedger::Create(Spec(100, 1, 10), 2);
  ASSERT_TRUE(ledger.ok());
  const ChunkResponse held = ledger->Exchange(1, ChunkRequest());
  ASSERT_TRUE(held.has_chunk());
  ledger->Release(1);  // worker 1 lost
  const ChunkResponse taken = ledger->Exchange(0, ChunkRequest());
  ASSERT_TRUE(taken.has_chunk());
  EXPECT_EQ(taken.chunk().id(), held.chunk().id());
  // Worker 1 comes back and reports the chunk it no longer holds.
  ledger->Exchange(1, Report({{held.chunk().id(), 3}}));
  EXPECT_EQ(ledger->Report().completions_refused(), 1);
  EXPECT_EQ(ledger->Report().chunks_reassigned(), 1);
  EXPECT_THAT(ledger->Report().examples_done(), ElementsAre(0));
  ledger->Exchange(0, Report({{taken.chunk().id(), 3}}));
  EXPECT_THAT(ledger->Report().examples_done(), ElementsAre(10));
}

TEST(DataLedgerTest, SaysWaitWhileOthersHoldChunksAndEndOnceTheyAreDone) {
  absl::StatusOr<DataLedger> ledger = DataLedger::Create(Spec(20, 1, 10), 2);
  ASSERT_TRUE(ledger.ok());
  const ChunkResponse a = ledger->Exchange(0, ChunkRequest());
  const ChunkResponse b = ledger->Exchange(1, ChunkRequest());
  const ChunkResponse r = ledger->Exchange(0, Report({{a.chunk().id(), 1}}));
  EXPECT_TRUE(r.wait());
  EXPECT_FALSE(r.has_chunk());
  ledger->Release(1);  // worker 1's chunk comes back: worker 0 gets it
  const ChunkResponse again = ledger->Exchange(0, ChunkRequest());
  ASSERT_TRUE(again.has_chunk());
  EXPECT_EQ(again.chunk().id(), b.chunk().id());
  EXPECT_TRUE(ledger->Exchange(0, Report({{again.chunk().id(), 2}})).end());
}

TEST(DataLedgerTest, AChunkStillHeldWhenItsWorkerAsksAgainGoesBack) {
  absl::StatusOr<DataLedger> ledger = DataLedger::Create(Spec(20, 1, 10), 1);
  ASSERT_TRUE(ledger.ok());
  const ChunkResponse first = ledger->Exchange(0, ChunkRequest());
  // A worker that recovered asks without reporting: the chunk is handed
  // out again (to it), and counted once when done.
  const ChunkResponse again = ledger->Exchange(0, ChunkRequest());
  EXPECT_EQ(again.chunk().id(), first.chunk().id());
  ChunkResponse r = ledger->Exchange(0, Report({{again.chunk().id(), 0}}));
  r = ledger->Exchange(0, Report({{r.chunk().id(), 0}}));
  EXPECT_TRUE(r.end());
  EXPECT_THAT(ledger->Report().examples_done(), ElementsAre(20));
}

// Random workers come and go; whatever happens, each example of each epoch
// is in exactly one completed chunk.
TEST(DataLedgerTest, EveryExampleIsTrainedExactlyOnceWhateverWorkersDo) {
  constexpr int kWorkers = 4;
  absl::StatusOr<DataLedger> ledger = DataLedger::Create(Spec(1000, 3, 64), kWorkers);
  ASSERT_TRUE(ledger.ok());
  std::mt19937 gen(7);
  std::map<int, DataChunk> holding;
  std::multiset<std::pair<int64_t, int64_t>> trained;  // (epoch, position)
  bool ended = false;
  for (int round = 0; round < 100000 && !ended; ++round) {
    const int w = static_cast<int>(gen() % kWorkers);
    if (gen() % 10 == 0 && holding.count(w) != 0) {  // lost mid-chunk
      ledger->Release(w);
      holding.erase(w);
      continue;
    }
    ChunkRequest request;
    if (holding.count(w) != 0) {
      const DataChunk& c = holding[w];
      for (int64_t p = c.first(); p < c.first() + c.count(); ++p) trained.insert({c.epoch(), p});
      request = Report({{c.id(), round}});
      holding.erase(w);
    }
    const ChunkResponse r = ledger->Exchange(w, request);
    if (r.has_chunk()) holding[w] = r.chunk();
    ended = r.end();
  }
  ASSERT_TRUE(ended);
  EXPECT_EQ(trained.size(), 3000u);
  for (int64_t e = 0; e < 3; ++e) {
    for (int64_t p = 0; p < 1000; ++p) ASSERT_EQ(trained.count({e, p}), 1u) << e << "/" << p;
  }
  EXPECT_THAT(ledger->Report().examples_done(), ElementsAre(1000, 1000, 1000));
  EXPECT_GT(ledger->Report().chunks_reassigned(), 0);
}

TEST(DataLedgerTest, StateBeforeAStepRestoresWhatThatStepHadTrained) {
  absl::StatusOr<DataLedger> ledger = DataLedger::Create(Spec(40, 1, 10), 1);
  ASSERT_TRUE(ledger.ok());
  ChunkResponse r = ledger->Exchange(0, ChunkRequest());
  for (int64_t step = 0; r.has_chunk(); ++step) r = ledger->Exchange(0, Report({{r.chunk().id(), step}}));
  // Chunks 0..3 last trained at steps 0..3: a checkpoint at step 2 holds 0, 1.
  EXPECT_THAT(ledger->State(2).completed(), ElementsAre(0, 1));
  EXPECT_THAT(ledger->State(0).completed(), ElementsAre(0, 1, 2, 3));

  LedgerSpec resumed = Spec(40, 1, 10);
  *resumed.mutable_state() = ledger->State(2);
  absl::StatusOr<DataLedger> restored = DataLedger::Create(resumed, 1);
  ASSERT_TRUE(restored.ok());
  EXPECT_THAT(restored->Report().examples_done(), ElementsAre(20));
  ChunkResponse next = restored->Exchange(0, ChunkRequest());
  EXPECT_EQ(next.chunk().id(), 2u);
}

TEST(DataLedgerTest, BadSpecsAreRefusedNamingTheField) {
  EXPECT_THAT(DataLedger::Create(Spec(0, 1, 10), 1).status().message(), HasSubstr("examples_per_epoch"));
  EXPECT_THAT(DataLedger::Create(Spec(10, 0, 10), 1).status().message(), HasSubstr("epochs"));
  EXPECT_THAT(DataLedger::Create(Spec(10, 1, 0), 1).status().message(), HasSubstr("chunk_examples"));
  EXPECT_THAT(DataLedger::Create(Spec(10, 1, 10, 11), 1).status().message(), HasSubstr("total_examples"));
  EXPECT_THAT(DataLedger::Create(Spec(int64_t{1} << 40, 1000, 1), 1).status().message(), HasSubstr("chunk_batches"));
  LedgerSpec outside = Spec(10, 1, 5);
  outside.mutable_state()->add_completed(2);
  EXPECT_THAT(DataLedger::Create(outside, 1).status().message(), HasSubstr("restored chunk 2"));
}

}  // namespace
}  // namespace pstrain
