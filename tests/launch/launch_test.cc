// pstrain-launch end to end, as a real subprocess, with fake role binaries:
// small shell scripts named pstrain-ps and pstrain-worker in a temp --bin_dir.
// Every fake writes its pid to RUN_DIR/<role>.pid and its argv (one per line)
// to RUN_DIR/<role>.args before doing what the test asks. Run with
// --check_config (the launcher's check before it starts anything), a fake
// writes its argv to <test dir>/<job>.check_args and does what the test asks
// of the check (by default: accept). The last tests use the real role
// binaries, whose check mode refuses what the roles would refuse.
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/util/process_test_util.h"

namespace pstrain::launch {
namespace {

namespace fs = std::filesystem;
using ::pstrain::test::BinDir;
using ::pstrain::test::Exists;
using ::pstrain::test::LiveGroupMembers;
using ::pstrain::test::ProcessAlive;
using ::pstrain::test::ReadFile;
using ::pstrain::test::ReadPid;
using ::pstrain::test::Spawn;
using ::pstrain::test::Subprocess;
using ::pstrain::test::TempDir;
using ::pstrain::test::WaitForExit;
using ::pstrain::test::WaitUntil;
using ::pstrain::test::WriteExecutable;
using ::pstrain::test::WriteFile;

// Role behaviours (shell snippets run after the common prelude).
// A PS that serves until every worker has left RUN_DIR/<worker>.done, then
// exits 0.
constexpr char kPsServe[] = R"sh(
echo "ps $INDEX serving"
while [ "$(ls "$RUN_DIR" | grep -c '\.done$')" -lt "$NUM_WORKERS" ]; do sleep 0.05; done
echo "ps $INDEX done"
)sh";
// Runs until signalled.
constexpr char kForever[] = "while :; do sleep 0.05; done\n";
// A worker that talks on both streams, splits a line across writes, has the
// chief write result.json, and exits 0.
constexpr char kWorkerOk[] = R"sh(
echo "hello from worker $INDEX"
echo "err $INDEX" >&2
printf 'part'
sleep 0.1
echo 'ial'
if [ "$INDEX" = 0 ]; then echo '{"final_loss": 0.5}' > "$RUN_DIR/result.json"; fi
touch "$RUN_DIR/$ROLE.done"
exit 0
)sh";

// Accepts the config, as the real roles' check mode does.
constexpr char kCheckOk[] = "echo \"config ok: $CONFIG\"\nexit 0\n";

std::string FakeRole(const std::string& kind, const std::string& body, const std::string& check_dir,
                     const std::string& check_body) {
  return absl::StrCat(R"sh(#!/bin/sh
for a in "$@"; do
  case "$a" in
    --config=*) CONFIG="${a#--config=}" ;;
    --index=*) INDEX="${a#--index=}" ;;
    --run_dir=*) RUN_DIR="${a#--run_dir=}" ;;
    --worker_hosts=*) WORKER_HOSTS="${a#--worker_hosts=}" ;;
    --check_config) CHECK=1 ;;
  esac
done
if [ -n "$CHECK" ]; then
  printf '%s\n' "$@" >> ")sh",
                      check_dir, "/", kind, R"sh(.check_args"
)sh",
                      check_body, R"sh(
fi
ROLE=)sh",
                      kind, R"sh($INDEX
NUM_WORKERS=$(echo "$WORKER_HOSTS" | tr ',' '\n' | wc -l)
printf '%s\n' "$@" > "$RUN_DIR/$ROLE.args"
echo $$ > "$RUN_DIR/$ROLE.pid"
)sh",
                      body);
}

// Waits for the pid files of `roles`, then blocks until they all exist.
std::string WaitForAll(const std::vector<std::string>& roles) {
  std::string wait;
  for (const std::string& role : roles) {
    absl::StrAppend(&wait, "while [ ! -s \"$RUN_DIR/", role, ".pid\" ]; do sleep 0.02; done\n");
  }
  return wait;
}

class LaunchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    launcher_ = BinDir() + "/pstrain-launch";
    ASSERT_TRUE(Exists(launcher_)) << launcher_ << " not built (PSTRAIN_BIN_DIR=" << BinDir() << ")";
    fs::create_directories(bin_dir_);
  }

  // Writes the fakes and a YAML config with `num_ps` PS and `num_workers`
  // workers. The fakes' check mode runs `ps_check` / `worker_check`.
  void PrepareRoles(int num_ps, int num_workers, const std::string& ps_body, const std::string& worker_body,
                    const std::string& ps_check = kCheckOk, const std::string& worker_check = kCheckOk) {
    WriteExecutable(bin_dir_ + "/pstrain-ps", FakeRole("ps", ps_body, dir_.path(), ps_check));
    WriteExecutable(bin_dir_ + "/pstrain-worker", FakeRole("worker", worker_body, dir_.path(), worker_check));
    std::string yaml = "name: fake\ncluster:\n  ps_hosts: [";
    for (int i = 0; i < num_ps; ++i) absl::StrAppend(&yaml, i ? ", " : "", "ps", i, ":1");
    absl::StrAppend(&yaml, "]\n  worker_hosts: [");
    for (int i = 0; i < num_workers; ++i) absl::StrAppend(&yaml, i ? ", " : "", "w", i, ":1");
    absl::StrAppend(&yaml, "]\n");
    WriteFile(config_, yaml);
  }

  // The argv a fake was given in check mode, one entry per line; empty if it
  // was never checked.
  std::vector<std::string> CheckArgs(const std::string& job) {
    return absl::StrSplit(ReadFile(dir_ / (job + ".check_args")), '\n', absl::SkipEmpty());
  }

  // No role was started: no role wrote a pid file or a log appeared.
  void ExpectNothingStarted(const std::vector<std::string>& roles) {
    for (const std::string& role : roles) {
      EXPECT_FALSE(Exists(run_dir_ + "/" + role + ".pid")) << role;
      EXPECT_FALSE(Exists(run_dir_ + "/" + role + ".log")) << role;
    }
  }

  Subprocess Launch(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {launcher_, config_, "--bin_dir", bin_dir_, "--run_dir", run_dir_};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return Spawn(argv, dir_.path());
  }

  // Pids the fakes wrote, waiting (bounded) for each to appear.
  std::vector<pid_t> Pids(const std::vector<std::string>& roles) {
    std::vector<pid_t> pids;
    for (const std::string& role : roles) {
      const std::string path = run_dir_ + "/" + role + ".pid";
      EXPECT_TRUE(WaitUntil([&] { return ReadPid(path) > 0; })) << "no pid file from " << role;
      pids.push_back(ReadPid(path));
    }
    return pids;
  }

  // Pids the fakes wrote, without waiting: for use after the launcher exited
  // (it reaps every role first, so no pid file can appear later). A role
  // stopped before its prelude ran has none.
  std::vector<pid_t> WrittenPids(const std::vector<std::string>& roles) {
    std::vector<pid_t> pids;
    for (const std::string& role : roles) {
      const pid_t pid = ReadPid(run_dir_ + "/" + role + ".pid");
      if (pid > 0) pids.push_back(pid);
    }
    return pids;
  }

  // After the launcher exited: each role was reaped by it and nothing of its
  // process group is left.
  void ExpectNoRoleProcessesLeft(const std::vector<pid_t>& pids) {
    for (pid_t pid : pids) {
      if (pid <= 0) continue;
      EXPECT_NE(kill(pid, 0), 0) << "role pid " << pid << " still exists after the launcher exited";
      EXPECT_TRUE(WaitUntil([&] { return LiveGroupMembers(pid).empty(); }))
          << "process group " << pid << " still has live members";
    }
  }

  static int ExitCode(std::optional<int> status) {
    if (!status) return -1000;  // did not exit in time
    if (WIFSIGNALED(*status)) return -WTERMSIG(*status);
    return WEXITSTATUS(*status);
  }

  TempDir dir_;
  std::string launcher_;
  std::string bin_dir_ = dir_ / "bin";
  std::string run_dir_ = dir_ / "run";
  std::string config_ = dir_ / "exp.yaml";
};

TEST_F(LaunchTest, SuccessPrefixesOutputPassesFlagsAndPrintsResult) {
  PrepareRoles(1, 2, kPsServe, kWorkerOk);
  Subprocess proc = Launch({"--", "--batch_size=7", "positional"});
  ASSERT_EQ(ExitCode(WaitForExit(proc.pid)), 0) << proc.out() << proc.err();
  const std::string out = proc.out();

  for (const char* line : {"[ps0] ps 0 serving\n", "[ps0] ps 0 done\n", "[worker0] hello from worker 0\n",
                           "[worker1] hello from worker 1\n", "[worker0] err 0\n", "[worker1] err 1\n",
                           "[worker0] partial\n", "[worker1] partial\n"}) {
    EXPECT_TRUE(absl::StrContains(out, line)) << "missing " << line << "in:\n" << out;
  }
  // A result.json this pstrain did not write is shown as it is (the real
  // roles' get a summary: recovery_test).
  EXPECT_TRUE(absl::StrContains(out, absl::StrCat("launch: all 3 roles finished; result: ", run_dir_,
                                                  "/result.json\n"
                                                  "launch: no summary (")))
      << out;
  EXPECT_TRUE(absl::StrContains(out, "); result.json:\n{\"final_loss\": 0.5}\n")) << out;
  // Every line is either the launcher's or a role's, whole.
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    EXPECT_TRUE(absl::StartsWith(line, "launch: ") || absl::StartsWith(line, "[ps0] ") ||
                absl::StartsWith(line, "[worker0] ") || absl::StartsWith(line, "[worker1] ") ||
                line == "{\"final_loss\": 0.5}")
        << "unexpected line: " << line;
  }
  // Raw logs: unprefixed bytes.
  EXPECT_EQ(ReadFile(run_dir_ + "/worker1.log"), "hello from worker 1\nerr 1\npartial\n");
  EXPECT_EQ(ReadFile(run_dir_ + "/ps0.log"), "ps 0 serving\nps 0 done\n");

  // Flags: same cluster for everyone, distinct loopback ports, extra args last.
  std::set<std::string> ps_flags, worker_flags;
  for (const std::string role : {"ps0", "worker0", "worker1"}) {
    const std::vector<std::string> args =
        absl::StrSplit(ReadFile(run_dir_ + "/" + role + ".args"), '\n', absl::SkipEmpty());
    ASSERT_EQ(args.size(), 7u) << role;
    EXPECT_EQ(args[0], "--config=" + config_);
    EXPECT_EQ(args[1], absl::StrCat("--index=", role.substr(role.size() - 1)));
    ps_flags.insert(args[2]);
    worker_flags.insert(args[3]);
    EXPECT_EQ(args[4], "--run_dir=" + run_dir_);
    EXPECT_EQ(args[5], "--batch_size=7");
    EXPECT_EQ(args[6], "positional");
  }
  ASSERT_EQ(ps_flags.size(), 1u);
  ASSERT_EQ(worker_flags.size(), 1u);
  const std::regex ps_re(R"(--ps_hosts=127\.0\.0\.1:(\d+))");
  const std::regex workers_re(R"(--worker_hosts=127\.0\.0\.1:(\d+),127\.0\.0\.1:(\d+))");
  std::smatch ps_m, workers_m;
  ASSERT_TRUE(std::regex_match(*ps_flags.begin(), ps_m, ps_re)) << *ps_flags.begin();
  ASSERT_TRUE(std::regex_match(*worker_flags.begin(), workers_m, workers_re)) << *worker_flags.begin();
  EXPECT_EQ(std::set<std::string>({ps_m[1], workers_m[1], workers_m[2]}).size(), 3u);
}

TEST_F(LaunchTest, WorkerFailureStopsAllRolesAndLeavesNoProcesses) {
  PrepareRoles(1, 2, kForever,
               absl::StrCat("if [ \"$INDEX\" = 1 ]; then\n", WaitForAll({"ps0", "worker0"}),
                            "  echo 'worker 1 giving up'; exit 3\nfi\n", kForever));
  Subprocess proc = Launch();
  const std::optional<int> status = WaitForExit(proc.pid, std::chrono::seconds(20));
  const std::string out = proc.out();
  EXPECT_EQ(ExitCode(status), 1) << out << proc.err();
  EXPECT_TRUE(absl::StrContains(out, "[worker1] worker 1 giving up\n")) << out;
  EXPECT_TRUE(absl::StrContains(out, "launch: worker1 exited with code 3; stopping all roles\n")) << out;
  // The verdict comes after the role's last output.
  EXPECT_LT(out.find("giving up"), out.find("exited with code 3")) << out;
  const std::vector<pid_t> pids = WrittenPids({"ps0", "worker0", "worker1"});
  EXPECT_EQ(pids.size(), 3u);
  ExpectNoRoleProcessesLeft(pids);
}

TEST_F(LaunchTest, RoleKilledBySignalIsAFailure) {
  PrepareRoles(1, 1, kForever, absl::StrCat(WaitForAll({"ps0"}), "kill -9 $$\n"));
  Subprocess proc = Launch();
  EXPECT_EQ(ExitCode(WaitForExit(proc.pid)), 1) << proc.out();
  EXPECT_TRUE(absl::StrContains(proc.out(), "launch: worker0 was killed by signal 9 (Killed); stopping all roles"))
      << proc.out();
  ExpectNoRoleProcessesLeft(WrittenPids({"ps0", "worker0"}));
}

TEST_F(LaunchTest, RoleRejectingTheConfigMakesExitCodeTwo) {
  PrepareRoles(1, 2, kForever,
               "if [ \"$INDEX\" = 0 ]; then echo 'exp.yaml: field x: expected y' >&2; "
               "exit 2; fi\n" +
                   std::string(kForever));
  Subprocess proc = Launch();
  EXPECT_EQ(ExitCode(WaitForExit(proc.pid)), 2) << proc.out();
  EXPECT_TRUE(absl::StrContains(proc.out(), "[worker0] exp.yaml: field x: expected y\n")) << proc.out();
  EXPECT_TRUE(absl::StrContains(proc.out(), "launch: worker0 exited with code 2; stopping all roles")) << proc.out();
  ExpectNoRoleProcessesLeft(WrittenPids({"ps0", "worker0", "worker1"}));
}

TEST_F(LaunchTest, PsStillRunningAfterWorkersFinishedIsStopped) {
  PrepareRoles(1, 2, kForever, absl::StrCat(WaitForAll({"ps0"}), "exit 0\n"));
  Subprocess proc = Launch({"--grace_s", "1"});
  EXPECT_EQ(ExitCode(WaitForExit(proc.pid)), 1) << proc.out();
  EXPECT_TRUE(absl::StrContains(proc.out(),
                                "launch: all workers finished but ps0 still "
                                "running 1s later; stopping it"))
      << proc.out();
  ExpectNoRoleProcessesLeft(WrittenPids({"ps0", "worker0", "worker1"}));
}

TEST_F(LaunchTest, RolesIgnoringSigtermAreKilledAfterGrace) {
  // The worker fails only once the PS ignores SIGTERM.
  PrepareRoles(1, 1, "trap '' TERM\ntouch \"$RUN_DIR/ps_ready\"\n" + std::string(kForever),
               "while [ ! -e \"$RUN_DIR/ps_ready\" ]; do sleep 0.02; done\nexit 1\n");
  Subprocess proc = Launch({"--grace_s", "1"});
  EXPECT_EQ(ExitCode(WaitForExit(proc.pid)), 1) << proc.out();
  EXPECT_TRUE(absl::StrContains(proc.out(), "launch: ps0 still running 1s after SIGTERM; sending SIGKILL"))
      << proc.out();
  ExpectNoRoleProcessesLeft(WrittenPids({"ps0", "worker0"}));
}

TEST_F(LaunchTest, TimeoutStopsRolesAndNamesThem) {
  PrepareRoles(1, 2, kForever, "if [ \"$INDEX\" = 0 ]; then exit 0; fi\n" + std::string(kForever));
  Subprocess proc = Launch({"--timeout_s", "2"});
  EXPECT_EQ(ExitCode(WaitForExit(proc.pid)), 1) << proc.out();
  EXPECT_TRUE(absl::StrContains(proc.out(),
                                "launch: timed out after 2s; still running: "
                                "ps0, worker1; stopping all roles"))
      << proc.out();
  ExpectNoRoleProcessesLeft(WrittenPids({"ps0", "worker0", "worker1"}));
}

class LaunchSignalTest : public LaunchTest, public ::testing::WithParamInterface<int> {};

TEST_P(LaunchSignalTest, SignalToLauncherTearsDownChildren) {
  const int signo = GetParam();
  PrepareRoles(1, 2, kForever, kForever);
  Subprocess proc = Launch();
  const std::vector<pid_t> pids = Pids({"ps0", "worker0", "worker1"});
  for (pid_t pid : pids) ASSERT_TRUE(ProcessAlive(pid));
  ASSERT_EQ(kill(proc.pid, signo), 0);
  EXPECT_EQ(ExitCode(WaitForExit(proc.pid)), 128 + signo) << proc.out();
  EXPECT_TRUE(
      absl::StrContains(proc.out(), absl::StrCat("launch: received SIG", sigabbrev_np(signo), "; stopping all roles")))
      << proc.out();
  ExpectNoRoleProcessesLeft(pids);
}

INSTANTIATE_TEST_SUITE_P(IntAndTerm, LaunchSignalTest, ::testing::Values(SIGINT, SIGTERM),
                         [](const auto& info) { return std::string(sigabbrev_np(info.param)); });

TEST_F(LaunchTest, ChildrenDieWhenTheLauncherIsKilled) {
  PrepareRoles(1, 2, kForever, kForever);
  Subprocess proc = Launch();
  const std::vector<pid_t> pids = Pids({"ps0", "worker0", "worker1"});
  ASSERT_EQ(kill(proc.pid, SIGKILL), 0);
  EXPECT_EQ(ExitCode(WaitForExit(proc.pid)), -SIGKILL);
  for (pid_t pid : pids) {
    EXPECT_TRUE(WaitUntil([&] { return !ProcessAlive(pid) && LiveGroupMembers(pid).empty(); }))
        << "role pid " << pid << " survived the launcher";
  }
  // Should the test fail, leave no fakes behind.
  for (pid_t pid : pids) {
    if (!LiveGroupMembers(pid).empty()) kill(-pid, SIGKILL);
  }
}

TEST_F(LaunchTest, MalformedConfigExitsTwoNamingTheFileAndStartsNothing) {
  PrepareRoles(1, 1, kForever, kForever);
  WriteFile(config_, "cluster: {ps_hosts: [a:1\n");
  Subprocess proc = Launch();
  EXPECT_EQ(ExitCode(WaitForExit(proc.pid)), 2);
  EXPECT_TRUE(absl::StrContains(proc.err(), config_)) << proc.err();
  EXPECT_FALSE(Exists(run_dir_ + "/ps0.pid"));
  EXPECT_FALSE(Exists(run_dir_ + "/worker0.pid"));

  config_ = dir_ / "missing.yaml";
  proc = Launch();
  EXPECT_EQ(ExitCode(WaitForExit(proc.pid)), 2);
  EXPECT_TRUE(absl::StrContains(proc.err(), config_)) << proc.err();
}

TEST_F(LaunchTest, MissingRoleBinaryIsReported) {
  PrepareRoles(1, 1, kForever, kForever);
  fs::remove(bin_dir_ + "/pstrain-worker");
  Subprocess proc = Launch();
  EXPECT_EQ(ExitCode(WaitForExit(proc.pid)), 1);
  EXPECT_TRUE(absl::StrContains(proc.err(), "cannot execute " + bin_dir_ + "/pstrain-worker")) << proc.err();
  EXPECT_FALSE(Exists(run_dir_ + "/ps0.pid"));
}

TEST_F(LaunchTest, TextProtoConfigStartsItsHosts) {
  PrepareRoles(0, 0, kPsServe, kWorkerOk);
  config_ = dir_ / "exp.pbtxt";
  WriteFile(config_,
            "cluster {\n  ps_hosts: \"a:1\"\n  ps_hosts: \"b:1\"\n  "
            "worker_hosts: [\"c:1\"]\n}\n");
  Subprocess proc = Launch();
  EXPECT_EQ(ExitCode(WaitForExit(proc.pid)), 0) << proc.out();
  EXPECT_TRUE(absl::StrContains(proc.out(), "launch: all 3 roles finished")) << proc.out();
  for (const char* role : {"ps0", "ps1", "worker0"}) EXPECT_TRUE(Exists(run_dir_ + "/" + role + ".log")) << role;
}

TEST_F(LaunchTest, DefaultsFindRolesBesideTheLauncherAndMakeATimestampedRunDir) {
  PrepareRoles(1, 1, kPsServe, kWorkerOk);
  const std::string own_launcher = bin_dir_ + "/pstrain-launch";
  fs::copy_file(launcher_, own_launcher);
  fs::permissions(own_launcher, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  const std::string cwd = dir_ / "work";
  fs::create_directories(cwd);
  Subprocess proc = Spawn({own_launcher, config_}, dir_.path(), cwd);
  ASSERT_EQ(ExitCode(WaitForExit(proc.pid)), 0) << proc.out() << proc.err();

  std::vector<std::string> runs;
  for (const auto& entry : fs::directory_iterator(cwd + "/runs")) runs.push_back(entry.path().filename());
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_TRUE(std::regex_match(runs[0], std::regex(R"(exp-\d{8}-\d{6})"))) << runs[0];
  const std::string run = "runs/" + runs[0];
  EXPECT_TRUE(Exists(cwd + "/" + run + "/worker0.log"));
  EXPECT_TRUE(absl::StrContains(proc.out(), "result: " + run + "/result.json")) << proc.out();
}

// Worker 1 fails (exit 3) the first `fails` times it runs, then behaves as
// kWorkerOk.
std::string WorkerFailingFirst(int fails) {
  return absl::StrCat(R"sh(
if [ "$INDEX" = 1 ]; then
  runs=$(cat "$RUN_DIR/worker1.runs" 2>/dev/null || echo 0)
  echo $((runs + 1)) > "$RUN_DIR/worker1.runs"
  if [ "$runs" -lt )sh",
                      fails, R"sh( ]; then echo "worker 1 fails (run $((runs + 1)))"; exit 3; fi
fi
)sh",
                      kWorkerOk);
}

TEST_F(LaunchTest, MaxRestartsStartsAFailedRoleAgainAndSaysSo) {
  PrepareRoles(1, 2, kPsServe, WorkerFailingFirst(1));
  Subprocess proc = Launch({"--max_restarts", "1"});
  ASSERT_EQ(ExitCode(WaitForExit(proc.pid)), 0) << proc.out() << proc.err();
  const std::string out = proc.out();
  EXPECT_TRUE(absl::StrContains(out, "launch: a role that fails is restarted up to 1 time")) << out;
  EXPECT_TRUE(absl::StrContains(out, "launch: worker1 exited with code 3; restarted it (restart 1 of 1, pid ")) << out;
  EXPECT_TRUE(absl::StrContains(out, "launch: restarted: worker1 1x\n")) << out;
  EXPECT_EQ(ReadFile(run_dir_ + "/worker1.runs"), "2\n");
  // The log keeps both runs' output.
  EXPECT_TRUE(absl::StrContains(ReadFile(run_dir_ + "/worker1.log"), "worker 1 fails (run 1)\nhello from worker 1\n"));
}

// --max_restarts with a checkpoint directory turns PS recovery on unless the
// config says otherwise: every role is given --ps_recover_seconds.
TEST_F(LaunchTest, MaxRestartsWithACheckpointDirectoryTurnsRecoveryOn) {
  PrepareRoles(1, 2, kPsServe, kWorkerOk);
  const std::string roles_only = ReadFile(config_);
  WriteFile(config_, roles_only + "checkpoint: {dir: " + (dir_ / "ck") + "}\n");
  Subprocess proc = Launch({"--max_restarts", "1"});
  ASSERT_EQ(ExitCode(WaitForExit(proc.pid)), 0) << proc.out() << proc.err();
  EXPECT_TRUE(absl::StrContains(proc.out(),
                                "(recovery on: a restarted PS shard is restored from the newest "
                                "checkpoint; --ps_recover_seconds=120"))
      << proc.out();
  for (const std::string role : {"ps0", "worker0", "worker1"}) {
    EXPECT_TRUE(absl::StrContains(ReadFile(run_dir_ + "/" + role + ".args"), "--ps_recover_seconds=120\n")) << role;
  }
  // The config's own choice wins, 0 included.
  WriteFile(config_, roles_only + "checkpoint: {dir: " + (dir_ / "ck") + "}\ntimeouts: {ps_recover_seconds: 0}\n");
  Subprocess own = Launch({"--max_restarts", "1"});
  ASSERT_EQ(ExitCode(WaitForExit(own.pid)), 0) << own.out() << own.err();
  EXPECT_TRUE(absl::StrContains(own.out(), "(timeouts.ps_recover_seconds is 0")) << own.out();
  EXPECT_FALSE(absl::StrContains(ReadFile(run_dir_ + "/ps0.args"), "--ps_recover_seconds")) << own.out();
}

TEST_F(LaunchTest, ARoleFailingMoreThanMaxRestartsStopsTheCluster) {
  PrepareRoles(1, 2, kPsServe, WorkerFailingFirst(5));
  Subprocess proc = Launch({"--max_restarts", "2"});
  EXPECT_EQ(ExitCode(WaitForExit(proc.pid)), 1) << proc.out() << proc.err();
  EXPECT_TRUE(absl::StrContains(proc.out(),
                                "launch: worker1 exited with code 3 after 2 restarts (--max_restarts 2); "
                                "stopping all roles\n"))
      << proc.out();
  EXPECT_EQ(ReadFile(run_dir_ + "/worker1.runs"), "3\n");
}

TEST_F(LaunchTest, UsageErrorWithoutConfig) {
  Subprocess proc = Spawn({launcher_}, dir_.path());
  EXPECT_EQ(ExitCode(WaitForExit(proc.pid)), 2);
  EXPECT_TRUE(absl::StrContains(proc.err(), "expected exactly one CONFIG argument")) << proc.err();
}

TEST_F(LaunchTest, ChecksEachRoleBinaryOnceWithItsRunArgumentsBeforeStartingAny) {
  PrepareRoles(2, 2, kPsServe, kWorkerOk);
  Subprocess proc = Launch({"--", "--batch_size=7"});
  ASSERT_EQ(ExitCode(WaitForExit(proc.pid)), 0) << proc.out() << proc.err();
  EXPECT_TRUE(absl::StrContains(proc.out(), "launch: the config is accepted by ps and worker (--check_config)\n"))
      << proc.out();
  for (const std::string job : {"ps", "worker"}) {
    std::vector<std::string> expected =
        absl::StrSplit(ReadFile(run_dir_ + "/" + job + "0.args"), '\n', absl::SkipEmpty());
    ASSERT_EQ(expected.size(), 6u) << job;
    expected.insert(expected.begin() + 5, "--check_config");  // before the extra args
    EXPECT_EQ(CheckArgs(job), expected) << job;               // once, as index 0, with the run's cluster and run dir
  }
}

TEST_F(LaunchTest, RoleRefusingInCheckModeExitsTwoWithItsMessageAndStartsNothing) {
  PrepareRoles(1, 2, kForever, kForever, kCheckOk,
               "echo \"error: $CONFIG: field 'model.name': expected a registered model, got 'x'\" >&2\nexit 2\n");
  Subprocess proc = Launch();
  EXPECT_EQ(ExitCode(WaitForExit(proc.pid)), 2) << proc.out() << proc.err();
  EXPECT_TRUE(absl::StrContains(proc.err(), absl::StrCat("launch: worker refuses the config: ", config_,
                                                         ": field 'model.name': expected a registered model, got "
                                                         "'x'; nothing was started\n")))
      << proc.err();
  EXPECT_EQ(CheckArgs("ps").size(), 6u);  // the PS was asked first and accepted
  ExpectNothingStarted({"ps0", "worker0", "worker1"});
  EXPECT_FALSE(Exists(run_dir_)) << "a refused config leaves no run directory";
}

TEST_F(LaunchTest, WithoutPsOnlyTheWorkerBinaryIsChecked) {
  PrepareRoles(0, 1, kForever, kWorkerOk, "echo 'error: must not be asked' >&2\nexit 2\n");
  Subprocess proc = Launch();
  EXPECT_EQ(ExitCode(WaitForExit(proc.pid)), 0) << proc.out() << proc.err();
  EXPECT_TRUE(CheckArgs("ps").empty());
  EXPECT_FALSE(CheckArgs("worker").empty());
  EXPECT_TRUE(absl::StrContains(proc.out(), "launch: the config is accepted by worker (--check_config)\n"))
      << proc.out();
}

TEST_F(LaunchTest, CheckThatDoesNotFinishIsKilledAtItsDeadline) {
  PrepareRoles(1, 1, kForever, kForever, kForever);
  const auto begin = std::chrono::steady_clock::now();
  Subprocess proc = Launch({"--check_timeout_s", "1"});
  EXPECT_EQ(ExitCode(WaitForExit(proc.pid, std::chrono::seconds(20))), 1) << proc.out() << proc.err();
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(15));
  EXPECT_TRUE(absl::StrContains(proc.err(), "launch: ps did not finish checking the config within 1s (" + bin_dir_ +
                                                "/pstrain-ps --check_config); it was killed; nothing was started"))
      << proc.err();
  ExpectNothingStarted({"ps0", "worker0"});
}

TEST_F(LaunchTest, BadCheckTimeoutIsAUsageError) {
  PrepareRoles(1, 1, kForever, kForever);
  Subprocess proc = Launch({"--check_timeout_s", "0"});
  EXPECT_EQ(ExitCode(WaitForExit(proc.pid)), 2);
  EXPECT_TRUE(absl::StrContains(proc.err(), "--check_timeout_s must be > 0")) << proc.err();
  EXPECT_TRUE(CheckArgs("ps").empty());
}

struct BadHosts {
  const char* name;
  const char* cluster;  // the cluster section of the config
  const char* error;    // what the launcher says after "<config>"
};

class BadHostsTest : public LaunchTest, public ::testing::WithParamInterface<BadHosts> {};

// The roles would refuse these host lists; the launcher, which replaces them
// with loopback ports, must refuse them as well, before asking any role.
TEST_P(BadHostsTest, IsRefusedWithExitTwoNamingTheFieldAndNothingStarts) {
  PrepareRoles(1, 1, kForever, kForever);
  WriteFile(config_, absl::StrCat("name: fake\ncluster: ", GetParam().cluster, "\n"));
  Subprocess proc = Launch();
  EXPECT_EQ(ExitCode(WaitForExit(proc.pid)), 2) << proc.out() << proc.err();
  EXPECT_TRUE(absl::StrContains(proc.err(), absl::StrCat("launch: ", config_, GetParam().error))) << proc.err();
  EXPECT_TRUE(CheckArgs("ps").empty());
  EXPECT_TRUE(CheckArgs("worker").empty());
  ExpectNothingStarted({"ps0", "worker0"});
}

INSTANTIATE_TEST_SUITE_P(
    Hosts, BadHostsTest,
    ::testing::Values(
        BadHosts{"PortOutOfRange", "{ps_hosts: [localhost:2222], worker_hosts: [localhost:99999]}",
                 ": field 'cluster.worker_hosts[0]': expected host:port"},
        BadHosts{"NoPort", "{ps_hosts: [localhost], worker_hosts: [localhost:2]}",
                 ": field 'cluster.ps_hosts[0]': expected host:port"},
        BadHosts{"Duplicate", "{ps_hosts: [localhost:2], worker_hosts: [localhost:3, localhost:2]}",
                 ": field 'cluster.worker_hosts[1]': expected a host:port no other task uses, got 'localhost:2'"},
        BadHosts{"NoWorker", "{ps_hosts: [localhost:2]}",
                 ": field 'cluster.worker_hosts': expected at least one host:port, got none"},
        BadHosts{"NotAList", "{worker_hosts: localhost:2}",
                 ":2: field 'cluster.worker_hosts': expected a list of string values, got 'localhost:2'"},
        BadHosts{"UnknownKey", "{workers: [localhost:2]}",
                 ":2: unknown field 'cluster.workers' (did you mean 'worker_hosts'?); the valid keys of 'cluster' "
                 "(ClusterConfig) are: ps_hosts, worker_hosts"}),
    [](const ::testing::TestParamInfo<BadHosts>& info) { return std::string(info.param.name); });

// The real pstrain-ps and pstrain-worker in check mode: what the launcher
// does not know (model names, strategies) is refused by the roles, before
// any role starts.
class RealRolesTest : public LaunchTest {
 protected:
  void SetUp() override {
    LaunchTest::SetUp();
    for (const char* binary : {"pstrain-ps", "pstrain-worker"}) {
      ASSERT_TRUE(Exists(BinDir() + "/" + binary)) << binary << " not built";
    }
  }
  // The launcher with the real role binaries.
  Subprocess LaunchReal() { return Spawn({launcher_, config_, "--run_dir", run_dir_}, dir_.path()); }

  // A config the roles accept, with `extra` appended.
  void WriteConfig(const std::string& extra, const std::string& worker_hosts = "[localhost:2223]") {
    WriteFile(config_, absl::StrCat("name: real\n"
                                    "cluster: {ps_hosts: [localhost:2222], worker_hosts: ",
                                    worker_hosts,
                                    "}\n"
                                    "data: {source: synthetic, synthetic_examples: 64}\n"
                                    "train: {batch_size_per_device: 8, steps: 2, evaluate: false}\n",
                                    extra));
  }

  void ExpectRefused(const Subprocess& proc, const std::string& field) {
    EXPECT_TRUE(absl::StrContains(proc.err(), absl::StrCat("refuses the config: ", config_, ": field '", field, "'")))
        << proc.err();
    EXPECT_TRUE(absl::StrContains(proc.err(), "; nothing was started")) << proc.err();
    EXPECT_TRUE(absl::StartsWith(proc.err(), "launch: worker refuses") ||
                absl::StartsWith(proc.err(), "launch: ps refuses"))
        << proc.err();
    ExpectNothingStarted({"ps0", "worker0"});
  }
};

TEST_F(RealRolesTest, MalformedWorkerHostIsRefusedNamingTheField) {
  WriteConfig("", "[localhost:99999]");
  Subprocess proc = LaunchReal();
  EXPECT_EQ(ExitCode(WaitForExit(proc.pid)), 2) << proc.out() << proc.err();
  EXPECT_TRUE(absl::StrContains(proc.err(), absl::StrCat(config_,
                                                         ": field 'cluster.worker_hosts[0]': expected "
                                                         "host:port with a port in 1..65535")))
      << proc.err();
  ExpectNothingStarted({"ps0", "worker0"});
}

TEST_F(RealRolesTest, UnknownModelIsRefusedByTheRolesCheck) {
  WriteConfig("model: {name: resnet9000}\n");
  Subprocess proc = LaunchReal();
  EXPECT_EQ(ExitCode(WaitForExit(proc.pid)), 2) << proc.out() << proc.err();
  ExpectRefused(proc, "model.name");
  EXPECT_TRUE(absl::StrContains(proc.err(), "resnet9000")) << proc.err();
}

// --byte_scale shrinks an emulated device's variables only: with the CPU
// it is refused before anything starts.
TEST_F(RealRolesTest, AByteScaleWithARealDeviceIsRefusedAndNothingStarts) {
  WriteConfig("");
  Subprocess proc = Spawn({launcher_, config_, "--run_dir", run_dir_, "--byte_scale", "4"}, dir_.path());
  EXPECT_EQ(ExitCode(WaitForExit(proc.pid)), 2) << proc.out() << proc.err();
  EXPECT_TRUE(absl::StrContains(proc.err(), absl::StrCat(config_, ": --byte_scale 4: expected 1 with device 'cpu'")))
      << proc.err();
  ExpectNothingStarted({"ps0", "worker0"});
}

TEST_F(RealRolesTest, UnknownVariableUpdateIsRefusedByTheRolesCheck) {
  WriteConfig("variable_update: ring_allreduce\n");
  Subprocess proc = LaunchReal();
  EXPECT_EQ(ExitCode(WaitForExit(proc.pid)), 2) << proc.out() << proc.err();
  ExpectRefused(proc, "variable_update");
  EXPECT_TRUE(absl::StrContains(proc.err(), "ring_allreduce")) << proc.err();
}

}  // namespace
}  // namespace pstrain::launch
