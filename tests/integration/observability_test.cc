// Observability with real processes: every role serves /metrics and /healthz
// while a cluster trains, scraped with curl and checked with promtool; a
// metrics port already in use is refused at start naming it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster_test_util.h"
#include "tests/util/process_test_util.h"

namespace pstrain::test {
namespace {

using std::chrono::seconds;

// Runs a shell command; returns its exit status and stdout.
std::pair<int, std::string> Shell(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, ""};
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

int PortOf(const std::string& host_port) { return std::stoi(host_port.substr(host_port.rfind(':') + 1)); }

// The value of the sample `name{labels}` in an exposition, or -1.
double Sample(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

class ObservabilityTest : public ::testing::Test {
 protected:
  Subprocess StartRole(const std::string& binary, int index, const std::string& extra) {
    const std::string capture = dir_ / absl::StrCat(binary, index);
    std::filesystem::create_directories(capture);
    return Spawn({BinDir() + "/" + binary, "--config=" + config_, absl::StrCat("--index=", index),
                  "--ps_hosts=" + ps_hosts_, "--worker_hosts=" + worker_hosts_, extra},
                 capture);
  }
  void SetUp() override {
    config_ = dir_ / "endless.yaml";
    WriteFile(config_, kEndlessSyncConfig);
    ps_hosts_ = FreeLoopbackHosts(1);
    worker_hosts_ = FreeLoopbackHosts(2);
  }
  TempDir dir_;
  std::string config_, ps_hosts_, worker_hosts_;
};

TEST_F(ObservabilityTest, EveryRoleServesMetricsThatPromtoolAcceptsWhileTraining) {
  if (Shell("command -v curl").first != 0) GTEST_SKIP() << "curl not found";
  // With loss scaling, whose scale the workers publish too.
  WriteFile(config_, std::string(kEndlessSyncConfig) +
                         "\nloss_scaling:\n  mode: dynamic\n  initial_scale: 1024\n  growth_interval: 1000000\n");
  const std::string ports = FreeLoopbackHosts(3);
  const int ps_port = PortOf(NthHost(ports, 0)), chief_port = PortOf(NthHost(ports, 1)),
            worker_port = PortOf(NthHost(ports, 2));
  Subprocess ps = StartRole("pstrain-ps", 0, absl::StrCat("--metrics_port=", ps_port));
  Subprocess chief = StartRole("pstrain-worker", 0, absl::StrCat("--metrics_port=", chief_port));
  Subprocess worker = StartRole("pstrain-worker", 1, absl::StrCat("--metrics_port=", worker_port));
  auto scrape = [](int port, const std::string& path) {
    return Shell(absl::StrCat("curl -sS --max-time 10 http://127.0.0.1:", port, path));
  };
  // Training has gone on for a while: the chief reports steps.
  std::string chief_text;
  ASSERT_TRUE(WaitUntil(
      [&] {
        chief_text = scrape(chief_port, "/metrics").second;
        return Sample(chief_text, "pstrain_worker_step{worker=\"0\"}") >= 40;
      },
      seconds(90)))
      << "chief metrics:\n"
      << chief_text << "\nchief stderr:\n"
      << chief.err();
  EXPECT_GT(Sample(chief_text, "pstrain_worker_pushed_bytes_total{worker=\"0\"}"), 0);
  EXPECT_GT(Sample(chief_text, "pstrain_worker_pulled_bytes_total{worker=\"0\"}"), 0);
  EXPECT_GT(Sample(chief_text, "pstrain_worker_images_per_second{worker=\"0\"}"), 0);
  EXPECT_EQ(Sample(chief_text, "pstrain_worker_loss_scale{worker=\"0\"}"), 1024) << chief_text;
  EXPECT_EQ(Sample(chief_text, "pstrain_worker_overflow_steps_total{worker=\"0\"}"), 0) << chief_text;

  const std::string ps_text = scrape(ps_port, "/metrics").second;
  EXPECT_GT(Sample(ps_text, "pstrain_ps_received_bytes_total{shard=\"0\"}"), 0) << ps_text;
  EXPECT_GT(Sample(ps_text, "pstrain_ps_applied_updates_total{shard=\"0\"}"), 0) << ps_text;
  EXPECT_GT(Sample(ps_text, "pstrain_ps_variables{shard=\"0\"}"), 0) << ps_text;
  const std::string worker_text = scrape(worker_port, "/metrics").second;
  EXPECT_GT(Sample(worker_text, "pstrain_worker_step{worker=\"1\"}"), 0) << worker_text;

  // Counters only grow between scrapes.
  const double before = Sample(ps_text, "pstrain_ps_received_bytes_total{shard=\"0\"}");
  ASSERT_TRUE(WaitUntil(
      [&] {
        return Sample(scrape(ps_port, "/metrics").second, "pstrain_ps_received_bytes_total{shard=\"0\"}") > before;
      },
      seconds(30)));

  for (int port : {ps_port, chief_port, worker_port}) {
    SCOPED_TRACE(port);
    auto [rc, body] = scrape(port, "/healthz");
    EXPECT_EQ(rc, 0);
    EXPECT_EQ(absl::StripTrailingAsciiWhitespace(body), "ok");
    if (Shell("command -v promtool").first == 0) {
      auto [check, out] = Shell(
          absl::StrCat("curl -sS --max-time 10 http://127.0.0.1:", port, "/metrics | promtool check metrics 2>&1"));
      EXPECT_EQ(check, 0) << out;
    }
  }
  for (Subprocess* p : {&worker, &chief, &ps}) kill(p->pid, SIGKILL);
  for (Subprocess* p : {&worker, &chief, &ps}) WaitForExit(p->pid, seconds(10));
  if (Shell("command -v promtool").first != 0) GTEST_SKIP() << "promtool not found (Debian package prometheus)";
}

TEST_F(ObservabilityTest, MetricsPortInUseIsRefusedAtStartNamingIt) {
  // Hold a port the way another server would.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);

  Subprocess ps = StartRole("pstrain-ps", 0, absl::StrCat("--metrics_port=", port));
  std::optional<int> status = WaitForExit(ps.pid, seconds(30));
  close(fd);
  ASSERT_TRUE(status.has_value()) << "pstrain-ps did not exit";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 2) << *status;
  EXPECT_TRUE(absl::StrContains(ps.err(), absl::StrCat("metrics_port ", port, ": address already in use"))) << ps.err();
}

}  // namespace
}  // namespace pstrain::test
