// The rendezvous key-value store: the same semantics in memory, over the
// in-process transport and over real gRPC on loopback.
#include "worker/collective/kv_store.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/transport/inproc/inproc_transport.h"
#include "common/transport/transport.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
// Pins gRPC's callback completion queue for the whole binary (see there).
#include "worker/collective/kv_store.pb.h"

namespace pstrain {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

enum class Kind { kMemory, kInproc, kGrpc };

std::string KindName(const ::testing::TestParamInfo<Kind>& info) {
  switch (info.param) {
    case Kind::kMemory:
      return "Memory";
    case Kind::kInproc:
      return "Inproc";
    case Kind::kGrpc:
      return "Grpc";
  }
  return "?";
}

absl::Time In(absl::Duration d) { return absl::Now() + d; }

// A chief serving a KvStoreService, and a client store talking to it.
class KvStoreTest : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override {
    service_ = std::make_unique<KvStoreService>();
    switch (GetParam()) {
      case Kind::kMemory:
        return;
      case Kind::kInproc:
        transport_ = std::make_unique<InprocTransport>();
        address_ = "worker0:2222";
        break;
      case Kind::kGrpc: {
        absl::StatusOr<std::unique_ptr<Transport>> grpc = CreateTransport("grpc", TransportOptions());
        ASSERT_TRUE(grpc.ok()) << grpc.status();
        transport_ = *std::move(grpc);
        break;
      }
    }
    Serve(GetParam() == Kind::kGrpc ? "127.0.0.1:0" : address_);
  }

  void Serve(const std::string& address) {
    absl::StatusOr<std::unique_ptr<Server>> server = transport_->Serve(address, service_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    if (GetParam() == Kind::kGrpc) address_ = absl::StrCat("127.0.0.1:", server_->port());
  }

  void TearDown() override { StopServer(); }

  void StopServer() {
    if (server_ == nullptr) return;
    service_->CancelPending(absl::CancelledError("chief finished"));
    server_->Shutdown(absl::Seconds(1));
    server_.reset();
  }

  // A fresh client (each simulated worker has its own channel).
  std::unique_ptr<KeyValueStore> NewClient() {
    absl::StatusOr<std::unique_ptr<TransportKeyValueStore>> client =
        TransportKeyValueStore::Connect(transport_.get(), address_);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  KeyValueStore* store() {
    if (GetParam() == Kind::kMemory) return service_->local_store();
    if (client_ == nullptr) client_ = NewClient();
    return client_.get();
  }

  std::unique_ptr<Transport> transport_;
  std::unique_ptr<KvStoreService> service_;
  std::unique_ptr<Server> server_;
  std::string address_;
  std::unique_ptr<KeyValueStore> client_;
};

TEST_P(KvStoreTest, SetThenGet) {
  ASSERT_TRUE(store()->Set("a", "alpha", In(absl::Seconds(5))).ok());
  absl::StatusOr<std::string> value = store()->Get("a", In(absl::Seconds(5)));
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "alpha");
}

TEST_P(KvStoreTest, BinaryValuesAndOverwrite) {
  std::string binary("\0\1\2\xff zero inside", 17);
  ASSERT_TRUE(store()->Set("bin", binary, In(absl::Seconds(5))).ok());
  EXPECT_EQ(store()->Get("bin", In(absl::Seconds(5))).value_or("?"), binary);
  ASSERT_TRUE(store()->Set("bin", "", In(absl::Seconds(5))).ok());
  EXPECT_EQ(store()->Get("bin", In(absl::Seconds(5))).value_or("?"), "");
}

TEST_P(KvStoreTest, GetWaitsForALaterSet) {
  KeyValueStore* reader = store();
  std::thread writer([&] {
    absl::SleepFor(absl::Milliseconds(300));
    // The writer is another worker (its own channel) or the chief itself.
    std::unique_ptr<KeyValueStore> other = GetParam() == Kind::kMemory ? nullptr : NewClient();
    KeyValueStore* w = other ? other.get() : service_->local_store();
    EXPECT_TRUE(w->Set("late", "value", In(absl::Seconds(5))).ok());
  });
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> value = reader->Get("late", In(absl::Seconds(10)));
  const absl::Duration waited = absl::Now() - start;
  writer.join();
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "value");
  EXPECT_GE(waited, absl::Milliseconds(250));
  EXPECT_LT(waited, absl::Seconds(5));
}

TEST_P(KvStoreTest, ChiefLocalSetWakesRemoteWaiters) {
  std::thread chief([&] {
    absl::SleepFor(absl::Milliseconds(200));
    EXPECT_TRUE(service_->local_store()->Set("k2", "2", absl::InfiniteFuture()).ok());
    absl::SleepFor(absl::Milliseconds(100));
    EXPECT_TRUE(service_->local_store()->Set("k1", "1", absl::InfiniteFuture()).ok());
  });
  absl::Status status = store()->Wait({"k1", "k2"}, In(absl::Seconds(10)));
  chief.join();
  EXPECT_TRUE(status.ok()) << status;
}

TEST_P(KvStoreTest, ManyConcurrentWaitersAllWake) {
  constexpr int kWaiters = 16;
  std::vector<std::unique_ptr<KeyValueStore>> clients;
  for (int i = 0; i < kWaiters; ++i) {
    clients.push_back(GetParam() == Kind::kMemory ? nullptr : NewClient());
  }
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      KeyValueStore* s = clients[i] ? clients[i].get() : service_->local_store();
      absl::StatusOr<std::string> v = s->Get("go", In(absl::Seconds(10)));
      if (v.ok() && *v == "now") ++ok;
    });
  }
  absl::SleepFor(absl::Milliseconds(200));
  ASSERT_TRUE(store()->Set("go", "now", In(absl::Seconds(5))).ok());
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), kWaiters);
}

TEST_P(KvStoreTest, GetDeadlineNamesTheKey) {
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> value = store()->Get("rank/7", In(absl::Milliseconds(500)));
  const absl::Duration waited = absl::Now() - start;
  ASSERT_FALSE(value.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(value.status())) << value.status();
  EXPECT_THAT(value.status().message(), AllOf(HasSubstr("\"rank/7\""), HasSubstr("not set within")));
  EXPECT_GE(waited, absl::Milliseconds(490));  // not before its deadline
  EXPECT_LT(waited, absl::Seconds(3));
}

TEST_P(KvStoreTest, WaitDeadlineNamesTheMissingKeys) {
  ASSERT_TRUE(store()->Set("p/0", "x", In(absl::Seconds(5))).ok());
  absl::Status status = store()->Wait({"p/0", "p/1", "p/2"}, In(absl::Milliseconds(500)));
  ASSERT_TRUE(absl::IsDeadlineExceeded(status)) << status;
  EXPECT_THAT(status.message(), AllOf(HasSubstr("p/1"), HasSubstr("p/2")));
  if (GetParam() == Kind::kMemory) {
    EXPECT_THAT(status.message(), Not(HasSubstr("p/0")));
  }
}

// Tests about the chief's server itself (not for the in-memory store).
class KvRemoteStoreTest : public KvStoreTest {};

TEST_P(KvRemoteStoreTest, ClientStartedBeforeTheChiefWaitsForIt) {
  StopServer();
  std::unique_ptr<KeyValueStore> early = NewClient();
  std::thread chief([&] {
    absl::SleepFor(absl::Milliseconds(400));
    ASSERT_TRUE(service_->local_store()->Set("addr/0", "chief", absl::InfiniteFuture()).ok());
    // Same address again (gRPC: the port it had).
    Serve(address_);
  });
  absl::StatusOr<std::string> value = early->Get("addr/0", In(absl::Seconds(10)));
  chief.join();
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "chief");
  // Set also waits for the chief.
  EXPECT_TRUE(early->Set("addr/1", "one", In(absl::Seconds(5))).ok());
}

TEST_P(KvRemoteStoreTest, ChiefThatNeverComesUpIsADeadlineNamingAddressAndKey) {
  StopServer();
  std::unique_ptr<KeyValueStore> orphan = NewClient();
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> value = orphan->Get("gloo/1", In(absl::Milliseconds(700)));
  const absl::Duration waited = absl::Now() - start;
  ASSERT_FALSE(value.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(value.status()) || absl::IsUnavailable(value.status())) << value.status();
  EXPECT_THAT(value.status().message(), AllOf(HasSubstr(address_), HasSubstr("gloo/1")));
  EXPECT_LT(waited, absl::Seconds(3));
}

TEST_P(KvRemoteStoreTest, ParkedRequestsAreAnsweredWhenTheChiefStops) {
  std::unique_ptr<KeyValueStore> client = NewClient();
  absl::Notification started;
  absl::Status status;
  std::thread waiter([&] {
    started.Notify();
    status = client->Wait({"never"}, In(absl::Seconds(20)));
  });
  started.WaitForNotification();
  absl::SleepFor(absl::Milliseconds(300));  // let the request park
  const absl::Time stop = absl::Now();
  StopServer();
  waiter.join();
  EXPECT_TRUE(absl::IsCancelled(status)) << status;
  EXPECT_THAT(status.message(), AllOf(HasSubstr("chief finished"), HasSubstr("never")));
  EXPECT_LT(absl::Now() - stop, absl::Seconds(5));
}

INSTANTIATE_TEST_SUITE_P(AllStores, KvStoreTest, ::testing::Values(Kind::kMemory, Kind::kInproc, Kind::kGrpc),
                         KindName);
INSTANTIATE_TEST_SUITE_P(RemoteStores, KvRemoteStoreTest, ::testing::Values(Kind::kInproc, Kind::kGrpc), KindName);

TEST(InMemoryKeyValueStoreTest, DeadlineInThePastProbesOnce) {
  InMemoryKeyValueStore store;
  EXPECT_TRUE(absl::IsDeadlineExceeded(store.Get("nope", absl::InfinitePast()).status()));
  EXPECT_TRUE(absl::IsDeadlineExceeded(store.Wait({"nope"}, absl::InfinitePast())));
  ASSERT_TRUE(store.Set("yes", "1", absl::InfinitePast()).ok());
  EXPECT_EQ(store.Get("yes", absl::InfinitePast()).value_or("?"), "1");
  EXPECT_TRUE(store.Wait({"yes"}, absl::InfinitePast()).ok());
  EXPECT_EQ(store.size(), 1u);
}

// Malformed and unknown requests are rejected without touching the table.
TEST(KvStoreServiceTest, RejectsBadRequests) {
  KvStoreService service;
  auto call = [&](std::string_view method, const collective::KvRequest& req) {
    absl::Status result = absl::InternalError("not answered");
    service.Handle(method, IncomingFrame::FromOutgoing(OutgoingFrame::FromHeader(req)),
                   [&](absl::Status status, OutgoingFrame) { result = status; });
    return result;
  };
  collective::KvRequest two_keys;
  two_keys.add_keys("a");
  two_keys.add_keys("b");
  EXPECT_TRUE(absl::IsInvalidArgument(call("KvSet", two_keys)));
  EXPECT_TRUE(absl::IsInvalidArgument(call("KvGet", two_keys)));
  EXPECT_TRUE(absl::IsInvalidArgument(call("KvWait", collective::KvRequest())));
  EXPECT_TRUE(absl::IsUnimplemented(call("Pull", two_keys)));

  absl::Status garbage = absl::InternalError("not answered");
  service.Handle("KvSet", IncomingFrame("\xff\xff\xff", {}, nullptr),
                 [&](absl::Status status, OutgoingFrame) { garbage = status; });
  EXPECT_TRUE(absl::IsInvalidArgument(garbage)) << garbage;
  EXPECT_EQ(service.local_store()->size(), 0u);

  EXPECT_TRUE(KvStoreService::Handles("KvWait"));
  EXPECT_FALSE(KvStoreService::Handles("Push"));
}

// A parked request whose wait runs out is answered by the server itself.
TEST(KvStoreServiceTest, ServerExpiresParkedRequests) {
  KvStoreService service;
  collective::KvRequest req;
  req.add_keys("x");
  req.add_keys("y");
  req.set_wait_ms(200);
  absl::Notification answered;
  absl::Status result;
  const absl::Time start = absl::Now();
  service.Handle("KvWait", IncomingFrame::FromOutgoing(OutgoingFrame::FromHeader(req)),
                 [&](absl::Status status, OutgoingFrame) {
                   result = status;
                   answered.Notify();
                 });
  ASSERT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(150));
  EXPECT_TRUE(absl::IsDeadlineExceeded(result)) << result;
  EXPECT_THAT(result.message(), AllOf(HasSubstr("x"), HasSubstr("y")));
}

}  // namespace
}  // namespace pstrain
