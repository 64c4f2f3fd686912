// Every `build/bin/...` command of README.md run as written, from the
// source tree, with its defaults: it exits 0, and what it trained learned
// (no warning in any result.json it left; no "!" row in a comparison). Only
// the output location is added (--run_dir / --out into a temporary
// directory), so the tree stays clean. tools/demo.sh and tools/test.sh, the
// README's two other commands, are what CI runs.
#include <sys/wait.h>

#include <cctype>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/metrics/result_json.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster_test_util.h"
#include "tests/util/process_test_util.h"

namespace pstrain::test {
namespace {

namespace fs = std::filesystem;

// The README's command lines that run a pstrain binary (inside ```sh blocks).
std::vector<std::string> ReadmeCommands() {
  std::vector<std::string> commands;
  bool in_block = false;
  for (absl::string_view line : absl::StrSplit(ReadFile(SourcePath("README.md")), '\n')) {
    const absl::string_view text = absl::StripAsciiWhitespace(line);
    if (absl::StartsWith(text, "```")) {
      in_block = !in_block;
      continue;
    }
    if (in_block && absl::StartsWith(text, "build/bin/")) commands.push_back(std::string(text));
  }
  return commands;
}

TEST(ReadmeCommandsTest, TheReadmeNamesItsCommands) {
  const std::vector<std::string> commands = ReadmeCommands();
  EXPECT_GE(commands.size(), 2u) << "the tour's launch and comparison";
  for (const std::string& command : commands) {
    EXPECT_TRUE(absl::StartsWith(command, "build/bin/pstrain-launch ") ||
                absl::StartsWith(command, "build/bin/pstrain-compare "))
        << "a README command this test does not know how to run and judge: " << command;
  }
}

// The result.json files under `dir`, with their warnings.
std::vector<std::string> WarningsUnder(const std::string& dir, int* results) {
  std::vector<std::string> warnings;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir)) {
    if (e.path().filename() != "result.json") continue;
    ++*results;
    absl::StatusOr<RunResult> result = ReadResultJson(e.path().string());
    EXPECT_TRUE(result.ok()) << result.status();
    if (result.ok()) warnings.insert(warnings.end(), result->warnings().begin(), result->warnings().end());
  }
  return warnings;
}

class ReadmeCommandTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ReadmeCommandTest, RunsAsWrittenAndLearns) {
  std::vector<std::string> argv = absl::StrSplit(GetParam(), ' ', absl::SkipEmpty());
  const bool compare = absl::EndsWith(argv[0], "pstrain-compare");
  TempDir dir;
  const std::string out = dir.path() + "/out";
  argv[0] = BinDir() + "/" + fs::path(argv[0]).filename().string();
  argv.insert(argv.end(), {compare ? "--out" : "--run_dir", out});
  Subprocess run = Spawn(argv, dir.path(), SourcePath(""));
  std::optional<int> status = WaitForExit(run.pid, std::chrono::minutes(8));
  ASSERT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << GetParam() << ":\n"
                                                                         << run.out() << run.err();
  int results = 0;
  const std::vector<std::string> warnings = WarningsUnder(out, &results);
  EXPECT_GE(results, 1) << GetParam() << " left no result.json";
  EXPECT_TRUE(warnings.empty()) << GetParam() << ": " << absl::StrJoin(warnings, "; ");
  if (compare) {
    // The table's rows: a run that did not learn is marked **!** there (the
    // legend below the table explains the mark, so it is not searched).
    const std::string md = ReadFile(out + "/results.md");
    for (absl::string_view line : absl::StrSplit(md, '\n')) {
      if (!absl::StartsWith(line, "|")) continue;
      EXPECT_FALSE(absl::StrContains(line, "**!**")) << line;
      EXPECT_FALSE(absl::StrContains(line, "failed (exit")) << line;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Readme, ReadmeCommandTest, ::testing::ValuesIn(ReadmeCommands()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = fs::path(info.param.substr(info.param.rfind(' ') + 1)).stem().string();
                           for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

}  // namespace
}  // namespace pstrain::test
