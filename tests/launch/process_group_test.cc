// ClusterProcesses in-process, with /bin/sh one-liners as roles.
#include "tools/launch/process_group.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/util/process_test_util.h"

namespace pstrain::launch {
namespace {

using ::pstrain::test::ProcessAlive;
using ::pstrain::test::ReadFile;
using ::pstrain::test::TempDir;

RoleSpec Shell(const std::string& name, const std::string& script, bool is_ps = false) {
  return RoleSpec{name, is_ps, "/bin/sh", {"-c", script}};
}

class ClusterProcessesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    out_path_ = dir_ / "out.txt";
    out_fd_ = open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(out_fd_, 0);
  }
  void TearDown() override { close(out_fd_); }

  ClusterOptions Options() {
    ClusterOptions options;
    options.log_dir = dir_.path();
    options.out_fd = out_fd_;
    options.grace = absl::Seconds(2);
    return options;
  }
  std::string Output() { return ReadFile(out_path_); }

  TempDir dir_;
  std::string out_path_;
  int out_fd_ = -1;
};

TEST_F(ClusterProcessesTest, PrefixesWholeLinesAndKeepsRawLogs) {
  ClusterProcesses cluster(Options());
  ASSERT_TRUE(cluster
                  .Start({Shell("ps0", "echo ready; printf 'no newline at end'", true),
                          Shell("worker0",
                                "printf 'hal'; sleep 0.2; printf 'f line\\nsecond\\n'; "
                                "echo oops >&2")})
                  .ok());
  const ClusterOutcome outcome = cluster.Wait();
  EXPECT_EQ(outcome.exit_code, 0) << outcome.reason;
  const std::string out = Output();
  EXPECT_NE(out.find("[ps0] ready\n"), std::string::npos) << out;
  EXPECT_NE(out.find("[ps0] no newline at end\n"), std::string::npos) << out;
  EXPECT_NE(out.find("[worker0] half line\n"), std::string::npos) << out;
  EXPECT_NE(out.find("[worker0] second\n"), std::string::npos) << out;
  EXPECT_NE(out.find("[worker0] oops\n"), std::string::npos) << out;
  EXPECT_EQ(ReadFile(dir_ / "worker0.log"), "half line\nsecond\noops\n");
  EXPECT_EQ(ReadFile(dir_ / "ps0.log"), "ready\nno newline at end");
  ASSERT_EQ(outcome.exits.size(), 2u);
  for (const RoleExit& exit : outcome.exits) {
    EXPECT_TRUE(WIFEXITED(exit.wait_status) && WEXITSTATUS(exit.wait_status) == 0) << exit.name;
  }
}

TEST_F(ClusterProcessesTest, SplitsOverlongLinesWhateverTheChunking) {
  ClusterProcesses cluster(Options());
  // worker0 writes its line in one burst; worker1 pauses exactly at the 64 KiB
  // boundary, then ends with a partial line.
  ASSERT_TRUE(cluster
                  .Start({Shell("worker0", "head -c 70000 /dev/zero | tr '\\0' x; echo"),
                          Shell("worker1",
                                "head -c 65536 /dev/zero | tr '\\0' y; sleep 0.1; "
                                "head -c 65537 /dev/zero | tr '\\0' y; echo; printf z")})
                  .ok());
  EXPECT_EQ(cluster.Wait().exit_code, 0);
  std::vector<std::string> lines0, lines1;
  const std::vector<std::string> lines = absl::StrSplit(Output(), '\n');
  for (const std::string& line : lines) {
    if (absl::StartsWith(line, "[worker0] ")) lines0.push_back(line.substr(10));
    if (absl::StartsWith(line, "[worker1] ")) lines1.push_back(line.substr(10));
  }
  EXPECT_EQ(lines0, (std::vector<std::string>{std::string(65536, 'x'), std::string(70000 - 65536, 'x')}));
  EXPECT_EQ(lines1,
            (std::vector<std::string>{std::string(65536, 'y'), std::string(65536, 'y'), std::string(1, 'y'), "z"}));
  EXPECT_EQ(ReadFile(dir_ / "worker0.log"), std::string(70000, 'x') + "\n");
  EXPECT_EQ(ReadFile(dir_ / "worker1.log"), std::string(131073, 'y') + "\nz");
}

TEST_F(ClusterProcessesTest, FirstFailureStopsTheOthers) {
  ClusterProcesses cluster(Options());
  ASSERT_TRUE(cluster
                  .Start({Shell("ps0", "exec sleep 60", true), Shell("worker0", "exec sleep 60"),
                          Shell("worker1", "sleep 0.2; exit 3")})
                  .ok());
  const ClusterOutcome outcome = cluster.Wait();
  EXPECT_EQ(outcome.exit_code, 1);
  EXPECT_EQ(outcome.reason, "worker1 exited with code 3");
  EXPECT_NE(Output().find("launch: worker1 exited with code 3; stopping all roles\n"), std::string::npos) << Output();
  ASSERT_EQ(outcome.exits.size(), 3u);
  for (int i : {0, 1}) {
    EXPECT_TRUE(WIFSIGNALED(outcome.exits[i].wait_status)) << outcome.exits[i].name;
    EXPECT_EQ(WTERMSIG(outcome.exits[i].wait_status), SIGTERM) << outcome.exits[i].name;
  }
  for (pid_t pid : cluster.pids()) EXPECT_FALSE(ProcessAlive(pid)) << pid;
}

TEST_F(ClusterProcessesTest, ExitCodeTwoIsAConfigError) {
  ClusterProcesses cluster(Options());
  ASSERT_TRUE(
      cluster.Start({Shell("ps0", "echo 'bad config' >&2; exit 2", true), Shell("worker0", "exec sleep 60")}).ok());
  EXPECT_EQ(cluster.Wait().exit_code, 2);
  EXPECT_NE(Output().find("[ps0] bad config\n"), std::string::npos) << Output();
}

TEST_F(ClusterProcessesTest, InterruptByteTearsDownWithSignalExitCode) {
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
  ClusterOptions options = Options();
  options.interrupt_fd = fds[0];
  ClusterProcesses cluster(options);
  ASSERT_TRUE(cluster.Start({Shell("ps0", "exec sleep 60", true), Shell("worker0", "exec sleep 60")}).ok());
  const unsigned char sig = SIGINT;
  ASSERT_EQ(write(fds[1], &sig, 1), 1);
  const ClusterOutcome outcome = cluster.Wait();
  EXPECT_EQ(outcome.exit_code, 130);
  EXPECT_NE(Output().find("launch: received SIGINT; stopping all roles"), std::string::npos) << Output();
  close(fds[0]);
  close(fds[1]);
}

TEST_F(ClusterProcessesTest, SigkillAfterGraceForRolesIgnoringSigterm) {
  ClusterOptions options = Options();
  options.grace = absl::Milliseconds(300);
  ClusterProcesses cluster(options);
  // worker0 fails only once ps0 ignores SIGTERM.
  const std::string ready = dir_ / "ps_ready";
  ASSERT_TRUE(cluster
                  .Start({Shell("ps0", "trap '' TERM; touch " + ready + "; while :; do sleep 0.05; done", true),
                          Shell("worker0", "while [ ! -e " + ready + " ]; do sleep 0.02; done; exit 1")})
                  .ok());
  const ClusterOutcome outcome = cluster.Wait();
  EXPECT_EQ(outcome.exit_code, 1);
  EXPECT_NE(Output().find("launch: ps0 still running 300ms after SIGTERM; sending SIGKILL"), std::string::npos)
      << Output();
  EXPECT_EQ(WTERMSIG(outcome.exits[0].wait_status), SIGKILL);
}

TEST_F(ClusterProcessesTest, StartRejectsMissingBinaryAndStartsNothing) {
  ClusterProcesses cluster(Options());
  const absl::Status status =
      cluster.Start({Shell("ps0", "exec sleep 60", true), RoleSpec{"worker0", false, dir_ / "nope", {}}});
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find(dir_ / "nope"), std::string::npos) << status;
  EXPECT_TRUE(cluster.pids().empty());
}

TEST_F(ClusterProcessesTest, DestructorKillsAndReapsRunningRoles) {
  std::vector<pid_t> pids;
  {
    ClusterProcesses cluster(Options());
    ASSERT_TRUE(cluster.Start({Shell("ps0", "exec sleep 60", true), Shell("worker0", "exec sleep 60")}).ok());
    pids = cluster.pids();
  }
  ASSERT_EQ(pids.size(), 2u);
  for (pid_t pid : pids) {
    EXPECT_NE(kill(pid, 0), 0) << "pid " << pid << " still exists (zombie or running)";
  }
}

TEST(DescribeWaitStatusTest, CodesAndSignals) {
  EXPECT_EQ(DescribeWaitStatus(3 << 8), "code 3");
  EXPECT_EQ(DescribeWaitStatus(SIGKILL), "signal 9 (Killed)");
}

}  // namespace
}  // namespace pstrain::launch
