// The worker's Chrome-trace timeline: one file per worker, only the chosen
// window of steps, a valid JSON array after every flush and after the
// process is killed between flushes.
#include "worker/timeline.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/util/process_test_util.h"

namespace pstrain {
namespace {

using ::google::protobuf::ListValue;
using ::google::protobuf::Value;
using ::pstrain::test::ReadFile;
using ::pstrain::test::TempDir;

// The file as a JSON array; fails the test when it does not parse.
ListValue ParseTimeline(const std::string& path) {
  ListValue events;
  const std::string text = ReadFile(path);
  const auto status = google::protobuf::util::JsonStringToMessage(text, &events);
  EXPECT_TRUE(status.ok()) << path << " is not a JSON array: " << status.ToString() << "\n" << text;
  return events;
}

const Value* Field(const Value& event, const std::string& name) {
  const auto& fields = event.struct_value().fields();
  auto it = fields.find(name);
  return it == fields.end() ? nullptr : &it->second;
}

ExperimentConfig TimelineConfigFor(const std::string& path, int64_t start_step, int64_t end_step) {
  ExperimentConfig config;
  config.mutable_timeline()->set_path(path);
  config.mutable_timeline()->set_start_step(start_step);
  config.mutable_timeline()->set_end_step(end_step);
  return config;
}

TEST(TimelineTest, EachWorkerGetsItsOwnFile) {
  EXPECT_EQ(Timeline::TimelinePath("runs/trace.json", 0), "runs/trace.json");
  EXPECT_EQ(Timeline::TimelinePath("runs/trace.json", 2), "runs/trace.worker2.json");
  EXPECT_EQ(Timeline::TimelinePath("runs/trace-{worker}.json", 0), "runs/trace-0.json");
  EXPECT_EQ(Timeline::TimelinePath("trace", 3), "trace.worker3");
}

TEST(TimelineTest, NoPathNoTimeline) {
  absl::StatusOr<std::unique_ptr<Timeline>> timeline = Timeline::Create(ExperimentConfig(), 0);
  ASSERT_TRUE(timeline.ok()) << timeline.status();
  EXPECT_EQ(*timeline, nullptr);
}

TEST(TimelineTest, AnUncreatableFileIsRefusedNamingIt) {
  TempDir dir;
  const std::string blocker = dir.path() + "/file";
  test::WriteFile(blocker, "not a directory");
  absl::StatusOr<std::unique_ptr<Timeline>> timeline =
      Timeline::Create(TimelineConfigFor(blocker + "/trace.json", 0, 0), 0);
  ASSERT_FALSE(timeline.ok());
  EXPECT_TRUE(absl::StrContains(timeline.status().message(), "timeline.path: cannot create " + blocker))
      << timeline.status();
}

TEST(TimelineTest, RecordsOnlyTheWindowAndIsValidAfterEveryFlush) {
  TempDir dir;
  const std::string path = dir.path() + "/trace.json";
  absl::StatusOr<std::unique_ptr<Timeline>> made = Timeline::Create(TimelineConfigFor(path, 2, 4), 1);
  ASSERT_TRUE(made.ok()) << made.status();
  Timeline& timeline = **made;
  EXPECT_EQ(timeline.path(), dir.path() + "/trace.worker1.json");
  const absl::Time t0 = absl::FromUnixSeconds(1'800'000'000);
  for (int64_t step = 0; step < 6; ++step) {
    timeline.SetStep(step);
    EXPECT_EQ(timeline.Tracing(), step == 2 || step == 3) << step;
    const absl::Time start = t0 + absl::Milliseconds(10 * step);
    timeline.Record("forward", "replica 0", start, start + absl::Milliseconds(3));
    timeline.Record("push batch 0", "push \"batch\" 0", start, start + absl::Milliseconds(5), R"("variables": 2)");
    ASSERT_TRUE(timeline.Flush().ok());
    ParseTimeline(timeline.path());  // valid after each flush
  }
  const ListValue events = ParseTimeline(timeline.path());
  std::set<int64_t> steps;
  int forward = 0, lanes = 0;
  for (const Value& event : events.values()) {
    const std::string name = Field(event, "name")->string_value();
    const std::string ph = Field(event, "ph")->string_value();
    EXPECT_EQ(Field(event, "pid")->number_value(), 1) << name;
    if (ph == "M") {
      if (name == "thread_name") ++lanes;
      continue;
    }
    EXPECT_EQ(ph, "X");
    const Value* args = Field(event, "args");
    ASSERT_NE(args, nullptr);
    steps.insert(static_cast<int64_t>(Field(*args, "step")->number_value()));
    if (name == "forward") {
      ++forward;
      EXPECT_EQ(Field(event, "dur")->number_value(), 3000);
    } else {
      EXPECT_EQ(name, "push batch 0");
      EXPECT_EQ(Field(*args, "variables")->number_value(), 2);
    }
  }
  EXPECT_EQ(steps, (std::set<int64_t>{2, 3}));
  EXPECT_EQ(forward, 2);
  EXPECT_EQ(lanes, 2);  // each lane announced once
  EXPECT_FALSE(std::filesystem::exists(timeline.path() + ".partial")) << "each flush renames its staging file";
}

TEST(TimelineTest, AProcessKilledMidWindowLeavesValidJson) {
  TempDir dir;
  const std::string path = dir.path() + "/trace.json";
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(ready[0]);
    absl::StatusOr<std::unique_ptr<Timeline>> timeline = Timeline::Create(TimelineConfigFor(path, 0, 0), 0);
    if (!timeline.ok()) _exit(3);
    for (int64_t step = 0;; ++step) {
      (*timeline)->SetStep(step);
      for (int e = 0; e < 50; ++e) (*timeline)->Record("backward", "replica 0", absl::Now(), absl::Now());
      if (!(*timeline)->Flush().ok()) _exit(4);
      if (step == 20) (void)!write(ready[1], "x", 1);  // enough written: kill me any time now
    }
  }
  close(ready[1]);
  char byte;
  ASSERT_EQ(read(ready[0], &byte, 1), 1) << "the child never flushed";
  close(ready[0]);
  usleep(20'000);  // mid-stream
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  const ListValue events = ParseTimeline(path);
  EXPECT_GE(events.values_size(), 21 * 50) << "fewer events than the child had flushed";
}

}  // namespace
}  // namespace pstrain
