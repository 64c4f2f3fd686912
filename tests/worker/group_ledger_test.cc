// The elastic all-reduce group's data ledger (worker/elastic/group_ledger.h)
// and its generation records (worker/elastic/elastic_group.h), without a
// network: bad specs refused; a fixed group and a group whose size changes
// between steps train every example of the run exactly once, each slice
// within one epoch, and the report counts every epoch and worker right; the
// state travels intact through Encode/Decode, and bad states are refused; a
// group that takes the state of a member ahead of, or behind, another trains
// the step in question once, or again; GroupGeneration records round-trip
// and garbage is refused.
#include "worker/elastic/group_ledger.h"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "worker/elastic/elastic_group.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kBatch = 64;
constexpr int64_t kPerEpoch = 59968;  // 937 batches
constexpr int64_t kEpochs = 3;

LedgerSpec Spec(int64_t per_epoch, int64_t epochs, int64_t total) {
  LedgerSpec spec;
  spec.set_examples_per_epoch(per_epoch);
  spec.set_epochs(epochs);
  spec.set_total_examples(total);
  return spec;
}

GroupLedger MakeLedger(const LedgerSpec& spec, int64_t batch, int listed) {
  absl::StatusOr<GroupLedger> ledger = GroupLedger::Create(spec, batch, listed);
  EXPECT_TRUE(ledger.ok()) << ledger.status();
  return *std::move(ledger);
}

// The stream position a slice starts at.
int64_t Position(const DataChunk& c, int64_t per_epoch) { return c.epoch() * per_epoch + c.first(); }

// The positions of every slice `size` members are handed at the current step.
std::vector<int64_t> StepPositions(const GroupLedger& ledger, int size, int64_t per_epoch) {
  std::vector<int64_t> positions;
  for (int r = 0; r < size; ++r) {
    std::optional<DataChunk> c = ledger.Slice(r, size);
    if (c) positions.push_back(Position(*c, per_epoch));
  }
  return positions;
}

bool SameReport(const LedgerReport& a, const LedgerReport& b) {
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

// What the test saw trained, counted from the slices handed out.
struct Trained {
  std::vector<DataChunk> slices;
  std::map<int, int64_t> by_worker;  // examples
};

// One step of `members` (rank order) as the strategy runs it: the members
// with data train their slice, those without leave first (Shrink), then the
// rest commit. Returns the members that committed.
std::vector<int> TrainStep(GroupLedger& ledger, std::vector<int> members, Trained* trained) {
  const int size = static_cast<int>(members.size());
  const int n = ledger.MembersWithData(size);
  EXPECT_GE(n, 1);
  EXPECT_LE(n, size);
  members.resize(n);
  for (int r = 0; r < n; ++r) {
    std::optional<DataChunk> c = ledger.Slice(r, n);
    EXPECT_TRUE(c.has_value()) << "rank " << r << " of " << n << " at " << ledger.next();
    if (!c) continue;
    trained->slices.push_back(*c);
    trained->by_worker[members[r]] += c->count();
  }
  // Past the members with data the stream has ended.
  if (n < size) {
    EXPECT_FALSE(ledger.Slice(n, size).has_value());
  }
  ledger.Commit(members);
  return members;
}

// Every position of the run's stream [0, total) trained exactly once, every
// slice a whole batch inside one epoch.
void ExpectExactlyOnce(const Trained& trained, int64_t per_epoch, int64_t batch, int64_t total) {
  std::set<int64_t> positions;
  std::set<uint64_t> ids;
  for (const DataChunk& c : trained.slices) {
    EXPECT_EQ(c.count(), batch);
    EXPECT_GE(c.first(), 0);
    EXPECT_LE(c.first() + c.count(), per_epoch) << "slice straddles epoch " << c.epoch() << " at " << c.first();
    EXPECT_EQ(c.first() % batch, 0);
    EXPECT_TRUE(positions.insert(Position(c, per_epoch)).second)
        << "epoch " << c.epoch() << " first " << c.first() << " trained twice";
    EXPECT_TRUE(ids.insert(c.id()).second) << "chunk id " << c.id() << " handed out twice";
  }
  ASSERT_EQ(static_cast<int64_t>(positions.size()), total / batch);
  int64_t expected = 0;
  for (int64_t p : positions) {
    ASSERT_EQ(p, expected) << "position " << expected << " never trained";
    expected += batch;
  }
}

// The report agrees with what was trained: each epoch's examples, each
// worker's, and the total.
void ExpectReport(const LedgerReport& report, const Trained& trained, int64_t per_epoch, int64_t epochs, int listed,
                  int64_t total) {
  std::vector<int64_t> by_epoch(epochs, 0);
  for (const DataChunk& c : trained.slices) by_epoch[c.epoch()] += c.count();
  ASSERT_EQ(report.examples_done_size(), epochs);
  for (int e = 0; e < epochs; ++e) {
    const int64_t full = std::min(per_epoch, std::max<int64_t>(0, total - e * per_epoch));
    EXPECT_EQ(report.examples_done(e), full) << "epoch " << e;
    EXPECT_EQ(report.examples_done(e), by_epoch[e]) << "epoch " << e;
  }
  ASSERT_EQ(report.examples_by_worker_size(), listed);
  int64_t sum = 0;
  for (int w = 0; w < listed; ++w) {
    const auto it = trained.by_worker.find(w);
    EXPECT_EQ(report.examples_by_worker(w), it == trained.by_worker.end() ? 0 : it->second) << "worker " << w;
    sum += report.examples_by_worker(w);
  }
  EXPECT_EQ(sum, total);
  EXPECT_EQ(report.total_examples(), total);
  EXPECT_EQ(report.examples_per_epoch(), per_epoch);
}

void ExpectRefused(const LedgerSpec& spec, int64_t batch, int listed, const std::string& field) {
  absl::StatusOr<GroupLedger> ledger = GroupLedger::Create(spec, batch, listed);
  ASSERT_FALSE(ledger.ok()) << field;
  EXPECT_EQ(ledger.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ledger.status().message()), HasSubstr(field));
}

TEST(GroupLedgerTest, CreateRefusesBadSpecs) {
  ExpectRefused(Spec(0, kEpochs, 0), kBatch, 4, "examples_per_epoch");
  ExpectRefused(Spec(kPerEpoch, 0, 0), kBatch, 4, "epochs");
  ExpectRefused(Spec(kPerEpoch, kEpochs, 0), 0, 4, "batch");
  ExpectRefused(Spec(kPerEpoch, kEpochs, 0), -kBatch, 4, "batch");
  ExpectRefused(Spec(kPerEpoch + 1, kEpochs, 0), kBatch, 4, "examples_per_epoch");
  ExpectRefused(Spec(kPerEpoch + 32, kEpochs, 0), kBatch, 4, "multiple");
  ExpectRefused(Spec(kPerEpoch, kEpochs, kEpochs * kPerEpoch + kBatch), kBatch, 4, "total_examples");
  ExpectRefused(Spec(kPerEpoch, kEpochs, kPerEpoch + 1), kBatch, 4, "total_examples");
  ExpectRefused(Spec(kPerEpoch, kEpochs, 0), kBatch, 0, "listed workers");
  // The edges that are fine: every example of every epoch, and total 0.
  EXPECT_TRUE(GroupLedger::Create(Spec(kPerEpoch, kEpochs, kEpochs * kPerEpoch), kBatch, 1).ok());
  absl::StatusOr<GroupLedger> all = GroupLedger::Create(Spec(kPerEpoch, kEpochs, 0), kBatch, 1);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->Report().total_examples(), kEpochs * kPerEpoch);
}

// A group of 4 from start to end; at the end fewer slices than members are
// left and the group shrinks.
void RunFixedGroup(int64_t total) {
  const LedgerSpec spec = Spec(kPerEpoch, kEpochs, total);
  GroupLedger ledger = MakeLedger(spec, kBatch, 4);
  const int64_t run_total = total > 0 ? total : kEpochs * kPerEpoch;
  Trained trained;
  int steps = 0;
  bool shrunk = false;
  while (!ledger.done()) {
    ASSERT_FALSE(shrunk) << "the run went on after the group shrank";
    const std::vector<int> committed = TrainStep(ledger, {0, 1, 2, 3}, &trained);
    shrunk = committed.size() < 4;
    ASSERT_LT(++steps, 100000);
  }
  EXPECT_EQ(ledger.next(), run_total);
  EXPECT_EQ(ledger.MembersWithData(4), 0);
  EXPECT_FALSE(ledger.Slice(0, 4).has_value());
  EXPECT_EQ(shrunk, (run_total / kBatch) % 4 != 0);
  ExpectExactlyOnce(trained, kPerEpoch, kBatch, run_total);
  ExpectReport(ledger.Report(), trained, kPerEpoch, kEpochs, 4, run_total);
}

TEST(GroupLedgerTest, FixedGroupTrainsEveryExampleOnce) {
  RunFixedGroup(kEpochs * kPerEpoch);  // 2811 batches: the last step has 3
}

TEST(GroupLedgerTest, FixedGroupStopsAtTotalMidEpoch) {
  RunFixedGroup(kPerEpoch + 300 * kBatch);  // the second epoch in part
  RunFixedGroup(0);                         // all of them
  RunFixedGroup(2 * kPerEpoch + 4 * kBatch);
}

// Members each keep their own copy; a new generation takes the root's
// (worker 0's) copy, as the strategy does.
class Group {
 public:
  Group(const LedgerSpec& spec, int listed) : spec_(spec), listed_(listed) {}

  void Form(const std::vector<int>& members) {
    std::optional<std::vector<int64_t>> root_state;
    if (!copies_.empty()) root_state = copies_.at(members.front()).Encode();
    std::map<int, GroupLedger> next;
    for (int w : members) {
      GroupLedger copy = MakeLedger(spec_, kBatch, listed_);
      if (root_state) {
        EXPECT_TRUE(copy.Decode(*root_state).ok());
      }
      next.emplace(w, std::move(copy));
    }
    copies_ = std::move(next);
    members_ = members;
  }

  // One step: every member asks its own copy for its slice, then commits.
  void Step(Trained* trained) {
    const int size = static_cast<int>(members_.size());
    const int n = copies_.at(members_[0]).MembersWithData(size);
    if (n < size) Form(std::vector<int>(members_.begin(), members_.begin() + n));  // Shrink
    for (int r = 0; r < n; ++r) {
      std::optional<DataChunk> c = copies_.at(members_[r]).Slice(r, n);
      ASSERT_TRUE(c.has_value());
      trained->slices.push_back(*c);
      trained->by_worker[members_[r]] += c->count();
    }
    for (auto& [w, copy] : copies_) copy.Commit(members_);
  }

  bool done() const { return copies_.at(members_[0]).done(); }
  const std::vector<int>& members() const { return members_; }
  const GroupLedger& copy(int worker) const { return copies_.at(worker); }

 private:
  LedgerSpec spec_;
  int listed_;
  std::vector<int> members_;
  std::map<int, GroupLedger> copies_;
};

TEST(GroupLedgerTest, ChangingGroupTrainsEveryExampleOnce) {
  const int64_t total = kEpochs * kPerEpoch;
  const LedgerSpec spec = Spec(kPerEpoch, kEpochs, total);
  Group group(spec, 5);
  Trained trained;
  group.Form({0, 1, 2, 3});
  for (int s = 0; s < 100; ++s) group.Step(&trained);
  group.Form({0, 1, 3});  // worker 2 lost
  for (int s = 0; s < 50; ++s) group.Step(&trained);
  group.Form({0, 1, 3, 4});  // worker 4 joins
  int steps = 0;
  while (!group.done()) {
    group.Step(&trained);
    ASSERT_LT(++steps, 100000);
  }
  // 2811 batches: 400 + 150, then 2261 = 565 x 4 + 1, so one member is left.
  EXPECT_EQ(group.members(), std::vector<int>({0}));
  ExpectExactlyOnce(trained, kPerEpoch, kBatch, total);
  ExpectReport(group.copy(0).Report(), trained, kPerEpoch, kEpochs, 5, total);
  EXPECT_GT(trained.by_worker[2], 0);
  EXPECT_GT(trained.by_worker[4], 0);
  EXPECT_LT(trained.by_worker[2], trained.by_worker[1]);
}

TEST(GroupLedgerTest, ChangingGroupCopiesStayIdentical) {
  const LedgerSpec spec = Spec(640, 2, 0);  // 10 batches an epoch
  Group group(spec, 3);
  Trained trained;
  group.Form({0, 1, 2});
  group.Step(&trained);
  group.Step(&trained);
  group.Form({0, 2});
  group.Step(&trained);
  EXPECT_EQ(group.copy(0).Encode(), group.copy(2).Encode());
  group.Form({0, 1, 2});
  while (!group.done()) group.Step(&trained);
  EXPECT_EQ(group.copy(0).Encode(), group.copy(1).Encode());
  EXPECT_EQ(group.copy(0).Encode(), group.copy(2).Encode());
  ExpectExactlyOnce(trained, 640, kBatch, 1280);
  ExpectReport(group.copy(0).Report(), trained, 640, 2, 3, 1280);
}

// A ledger of the fixed spec after `steps` steps of `size` members.
GroupLedger LedgerAfter(int steps, int size, int listed) {
  GroupLedger ledger = MakeLedger(Spec(kPerEpoch, kEpochs, 0), kBatch, listed);
  std::vector<int> members;
  for (int w = 0; w < size; ++w) members.push_back(w);
  for (int s = 0; s < steps; ++s) ledger.Commit(members);
  return ledger;
}

TEST(GroupLedgerTest, EncodeDecodeRoundTrip) {
  GroupLedger ledger = LedgerAfter(300, 4, 5);  // into the second epoch
  ledger.Commit({0, 1, 4});
  const std::vector<int64_t> state = ledger.Encode();
  EXPECT_EQ(state.size(), ledger.encoded_size());

  GroupLedger fresh = MakeLedger(Spec(kPerEpoch, kEpochs, 0), kBatch, 5);
  EXPECT_FALSE(SameReport(fresh.Report(), ledger.Report()));
  ASSERT_TRUE(fresh.Decode(state).ok());
  EXPECT_EQ(fresh.next(), ledger.next());
  EXPECT_EQ(fresh.Encode(), state);
  EXPECT_TRUE(SameReport(fresh.Report(), ledger.Report())) << fresh.Report().DebugString();
  for (int size = 1; size <= 6; ++size) {
    EXPECT_EQ(fresh.MembersWithData(size), ledger.MembersWithData(size));
    for (int r = 0; r < size; ++r) {
      std::optional<DataChunk> a = ledger.Slice(r, size);
      std::optional<DataChunk> b = fresh.Slice(r, size);
      ASSERT_EQ(a.has_value(), b.has_value());
      EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*a, *b)) << size << " " << r;
    }
  }
  // They go on alike.
  ledger.Commit({0, 2});
  fresh.Commit({0, 2});
  EXPECT_TRUE(SameReport(fresh.Report(), ledger.Report()));
}

void ExpectDecodeRefused(GroupLedger& ledger, const std::vector<int64_t>& state, const std::string& what) {
  const std::vector<int64_t> before = ledger.Encode();
  absl::Status status = ledger.Decode(state);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << what << ": " << status;
  EXPECT_EQ(ledger.Encode(), before) << what << ": a refused state changed the ledger";
}

TEST(GroupLedgerTest, DecodeRefusesBadStates) {
  GroupLedger ahead = LedgerAfter(100, 4, 4);
  GroupLedger ledger = LedgerAfter(10, 4, 4);
  std::vector<int64_t> state = ahead.Encode();
  ASSERT_TRUE(ledger.Decode(state).ok());  // the good one, for contrast

  std::vector<int64_t> shorter(state.begin(), state.end() - 1);
  ExpectDecodeRefused(ledger, shorter, "one number short");
  std::vector<int64_t> longer = state;
  longer.push_back(0);
  ExpectDecodeRefused(ledger, longer, "one number more");
  ExpectDecodeRefused(ledger, {}, "empty");
  // A ledger of 5 listed workers has a longer state.
  ExpectDecodeRefused(ledger, LedgerAfter(10, 4, 5).Encode(), "another number of workers");

  std::vector<int64_t> odd = state;
  odd[0] += kBatch / 2;
  ExpectDecodeRefused(ledger, odd, "position off a batch boundary");
  std::vector<int64_t> past = state;
  past[0] = kEpochs * kPerEpoch + kBatch;
  ExpectDecodeRefused(ledger, past, "position past the total");
  std::vector<int64_t> negative = state;
  negative[0] = -kBatch;
  ExpectDecodeRefused(ledger, negative, "negative position");

  // The run's end is a position too.
  std::vector<int64_t> end = state;
  end[0] = kEpochs * kPerEpoch;
  ASSERT_TRUE(ledger.Decode(end).ok());
  EXPECT_TRUE(ledger.done());
  EXPECT_FALSE(ledger.Slice(0, 1).has_value());
}

std::set<int64_t> AsSet(const std::vector<int64_t>& v) { return std::set<int64_t>(v.begin(), v.end()); }

// Two members A and B of a group of 4; A committed a step that B did not
// (the all-reduce broke in between). The new group takes the root's state.
TEST(GroupLedgerTest, RegroupFromTheMemberAheadDoesNotRetrainItsStep) {
  GroupLedger a = LedgerAfter(500, 4, 4);
  GroupLedger b = LedgerAfter(500, 4, 4);
  const std::set<int64_t> step = AsSet(StepPositions(a, 4, kPerEpoch));
  ASSERT_EQ(step.size(), 4u);
  a.Commit({0, 1, 2, 3});

  ASSERT_TRUE(b.Decode(a.Encode()).ok());
  const std::vector<int64_t> next_a = StepPositions(a, 4, kPerEpoch);
  EXPECT_EQ(StepPositions(b, 4, kPerEpoch), next_a);
  for (int64_t p : next_a) EXPECT_EQ(step.count(p), 0u) << "position " << p << " trained again";
  EXPECT_TRUE(SameReport(a.Report(), b.Report()));
}

TEST(GroupLedgerTest, RegroupFromTheMemberBehindRetrainsTheStep) {
  GroupLedger a = LedgerAfter(500, 4, 4);
  GroupLedger b = LedgerAfter(500, 4, 4);
  const std::vector<int64_t> step = StepPositions(b, 4, kPerEpoch);
  a.Commit({0, 1, 2, 3});
  EXPECT_NE(StepPositions(a, 4, kPerEpoch), step);

  ASSERT_TRUE(a.Decode(b.Encode()).ok());
  EXPECT_EQ(StepPositions(a, 4, kPerEpoch), step);
  EXPECT_TRUE(SameReport(a.Report(), b.Report()));
}

// The whole run with such a regroup: worker 2 is lost after committing a
// step the others did not, and the survivors (3 of them) train it again. Counting the committed steps only, every
// example once.
TEST(GroupLedgerTest, RunWithRollbackTrainsEveryExampleOnce) {
  const int64_t total = kEpochs * kPerEpoch;
  GroupLedger ledger = MakeLedger(Spec(kPerEpoch, kEpochs, total), kBatch, 4);
  Trained trained;
  for (int s = 0; s < 200; ++s) TrainStep(ledger, {0, 1, 2, 3}, &trained);

  // Worker 2 committed the next step and was lost; no survivor did, so the
  // new group of 3 takes the state from before that step.
  const std::vector<int64_t> before = ledger.Encode();
  const std::vector<int64_t> lost_step = StepPositions(ledger, 4, kPerEpoch);
  GroupLedger survivor = MakeLedger(Spec(kPerEpoch, kEpochs, total), kBatch, 4);
  ASSERT_TRUE(survivor.Decode(before).ok());
  const std::vector<int64_t> retrained = StepPositions(survivor, 3, kPerEpoch);
  EXPECT_EQ(retrained, std::vector<int64_t>(lost_step.begin(), lost_step.begin() + 3));
  int steps = 0;
  while (!survivor.done()) {
    TrainStep(survivor, {0, 1, 3}, &trained);
    ASSERT_LT(++steps, 100000);
  }
  ExpectExactlyOnce(trained, kPerEpoch, kBatch, total);
  ExpectReport(survivor.Report(), trained, kPerEpoch, kEpochs, 4, total);
}

GroupGeneration Generation(std::vector<int> members, std::vector<std::string> incarnations, int root, std::string why) {
  GroupGeneration g;
  g.number = 7;
  g.members = std::move(members);
  g.incarnations = std::move(incarnations);
  g.root = root;
  g.why = std::move(why);
  return g;
}

void ExpectRoundTrip(const GroupGeneration& g) {
  absl::StatusOr<GroupGeneration> back = GroupGeneration::Decode(g.number, g.Encode());
  ASSERT_TRUE(back.ok()) << back.status() << " for '" << g.Encode() << "'";
  EXPECT_EQ(back->number, g.number);
  EXPECT_EQ(back->members, g.members);
  EXPECT_EQ(back->incarnations, g.incarnations);
  EXPECT_EQ(back->root, g.root);
  EXPECT_EQ(back->why, g.why);
}

TEST(GroupGenerationTest, EncodeDecodeRoundTrip) {
  ExpectRoundTrip(Generation({0, 1, 3}, {"1234.1700000000000001", "99.5", "7.8"}, 0, "first: 3 of 4 workers"));
  ExpectRoundTrip(Generation({0, 2}, {"11.1", "12.2"}, 2, "worker 1 lost | regroup | root 2"));
  ExpectRoundTrip(Generation({0}, {"1.1"}, 0, ""));
  ExpectRoundTrip(Generation({0, 1}, {"1.1", "2.2"}, 1, "|||"));
}

TEST(GroupGenerationTest, RankOf) {
  const GroupGeneration g = Generation({0, 2, 5}, {"a", "b", "c"}, 0, "");
  EXPECT_EQ(g.RankOf(0), 0);
  EXPECT_EQ(g.RankOf(2), 1);
  EXPECT_EQ(g.RankOf(5), 2);
  EXPECT_EQ(g.RankOf(1), -1);
  EXPECT_EQ(g.RankOf(6), -1);
  EXPECT_EQ(g.RankOf(-1), -1);
}

TEST(GroupGenerationTest, DecodeRefusesGarbage) {
  for (const std::string text : {
           "", "x|0|y",
           "0=a,1=b|5|why",       // root not a member
           "1=a,0=b|0|why",       // members not ascending
           "0=a|notanumber|why",  // root not a number
           "0=a,1=b",             // no root, no why
           "0=a,1=b|0",           // no why
           "|0|why",              // no members
           "0=a,b|0|why",         // a member without its incarnation
           "zero=a|0|why",        // a member not a number
       }) {
    absl::StatusOr<GroupGeneration> g = GroupGeneration::Decode(3, text);
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << "'" << text << "'";
    if (!g.ok()) {
      EXPECT_THAT(std::string(g.status().message()), HasSubstr("generation 3"));
    }
  }
}

}  // namespace
}  // namespace pstrain
