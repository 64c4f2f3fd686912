// Every pstrain binary's command line as a user meets it: --help exits 0
// and fits a screen (pstrain's own flags only), a bad flag exits 2 with one
// line naming it.
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/process_test_util.h"

namespace pstrain::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct Ran {
  int code = -1;
  std::string out, err;
};

Ran RunBinary(const std::vector<std::string>& argv) {
  TempDir dir;
  std::vector<std::string> full = argv;
  full[0] = BinDir() + "/" + argv[0];
  Subprocess p = Spawn(full, dir.path());
  const std::optional<int> status = WaitForExit(p.pid, std::chrono::seconds(30));
  Ran ran;
  if (status && WIFEXITED(*status)) ran.code = WEXITSTATUS(*status);
  ran.out = p.out();
  ran.err = p.err();
  return ran;
}

int Lines(const std::string& text) { return static_cast<int>(std::count(text.begin(), text.end(), '\n')); }

class HelpTest : public ::testing::TestWithParam<std::vector<std::string>> {};

TEST_P(HelpTest, HelpExitsZeroWithOwnFlagsOnAScreen) {
  std::vector<std::string> argv = GetParam();
  argv.push_back("--help");
  const Ran ran = RunBinary(argv);
  EXPECT_EQ(ran.code, 0) << ran.out << ran.err;
  EXPECT_THAT(ran.out, HasSubstr("usage: " + argv[0]));
  EXPECT_LT(Lines(ran.out), 40) << ran.out;
  EXPECT_THAT(ran.out, Not(HasSubstr("logtostderr"))) << "glog's flags belong to --helpfull";
  EXPECT_EQ(ran.err, "");
}

TEST_P(HelpTest, ABadFlagExitsTwoWithOneLineNamingIt) {
  std::vector<std::string> argv = GetParam();
  argv.push_back("--no_such_flag=1");
  const Ran ran = RunBinary(argv);
  EXPECT_EQ(ran.code, 2) << ran.out << ran.err;
  EXPECT_EQ(Lines(ran.err), 1) << ran.err;
  EXPECT_THAT(ran.err, HasSubstr("unknown flag --no_such_flag"));
}

INSTANTIATE_TEST_SUITE_P(
    Binaries, HelpTest,
    ::testing::Values(std::vector<std::string>{"pstrain-launch"}, std::vector<std::string>{"pstrain-compare"},
                      std::vector<std::string>{"pstrain-ps"}, std::vector<std::string>{"pstrain-worker"},
                      std::vector<std::string>{"pstrain-data"}, std::vector<std::string>{"pstrain-storm"},
                      std::vector<std::string>{"pstrain-bench", "ps"},
                      std::vector<std::string>{"pstrain-bench", "model"}),
    [](const auto& info) {
      std::string name = info.param[0].substr(8);
      if (info.param.size() > 1) name += "_" + info.param[1];
      return name;
    });

TEST(HelpTest, HelpfullAddsTheLibrariesFlags) {
  const Ran ran = RunBinary({"pstrain-worker", "--helpfull"});
  EXPECT_EQ(ran.code, 0);
  EXPECT_THAT(ran.out, HasSubstr("--config="));
  EXPECT_THAT(ran.out, HasSubstr("--logtostderr"));
}

TEST(HelpTest, AValueItsTypeRefusesExitsTwo) {
  const Ran launch = RunBinary({"pstrain-launch", "configs/fashion_mnist_mlp_sync.yaml", "--timeout_s", "abc"});
  EXPECT_EQ(launch.code, 2) << launch.err;
  EXPECT_EQ(launch.err, "pstrain-launch: --timeout_s: 'abc' is not an int32 (see --help)\n");
  const Ran compare = RunBinary({"pstrain-compare", "configs/compare/distributed_strategies.yaml", "--dryrun"});
  EXPECT_EQ(compare.code, 2) << compare.err;
  EXPECT_EQ(compare.err, "pstrain-compare: unknown flag --dryrun (see --help)\n");
}

// pstrain-launch --check_config: every role's check on this machine, nothing
// started; a GPU config on a machine without one is refused naming the device.
TEST(CheckConfigTest, TheLauncherChecksEveryRoleAndStartsNothing) {
  const std::string source = PSTRAIN_TEST_SOURCE_DIR;
  const Ran demo = RunBinary({"pstrain-launch", source + "/configs/fashion_mnist_mlp_sync.yaml", "--check_config"});
  EXPECT_EQ(demo.code, 0) << demo.out << demo.err;
  EXPECT_THAT(demo.out, HasSubstr("launch: config ok: " + source +
                                  "/configs/fashion_mnist_mlp_sync.yaml (the ps and worker checks on this machine "
                                  "accept it); nothing started"));
  EXPECT_THAT(demo.out, Not(HasSubstr("[worker0]"))) << "nothing started";
  const Ran gpu = RunBinary({"pstrain-launch", source + "/configs/resnet50_synthetic_gpu.yaml", "--check_config"});
  if (std::filesystem::exists("/dev/nvidiactl")) {
    EXPECT_EQ(gpu.code, 0) << gpu.out << gpu.err;
  } else {
    EXPECT_EQ(gpu.code, 2) << gpu.out << gpu.err;
    EXPECT_THAT(gpu.err, HasSubstr("device gpu: no CUDA device is usable on this machine")) << gpu.err;
  }
  const Ran worker =
      RunBinary({"pstrain-worker", "--config=" + source + "/configs/fashion_mnist_mlp_sync.yaml", "--check_config"});
  EXPECT_EQ(worker.code, 0) << worker.err;
  EXPECT_THAT(worker.out, HasSubstr("config ok: ")) << "no --index needed: worker 0";
  EXPECT_THAT(worker.out, HasSubstr("(worker 0)"));
}

TEST(HelpTest, BenchWithoutASubcommandListsThem) {
  const Ran ran = RunBinary({"pstrain-bench", "--help"});
  EXPECT_EQ(ran.code, 0);
  EXPECT_THAT(ran.out, HasSubstr("subcommands:"));
  EXPECT_THAT(ran.out, HasSubstr("pstrain-bench <subcommand> --help"));
  EXPECT_LT(Lines(ran.out), 40);
}

}  // namespace
}  // namespace pstrain::test
