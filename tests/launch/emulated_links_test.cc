// Emulated links against physics: bytes sent between two emulated hosts
// whose links are capped take bytes / rate, within a tolerance (TCP/IP and
// Ethernet headers cost about 5%). Each side runs on a thread that entered
// its host's network namespace (setns affects only the calling thread).
// Needs root; skips saying why otherwise.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tools/launch/emulated_hosts.h"

namespace pstrain::launch {
namespace {

// Enters `ns` (a namespace `ip netns` made) on this thread.
bool EnterNamespace(const std::string& ns) {
  const int fd = open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = setns(fd, CLONE_NEWNET) == 0;
  close(fd);
  return ok;
}

// Sends `bytes` from host 0 to host 1 over one TCP connection; returns the
// seconds from connect until the receiver has read every byte (< 0 on error).
double TimedTransfer(const EmulatedHosts& hosts, int64_t bytes) {
  constexpr int kPort = 23456;
  double seconds = -1;
  int listener = -1;
  bool listening = false;
  std::thread receiver([&] {
    if (!EnterNamespace(hosts.namespace_name(1))) return;
    listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(kPort);
    if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(listener, 1) != 0) return;
    listening = true;
    const int conn = accept(listener, nullptr, nullptr);
    if (conn < 0) return;
    std::vector<char> buffer(1 << 20);
    int64_t got = 0;
    const auto start = std::chrono::steady_clock::now();
    while (got < bytes) {
      const ssize_t n = read(conn, buffer.data(), buffer.size());
      if (n <= 0) break;
      got += n;
    }
    if (got == bytes) seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    close(conn);
  });
  std::thread sender([&] {
    if (!EnterNamespace(hosts.namespace_name(0))) return;
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(kPort);
    inet_pton(AF_INET, hosts.address(1).c_str(), &addr.sin_addr);
    for (int attempt = 0; attempt < 100; ++attempt) {
      if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::vector<char> buffer(1 << 20, 'x');
    for (int64_t sent = 0; sent < bytes;) {
      const ssize_t n = write(fd, buffer.data(), std::min<int64_t>(buffer.size(), bytes - sent));
      if (n <= 0) break;
      sent += n;
    }
    close(fd);
  });
  sender.join();
  receiver.join();
  if (listener >= 0) close(listener);
  return listening ? seconds : -1;
}

class EmulatedLinksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (absl::Status s = CanEmulateHosts(); !s.ok()) GTEST_SKIP() << s.message();
    absl::StatusOr<std::unique_ptr<EmulatedHosts>> hosts = EmulatedHosts::Create({{"a"}, {"b"}}, 213 * 256 + 20);
    ASSERT_TRUE(hosts.ok()) << hosts.status();
    hosts_ = *std::move(hosts);
  }
  std::unique_ptr<EmulatedHosts> hosts_;
};

TEST_F(EmulatedLinksTest, HundredMegabytesOverOneGigabitTakeEightTenthsOfASecond) {
  for (int host : {0, 1}) ASSERT_TRUE(hosts_->LimitLink(host, 1.0).ok());
  const double seconds = TimedTransfer(*hosts_, 100'000'000);
  ASSERT_GT(seconds, 0) << "the transfer failed";
  EXPECT_NEAR(seconds, 0.8, 0.8 * 0.15) << "100 MB at 1 Gbit/s";
  std::cout << "100 MB at 1 Gbit/s: " << seconds << " s (0.8 expected)" << std::endl;
  // Twice the rate, half the time: the cap, not this machine, sets the pace.
  for (int host : {0, 1}) ASSERT_TRUE(hosts_->LimitLink(host, 2.0).ok());
  const double faster = TimedTransfer(*hosts_, 100'000'000);
  ASSERT_GT(faster, 0) << "the transfer failed";
  EXPECT_NEAR(faster, 0.4, 0.4 * 0.15) << "100 MB at 2 Gbit/s";
  std::cout << "100 MB at 2 Gbit/s: " << faster << " s (0.4 expected)" << std::endl;
}

TEST_F(EmulatedLinksTest, TheSlowerEndSetsThePace) {
  // Host 0 sends at up to 4 Gbit/s, host 1 receives at 0.5: 50 MB take 0.8 s.
  ASSERT_TRUE(hosts_->LimitLink(0, 4.0).ok());
  ASSERT_TRUE(hosts_->LimitLink(1, 0.5).ok());
  const double seconds = TimedTransfer(*hosts_, 50'000'000);
  ASSERT_GT(seconds, 0) << "the transfer failed";
  EXPECT_NEAR(seconds, 0.8, 0.8 * 0.15);
  std::cout << "50 MB from 4 to 0.5 Gbit/s: " << seconds << " s (0.8 expected)" << std::endl;
}

TEST_F(EmulatedLinksTest, RatesOutsideTheRangeAreRefused) {
  for (double bad : {0.0, -1.0, 401.0}) {
    absl::Status s = hosts_->LimitLink(0, bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("expected a rate in (0, 400]"), std::string::npos) << s;
  }
  EXPECT_EQ(hosts_->LimitLink(2, 1.0).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pstrain::launch
