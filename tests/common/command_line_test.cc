// The command line every pstrain binary shares (common/command_line/): its
// own flags in --help, the libraries' only in --helpfull, and every kind of
// bad flag named in one line. The binaries themselves: tests/tools/help_test.cc.
#include "common/command_line/command_line.h"

#include <gflags/gflags.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

DEFINE_int32(test_rounds, 3, "rounds: how many");
DEFINE_string(test_name, "", "names: what to call it");
DEFINE_bool(test_quiet, false, "every subcommand: say less");

namespace pstrain {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const CommandLineSpec kSpec{.program = "pstrain-test",
                            .usage = "[--flags]\nA test of the command line.",
                            .own_files = {"command_line_test"},
                            .shows = nullptr};

// FirstBadFlag over `args` (argv[0] added).
std::string BadFlag(std::vector<std::string> args) {
  args.insert(args.begin(), "pstrain-test");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return FirstBadFlag(static_cast<int>(argv.size()), argv.data());
}

TEST(CommandLineTest, HelpShowsOwnFlagsAndHelpfullTheLibraries) {
  const std::string help = HelpText(kSpec, /*full=*/false);
  EXPECT_THAT(help, HasSubstr("usage: pstrain-test [--flags]\nA test of the command line.\n"));
  EXPECT_THAT(help, HasSubstr("  --test_rounds=3  rounds: how many\n"));
  EXPECT_THAT(help, HasSubstr("  --test_name=\"\"  names: what to call it\n"));
  EXPECT_THAT(help, Not(HasSubstr("--flagfile")));
  EXPECT_THAT(help, HasSubstr("--helpfull also lists the libraries' flags"));
  const std::string full = HelpText(kSpec, /*full=*/true);
  EXPECT_THAT(full, HasSubstr("  --test_rounds=3"));
  EXPECT_THAT(full, HasSubstr("  --flagfile=\"\"  load flags from file"));
}

TEST(CommandLineTest, AFilterShowsTheFlagsOfOneSubcommand) {
  CommandLineSpec rounds = kSpec;
  rounds.shows = [](const std::string& d) { return d.rfind("rounds: ", 0) == 0 || d.rfind("every", 0) == 0; };
  const std::string help = HelpText(rounds, false);
  EXPECT_THAT(help, HasSubstr("--test_rounds"));
  EXPECT_THAT(help, HasSubstr("--test_quiet"));
  EXPECT_THAT(help, Not(HasSubstr("--test_name")));
}

TEST(CommandLineTest, EveryKindOfBadFlagIsNamedInOneLine) {
  EXPECT_EQ(BadFlag({"--test_rounds=7", "--test_name", "x", "--notest_quiet", "positional"}), "");
  EXPECT_EQ(FLAGS_test_rounds, 7);
  EXPECT_EQ(FLAGS_test_name, "x");
  EXPECT_EQ(BadFlag({"--test_rounds", "-2"}), "") << "a value may look like a flag";
  EXPECT_EQ(FLAGS_test_rounds, -2);
  EXPECT_EQ(BadFlag({"--dryrun"}), "unknown flag --dryrun");
  EXPECT_EQ(BadFlag({"-test_rounds=abc"}), "--test_rounds: 'abc' is not an int32");
  EXPECT_EQ(BadFlag({"--test_quiet=maybe"}), "--test_quiet: 'maybe' is not a bool");
  EXPECT_EQ(BadFlag({"--test_rounds"}), "--test_rounds needs a value (int32)");
  EXPECT_EQ(BadFlag({"--", "--dryrun"}), "") << "after --, nothing is a flag";
}

}  // namespace
}  // namespace pstrain
