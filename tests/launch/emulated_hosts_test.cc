// EmulatedHosts::RunOnCpus: a program started on a host with CPUs of its
// own may run on those CPUs alone, inside the host's network namespace;
// other hosts are untouched; bad requests are refused naming what is wrong.
// Needs root; skips saying why otherwise.
#include "tools/launch/emulated_hosts.h"

#include <sys/wait.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/launch/host_cpus.h"
#include "tools/launch/role_check.h"

namespace pstrain::launch {
namespace {

using ::testing::HasSubstr;

// What `grep Cpus_allowed_list` and `ip -4 addr show eth0` say when run on
// `host`.
std::string RunOnHost(const EmulatedHosts& hosts, int host) {
  std::vector<std::string> argv = hosts.RunOn(host);
  argv.insert(argv.end(), {"/bin/sh", "-c", "grep Cpus_allowed_list /proc/self/status; ip -4 addr show eth0"});
  absl::StatusOr<CheckRun> ran = RunCheckCommand(argv[0], {argv.begin() + 1, argv.end()}, absl::Seconds(30));
  EXPECT_TRUE(ran.ok()) << ran.status();
  if (!ran.ok()) return "";
  EXPECT_TRUE(WIFEXITED(ran->wait_status) && WEXITSTATUS(ran->wait_status) == 0) << ran->output;
  return ran->output;
}

TEST(EmulatedHostsTest, AHostsProgramsRunOnItsOwnCpusInItsNamespace) {
  if (absl::Status s = CanEmulateHosts(); !s.ok()) GTEST_SKIP() << s.message();
  const std::vector<int> mine = CpusOfThisProcess();
  absl::StatusOr<std::unique_ptr<EmulatedHosts>> hosts =
      EmulatedHosts::Create({{"a"}, {"b"}}, /*subnet=*/214 * 256 + 61);
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  ASSERT_TRUE((*hosts)->RunOnCpus(1, {mine.back()}).ok());
  EXPECT_EQ((*hosts)->cpus(1), std::vector<int>({mine.back()}));
  EXPECT_TRUE((*hosts)->cpus(0).empty());

  const std::string on1 = RunOnHost(**hosts, 1);
  EXPECT_THAT(on1, HasSubstr(absl::StrCat("Cpus_allowed_list:\t", mine.back(), "\n")));
  EXPECT_THAT(on1, HasSubstr((*hosts)->address(1) + "/24"));
  const std::string on0 = RunOnHost(**hosts, 0);
  EXPECT_THAT(on0, HasSubstr(absl::StrCat("Cpus_allowed_list:\t", CpuListString(mine), "\n")));
  EXPECT_THAT(on0, HasSubstr((*hosts)->address(0) + "/24"));
}

TEST(EmulatedHostsTest, NoSuchHostOrNoCpuIsRefused) {
  if (absl::Status s = CanEmulateHosts(); !s.ok()) GTEST_SKIP() << s.message();
  absl::StatusOr<std::unique_ptr<EmulatedHosts>> hosts = EmulatedHosts::Create({{"a"}}, /*subnet=*/214 * 256 + 62);
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  absl::Status no_host = (*hosts)->RunOnCpus(1, {0});
  EXPECT_TRUE(absl::IsInvalidArgument(no_host));
  EXPECT_THAT(no_host.message(), HasSubstr("no emulated host 1"));
  absl::Status no_cpu = (*hosts)->RunOnCpus(0, {});
  EXPECT_TRUE(absl::IsInvalidArgument(no_cpu));
  EXPECT_THAT(no_cpu.message(), HasSubstr("no CPU to run on"));
  EXPECT_TRUE((*hosts)->cpus(0).empty());
}

}  // namespace
}  // namespace pstrain::launch
