// Gloo collectives with ranks as threads of this process: TCP over loopback,
// rendezvous through the chief's KvStoreService served over inproc or gRPC
// (rank 0 uses the service's table directly, as the chief does).
#include <atomic>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/barrier.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/transport/inproc/inproc_transport.h"
#include "common/transport/transport.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/collective.h"
// Pins gRPC's callback completion queue for the whole binary (see there).
#include "worker/collective/kv_store.h"

namespace pstrain {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

enum class StoreKind { kInproc, kGrpc };

// The chief's rendezvous store, served over a transport.
class Chief {
 public:
  explicit Chief(StoreKind kind) {
    if (kind == StoreKind::kInproc) {
      transport_ = std::make_unique<InprocTransport>();
      address_ = "worker0:2222";
    } else {
      transport_ = CreateTransport("grpc", TransportOptions()).value();
      address_ = "127.0.0.1:0";
    }
    server_ = transport_->Serve(address_, &service_).value();
    if (kind == StoreKind::kGrpc) address_ = absl::StrCat("127.0.0.1:", server_->port());
  }
  ~Chief() {
    service_.CancelPending(absl::CancelledError("test over"));
    server_->Shutdown(absl::Seconds(1));
  }

  // Rank 0 is the chief: its own table. Others: a client over the transport.
  std::unique_ptr<KeyValueStore> StoreFor(int rank) {
    if (rank == 0) return nullptr;
    return TransportKeyValueStore::Connect(transport_.get(), address_).value();
  }
  KeyValueStore* local() { return service_.local_store(); }

 private:
  std::unique_ptr<Transport> transport_;
  KvStoreService service_;
  std::unique_ptr<Server> server_;
  std::string address_;
};

std::string UniquePrefix() {
  static std::atomic<int> n{0};
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return absl::StrCat(info->test_suite_name(), ".", info->name(), ".", n++);
}

struct RankOptions {
  absl::Duration timeout = absl::Seconds(30);  // generous: a loaded shared machine
  absl::Duration connect_timeout = absl::Seconds(30);
  std::string prefix;
};

// Options of rank `rank` of `size` on loopback, reaching the store through
// `client` (null: the chief's own table).
CollectiveOptions LoopbackOptions(Chief& chief, KeyValueStore* client, int rank, int size, const std::string& prefix,
                                  const RankOptions& timing) {
  CollectiveOptions options;
  options.rank = rank;
  options.size = size;
  options.host = "127.0.0.1";
  options.store = client != nullptr ? client : chief.local();
  options.prefix = prefix;
  options.timeout = timing.timeout;
  options.connect_timeout = timing.connect_timeout;
  return options;
}

// Runs `fn(rank, collective)` on `ranks` threads, each after joining the
// communicator (a join error fails the test). Ranks in `absent` never join.
void RunRanks(Chief& chief, int ranks, const RankOptions& rank_options,
              const std::function<void(int, Collective*)>& fn) {
  const std::string prefix = rank_options.prefix.empty() ? UniquePrefix() : rank_options.prefix;
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<KeyValueStore> client = chief.StoreFor(r);
      const CollectiveOptions options = LoopbackOptions(chief, client.get(), r, ranks, prefix, rank_options);
      absl::StatusOr<std::unique_ptr<Collective>> collective = CreateGlooCollective(options);
      ASSERT_TRUE(collective.ok()) << "rank " << r << ": " << collective.status();
      EXPECT_EQ((*collective)->rank(), r);
      EXPECT_EQ((*collective)->size(), ranks);
      fn(r, collective->get());
    });
  }
  for (std::thread& t : threads) t.join();
}

// ---- correctness, 2 and 3 ranks, store over inproc and gRPC ----

class GlooCollectiveTest : public ::testing::TestWithParam<std::tuple<int, StoreKind>> {
 protected:
  GlooCollectiveTest() : chief_(std::get<1>(GetParam())) {}
  int ranks() const { return std::get<0>(GetParam()); }
  Chief chief_;
};

std::string ParamName(const ::testing::TestParamInfo<std::tuple<int, StoreKind>>& info) {
  return absl::StrCat(std::get<0>(info.param), "Ranks",
                      std::get<1>(info.param) == StoreKind::kInproc ? "Inproc" : "Grpc");
}

// Integer-valued floats (< 2^24) sum exactly in any order.
float Value(int rank, size_t i) { return static_cast<float>((i * 31 + rank * 7) % 1024); }

TEST_P(GlooCollectiveTest, AllReduceSumIsExact) {
  const size_t count = 1000 + 7;
  RunRanks(chief_, ranks(), {}, [&](int r, Collective* c) {
    std::vector<float> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = Value(r, i);
    ASSERT_TRUE(c->AllReduceSum(data.data(), count).ok());
    for (size_t i = 0; i < count; ++i) {
      float expected = 0;
      for (int q = 0; q < ranks(); ++q) expected += Value(q, i);
      ASSERT_EQ(data[i], expected) << "rank " << r << " element " << i;
    }
  });
}

TEST_P(GlooCollectiveTest, LargeBufferOf4MFloats) {
  const size_t count = size_t{4} << 20;
  RunRanks(chief_, ranks(), {}, [&](int r, Collective* c) {
    std::vector<float> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(i % 4096 + r);
    ASSERT_TRUE(c->AllReduceSum(data.data(), count).ok());
    const int n = ranks();
    const float rank_sum = static_cast<float>(n * (n - 1) / 2);
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      if (data[i] != static_cast<float>(n * (i % 4096)) + rank_sum) ++wrong;
    }
    EXPECT_EQ(wrong, 0u) << "rank " << r;
  });
}

TEST_P(GlooCollectiveTest, ManySmallCallsIncludingFewerElementsThanRanks) {
  constexpr int kCalls = 300;
  RunRanks(chief_, ranks(), {}, [&](int r, Collective* c) {
    for (int call = 0; call < kCalls; ++call) {
      const size_t count = 1 + (call * 7) % 50;  // 1, 8, 15, ... (1 and 2 < ranks)
      std::vector<float> data(count);
      for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(call + i + r);
      ASSERT_TRUE(c->AllReduceSum(data.data(), count).ok()) << "call " << call;
      const int n = ranks();
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(data[i], static_cast<float>(n * (call + i) + n * (n - 1) / 2)) << "call " << call << " i " << i;
      }
    }
    std::vector<float> empty;
    EXPECT_TRUE(c->AllReduceSum(empty.data(), 0).ok());
  });
}

TEST_P(GlooCollectiveTest, BroadcastFromEveryRoot) {
  const size_t count = 100003;
  RunRanks(chief_, ranks(), {}, [&](int r, Collective* c) {
    for (int root = 0; root < ranks(); ++root) {
      std::vector<float> data(count, -1.0f);
      if (r == root) {
        for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(root * 1000 + i % 977);
      }
      ASSERT_TRUE(c->Broadcast(data.data(), count, root).ok()) << "root " << root;
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(data[i], static_cast<float>(root * 1000 + i % 977)) << "rank " << r << " root " << root;
      }
    }
    float x = 0;
    absl::Status bad = c->Broadcast(&x, 1, ranks());
    EXPECT_TRUE(absl::IsInvalidArgument(bad)) << bad;
  });
}

TEST_P(GlooCollectiveTest, BarrierWaitsForTheLastRank) {
  std::vector<absl::Time> arrived(ranks()), left(ranks());
  RunRanks(chief_, ranks(), {}, [&](int r, Collective* c) {
    ASSERT_TRUE(c->Barrier().ok());  // everyone connected
    absl::SleepFor(absl::Milliseconds(200) * r);
    arrived[r] = absl::Now();
    ASSERT_TRUE(c->Barrier().ok());
    left[r] = absl::Now();
  });
  const absl::Time last = *std::max_element(arrived.begin(), arrived.end());
  for (int r = 0; r < ranks(); ++r) EXPECT_GE(left[r], last) << "rank " << r << " left the barrier early";
}

TEST_P(GlooCollectiveTest, TwoCommunicatorsShareOneStore) {
  RankOptions a, b;
  a.prefix = UniquePrefix() + "/a";
  b.prefix = UniquePrefix() + "/b";
  std::thread second([&] {
    RunRanks(chief_, ranks(), b, [&](int r, Collective* c) {
      float x = 10.0f * (r + 1);
      ASSERT_TRUE(c->AllReduceSum(&x, 1).ok());
      EXPECT_EQ(x, 10.0f * ranks() * (ranks() + 1) / 2);
    });
  });
  RunRanks(chief_, ranks(), a, [&](int r, Collective* c) {
    float x = 1.0f;
    ASSERT_TRUE(c->AllReduceSum(&x, 1).ok());
    EXPECT_EQ(x, static_cast<float>(ranks()));
  });
  second.join();
}

INSTANTIATE_TEST_SUITE_P(Ranks, GlooCollectiveTest,
                         ::testing::Combine(::testing::Values(2, 3),
                                            ::testing::Values(StoreKind::kInproc, StoreKind::kGrpc)),
                         ParamName);

// ---- options and edge cases ----

TEST(GlooCollectiveOptionsTest, BadOptionsAreInvalidArgument) {
  InMemoryKeyValueStore store;
  CollectiveOptions ok;
  ok.host = "127.0.0.1";
  ok.store = &store;
  auto bad = [&](auto mutate) {
    CollectiveOptions o = ok;
    mutate(o);
    return CreateGlooCollective(o).status();
  };
  EXPECT_TRUE(absl::IsInvalidArgument(bad([](CollectiveOptions& o) { o.size = 0; })));
  EXPECT_TRUE(absl::IsInvalidArgument(bad([](CollectiveOptions& o) { o.rank = 1; })));
  EXPECT_TRUE(absl::IsInvalidArgument(bad([](CollectiveOptions& o) { o.rank = -1; })));
  EXPECT_TRUE(absl::IsInvalidArgument(bad([](CollectiveOptions& o) { o.store = nullptr; })));
  EXPECT_TRUE(absl::IsInvalidArgument(bad([](CollectiveOptions& o) { o.host = ""; })));
  EXPECT_TRUE(absl::IsInvalidArgument(bad([](CollectiveOptions& o) { o.timeout = absl::ZeroDuration(); })));
}

TEST(GlooCollectiveOptionsTest, UnresolvableHostIsUnavailable) {
  InMemoryKeyValueStore store;
  CollectiveOptions o;
  o.host = "no-such-host.invalid";
  o.store = &store;
  absl::StatusOr<std::unique_ptr<Collective>> c = CreateGlooCollective(o);
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::IsUnavailable(c.status())) << c.status();
  EXPECT_THAT(c.status().message(), HasSubstr("no-such-host.invalid"));
}

TEST(GlooCollectiveOptionsTest, SingleRankIsTheIdentity) {
  InMemoryKeyValueStore store;
  CollectiveOptions o;
  o.host = "127.0.0.1";
  o.store = &store;
  absl::StatusOr<std::unique_ptr<Collective>> c = CreateGlooCollective(o);
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<float> data = {1, 2, 3};
  ASSERT_TRUE((*c)->AllReduceSum(data.data(), data.size()).ok());
  ASSERT_TRUE((*c)->Broadcast(data.data(), data.size(), 0).ok());
  ASSERT_TRUE((*c)->Barrier().ok());
  EXPECT_EQ(data, (std::vector<float>{1, 2, 3}));
}

// ---- failures: errors within the timeout, never a hang ----

TEST(GlooCollectiveFailureTest, RankThatNeverJoinsFailsTheOthersNamingIt) {
  Chief chief(StoreKind::kGrpc);
  const std::string prefix = UniquePrefix();
  constexpr int kSize = 3;
  std::vector<absl::Status> status(2);
  std::vector<absl::Duration> took(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {  // rank 2 never comes
    threads.emplace_back([&, r] {
      std::unique_ptr<KeyValueStore> client = chief.StoreFor(r);
      const RankOptions timing = {.timeout = absl::Seconds(3), .connect_timeout = absl::ZeroDuration(), .prefix = ""};
      const CollectiveOptions o = LoopbackOptions(chief, client.get(), r, kSize, prefix, timing);
      const absl::Time start = absl::Now();
      status[r] = CreateGlooCollective(o).status();
      took[r] = absl::Now() - start;
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    std::cerr << "rank " << r << " after " << took[r] << ": " << status[r] << "\n";
    EXPECT_TRUE(absl::IsDeadlineExceeded(status[r])) << status[r];
    EXPECT_THAT(status[r].message(), AllOf(HasSubstr(absl::StrCat("rank ", r, " of 3")),
                                           HasSubstr("rank 2 has not joined"), HasSubstr("3s"), HasSubstr(prefix)));
    EXPECT_GE(took[r], absl::Milliseconds(2500));
    EXPECT_LT(took[r], absl::Seconds(8));
  }
}

TEST(GlooCollectiveFailureTest, PeerThatStopsParticipatingTimesOutAndBreaksTheCommunicator) {
  Chief chief(StoreKind::kInproc);
  RankOptions options;
  options.timeout = absl::Seconds(1);
  absl::Notification rank0_done;
  RunRanks(chief, 2, options, [&](int r, Collective* c) {
    if (r == 1) {  // joined, but never calls the all-reduce
      ASSERT_TRUE(rank0_done.WaitForNotificationWithTimeout(absl::Seconds(30)));
      return;
    }
    std::vector<float> data(1000, 1.0f);
    const absl::Time start = absl::Now();
    absl::Status status = c->AllReduceSum(data.data(), data.size());
    const absl::Duration took = absl::Now() - start;
    std::cerr << "rank 0 after " << took << ": " << status << "\n";
    EXPECT_TRUE(absl::IsDeadlineExceeded(status)) << status;
    EXPECT_THAT(status.message(), AllOf(HasSubstr("rank 0 of 2"), HasSubstr("timeout 1s")));
    EXPECT_LT(took, absl::Seconds(6));
    // Broken from now on, at once.
    absl::Status again = c->Barrier();
    EXPECT_TRUE(absl::IsFailedPrecondition(again)) << again;
    EXPECT_THAT(again.message(), HasSubstr("broken"));
    rank0_done.Notify();
  });
}

TEST(GlooCollectiveFailureTest, PeerThatGoesAwayFailsTheOthersWithinTheTimeout) {
  Chief chief(StoreKind::kInproc);
  const std::string prefix = UniquePrefix();
  constexpr int kSize = 3;
  std::vector<absl::Status> status(kSize);
  std::vector<absl::Duration> took(kSize);
  absl::Barrier* joined = new absl::Barrier(kSize);
  std::vector<std::thread> threads;
  for (int r = 0; r < kSize; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<KeyValueStore> client = chief.StoreFor(r);
      const RankOptions timing = {.timeout = absl::Seconds(3), .connect_timeout = absl::Seconds(30), .prefix = ""};
      const CollectiveOptions o = LoopbackOptions(chief, client.get(), r, kSize, prefix, timing);
      absl::StatusOr<std::unique_ptr<Collective>> c = CreateGlooCollective(o);
      ASSERT_TRUE(c.ok()) << c.status();
      std::vector<float> data(1 << 16, 1.0f);
      ASSERT_TRUE((*c)->AllReduceSum(data.data(), data.size()).ok());
      if (joined->Block()) delete joined;
      if (r == 2) return;  // destroys its communicator: sockets close
      absl::SleepFor(absl::Milliseconds(200));
      const absl::Time start = absl::Now();
      status[r] = (*c)->AllReduceSum(data.data(), data.size());
      took[r] = absl::Now() - start;
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    std::cerr << "rank " << r << " after " << took[r] << ": " << status[r] << "\n";
    EXPECT_FALSE(status[r].ok());
    EXPECT_THAT(status[r].message(), HasSubstr(absl::StrCat("rank ", r, " of 3")));
    EXPECT_LT(took[r], absl::Seconds(8));
  }
}

}  // namespace
}  // namespace pstrain
