// Whether an address is this process's network namespace's own
// (common/network_namespace.h), against the addresses its interfaces hold.
#include "common/network_namespace.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <string>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

// The first non-loopback IPv4 address of this namespace's interfaces, or "".
std::string AnInterfaceAddress() {
  ifaddrs* interfaces = nullptr;
  if (getifaddrs(&interfaces) != 0) return "";
  std::string found;
  for (const ifaddrs* i = interfaces; i != nullptr && found.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    const in_addr a = reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr;
    if ((ntohl(a.s_addr) >> 24) == 127) continue;
    char text[INET_ADDRSTRLEN];
    if (inet_ntop(AF_INET, &a, text, sizeof(text)) != nullptr) found = text;
  }
  freeifaddrs(interfaces);
  return found;
}

TEST(NetworkNamespaceTest, LoopbackWildcardAndLocalhostAreThisNamespaces) {
  for (const char* host :
       {"localhost", "127.0.0.1", "127.3.4.5", "0.0.0.0", "::1", "[::1]", "::", "::ffff:127.0.0.1"}) {
    EXPECT_TRUE(HostInThisNetworkNamespace(host)) << host;
  }
}

TEST(NetworkNamespaceTest, AnAddressOfAnInterfaceHereIsThisNamespaces) {
  const std::string mine = AnInterfaceAddress();
  if (mine.empty()) GTEST_SKIP() << "this namespace has no IPv4 address besides loopback";
  EXPECT_TRUE(HostInThisNetworkNamespace(mine)) << mine;
}

TEST(NetworkNamespaceTest, OtherAddressesAndNamesAreAnotherHosts) {
  // TEST-NET-3 (RFC 5737) and the IPv6 documentation prefix: no interface holds them.
  for (const char* host :
       {"203.0.113.7", "2001:db8::1", "[2001:db8::1]", "ps0", "example.org", "", "1.2.3", "::ffff:203.0.113.7"}) {
    EXPECT_FALSE(HostInThisNetworkNamespace(host)) << host;
  }
}

}  // namespace
}  // namespace pstrain
