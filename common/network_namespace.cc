#include "common/network_namespace.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <cstring>
#include <string>

#include "glog/logging.h"

namespace pstrain {
namespace {

// The IPv4 address inside an IPv4 or IPv4-mapped IPv6 address.
bool Ipv4Of(const sockaddr* address, in_addr* out) {
  if (address->sa_family == AF_INET) {
    *out = reinterpret_cast<const sockaddr_in*>(address)->sin_addr;
    return true;
  }
  if (address->sa_family == AF_INET6) {
    const in6_addr& v6 = reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr;
    if (!IN6_IS_ADDR_V4MAPPED(&v6)) return false;
    std::memcpy(&out->s_addr, v6.s6_addr + 12, 4);
    return true;
  }
  return false;
}

bool SameAddress(const sockaddr* a, const sockaddr* b) {
  in_addr a4, b4;
  if (Ipv4Of(a, &a4) && Ipv4Of(b, &b4)) return a4.s_addr == b4.s_addr;
  if (a->sa_family != AF_INET6 || b->sa_family != AF_INET6) return false;
  return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                     &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, sizeof(in6_addr)) == 0;
}

}  // namespace

bool InThisNetworkNamespace(const sockaddr* address) {
  in_addr v4;
  if (Ipv4Of(address, &v4)) {
    const uint32_t host = ntohl(v4.s_addr);
    if ((host >> 24) == 127 || host == INADDR_ANY) return true;
  } else if (address->sa_family == AF_INET6) {
    const in6_addr& v6 = reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&v6) || IN6_IS_ADDR_UNSPECIFIED(&v6)) return true;
  } else {
    return false;
  }
  ifaddrs* interfaces = nullptr;
  if (getifaddrs(&interfaces) != 0) {
    PLOG_EVERY_N(WARNING, 100) << "cannot list this host's interfaces (getifaddrs); treating a peer as remote";
    return false;
  }
  bool mine = false;
  for (const ifaddrs* i = interfaces; i != nullptr && !mine; i = i->ifa_next) {
    if (i->ifa_addr != nullptr) mine = SameAddress(i->ifa_addr, address);
  }
  freeifaddrs(interfaces);
  return mine;
}

bool HostInThisNetworkNamespace(std::string_view host) {
  if (host == "localhost") return true;
  std::string text(host);
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') text = text.substr(1, text.size() - 2);
  sockaddr_in v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4.sin_addr) == 1) {
    v4.sin_family = AF_INET;
    return InThisNetworkNamespace(reinterpret_cast<const sockaddr*>(&v4));
  }
  sockaddr_in6 v6{};
  if (inet_pton(AF_INET6, text.c_str(), &v6.sin6_addr) == 1) {
    v6.sin6_family = AF_INET6;
    return InThisNetworkNamespace(reinterpret_cast<const sockaddr*>(&v6));
  }
  return false;
}

}  // namespace pstrain
