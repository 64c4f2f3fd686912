#include "tools/launch/free_ports.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>

#include "gtest/gtest.h"

namespace pstrain::launch {
namespace {

TEST(FreePortsTest, PortsAreDistinctAndBindable) {
  auto ports = PickFreeLoopbackPorts(8);
  ASSERT_TRUE(ports.ok()) << ports.status();
  ASSERT_EQ(ports->size(), 8u);
  EXPECT_EQ(std::set<int>(ports->begin(), ports->end()).size(), 8u);
  std::vector<int> fds;
  for (int port : *ports) {
    EXPECT_GT(port, 0);
    EXPECT_LT(port, 65536);
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << "port " << port;
    EXPECT_EQ(listen(fd, 1), 0) << "port " << port;
  }
  for (int fd : fds) close(fd);
}

TEST(FreePortsTest, ZeroPortsIsEmpty) {
  auto ports = PickFreeLoopbackPorts(0);
  ASSERT_TRUE(ports.ok()) << ports.status();
  EXPECT_TRUE(ports->empty());
}

}  // namespace
}  // namespace pstrain::launch
