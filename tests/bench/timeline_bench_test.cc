// The timeline flush benchmark: the figures describe the run it made (file
// size, bytes per step, spans ordered by file size, the fitted line through
// its own samples), the file it measured is a complete trace, and bad
// options are named. No speed thresholds (a shared machine).
#include "tools/bench/timeline_bench.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/process_test_util.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(TimelineBenchTest, FiguresDescribeTheFileItWrote) {
  test::TempDir dir;
  TimelineBenchOptions options;
  options.steps = 40;
  options.events_per_step = 5;
  options.dir = dir.path();
  absl::StatusOr<TimelineBenchResult> r = RunTimelineBench(options);
  ASSERT_TRUE(r.ok()) << r.status();

  // The file it measured is still there (a given --dir is kept), complete,
  // with every step's events.
  const std::string trace = ReadAll(dir / "timeline.json");
  EXPECT_EQ(static_cast<int64_t>(trace.size()), r->final_file_bytes);
  EXPECT_EQ(trace.front(), '[');
  EXPECT_EQ(trace.substr(trace.size() - 3), "\n]\n");
  size_t events = 0;
  for (size_t at = trace.find("\"ph\": \"X\""); at != std::string::npos; at = trace.find("\"ph\": \"X\"", at + 1)) {
    ++events;
  }
  EXPECT_EQ(events, 40u * 5u);
  // The reference appended exactly what the timeline grew by after its
  // first write (the opening bracket and the closing one).
  EXPECT_EQ(static_cast<int64_t>(std::filesystem::file_size(dir / "reference.json")), r->final_file_bytes - 4);
  EXPECT_DOUBLE_EQ(r->bytes_per_step, static_cast<double>(r->final_file_bytes) / 40);

  EXPECT_LT(r->first_tenth.file_mb, r->last_tenth.file_mb);
  for (const TimelineSpan& span : {r->first_tenth, r->last_tenth}) {
    EXPECT_GT(span.flush_us, 0);
    EXPECT_GT(span.append_us, 0);
    EXPECT_DOUBLE_EQ(span.ratio, span.flush_us / span.append_us);
  }
  EXPECT_GT(r->total_flush_s, 0);
  EXPECT_TRUE(std::isfinite(r->fixed_us) && std::isfinite(r->us_per_mb));
  EXPECT_FALSE(r->file_system.empty());

  const std::string table = FormatTimelineBenchTable(*r);
  EXPECT_THAT(table, HasSubstr("40 steps x 5 events"));
  EXPECT_THAT(table, HasSubstr("per MB of file so far"));
  const std::string json = FormatTimelineBenchJson(*r);
  EXPECT_THAT(json, HasSubstr("{\"steps\":40,\"events_per_step\":5,\"file_system\":\""));
  EXPECT_THAT(json, HasSubstr(absl::StrCat("\"final_file_bytes\":", r->final_file_bytes, ",")));
  EXPECT_EQ(json.find("nan"), std::string::npos) << json;
}

TEST(TimelineBenchTest, WithoutADirectoryItCleansUpAfterItself) {
  TimelineBenchOptions options;
  options.steps = 10;
  options.events_per_step = 1;
  test::TempDir tmp;
  const char* was = std::getenv("TMPDIR");
  const std::string saved = was != nullptr ? was : "";
  setenv("TMPDIR", tmp.path().c_str(), 1);
  absl::StatusOr<TimelineBenchResult> r = RunTimelineBench(options);
  if (was != nullptr) {
    setenv("TMPDIR", saved.c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(std::filesystem::is_empty(tmp.path())) << "the run's directory was left behind";
}

TEST(TimelineBenchTest, BadOptionsAreNamed) {
  TimelineBenchOptions options;
  options.steps = 9;
  EXPECT_THAT(std::string(ValidateTimelineBenchOptions(options).message()), HasSubstr("--steps must be at least 10"));
  options.steps = 10;
  options.events_per_step = 0;
  EXPECT_THAT(std::string(RunTimelineBench(options).status().message()),
              HasSubstr("--events_per_step must be at least 1"));
  options.events_per_step = 1;
  options.dir = "/proc/no-such-place/timeline";
  EXPECT_THAT(std::string(RunTimelineBench(options).status().message()), HasSubstr("/proc/no-such-place/timeline"));
}

}  // namespace
}  // namespace pstrain
