// emulation.link_changes: the wall-clock steps (no root) and the schedule
// changing real tc caps of an emulated cluster (root; skips saying why
// otherwise).
#include "tools/launch/link_schedule.h"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/launch/emulated_hosts.h"

namespace pstrain::launch {
namespace {

using ::testing::HasSubstr;

TEST(LinkStepsOf, EmulatedSecondsAndRatesBecomeWallClockOnes) {
  ExperimentConfig c;
  c.set_device("emulated");  // the time scale applies to emulated devices only
  c.mutable_emulation()->set_time_scale(20);
  auto* first = c.mutable_emulation()->add_link_changes();
  first->set_after_seconds(3);
  first->set_gbps(2);
  auto* second = c.mutable_emulation()->add_link_changes();
  second->set_after_seconds(6);
  second->set_gbps(8);
  const std::vector<LinkStep> steps = LinkStepsOf(c);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].at, absl::Seconds(60));
  EXPECT_DOUBLE_EQ(steps[0].gbps, 0.1);
  EXPECT_DOUBLE_EQ(steps[0].model_gbps, 2);
  EXPECT_EQ(steps[1].at, absl::Seconds(120));
  EXPECT_DOUBLE_EQ(steps[1].gbps, 0.4);
  // A byte scale of 4 at a quarter of the time scale: the same rates, the
  // changes four times sooner.
  c.mutable_emulation()->set_time_scale(5);
  const std::vector<LinkStep> scaled = LinkStepsOf(c, /*byte_scale=*/4);
  ASSERT_EQ(scaled.size(), 2u);
  EXPECT_EQ(scaled[0].at, absl::Seconds(15));
  EXPECT_DOUBLE_EQ(scaled[0].gbps, 0.1);
  EXPECT_DOUBLE_EQ(scaled[0].model_gbps, 2);
}

// What the schedule said, line by line.
class Lines {
 public:
  std::function<void(const std::string&)> Sink() {
    return [this](const std::string& line) {
      absl::MutexLock lock(&mu_);
      lines_.push_back(line);
    };
  }
  // Waits up to 30 s for `n` lines; all of them.
  std::vector<std::string> Await(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return lines_.size() >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(30));
    return lines_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};

// `tc qdisc show dev eth0` inside the host of worker `w`.
std::string QdiscOfWorkerHost(const EmulatedCluster& cluster, int w) {
  std::vector<std::string> argv = cluster.RunWorker(w);
  for (const char* arg : {"tc", "qdisc", "show", "dev", "eth0"}) argv.push_back(arg);
  FILE* pipe = popen(absl::StrJoin(argv, " ").c_str(), "r");
  if (pipe == nullptr) return "";
  std::string out;
  char buffer[512];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) out += buffer;
  pclose(pipe);
  return out;
}

class LinkScheduleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (absl::Status s = CanEmulateHosts(); !s.ok()) GTEST_SKIP() << s.message();
    EmulatedLayout layout;
    layout.num_ps = 1;
    layout.num_workers = 1;
    layout.server_hosts = 1;
    layout.link_gbps = 1;
    layout.server_link_gbps = 1;
    absl::StatusOr<std::unique_ptr<EmulatedCluster>> cluster = EmulatedCluster::Create(layout, 213 * 256 + 40);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
  }
  std::unique_ptr<EmulatedCluster> cluster_;
};

TEST_F(LinkScheduleTest, EachChangeCapsEveryLinkWhenDueAndSaysSo) {
  EXPECT_THAT(QdiscOfWorkerHost(*cluster_, 0), HasSubstr("rate 1Gbit"));
  Lines lines;
  {
    LinkSchedule schedule(cluster_.get(),
                          {{.at = absl::Milliseconds(100), .gbps = 0.25, .model_gbps = 5, .model_seconds = 2},
                           {.at = absl::Milliseconds(300), .gbps = 0.5, .model_gbps = 10, .model_seconds = 6}},
                          lines.Sink());
    const std::vector<std::string> said = lines.Await(2);
    ASSERT_EQ(said.size(), 2u);
    EXPECT_THAT(said[0], HasSubstr("links now 5 Gbit/s each way (0.25 Gbit/s on the wire), 2 s emulated after"));
    EXPECT_THAT(said[1], HasSubstr("links now 10 Gbit/s each way (0.5 Gbit/s on the wire), 6 s emulated after"));
  }
  EXPECT_THAT(QdiscOfWorkerHost(*cluster_, 0), HasSubstr("rate 500Mbit"));
  EXPECT_THAT(cluster_->Describe(), HasSubstr("links 0.5 Gbit/s each way"));
}

TEST_F(LinkScheduleTest, EndsAtOnceWithChangesNotYetDueAndStopsAtAFailedOne) {
  Lines lines;
  const absl::Time start = absl::Now();
  { LinkSchedule far(cluster_.get(), {{.at = absl::Hours(1), .gbps = 0.5}}, lines.Sink()); }
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "destroying the schedule waited for its change";
  EXPECT_TRUE(lines.Await(0).empty());
  {
    LinkSchedule failing(cluster_.get(),
                         {{.at = absl::Milliseconds(10), .gbps = 0, .model_seconds = 1},
                          {.at = absl::Milliseconds(20), .gbps = 0.5, .model_seconds = 2}},
                         lines.Sink());
    const std::vector<std::string> said = lines.Await(1);
    ASSERT_EQ(said.size(), 1u);
    EXPECT_THAT(said[0], HasSubstr("could not change the links"));
    EXPECT_THAT(said[0], HasSubstr("expected a rate in (0, 400]"));
  }
  EXPECT_EQ(lines.Await(0).size(), 1u) << "no change after a failed one";
  EXPECT_THAT(QdiscOfWorkerHost(*cluster_, 0), HasSubstr("rate 1Gbit"));
}

}  // namespace
}  // namespace pstrain::launch
