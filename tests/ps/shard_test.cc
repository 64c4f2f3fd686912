// PsShard driven through PsService over the in-process transport: Init,
// Pull, Push validation, sync/async consistency, deadlines, lost workers,
// Done/Stats (ps/shard/shard.h, ps/ps_service.h).
#include "ps/shard/shard.h"

#include <atomic>
#include <functional>
#include <ostream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ps/ps_test_util.h"

namespace pstrain {
namespace {

using ::pstrain::ps_testing::AddTensor;
using ::pstrain::ps_testing::FloatBytes;
using ::pstrain::ps_testing::PsHarness;
using ::pstrain::ps_testing::PullResult;
using ::pstrain::ps_testing::SgdOptions;
using ::pstrain::ps_testing::Var;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Dyadic values: every SGD step below is exact in float.
const Var kA{"a", {2, 3}, {1.0f, -2.0f, 0.5f, 4.0f, -0.25f, 8.0f}};
const Var kB{"b", {4}, {0.125f, 3.0f, -1.5f, 2.0f}};

Var Grad(const Var& v, std::vector<float> values) { return Var{v.name, v.shape, std::move(values)}; }

const Var kGa0 = Grad(kA, {0.5f, 1.0f, -1.0f, 0.25f, 2.0f, -0.75f});
const Var kGa1 = Grad(kA, {1.5f, -1.0f, 0.0f, 0.75f, -4.0f, 0.25f});
const Var kGb0 = Grad(kB, {1.0f, -0.5f, 0.25f, 8.0f});
const Var kGb1 = Grad(kB, {-3.0f, 0.5f, 0.75f, 0.0f});

// What the shard computes for plain SGD (weight_decay 0).
std::vector<float> SgdStep(const std::vector<float>& w, const std::vector<float>& g, float lr) {
  std::vector<float> out(w.size());
  for (size_t i = 0; i < w.size(); ++i) out[i] = w[i] - lr * (g[i] + 0.0f * w[i]);
  return out;
}

std::vector<float> Mean2(const std::vector<float>& g0, const std::vector<float>& g1) {
  std::vector<float> out(g0.size());
  for (size_t i = 0; i < g0.size(); ++i) out[i] = (g0[i] + g1[i]) * 0.5f;
  return out;
}

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

// ---------------------------------------------------------------- Init / Pull

TEST(PsShardInitTest, PullReturnsInitialValues) {
  PsHarness ps(SgdOptions(2, "sync", 0.5f));
  ASSERT_TRUE(ps.ok());
  absl::StatusOr<InitResponse> init = ps.Init({kB, kA});
  ASSERT_TRUE(init.ok()) << init.status();
  EXPECT_FALSE(init->already_initialized());

  // Empty names: every variable, sorted by name.
  PullResult all = ps.Pull();
  ASSERT_TRUE(all.status.ok()) << all.status;
  EXPECT_THAT(all.names, ElementsAre("a", "b"));
  EXPECT_THAT(all.versions, ElementsAre(0, 0));
  EXPECT_EQ(all.values["a"], kA.values);
  EXPECT_EQ(all.values["b"], kB.values);

  // Named: in the requested order, with shapes.
  PullResult named = ps.Pull({"b", "a"});
  ASSERT_TRUE(named.status.ok()) << named.status;
  EXPECT_THAT(named.names, ElementsAre("b", "a"));
  PullResponse header;
  ASSERT_TRUE(header.ParseFromString(named.header));
  EXPECT_THAT(header.tensors(0).shape(), ElementsAre(4));
  EXPECT_THAT(header.tensors(1).shape(), ElementsAre(2, 3));
  EXPECT_EQ(header.tensors(1).dtype(), DT_FLOAT32);
  EXPECT_EQ(header.tensors(1).num_bytes(), 24u);
}

TEST(PsShardInitTest, SecondInitIsAcknowledgedAndIgnored) {
  PsHarness ps(SgdOptions(2, "sync", 0.5f));
  ASSERT_TRUE(ps.Init({kA}).ok());
  const std::string before = ps.Snapshot();
  Var other = kA;
  other.values.assign(6, 42.0f);
  absl::StatusOr<InitResponse> again = ps.Init({other, kB}, /*worker=*/1);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->already_initialized());
  EXPECT_EQ(ps.Snapshot(), before);
  EXPECT_EQ(ps.Pull({"b"}).status.code(), absl::StatusCode::kInvalidArgument);
}

TEST(PsShardInitTest, MalformedInitChangesNothing) {
  PsHarness ps(SgdOptions(2, "sync", 0.5f));
  {  // payload shorter than declared
    InitRequest header;
    AddTensor(header.add_tensors(), "a", {2, 3}, 24);
    absl::StatusOr<InitResponse> r = ps.InitRaw(header, FloatBytes({1, 2, 3, 4, 5}));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  }
  {  // payload longer than declared
    InitRequest header;
    AddTensor(header.add_tensors(), "a", {2, 3}, 24);
    absl::StatusOr<InitResponse> r = ps.InitRaw(header, FloatBytes({1, 2, 3, 4, 5, 6, 7}));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  }
  {  // num_bytes not matching the shape
    InitRequest header;
    AddTensor(header.add_tensors(), "a", {2, 3}, 20);
    absl::StatusOr<InitResponse> r = ps.InitRaw(header, FloatBytes({1, 2, 3, 4, 5}));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  }
  {  // a variable twice
    InitRequest header;
    AddTensor(header.add_tensors(), "b", {4}, 16);
    AddTensor(header.add_tensors(), "b", {4}, 16);
    absl::StatusOr<InitResponse> r = ps.InitRaw(header, FloatBytes(std::vector<float>(8, 1.0f)));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  }
  {  // negative dimension
    InitRequest header;
    AddTensor(header.add_tensors(), "b", {-4}, 16);
    absl::StatusOr<InitResponse> r = ps.InitRaw(header, FloatBytes(std::vector<float>(4, 1.0f)));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  }
  {  // worker out of range
    absl::StatusOr<InitResponse> r = ps.Init({kA}, /*worker=*/2);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  }
  // Still uninitialised: pushes are refused, and a good Init is the first.
  absl::StatusOr<PushResponse> push = ps.Push(0, 0, {kGa0});
  EXPECT_EQ(push.status().code(), absl::StatusCode::kFailedPrecondition) << push.status();
  absl::StatusOr<InitResponse> init = ps.Init({kA, kB});
  ASSERT_TRUE(init.ok()) << init.status();
  EXPECT_FALSE(init->already_initialized());
  PullResult r = ps.Pull();
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.values["a"], kA.values);
  EXPECT_EQ(r.values["b"], kB.values);
}

TEST(PsShardInitTest, PullBeforeInitWaitsForInit) {
  PsHarness ps(SgdOptions(1, "sync", 0.5f));
  auto pending = ps.PullAsync({"a"}, 0, 30000);
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(pending->done.HasBeenNotified()) << "pull answered before Init";
  ASSERT_TRUE(ps.Init({kA}).ok());
  ASSERT_TRUE(pending->done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  ASSERT_TRUE(pending->result.status.ok()) << pending->result.status;
  EXPECT_EQ(pending->result.values["a"], kA.values);
}

TEST(PsShardPullTest, BadPullsAreInvalidArgument) {
  PsHarness ps(SgdOptions(2, "sync", 0.5f));
  ASSERT_TRUE(ps.Init({kA, kB}).ok());
  PullResult unknown = ps.Pull({"a", "nope"});
  EXPECT_EQ(unknown.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(unknown.status), HasSubstr("nope"));
  EXPECT_EQ(ps.Pull({}, 0, 0, /*worker=*/2).status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ps.Pull({}, 0, 0, /*worker=*/-1).status.code(), absl::StatusCode::kInvalidArgument);
}

TEST(PsShardServiceTest, UnknownMethodAndMalformedHeader) {
  PsHarness ps(SgdOptions(1, "sync", 0.5f));
  ASSERT_TRUE(ps.Init({kA}).ok());
  absl::Status s = ps.Call("Frobnicate", OutgoingFrame(), nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_THAT(Msg(s), HasSubstr("Frobnicate"));
  for (const char* method : {"Push", "Pull", "Init", "Done", "Heartbeat"}) {
    SCOPED_TRACE(method);
    OutgoingFrame garbage;
    garbage.header = std::string("\xff\xff\xff\xff\x0f\x01", 6);  // not a valid message
    s = ps.Call(method, std::move(garbage), nullptr);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  }
  PullResult after = ps.Pull();
  ASSERT_TRUE(after.status.ok());
  EXPECT_EQ(after.values["a"], kA.values);
  EXPECT_THAT(after.versions, ElementsAre(0));
}

// ---------------------------------------------------------------- malformed pushes

struct BadPush {
  std::string name;
  // Fills header (worker 0, step 0 preset) and payload.
  std::function<void(PushRequest*, std::string*)> build;
};

void PrintTo(const BadPush& b, std::ostream* os) { *os << b.name; }

std::vector<BadPush> BadPushes() {
  const std::string ga = FloatBytes(kGa0.values), gb = FloatBytes(kGb0.values);
  return {
      {"UnknownVariable",
       [=](PushRequest* h, std::string* p) {
         AddTensor(h->add_tensors(), "zzz", {4}, 16);
         *p = gb;
       }},
      {"NumBytesNotMatchingShape",
       [=](PushRequest* h, std::string* p) {
         AddTensor(h->add_tensors(), "b", {4}, 12);
         *p = gb.substr(0, 12);
       }},
      {"NumBytesLargerThanShape",
       [=](PushRequest* h, std::string* p) {
         AddTensor(h->add_tensors(), "b", {4}, 20);
         *p = gb + std::string(4, '\0');
       }},
      {"PayloadShorterThanDeclared",
       [=](PushRequest* h, std::string* p) {
         AddTensor(h->add_tensors(), "b", {4}, 16);
         *p = gb.substr(0, 12);
       }},
      {"PayloadLongerThanDeclared",
       [=](PushRequest* h, std::string* p) {
         AddTensor(h->add_tensors(), "b", {4}, 16);
         *p = gb + std::string(4, '\x01');
       }},
      {"NoPayloadAtAll", [=](PushRequest* h, std::string* p) { AddTensor(h->add_tensors(), "b", {4}, 16); }},
      {"WrongShapeSameElementCount",
       [=](PushRequest* h, std::string* p) {
         AddTensor(h->add_tensors(), "a", {3, 2}, 24);
         *p = ga;
       }},
      {"WrongRank",
       [=](PushRequest* h, std::string* p) {
         AddTensor(h->add_tensors(), "a", {6}, 24);
         *p = ga;
       }},
      {"WrongDtype",
       [=](PushRequest* h, std::string* p) {
         AddTensor(h->add_tensors(), "b", {4}, 16, static_cast<WireDType>(9));
         *p = gb;
       }},
      {"Fp16WithFloat32ByteCount",
       [=](PushRequest* h, std::string* p) {
         AddTensor(h->add_tensors(), "b", {4}, 16, DT_FLOAT16);
         *p = gb;
       }},
      {"SparseIndexOutOfRange",
       [=](PushRequest* h, std::string* p) {
         AddTensor(h->add_tensors(), "b", {4}, 8);
         h->mutable_tensors(0)->set_sparse_count(1);
         const uint32_t index = 4;
         const float value = 1.0f;
         *p = std::string(reinterpret_cast<const char*>(&index), 4) +
              std::string(reinterpret_cast<const char*>(&value), 4);
       }},
      {"GoodThenSparseIndexOutOfRange",
       [=](PushRequest* h, std::string* p) {
         AddTensor(h->add_tensors(), "a", {2, 3}, 24);
         AddTensor(h->add_tensors(), "b", {4}, 8);
         h->mutable_tensors(1)->set_sparse_count(1);
         const uint32_t index = 1000;
         const float value = 1.0f;
         *p = ga + std::string(reinterpret_cast<const char*>(&index), 4) +
              std::string(reinterpret_cast<const char*>(&value), 4);
       }},
      {"SparseBytesDoNotMatchTheCount",
       [=](PushRequest* h, std::string* p) {
         AddTensor(h->add_tensors(), "b", {4}, 16);
         h->mutable_tensors(0)->set_sparse_count(1);
         *p = gb;
       }},
      {"SparseCountAboveTheElements",
       [=](PushRequest* h, std::string* p) {
         AddTensor(h->add_tensors(), "b", {4}, 40);
         h->mutable_tensors(0)->set_sparse_count(5);
         *p = std::string(40, '\0');
       }},
      {"DuplicateVariable",
       [=](PushRequest* h, std::string* p) {
         AddTensor(h->add_tensors(), "b", {4}, 16);
         AddTensor(h->add_tensors(), "b", {4}, 16);
         *p = gb + gb;
       }},
      {"WorkerOutOfRange",
       [=](PushRequest* h, std::string* p) {
         h->set_worker(2);
         AddTensor(h->add_tensors(), "b", {4}, 16);
         *p = gb;
       }},
      {"NegativeWorker",
       [=](PushRequest* h, std::string* p) {
         h->set_worker(-1);
         AddTensor(h->add_tensors(), "b", {4}, 16);
         *p = gb;
       }},
      {"FutureStep",
       [=](PushRequest* h, std::string* p) {
         h->set_step(1);
         AddTensor(h->add_tensors(), "b", {4}, 16);
         *p = gb;
       }},
      {"NegativeStep",
       [=](PushRequest* h, std::string* p) {
         h->set_step(-1);
         AddTensor(h->add_tensors(), "b", {4}, 16);
         *p = gb;
       }},
      {"GoodThenWrongShape",
       [=](PushRequest* h, std::string* p) {
         AddTensor(h->add_tensors(), "a", {2, 3}, 24);
         AddTensor(h->add_tensors(), "b", {2, 2}, 16);
         *p = ga + gb;
       }},
      {"GoodThenUnknown",
       [=](PushRequest* h, std::string* p) {
         AddTensor(h->add_tensors(), "a", {2, 3}, 24);
         AddTensor(h->add_tensors(), "zzz", {4}, 16);
         *p = ga + gb;
       }},
      {"WrongDtypeThenGood",
       [=](PushRequest* h, std::string* p) {
         AddTensor(h->add_tensors(), "b", {4}, 16, static_cast<WireDType>(7));
         AddTensor(h->add_tensors(), "a", {2, 3}, 24);
         *p = gb + ga;
       }},
      {"TwoGoodButPayloadShort",
       [=](PushRequest* h, std::string* p) {
         AddTensor(h->add_tensors(), "a", {2, 3}, 24);
         AddTensor(h->add_tensors(), "b", {4}, 16);
         *p = ga + gb.substr(0, 12);
       }},
      {"TwoGoodButPayloadLong",
       [=](PushRequest* h, std::string* p) {
         AddTensor(h->add_tensors(), "a", {2, 3}, 24);
         AddTensor(h->add_tensors(), "b", {4}, 16);
         *p = ga + gb + gb;
       }},
  };
}

class MalformedPushTest : public ::testing::TestWithParam<std::tuple<BadPush, std::string>> {};

TEST_P(MalformedPushTest, RejectedWithInvalidArgumentAndChangesNothing) {
  const BadPush& bad = std::get<0>(GetParam());
  const std::string& consistency = std::get<1>(GetParam());
  const float lr = 0.5f;
  PsHarness ps(SgdOptions(2, consistency, lr));
  ASSERT_TRUE(ps.ok());
  ASSERT_TRUE(ps.Init({kA, kB}).ok());
  const std::string before = ps.Snapshot();

  PushRequest header;
  header.set_worker(0);
  header.set_step(0);
  std::string payload;
  bad.build(&header, &payload);
  // Whole payload, and split into odd chunks.
  for (const std::vector<size_t>& chunks : {std::vector<size_t>{}, std::vector<size_t>{5, 3}}) {
    absl::StatusOr<PushResponse> r = ps.PushRaw(header, payload, chunks);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_EQ(ps.Snapshot(), before) << "a rejected push changed the shard";
  }

  // A well-formed step afterwards sees no trace of the rejected push.
  if (consistency == "sync") {
    absl::StatusOr<PushResponse> p0 = ps.Push(0, 0, {kGa0, kGb0});
    ASSERT_TRUE(p0.ok()) << p0.status();
    EXPECT_EQ(p0->accepted(), 2);
    EXPECT_EQ(ps.Snapshot(), before) << "one of two gradients must not apply";
    absl::StatusOr<PushResponse> p1 = ps.Push(1, 0, {kGa1, kGb1});
    ASSERT_TRUE(p1.ok()) << p1.status();
    PullResult r = ps.Pull({"a", "b"}, 1, 5000);
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_THAT(r.versions, ElementsAre(1, 1));
    EXPECT_EQ(r.values["a"], SgdStep(kA.values, Mean2(kGa0.values, kGa1.values), lr));
    EXPECT_EQ(r.values["b"], SgdStep(kB.values, Mean2(kGb0.values, kGb1.values), lr));
  } else {
    absl::StatusOr<PushResponse> p0 = ps.Push(0, 0, {kGa0, kGb0});
    ASSERT_TRUE(p0.ok()) << p0.status();
    PullResult r = ps.Pull({"a", "b"}, 1, 5000);
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_THAT(r.versions, ElementsAre(1, 1));
    EXPECT_EQ(r.values["a"], SgdStep(kA.values, kGa0.values, lr));
    EXPECT_EQ(r.values["b"], SgdStep(kB.values, kGb0.values, lr));
  }
  absl::StatusOr<StatsResponse> stats = ps.Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->load().dropped_gradients(), 0);
}

INSTANTIATE_TEST_SUITE_P(Cases, MalformedPushTest,
                         ::testing::Combine(::testing::ValuesIn(BadPushes()), ::testing::Values("sync", "async")),
                         [](const ::testing::TestParamInfo<std::tuple<BadPush, std::string>>& info) {
                           return std::get<0>(info.param).name + "_" + std::get<1>(info.param);
                         });

TEST(PsShardPushTest, PushBeforeInitIsFailedPrecondition) {
  PsHarness ps(SgdOptions(1, "sync", 0.5f));
  absl::StatusOr<PushResponse> r = ps.Push(0, 0, {kGa0});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
}

TEST(PsShardPushTest, SyncDuplicatePushForSameStepIsRejected) {
  const float lr = 0.5f;
  PsHarness ps(SgdOptions(2, "sync", lr));
  ASSERT_TRUE(ps.Init({kA, kB}).ok());
  ASSERT_TRUE(ps.Push(0, 0, {kGa0}).ok());
  const std::string before = ps.Snapshot();
  absl::StatusOr<PushResponse> dup = ps.Push(0, 0, {kGa1});
  EXPECT_EQ(dup.status().code(), absl::StatusCode::kInvalidArgument) << dup.status();
  EXPECT_THAT(Msg(dup.status()), HasSubstr("a"));
  // Also when the duplicate comes with a fresh, valid gradient of another variable.
  absl::StatusOr<PushResponse> mixed = ps.Push(0, 0, {kGb0, kGa1});
  EXPECT_EQ(mixed.status().code(), absl::StatusCode::kInvalidArgument) << mixed.status();
  EXPECT_EQ(ps.Snapshot(), before);

  // b got nothing from worker 0 yet: worker 0 may still push it.
  ASSERT_TRUE(ps.Push(0, 0, {kGb0}).ok());
  ASSERT_TRUE(ps.Push(1, 0, {kGa1, kGb1}).ok());
  PullResult r = ps.Pull({"a", "b"}, 1, 5000);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.values["a"], SgdStep(kA.values, Mean2(kGa0.values, kGa1.values), lr));
  EXPECT_EQ(r.values["b"], SgdStep(kB.values, Mean2(kGb0.values, kGb1.values), lr));
}

// Two identical pushes racing from the same worker: exactly one may count.
// (Many variables per push widen the window between validating a push and
// applying it.)
TEST(PsShardPushTest, ConcurrentDuplicatePushesCountOnce) {
  constexpr int kVars = 3000;
  InitRequest init;
  PushRequest push;
  push.set_worker(0);
  push.set_step(0);
  std::string init_payload, push_payload;
  for (int v = 0; v < kVars; ++v) {
    const std::string name = absl::StrCat("v", v);
    AddTensor(init.add_tensors(), name, {1}, 4);
    AddTensor(push.add_tensors(), name, {1}, 4);
    init_payload += FloatBytes({1.0f});
    push_payload += FloatBytes({0.5f});
  }
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE(round);
    absl::StatusOr<std::unique_ptr<PsShard>> shard = PsShard::Create(SgdOptions(2, "sync", 0.5f));
    ASSERT_TRUE(shard.ok());
    {
      OutgoingFrame f;
      f.chunks = ps_testing::Chunks(init_payload, {});
      IncomingFrame in = IncomingFrame::FromOutgoing(std::move(f));
      InitResponse response;
      ASSERT_TRUE((*shard)->Init(init, in, &response).ok());
    }
    std::atomic<int> ready{0};
    absl::Status results[2];
    auto run = [&](int i) {
      OutgoingFrame f;
      f.chunks = ps_testing::Chunks(push_payload, {});
      IncomingFrame in = IncomingFrame::FromOutgoing(std::move(f));
      PushResponse response;
      ready.fetch_add(1);
      while (ready.load() < 2) {
      }
      results[i] = (*shard)->Push(push, in, &response);
    };
    std::thread t0(run, 0), t1(run, 1);
    t0.join();
    t1.join();
    EXPECT_EQ(results[0].ok() + results[1].ok(), 1) << results[0] << " / " << results[1];
    StatsResponse stats = (*shard)->Stats();
    EXPECT_EQ(stats.load().applied_updates(), 0) << "worker 0's gradients were counted twice and applied alone";
    if (HasFailure()) break;
  }
}

// ---------------------------------------------------------------- sync semantics

TEST(PsShardSyncTest, TwoWorkersAverageThenApply) {
  const float lr = 0.25f;
  PsHarness ps(SgdOptions(2, "sync", lr));
  ASSERT_TRUE(ps.Init({kA, kB}).ok());

  absl::StatusOr<PushResponse> p0 = ps.Push(0, 0, {kGa0, kGb0});
  ASSERT_TRUE(p0.ok()) << p0.status();
  EXPECT_EQ(p0->accepted(), 2);
  EXPECT_EQ(p0->dropped_stale(), 0);

  auto waiting = ps.PullAsync({"a", "b"}, 1, 30000, /*worker=*/0);
  // Version 0 is still served, unchanged.
  PullResult now = ps.Pull({"a", "b"}, 0);
  ASSERT_TRUE(now.status.ok());
  EXPECT_THAT(now.versions, ElementsAre(0, 0));
  EXPECT_EQ(now.values["a"], kA.values);
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_FALSE(waiting->done.HasBeenNotified()) << "pull for version 1 answered before worker 1 pushed";

  absl::StatusOr<PushResponse> p1 = ps.Push(1, 0, {kGa1, kGb1});
  ASSERT_TRUE(p1.ok()) << p1.status();
  EXPECT_EQ(p1->accepted(), 2);
  ASSERT_TRUE(waiting->done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  const PullResult& r = waiting->result;
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_THAT(r.versions, ElementsAre(1, 1));
  const std::vector<float> a1 = SgdStep(kA.values, Mean2(kGa0.values, kGa1.values), lr);
  const std::vector<float> b1 = SgdStep(kB.values, Mean2(kGb0.values, kGb1.values), lr);
  EXPECT_EQ(r.values.at("a"), a1);
  EXPECT_EQ(r.values.at("b"), b1);
  // Spot-check the arithmetic itself: a[0] = 1 - 0.25 * (0.5 + 1.5) / 2.
  EXPECT_EQ(a1[0], 0.75f);

  // Step 1 with the workers in the other order.
  ASSERT_TRUE(ps.Push(1, 1, {kGa0, kGb0}).ok());
  ASSERT_TRUE(ps.Push(0, 1, {kGa1, kGb1}).ok());
  PullResult r2 = ps.Pull({"a"}, 2, 5000);
  ASSERT_TRUE(r2.status.ok()) << r2.status;
  EXPECT_THAT(r2.versions, ElementsAre(2));
  EXPECT_EQ(r2.values["a"], SgdStep(a1, Mean2(kGa1.values, kGa0.values), lr));

  // A push for an applied step is dropped and reported.
  absl::StatusOr<PushResponse> stale = ps.Push(0, 0, {kGa0});
  ASSERT_TRUE(stale.ok()) << stale.status();
  EXPECT_EQ(stale->accepted(), 0);
  EXPECT_EQ(stale->dropped_stale(), 1);
  EXPECT_EQ(ps.Pull({"a"}).values["a"], r2.values["a"]);
}

TEST(PsShardSyncTest, VariablesAdvanceIndependently) {
  const float lr = 0.5f;
  PsHarness ps(SgdOptions(2, "sync", lr));
  ASSERT_TRUE(ps.Init({kA, kB}).ok());
  ASSERT_TRUE(ps.Push(0, 0, {kGa0}).ok());
  ASSERT_TRUE(ps.Push(1, 0, {kGa1, kGb1}).ok());
  PullResult r = ps.Pull({"a", "b"});
  ASSERT_TRUE(r.status.ok());
  EXPECT_THAT(r.versions, ElementsAre(1, 0));
  EXPECT_EQ(r.values["b"], kB.values);
  auto waiting = ps.PullAsync({"a", "b"}, 1, 30000);
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(waiting->done.HasBeenNotified());
  ASSERT_TRUE(ps.Push(0, 0, {kGb0}).ok());
  ASSERT_TRUE(waiting->done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  ASSERT_TRUE(waiting->result.status.ok()) << waiting->result.status;
  EXPECT_THAT(waiting->result.versions, ElementsAre(1, 1));
}

TEST(PsShardSyncTest, ReplicasToAggregateOneDropsTheSecondPush) {
  const float lr = 0.5f;
  PsHarness ps(SgdOptions(2, "sync", lr, /*replicas_to_aggregate=*/1));
  ASSERT_TRUE(ps.Init({kA}).ok());
  absl::StatusOr<PushResponse> first = ps.Push(0, 0, {kGa0});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->accepted(), 1);
  EXPECT_EQ(first->dropped_stale(), 0);
  PullResult r = ps.Pull({"a"}, 1, 5000);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.values["a"], SgdStep(kA.values, kGa0.values, lr));

  absl::StatusOr<PushResponse> second = ps.Push(1, 0, {kGa1});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->accepted(), 0);
  EXPECT_EQ(second->dropped_stale(), 1);
  PullResult after = ps.Pull({"a"});
  EXPECT_THAT(after.versions, ElementsAre(1));
  EXPECT_EQ(after.values["a"], r.values["a"]);

  absl::StatusOr<StatsResponse> stats = ps.Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->load().dropped_gradients(), 1);
  EXPECT_EQ(stats->load().applied_updates(), 1);
}

TEST(PsShardSyncTest, SecondGradientSplitIntoTinyChunks) {
  // The second gradient of a step is added from the wire piece by piece;
  // pieces may split floats anywhere (even one byte per piece).
  const float lr = 0.5f;
  for (const std::vector<size_t>& chunks :
       {std::vector<size_t>{5, 3, 7}, std::vector<size_t>{2, 1, 1}, std::vector<size_t>{1}}) {
    SCOPED_TRACE(::testing::PrintToString(chunks));
    PsHarness ps(SgdOptions(2, "sync", lr));
    ASSERT_TRUE(ps.Init({kA, kB}).ok());
    ASSERT_TRUE(ps.Push(0, 0, {kGa0, kGb0}).ok());
    ASSERT_TRUE(ps.Push(1, 0, {kGa1, kGb1}, chunks).ok());
    PullResult r = ps.Pull({"a", "b"}, 1, 5000);
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.values["a"], SgdStep(kA.values, Mean2(kGa0.values, kGa1.values), lr));
    EXPECT_EQ(r.values["b"], SgdStep(kB.values, Mean2(kGb0.values, kGb1.values), lr));
  }
}

TEST(PsShardSyncTest, ParkedPullTimesOutNamingMissingWorkers) {
  PsHarness ps(SgdOptions(3, "sync", 0.5f));
  ASSERT_TRUE(ps.Init({kA, kB}).ok());
  ASSERT_TRUE(ps.Push(0, 0, {kGa0, kGb0}).ok());
  auto short_pull = ps.PullAsync({"a"}, 1, /*timeout_ms=*/50, /*worker=*/0);
  auto long_pull = ps.PullAsync({"a"}, 1, /*timeout_ms=*/600000, /*worker=*/2);

  // Not expired before its deadline.
  EXPECT_TRUE(ps.shard()->Check(absl::Now() - absl::Seconds(1)).ok());
  EXPECT_FALSE(short_pull->done.HasBeenNotified());

  absl::Status check = ps.shard()->Check(absl::Now() + absl::Seconds(1));
  EXPECT_TRUE(check.ok()) << check;
  ASSERT_TRUE(short_pull->done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  const absl::Status& s = short_pull->result.status;
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(Msg(s), HasSubstr("workers [1,2]"));
  EXPECT_THAT(Msg(s), HasSubstr("a"));
  EXPECT_FALSE(long_pull->done.HasBeenNotified()) << "a pull with a far deadline expired";

  // Once the step completes, the remaining pull is answered normally.
  ASSERT_TRUE(ps.Push(1, 0, {kGa1}).ok());
  ASSERT_TRUE(ps.Push(2, 0, {kGa1}).ok());
  ASSERT_TRUE(long_pull->done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_TRUE(long_pull->result.status.ok()) << long_pull->result.status;
  EXPECT_EQ(short_pull->completions.load(), 1);
}

TEST(PsShardSyncTest, ParkedPullNamesTheOneMissingWorker) {
  PsHarness ps(SgdOptions(2, "sync", 0.5f));
  ASSERT_TRUE(ps.Init({kA}).ok());
  ASSERT_TRUE(ps.Push(0, 0, {kGa0}).ok());
  auto pull = ps.PullAsync({"a"}, 1, 10, 0);
  ASSERT_TRUE(ps.shard()->Check(absl::Now() + absl::Seconds(1)).ok());
  ASSERT_TRUE(pull->done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_EQ(pull->result.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(Msg(pull->result.status), HasSubstr("workers [1]"));
}

TEST(PsShardSyncTest, PullWithoutTimeoutUsesRpcSeconds) {
  PsShardOptions options = SgdOptions(2, "sync", 0.5f);
  options.timeouts.set_rpc_seconds(100);
  options.timeouts.set_startup_seconds(1000);
  PsHarness ps(options);
  ASSERT_TRUE(ps.Init({kA}).ok());
  auto pull = ps.PullAsync({"a"}, 1, /*timeout_ms=*/0);
  absl::SleepFor(absl::Milliseconds(20));
  ASSERT_TRUE(ps.shard()->Check(absl::Now() + absl::Seconds(50)).ok());
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_FALSE(pull->done.HasBeenNotified());
  ASSERT_TRUE(ps.shard()->Check(absl::Now() + absl::Seconds(150)).ok());
  ASSERT_TRUE(pull->done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_EQ(pull->result.status.code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(PsShardSyncTest, CheckReportsSlowSyncStep) {
  PsShardOptions options = SgdOptions(2, "sync", 0.5f);
  options.timeouts.set_sync_step_seconds(0.5f);
  PsHarness ps(options);
  ASSERT_TRUE(ps.Init({kA, kB}).ok());
  EXPECT_TRUE(ps.shard()->Check(absl::Now() + absl::Seconds(5)).ok()) << "no step in progress yet";
  ASSERT_TRUE(ps.Push(0, 0, {kGb0}).ok());
  EXPECT_TRUE(ps.shard()->Check(absl::Now()).ok());
  absl::Status s = ps.shard()->Check(absl::Now() + absl::Seconds(5));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(Msg(s), HasSubstr("b"));
  EXPECT_THAT(Msg(s), HasSubstr("workers [1]"));
  EXPECT_THAT(Msg(s), HasSubstr("sync step 0"));
  // Completing the step clears it.
  ASSERT_TRUE(ps.Push(1, 0, {kGb1}).ok());
  EXPECT_TRUE(ps.shard()->Check(absl::Now() + absl::Seconds(5)).ok());
}

TEST(PsShardSyncTest, CheckReportsLostWorker) {
  PsShardOptions options = SgdOptions(2, "sync", 0.5f);
  options.timeouts.set_worker_lost_seconds(2);
  options.timeouts.set_startup_seconds(1000);
  PsHarness ps(options);
  ASSERT_TRUE(ps.Init({kA}).ok());
  ASSERT_TRUE(ps.Heartbeat(0).ok());
  ASSERT_TRUE(ps.Heartbeat(1, 7).ok());
  EXPECT_TRUE(ps.shard()->Check(absl::Now()).ok());
  ASSERT_TRUE(ps.Done(0).ok());
  absl::Status s = ps.shard()->Check(absl::Now() + absl::Seconds(10));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(Msg(s), HasSubstr("worker 1"));
  EXPECT_THAT(Msg(s), HasSubstr("7"));  // last step
  EXPECT_FALSE(ps.shard()->Finished());
}

// Two workers silent at once: the shard cannot tell which one died, so it
// names both, the longest silent first, not just the lowest index.
TEST(PsShardSyncTest, CheckNamesEveryLostWorkerLongestSilentFirst) {
  PsShardOptions options = SgdOptions(2, "sync", 0.5f);
  options.timeouts.set_worker_lost_seconds(2);
  options.timeouts.set_startup_seconds(1000);
  PsHarness ps(options);
  ASSERT_TRUE(ps.Init({kA}).ok());
  ASSERT_TRUE(ps.Heartbeat(1, 4).ok());
  absl::SleepFor(absl::Milliseconds(50));
  ASSERT_TRUE(ps.Heartbeat(0, 5).ok());
  absl::Status s = ps.shard()->Check(absl::Now() + absl::Seconds(10));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  const std::string message = Msg(s);
  const size_t one = message.find("worker 1 lost"), zero = message.find("worker 0 lost");
  ASSERT_NE(one, std::string::npos) << message;
  ASSERT_NE(zero, std::string::npos) << message;
  EXPECT_LT(one, zero) << "worker 1 went silent first: " << message;
  EXPECT_THAT(message, HasSubstr("(last step 4)"));
}

TEST(PsShardSyncTest, CheckReportsWorkerThatNeverConnected) {
  PsShardOptions options = SgdOptions(2, "sync", 0.5f);
  options.timeouts.set_startup_seconds(3);
  PsHarness ps(options);
  ASSERT_TRUE(ps.Init({kA}).ok());
  ASSERT_TRUE(ps.Heartbeat(0).ok());
  ASSERT_TRUE(ps.Done(0).ok());
  EXPECT_TRUE(ps.shard()->Check(absl::Now() + absl::Seconds(1)).ok());
  absl::Status s = ps.shard()->Check(absl::Now() + absl::Seconds(10));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(Msg(s), HasSubstr("worker 1"));
}

TEST(PsShardSyncTest, HeartbeatKeepsAWorkerAlive) {
  PsShardOptions options = SgdOptions(1, "sync", 0.5f);
  options.timeouts.set_worker_lost_seconds(5);
  PsHarness ps(options);
  ASSERT_TRUE(ps.Heartbeat(0).ok());
  EXPECT_TRUE(ps.shard()->Check(absl::Now() + absl::Seconds(3)).ok());
  EXPECT_EQ(ps.Heartbeat(1).code(), absl::StatusCode::kInvalidArgument);
}

ChiefLayout Layout(int64_t version, int64_t batch_bytes, int64_t window_bytes, int64_t pushes_per_shard) {
  ChiefLayout layout;
  layout.set_version(version);
  layout.set_batch_bytes(batch_bytes);
  layout.set_window_bytes(window_bytes);
  layout.set_pushes_per_shard(pushes_per_shard);
  return layout;
}

// The chief's layout (its tuner's choice) reaches every worker through the
// heartbeats' answers: kept when newer, never from another worker, and a
// malformed one is refused leaving the kept one.
TEST(PsShardSyncTest, TheChiefsLayoutReachesEveryWorkersHeartbeat) {
  PsHarness ps(SgdOptions(2, "sync", 0.5f));
  absl::StatusOr<ChiefLayout> none = ps.HeartbeatWithLayout(1, ChiefLayout());
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->version(), 0) << "no layout before the chief sent one";
  ASSERT_TRUE(ps.HeartbeatWithLayout(0, Layout(2, 1 << 20, 0, 1)).ok());
  absl::StatusOr<ChiefLayout> heard = ps.HeartbeatWithLayout(1, ChiefLayout());
  ASSERT_TRUE(heard.ok()) << heard.status();
  EXPECT_EQ(heard->version(), 2);
  EXPECT_EQ(heard->batch_bytes(), 1 << 20);
  EXPECT_EQ(heard->pushes_per_shard(), 1);
  // Only the chief's count; an older one of the chief's is not taken back.
  ASSERT_TRUE(ps.HeartbeatWithLayout(1, Layout(9, 4096, 0, 1)).ok());
  ASSERT_TRUE(ps.HeartbeatWithLayout(0, Layout(1, 65536, 0, 1)).ok());
  heard = ps.HeartbeatWithLayout(1, ChiefLayout());
  ASSERT_TRUE(heard.ok());
  EXPECT_EQ(heard->version(), 2);
  EXPECT_EQ(heard->batch_bytes(), 1 << 20);
  // Malformed: INVALID_ARGUMENT naming the field, the kept layout stays.
  absl::StatusOr<ChiefLayout> bad = ps.HeartbeatWithLayout(0, Layout(3, 0, 0, 1));
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(bad.status()), HasSubstr("batch_bytes 0"));
  heard = ps.HeartbeatWithLayout(1, ChiefLayout());
  ASSERT_TRUE(heard.ok());
  EXPECT_EQ(heard->version(), 2);
}

// data.sharding dynamic: a worker waiting for data pauses; the sync step
// under way goes on with the others, and the steps wait for it again once it
// resumes.
TEST(PsShardSyncTest, APausedWorkerIsNotWaitedForUntilItResumes) {
  PsHarness ps(SgdOptions(2, "sync", 0.5f));
  ASSERT_TRUE(ps.Init({kA}).ok());
  ASSERT_TRUE(ps.Push(0, 0, {kGa0}).ok());
  EXPECT_EQ(ps.shard()->MinVersion(), 0) << "step 0 waits for worker 1";
  ASSERT_TRUE(ps.Heartbeat(1, 0, /*paused=*/true).ok());
  EXPECT_EQ(ps.shard()->MinVersion(), 1) << "step 0 applied without the paused worker";
  ASSERT_TRUE(ps.Heartbeat(1, 0, /*paused=*/true).ok());  // heartbeats repeat the state
  ASSERT_TRUE(ps.Push(0, 1, {kGa0}).ok());
  EXPECT_EQ(ps.shard()->MinVersion(), 2);
  ASSERT_TRUE(ps.Heartbeat(1, 2, /*paused=*/false).ok());
  ASSERT_TRUE(ps.Push(0, 2, {kGa0}).ok());
  EXPECT_EQ(ps.shard()->MinVersion(), 2) << "step 2 waits for the resumed worker";
  ASSERT_TRUE(ps.Push(1, 2, {kGa1}).ok());
  EXPECT_EQ(ps.shard()->MinVersion(), 3);
  // It still counts as present: the run does not end without it.
  EXPECT_FALSE(ps.shard()->Finished());
}

// Under ssp a paused worker does not hold the others' pulls back.
TEST(PsShardSspTest, APausedWorkerDoesNotHoldPullsBack) {
  PsShardOptions options = SgdOptions(2, "ssp", 0.5f);
  options.staleness = 1;
  PsHarness ps(options);
  ASSERT_TRUE(ps.Init({kA}).ok());
  PullRequest ahead = PsHarness::PullHeader({}, 0, 2000, 0);
  ahead.set_local_step(5);  // worker 1 has completed no step: 5 - 1 > 0
  std::shared_ptr<ps_testing::PendingPull> blocked = ps.PullAsyncRaw(ahead);
  EXPECT_FALSE(blocked->done.WaitForNotificationWithTimeout(absl::Milliseconds(200)));
  ASSERT_TRUE(ps.Heartbeat(1, 0, /*paused=*/true).ok());
  ASSERT_TRUE(blocked->done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_TRUE(blocked->result.status.ok()) << blocked->result.status;
}

// Two worker threads run the sync protocol (pull version t, push step t).
TEST(PsShardSyncTest, ConcurrentWorkersMatchSequentialResult) {
  const float lr = 0.125f;
  const int kSteps = 25;
  PsHarness ps(SgdOptions(2, "sync", lr));
  ASSERT_TRUE(ps.Init({kA, kB}).ok());
  auto grad = [](const Var& v, int worker, int step) {
    std::vector<float> g(v.values.size());
    for (size_t i = 0; i < g.size(); ++i) g[i] = 0.25f * static_cast<float>((worker + 1) * (step + 2) + i) - 2.0f;
    return Var{v.name, v.shape, g};
  };
  std::atomic<bool> failed{false};
  auto worker = [&](int w) {
    for (int step = 0; step < kSteps && !failed; ++step) {
      PullResult r = ps.Pull({"a", "b"}, step, 10000, w);
      if (!r.status.ok() || r.versions[0] < step) {
        ADD_FAILURE() << "worker " << w << " step " << step << ": " << r.status;
        failed = true;
        return;
      }
      absl::StatusOr<PushResponse> p = ps.Push(w, step, {grad(kA, w, step), grad(kB, w, step)});
      if (!p.ok() || p->accepted() != 2) {
        ADD_FAILURE() << "worker " << w << " step " << step << ": " << p.status();
        failed = true;
        return;
      }
    }
  };
  std::thread w0(worker, 0), w1(worker, 1);
  w0.join();
  w1.join();
  ASSERT_FALSE(failed);
  std::vector<float> a = kA.values, b = kB.values;
  for (int step = 0; step < kSteps; ++step) {
    a = SgdStep(a, Mean2(grad(kA, 0, step).values, grad(kA, 1, step).values), lr);
    b = SgdStep(b, Mean2(grad(kB, 0, step).values, grad(kB, 1, step).values), lr);
  }
  PullResult r = ps.Pull({"a", "b"}, kSteps, 5000);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_THAT(r.versions, ElementsAre(kSteps, kSteps));
  EXPECT_EQ(r.values["a"], a);
  EXPECT_EQ(r.values["b"], b);
  absl::StatusOr<StatsResponse> stats = ps.Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->load().applied_updates(), 2 * kSteps);
  EXPECT_EQ(stats->load().dropped_gradients(), 0);
}

// A pull's payload is the value it was answered with, even while later
// updates land (values are published immutably and recycled only when no
// pull still holds them).
TEST(PsShardSyncTest, HeldPullKeepsItsValuesAcrossUpdates) {
  const float lr = 0.5f;
  PsHarness ps(SgdOptions(1, "sync", lr));
  ASSERT_TRUE(ps.Init({kA}).ok());
  IncomingFrame held;
  ASSERT_TRUE(ps.Call("Pull", OutgoingFrame::FromHeader(PsHarness::PullHeader({"a"}, 0, 0, 0)), &held).ok());
  std::vector<float> expect = kA.values;
  for (int step = 0; step < 5; ++step) {
    ASSERT_TRUE(ps.Push(0, step, {kGa0}).ok());
    expect = SgdStep(expect, kGa0.values, lr);
    PullResult now = ps.Pull({"a"}, step + 1, 5000);
    ASSERT_TRUE(now.status.ok());
    EXPECT_EQ(now.values["a"], expect) << "step " << step;
  }
  PullResult old = ps_testing::DecodePull(absl::OkStatus(), held);
  ASSERT_TRUE(old.status.ok());
  EXPECT_THAT(old.versions, ElementsAre(0));
  EXPECT_EQ(old.values["a"], kA.values) << "a held pull's bytes were overwritten by a later update";
}

TEST(PsShardSyncTest, CosineScheduleUsesInitTotalSteps) {
  PsShardOptions options = SgdOptions(1, "sync", 1.0f);
  options.optimizer.set_lr_schedule("cosine");
  PsHarness ps(options);
  const Var w{"w", {1}, {1.0f}};
  ASSERT_TRUE(ps.Init({w}, 0, /*total_steps=*/2).ok());
  const Var g{"w", {1}, {0.25f}};
  for (int step = 0; step < 3; ++step) ASSERT_TRUE(ps.Push(0, step, {g}).ok());
  PullResult r = ps.Pull({"w"}, 3, 5000);
  ASSERT_TRUE(r.status.ok());
  // lr 1, 0.5, 0 at updates 0, 1, 2: 1 - 0.25 - 0.125 - 0.
  EXPECT_NEAR(r.values["w"][0], 0.625f, 1e-6);
}

// ---------------------------------------------------------------- async

TEST(PsShardAsyncTest, EachPushIsAppliedOnArrival) {
  const float lr = 0.5f;
  PsHarness ps(SgdOptions(2, "async", lr));
  ASSERT_TRUE(ps.Init({kA, kB}).ok());
  absl::StatusOr<PushResponse> p = ps.Push(0, 0, {kGa0});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->accepted(), 1);
  PullResult r1 = ps.Pull({"a", "b"});
  EXPECT_THAT(r1.versions, ElementsAre(1, 0));
  const std::vector<float> a1 = SgdStep(kA.values, kGa0.values, lr);
  EXPECT_EQ(r1.values["a"], a1);

  // Worker 1 computed on version 0 too: still applied (no staleness bound).
  p = ps.Push(1, 0, {kGa1, kGb1});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->accepted(), 2);
  EXPECT_EQ(p->dropped_stale(), 0);
  PullResult r2 = ps.Pull({"a", "b"});
  EXPECT_THAT(r2.versions, ElementsAre(2, 1));
  const std::vector<float> a2 = SgdStep(a1, kGa1.values, lr);
  EXPECT_EQ(r2.values["a"], a2);
  EXPECT_EQ(r2.values["b"], SgdStep(kB.values, kGb1.values, lr));

  // The same worker twice for one step is fine in async mode.
  ASSERT_TRUE(ps.Push(1, 1, {kGa0}).ok());
  ASSERT_TRUE(ps.Push(1, 1, {kGa0}).ok());
  PullResult r3 = ps.Pull({"a"});
  EXPECT_THAT(r3.versions, ElementsAre(4));
  EXPECT_EQ(r3.values["a"], SgdStep(SgdStep(a2, kGa0.values, lr), kGa0.values, lr));

  // Still no future steps.
  EXPECT_EQ(ps.Push(0, 5, {kGa0}).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<StatsResponse> stats = ps.Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->load().applied_updates(), 5);
}

TEST(PsShardAsyncTest, PullWaitsForMinVersion) {
  PsHarness ps(SgdOptions(2, "async", 0.5f));
  ASSERT_TRUE(ps.Init({kA}).ok());
  auto pull = ps.PullAsync({"a"}, 2, 30000);
  ASSERT_TRUE(ps.Push(0, 0, {kGa0}).ok());
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(pull->done.HasBeenNotified());
  ASSERT_TRUE(ps.Push(1, 0, {kGa1}).ok());
  ASSERT_TRUE(pull->done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_THAT(pull->result.versions, ElementsAre(2));
}

// Async applies the optimizer straight from the wire in runs; momentum slots
// must line up with each run, whatever the chunking.
TEST(PsShardAsyncTest, MomentumFromSplitPayloadMatchesWholeUpdate) {
  const int n = 3001;
  Var w{"w", {n}, {}};
  for (int i = 0; i < n; ++i) w.values.push_back(0.001f * static_cast<float>(i % 97) - 0.03f);
  std::vector<Var> grads;
  for (int k = 0; k < 3; ++k) {
    Var g{"w", {n}, {}};
    for (int i = 0; i < n; ++i) g.values.push_back(0.01f * static_cast<float>((i * (k + 3)) % 41) - 0.2f);
    grads.push_back(g);
  }
  OptimizerConfig config;
  config.set_name("momentum");
  config.set_learning_rate(0.1f);
  config.set_momentum(0.9f);
  config.set_weight_decay(0.0001f);
  // Reference: whole-array updates.
  absl::StatusOr<std::unique_ptr<Optimizer>> opt = CreateOptimizer(config);
  ASSERT_TRUE(opt.ok());
  std::vector<float> ref = w.values, slot(n, 0.0f), out(n);
  for (const Var& g : grads) {
    float* slots[] = {slot.data()};
    (*opt)->Apply(ref.data(), g.values.data(), n, {.learning_rate = 0.1f}, slots, out.data());
    ref = out;
  }
  for (const std::vector<size_t>& chunks :
       {std::vector<size_t>{}, std::vector<size_t>{5, 3, 4097, 6}, std::vector<size_t>{4, 4, 4, 1001}}) {
    SCOPED_TRACE(::testing::PrintToString(chunks));
    PsShardOptions options;
    options.num_workers = 1;
    options.consistency = "async";
    options.optimizer = config;
    PsHarness ps(options);
    ASSERT_TRUE(ps.Init({w}).ok());
    for (int k = 0; k < 3; ++k) ASSERT_TRUE(ps.Push(0, k, {grads[k]}, chunks).ok());
    PullResult r = ps.Pull({"w"}, 3, 5000);
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.values["w"], ref);
  }
}

TEST(PsShardAsyncTest, LostWorkerIsDroppedAndTrainingContinues) {
  PsShardOptions options = SgdOptions(2, "async", 0.5f);
  options.timeouts.set_worker_lost_seconds(2);
  PsHarness ps(options);
  ASSERT_TRUE(ps.Init({kA}).ok());
  ASSERT_TRUE(ps.Heartbeat(0).ok());
  ASSERT_TRUE(ps.Heartbeat(1).ok());
  ASSERT_TRUE(ps.Done(0).ok());
  EXPECT_FALSE(ps.shard()->Finished());
  absl::Status s = ps.shard()->Check(absl::Now() + absl::Seconds(10));
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_THAT(ps.shard()->LostWorkers(), ElementsAre(1));
  EXPECT_TRUE(ps.shard()->Finished());
  absl::StatusOr<StatsResponse> stats = ps.Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_THAT(stats->lost(), ElementsAre(1));
  // Reported once.
  EXPECT_TRUE(ps.shard()->Check(absl::Now() + absl::Seconds(20)).ok());
  EXPECT_THAT(ps.shard()->LostWorkers(), ElementsAre(1));
}

TEST(PsShardAsyncTest, NoWorkerLostWithinTheLimit) {
  PsShardOptions options = SgdOptions(2, "async", 0.5f);
  options.timeouts.set_worker_lost_seconds(100);
  PsHarness ps(options);
  ASSERT_TRUE(ps.Heartbeat(0).ok());
  ASSERT_TRUE(ps.Heartbeat(1).ok());
  EXPECT_TRUE(ps.shard()->Check(absl::Now() + absl::Seconds(10)).ok());
  EXPECT_TRUE(ps.shard()->LostWorkers().empty());
  EXPECT_FALSE(ps.shard()->Finished());
}

// ---------------------------------------------------------------- Done / Stats

TEST(PsShardDoneTest, FinishedAfterEveryWorkerIsDone) {
  PsHarness ps(SgdOptions(2, "sync", 0.5f));
  ASSERT_TRUE(ps.Init({kA, kB}).ok());
  EXPECT_FALSE(ps.shard()->Finished());
  ASSERT_TRUE(ps.Done(1, 20, 250.0).ok());
  EXPECT_FALSE(ps.shard()->Finished());
  ASSERT_TRUE(ps.Done(1, 99, 1.0).ok());  // repeated: ignored
  EXPECT_FALSE(ps.shard()->Finished());
  EXPECT_EQ(ps.Done(2).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(ps.Done(0, 20, 300.0).ok());
  EXPECT_TRUE(ps.shard()->Finished());
  EXPECT_TRUE(ps.shard()->Check(absl::Now() + absl::Seconds(100000)).ok()) << "done workers are never lost";

  absl::StatusOr<StatsResponse> stats = ps.Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  ASSERT_EQ(stats->done_size(), 2);
  std::map<int, WorkerReport> by_worker;
  for (const WorkerReport& r : stats->done()) by_worker[r.worker()] = r;
  ASSERT_EQ(by_worker.size(), 2u);
  EXPECT_EQ(by_worker[0].steps(), 20);
  EXPECT_DOUBLE_EQ(by_worker[0].images_per_sec(), 300.0);
  EXPECT_EQ(by_worker[1].steps(), 20);
  EXPECT_DOUBLE_EQ(by_worker[1].images_per_sec(), 250.0);
  EXPECT_DOUBLE_EQ(by_worker[1].final_loss(), 1.5);
  EXPECT_TRUE(stats->lost().empty());
}

TEST(PsShardDoneTest, StatsReportsLoad) {
  PsShardOptions options = SgdOptions(2, "sync", 0.5f);
  options.shard_index = 3;
  PsHarness ps(options);
  absl::StatusOr<StatsResponse> empty = ps.Stats();
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->load().shard(), 3);
  EXPECT_EQ(empty->load().variables(), 0);
  ASSERT_TRUE(ps.Init({kA, kB}).ok());
  ASSERT_TRUE(ps.Push(0, 0, {kGa0, kGb0}).ok());
  ASSERT_TRUE(ps.Push(1, 0, {kGa1, kGb1}).ok());
  ASSERT_TRUE(ps.Pull({"a", "b"}, 1, 5000).status.ok());
  absl::StatusOr<StatsResponse> stats = ps.Stats();
  ASSERT_TRUE(stats.ok());
  const ShardLoad& load = stats->load();
  EXPECT_EQ(load.shard(), 3);
  EXPECT_EQ(load.variables(), 2);
  EXPECT_EQ(load.variable_bytes(), 40);
  EXPECT_EQ(load.applied_updates(), 2);
  EXPECT_EQ(load.dropped_gradients(), 0);
  EXPECT_EQ(load.bytes_in(), 40 + 2 * 40);  // init + two pushes
  EXPECT_GE(load.bytes_out(), 40);
  EXPECT_GE(load.apply_seconds(), 0.0);
}

TEST(PsShardCreateTest, RejectsBadOptions) {
  PsShardOptions options = SgdOptions(0, "sync", 0.5f);
  EXPECT_FALSE(PsShard::Create(options).ok());
  options = SgdOptions(2, "eventually", 0.5f);
  EXPECT_EQ(PsShard::Create(options).status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(PsShard::Create(options).status()),
              HasSubstr("unknown consistency 'eventually'; known: async, ssp, sync"));
  options = SgdOptions(2, "sync", 0.5f);
  options.optimizer.set_name("adamw");
  absl::StatusOr<std::unique_ptr<PsShard>> bad = PsShard::Create(options);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(Msg(bad.status()), HasSubstr("sgd"));
}

}  // namespace
}  // namespace pstrain
