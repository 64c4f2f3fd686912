// SparseTables on their own (ps/embedding/sparse_tables.h): sparse pulls and
// pushes as frames, async updates on arrival, sync steps that apply the
// workers' mean once every worker pushed (whatever the arrival order), pulls
// parked until their version, and every malformed request refused without
// changing anything.
#include "ps/embedding/sparse_tables.h"

#include <cstring>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/compression/compression.h"
#include "common/embedding_keys.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

constexpr int kDim = 3;

SparseTablesOptions Options(bool sync, int workers, int shards = 1,
                            EmbeddingTableConfig::WireDtype wire = EmbeddingTableConfig::fp32) {
  SparseTablesOptions o;
  o.num_workers = workers;
  o.num_shards = shards;
  o.sync = sync;
  o.seed = 5;
  o.default_optimizer.set_name("sgd");
  o.default_optimizer.set_learning_rate(0.5f);
  EmbeddingTableConfig& t = o.tables.emplace_back();
  t.set_name("ads");
  t.set_dim(kDim);
  t.set_wire_dtype(wire);
  return o;
}

std::unique_ptr<SparseTables> Make(const SparseTablesOptions& o) {
  absl::StatusOr<std::unique_ptr<SparseTables>> tables = SparseTables::Create(o);
  EXPECT_TRUE(tables.ok()) << tables.status();
  return tables.ok() ? *std::move(tables) : nullptr;
}

// An incoming frame of `header` and raw `payload` bytes.
template <typename Header>
IncomingFrame Frame(const Header& header, std::vector<char> payload) {
  OutgoingFrame out = OutgoingFrame::FromHeader(header);
  auto bytes = std::make_shared<std::vector<char>>(std::move(payload));
  out.chunks.push_back(ConstChunk{bytes->data(), bytes->size(), bytes});
  return IncomingFrame::FromOutgoing(std::move(out));
}

std::vector<char> Bytes(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  return std::vector<char>(p, p + n);
}

struct PullResult {
  absl::Status status = absl::UnknownError("not answered");
  std::vector<float> rows;
  int64_t version = -1;
};

// Sends a pull; the result is filled when it is answered (now or later).
void Pull(SparseTables& tables, const std::vector<uint64_t>& keys, int64_t min_version, PullResult* result,
          int64_t timeout_ms = 0) {
  SparsePullRequest request;
  request.set_table("ads");
  request.set_num_ids(static_cast<int64_t>(keys.size()));
  request.set_min_version(min_version);
  request.set_timeout_ms(timeout_ms);
  IncomingFrame frame = Frame(request, Bytes(keys.data(), keys.size() * 8));
  tables.Pull(request, frame, [result](absl::Status status, OutgoingFrame response) {
    result->status = status;
    if (!status.ok()) return;
    IncomingFrame in = IncomingFrame::FromOutgoing(std::move(response));
    SparsePullResponse header;
    ASSERT_TRUE(in.ParseHeader(&header));
    result->version = header.version();
    std::vector<char> wire(in.remaining());
    ASSERT_TRUE(in.Read(wire.data(), wire.size()).ok());
    result->rows.resize(header.num_ids() * header.dim());
    DecodeFloats(header.dtype(), wire.data(), result->rows.size(), result->rows.data());
  });
}

PullResult PullNow(SparseTables& tables, const std::vector<uint64_t>& keys) {
  PullResult result;
  Pull(tables, keys, 0, &result);
  EXPECT_TRUE(result.status.ok()) << result.status;
  return result;
}

absl::StatusOr<SparsePushResponse> Push(SparseTables& tables, int worker, int64_t step,
                                        const std::vector<uint64_t>& keys, const std::vector<float>& rows,
                                        WireDType dtype = DT_FLOAT32) {
  SparsePushRequest request;
  request.set_worker(worker);
  request.set_table("ads");
  request.set_num_ids(static_cast<int64_t>(keys.size()));
  request.set_dim(kDim);
  request.set_dtype(dtype);
  request.set_step(step);
  std::vector<char> payload = Bytes(keys.data(), keys.size() * 8);
  std::vector<char> encoded(rows.size() * WireDTypeSize(dtype));
  EncodeFloats(dtype, rows.data(), rows.size(), encoded.data());
  payload.insert(payload.end(), encoded.begin(), encoded.end());
  IncomingFrame frame = Frame(request, std::move(payload));
  return tables.Push(request, frame);
}

std::vector<float> Initial(uint64_t key) {
  std::vector<float> row(kDim);
  InitialEmbeddingRow(5, EmbeddingTableDigest("ads"), key, 0.01f, absl::MakeSpan(row));
  return row;
}

TEST(SparseTablesTest, AsyncPushesApplyOnArrival) {
  std::unique_ptr<SparseTables> tables = Make(Options(/*sync=*/false, 2));
  std::vector<float> both = Initial(8), nine = Initial(9);
  both.insert(both.end(), nine.begin(), nine.end());
  EXPECT_EQ(PullNow(*tables, {8, 9}).rows, both);
  absl::StatusOr<SparsePushResponse> r = Push(*tables, 1, 0, {9}, {1, 2, 4});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->applied_rows(), 1);
  EXPECT_EQ(r->version(), 1);
  PullResult after = PullNow(*tables, {9});
  EXPECT_EQ(after.version, 1);
  const std::vector<float> grad = {1, 2, 4};
  for (int d = 0; d < kDim; ++d) {
    EXPECT_FLOAT_EQ(after.rows[d], Initial(9)[d] - 0.5f * grad[d]);
  }
}

TEST(SparseTablesTest, SyncStepAppliesTheWorkersMeanOnceAllPushedAndWakesPulls) {
  std::unique_ptr<SparseTables> tables = Make(Options(/*sync=*/true, 2));
  PullResult parked;
  Pull(*tables, {1, 2}, /*min_version=*/1, &parked);
  ASSERT_TRUE(Push(*tables, 0, 0, {1, 2}, {2, 2, 2, 4, 4, 4}).ok());
  EXPECT_EQ(parked.status.code(), absl::StatusCode::kUnknown);  // still parked
  EXPECT_EQ(PullNow(*tables, {1}).rows, Initial(1));            // nothing applied yet
  absl::StatusOr<SparsePushResponse> last = Push(*tables, 1, 0, {2, 3}, {6, 6, 6, 8, 8, 8});
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->applied_rows(), 3);
  EXPECT_EQ(last->version(), 1);
  ASSERT_TRUE(parked.status.ok()) << parked.status;
  EXPECT_EQ(parked.version, 1);
  for (int d = 0; d < kDim; ++d) {
    EXPECT_FLOAT_EQ(parked.rows[d], Initial(1)[d] - 0.5f * 2 / 2);          // only worker 0 had key 1
    EXPECT_FLOAT_EQ(parked.rows[kDim + d], Initial(2)[d] - 0.5f * 10 / 2);  // 4 + 6
  }
  EXPECT_FLOAT_EQ(PullNow(*tables, {3}).rows[0], Initial(3)[0] - 0.5f * 8 / 2);
}

TEST(SparseTablesTest, SyncResultDoesNotDependOnArrivalOrder) {
  const std::vector<std::vector<float>> rows = {{0.1f, 1e-3f, 7}, {3.3f, -2e-4f, 1e5f}, {-1.7f, 9e-4f, -1e5f}};
  std::vector<std::vector<float>> results;
  for (const std::vector<int>& order : std::vector<std::vector<int>>{{0, 1, 2}, {2, 0, 1}, {1, 2, 0}}) {
    std::unique_ptr<SparseTables> tables = Make(Options(/*sync=*/true, 3));
    for (int w : order) ASSERT_TRUE(Push(*tables, w, 0, {77}, rows[w]).ok());
    results.push_back(PullNow(*tables, {77}).rows);
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

TEST(SparseTablesTest, MalformedPushesAreRefusedAndChangeNothing) {
  std::unique_ptr<SparseTables> tables = Make(Options(/*sync=*/true, 2, /*shards=*/1));
  ASSERT_TRUE(Push(*tables, 0, 0, {5}, {1, 1, 1}).ok());
  auto refused = [&](absl::StatusOr<SparsePushResponse> r, const std::string& why) {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << why;
    EXPECT_THAT(r.status().message(), HasSubstr(why));
  };
  refused(Push(*tables, 0, 0, {6}, {1, 1, 1}), "pushed step 0 twice");
  refused(Push(*tables, 1, 0, {6, 6}, {1, 1, 1, 1, 1, 1}), "repeated");
  refused(Push(*tables, 1, 0, {6}, {1, 1}), "bytes of rows");
  refused(Push(*tables, 2, 0, {6}, {1, 1, 1}), "worker 2 out of range");
  refused(Push(*tables, 1, 0, {6}, {1, 1, 1}, DT_FLOAT16), "dtype");
  ASSERT_TRUE(Push(*tables, 1, 0, {6}, {1, 1, 1}).ok());
  refused(Push(*tables, 1, 0, {6}, {1, 1, 1}), "the table has applied 1 steps");
  EXPECT_EQ(tables->Stats()[0].version(), 1);
  EXPECT_EQ(tables->Stats()[0].pushed_rows(), 2);
}

TEST(SparseTablesTest, KeysOfAnotherShardAndUnknownTablesAreRefused) {
  SparseTablesOptions o = Options(/*sync=*/false, 1, /*shards=*/2);
  std::unique_ptr<SparseTables> tables = Make(o);
  uint64_t foreign = 0;
  while (EmbeddingKeyShard(foreign, 2) == 0) ++foreign;
  PullResult r;
  Pull(*tables, {foreign}, 0, &r);
  EXPECT_THAT(r.status.message(), HasSubstr("belongs to shard 1"));
  SparsePullRequest request;
  request.set_table("clicks");
  IncomingFrame frame = Frame(request, {});
  tables->Pull(request, frame, [&r](absl::Status s, OutgoingFrame) { r.status = s; });
  EXPECT_THAT(r.status.message(), HasSubstr("no embedding table 'clicks' on shard 0"));
}

TEST(SparseTablesTest, AParkedPullTimesOutSayingWhatItWaitedFor) {
  std::unique_ptr<SparseTables> tables = Make(Options(/*sync=*/true, 2));
  PullResult r;
  Pull(*tables, {1}, /*min_version=*/3, &r, /*timeout_ms=*/10);
  tables->ExpirePulls(absl::Now());
  EXPECT_EQ(r.status.code(), absl::StatusCode::kUnknown);  // not yet
  tables->ExpirePulls(absl::Now() + absl::Seconds(1));
  EXPECT_EQ(r.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(r.status.message(), HasSubstr("for version >= 3 timed out at version 0"));
}

TEST(SparseTablesTest, SixteenBitRowsTravelAsHalfTheBytes) {
  std::unique_ptr<SparseTables> tables = Make(Options(/*sync=*/false, 1, 1, EmbeddingTableConfig::bf16));
  PullResult r = PullNow(*tables, {4});
  for (int d = 0; d < kDim; ++d) {
    EXPECT_NEAR(r.rows[d], Initial(4)[d], 1e-4);
  }
  ASSERT_TRUE(Push(*tables, 0, 0, {4}, {1, 1, 1}, DT_BFLOAT16).ok());
  EXPECT_NEAR(PullNow(*tables, {4}).rows[0], Initial(4)[0] - 0.5f, 1e-2);
}

// Workers on threads of their own, as transport threads deliver them: each
// step every worker pulls its rows at the step's version (parked until the
// previous step applied) and pushes; the end is the same as the steps run
// one worker at a time (summed in worker order, so bit for bit).
TEST(SparseTablesTest, ConcurrentSyncWorkersEndWhereSequentialOnesDo) {
  constexpr int kWorkers = 4, kSteps = 20;
  auto keys_of = [](int w, int step) {
    return std::vector<uint64_t>{static_cast<uint64_t>(step % 5), static_cast<uint64_t>(10 + (w + step) % 3)};
  };
  auto run = [&](bool threads) {
    std::unique_ptr<SparseTables> tables = Make(Options(/*sync=*/true, kWorkers));
    auto one_step = [&](int w, int step) {
      {
        absl::Notification pulled;
        PullResult r;
        SparsePullRequest request;
        request.set_table("ads");
        const std::vector<uint64_t> keys = keys_of(w, step);
        request.set_num_ids(static_cast<int64_t>(keys.size()));
        request.set_min_version(step);
        IncomingFrame frame = Frame(request, Bytes(keys.data(), keys.size() * 8));
        tables->Pull(request, frame, [&](absl::Status s, OutgoingFrame) {
          r.status = s;
          pulled.Notify();
        });
        pulled.WaitForNotification();
        ASSERT_TRUE(r.status.ok()) << r.status;
        std::vector<float> grads(keys.size() * kDim, 0.25f * (w + 1));
        ASSERT_TRUE(Push(*tables, w, step, keys, grads).ok());
      }
    };
    if (threads) {
      std::vector<std::thread> pool;
      for (int w = 0; w < kWorkers; ++w) {
        pool.emplace_back([&one_step, w] {
          for (int step = 0; step < kSteps; ++step) one_step(w, step);
        });
      }
      for (std::thread& t : pool) t.join();
    } else {
      // One step at a time, every worker in turn.
      for (int step = 0; step < kSteps; ++step) {
        for (int w = 0; w < kWorkers; ++w) one_step(w, step);
      }
    }
    std::vector<uint64_t> all = {0, 1, 2, 3, 4, 10, 11, 12};
    return PullNow(*tables, all).rows;
  };
  EXPECT_EQ(run(/*threads=*/true), run(/*threads=*/false));
}

TEST(SparseTablesTest, BadTableConfigsAreRefusedNamingTheTable) {
  SparseTablesOptions o = Options(false, 1);
  o.tables.push_back(o.tables[0]);
  EXPECT_THAT(SparseTables::Create(o).status().message(), HasSubstr("table 'ads' is named twice"));
}

}  // namespace
}  // namespace pstrain
