// Role checks: running a binary in check mode with a deadline, and turning its
// exit into the launcher's verdict. The "roles" are small shell scripts.
#include "tools/launch/role_check.h"

#include <sys/wait.h>

#include <chrono>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/process_test_util.h"

namespace pstrain::launch {
namespace {

using ::pstrain::test::ProcessAlive;
using ::pstrain::test::ReadPid;
using ::pstrain::test::TempDir;
using ::pstrain::test::WaitUntil;
using ::pstrain::test::WriteExecutable;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class RoleCheckTest : public ::testing::Test {
 protected:
  // A script named `name` in the temp dir running `body`.
  std::string Script(const std::string& name, const std::string& body) {
    const std::string path = dir_ / name;
    WriteExecutable(path, absl::StrCat("#!/bin/sh\n", body));
    return path;
  }
  TempDir dir_;
};

TEST_F(RoleCheckTest, RunPassesArgumentsAndCapturesBothStreams) {
  const std::string role = Script("role", "echo \"args: $*\"\necho 'to stderr' >&2\nexit 3\n");
  absl::StatusOr<CheckRun> run = RunCheckCommand(role, {"--a=1", "b c", kCheckConfigFlag}, absl::Seconds(10));
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_FALSE(run->timed_out);
  ASSERT_TRUE(WIFEXITED(run->wait_status));
  EXPECT_EQ(WEXITSTATUS(run->wait_status), 3);
  EXPECT_THAT(run->output, HasSubstr("args: --a=1 b c --check_config\n"));
  EXPECT_THAT(run->output, HasSubstr("to stderr\n"));
}

TEST_F(RoleCheckTest, RunKillsTheWholeGroupAtTheDeadline) {
  // The script and a child of its own both hang; neither may survive.
  const std::string role = Script("hang", absl::StrCat("sleep 60 &\necho $! > ", dir_ / "child.pid",
                                                       "\necho waiting\nwhile :; do sleep 0.05; done\n"));
  const auto begin = std::chrono::steady_clock::now();
  absl::StatusOr<CheckRun> run = RunCheckCommand(role, {}, absl::Milliseconds(500));
  const auto elapsed = std::chrono::steady_clock::now() - begin;
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_TRUE(run->timed_out);
  EXPECT_LT(elapsed, std::chrono::seconds(5));
  EXPECT_THAT(run->output, HasSubstr("waiting"));
  const pid_t child = ReadPid(dir_ / "child.pid");
  ASSERT_GT(child, 0);
  EXPECT_TRUE(WaitUntil([&] { return !ProcessAlive(child); })) << "the role's child survived the deadline";
}

TEST_F(RoleCheckTest, RunRefusesAMissingBinary) {
  absl::StatusOr<CheckRun> run = RunCheckCommand(dir_ / "nope", {}, absl::Seconds(1));
  EXPECT_EQ(run.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(run.status().message()), StartsWith("cannot execute " + (dir_ / "nope")));
}

TEST(CheckMessageTest, TakesTheLastErrorLineElseTheLastLine) {
  EXPECT_EQ(CheckMessage("I0101 log line\nerror: exp.yaml: field 'x': expected y\n"),
            "exp.yaml: field 'x': expected y");
  EXPECT_EQ(CheckMessage("error: first\nerror: second\n\n"), "second");
  EXPECT_EQ(CheckMessage("something broke\n  \n"), "something broke");
  EXPECT_EQ(CheckMessage(""), "");
}

TEST_F(RoleCheckTest, VerdictAcceptsExitZeroWithWhatTheRoleNeeds) {
  const std::string plain = Script("ok", "echo 'config ok: exp.yaml (worker 0)'\nexit 0\n");
  absl::StatusOr<std::vector<std::string>> none =
      CheckRoleConfig("worker", plain, {kCheckConfigFlag}, absl::Seconds(10));
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
  const std::string mpi = Script("mpi", "echo 'config ok: exp.yaml (worker 0)'\necho 'needs: mpirun'\nexit 0\n");
  absl::StatusOr<std::vector<std::string>> needs =
      CheckRoleConfig("worker", mpi, {kCheckConfigFlag}, absl::Seconds(10));
  ASSERT_TRUE(needs.ok()) << needs.status();
  EXPECT_THAT(*needs, ::testing::ElementsAre("mpirun"));
}

TEST_F(RoleCheckTest, VerdictOnExitTwoIsARefusalWithTheRolesMessage) {
  const std::string role = Script("refuse",
                                  "echo \"error: exp.yaml: field 'model.name': expected one of mlp\" >&2\n"
                                  "exit 2\n");
  const absl::Status status = CheckRoleConfig("worker", role, {kCheckConfigFlag}, absl::Seconds(10)).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "worker refuses the config: exp.yaml: field 'model.name': expected one of mlp");
}

TEST_F(RoleCheckTest, VerdictOnAnotherExitOrSignalIsAFailure) {
  const std::string crash = Script("crash", "echo 'boom'\nkill -9 $$\n");
  absl::Status status = CheckRoleConfig("ps", crash, {kCheckConfigFlag}, absl::Seconds(10)).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(status.message()), StartsWith("ps failed while checking the config (" + crash));
  EXPECT_THAT(status.message(), HasSubstr("was killed by signal 9 (Killed)): boom"));

  const std::string old = Script("old", "echo 'unknown command line flag check_config' >&2\nexit 1\n");
  status = CheckRoleConfig("ps", old, {kCheckConfigFlag}, absl::Seconds(10)).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr("exited with code 1): unknown command line flag check_config"));
}

TEST_F(RoleCheckTest, VerdictOnTheDeadlineNamesTheRoleAndTheLimit) {
  const std::string role = Script("slow", "while :; do sleep 0.05; done\n");
  const absl::Status status = CheckRoleConfig("worker", role, {kCheckConfigFlag}, absl::Milliseconds(300)).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(status.message()), StartsWith("worker did not finish checking the config within 0.3s (" +
                                                        role + " --check_config); it was killed"));
}

}  // namespace
}  // namespace pstrain::launch
