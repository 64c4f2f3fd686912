#include "common/transport/ucx/address.h"

#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace pstrain::ucx {

absl::StatusOr<HostPort> ParseAddress(const std::string& address, bool allow_port_zero) {
  if (allow_port_zero && absl::EndsWith(address, ":0")) {
    // ParseHostPort accepts 1..65535 only; parse the rest with a stand-in port.
    absl::StatusOr<HostPort> parsed = ParseHostPort(absl::StrCat(address.substr(0, address.size() - 2), ":1"));
    if (parsed.ok()) parsed->port = 0;
    return parsed;
  }
  return ParseHostPort(address);
}

absl::StatusOr<SocketAddress> Resolve(const HostPort& hp, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* results = nullptr;
  const std::string port = std::to_string(hp.port);
  const int rc = getaddrinfo(hp.host.c_str(), port.c_str(), &hints, &results);
  if (rc != 0) {
    return absl::UnavailableError(absl::StrCat("ucx: cannot resolve '", hp.host, "': ", gai_strerror(rc)));
  }
  const addrinfo* chosen = results;
  for (const addrinfo* ai = results; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family == AF_INET) {
      chosen = ai;
      break;
    }
  }
  SocketAddress out;
  std::memcpy(&out.storage, chosen->ai_addr, chosen->ai_addrlen);
  out.length = chosen->ai_addrlen;
  freeaddrinfo(results);
  return out;
}

int PortOf(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(address).sin_port);
  if (address.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(address).sin6_port);
  return 0;
}

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

bool SameHost(const sockaddr* a, const sockaddr* b) {
  in_addr a4, b4;
  if (Ipv4Of(a, &a4) && Ipv4Of(b, &b4)) return a4.s_addr == b4.s_addr;
  if (a->sa_family != AF_INET6 || b->sa_family != AF_INET6) return false;
  return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                     &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, sizeof(in6_addr)) == 0;
}

}  // namespace

bool InThisNetworkNamespace(const SocketAddress& address) {
  const sockaddr* peer = address.get();
  in_addr v4;
  if (Ipv4Of(peer, &v4)) {
    const uint32_t host = ntohl(v4.s_addr);
    if ((host >> 24) == 127 || host == INADDR_ANY) return true;
  } else if (peer->sa_family == AF_INET6) {
    const in6_addr& v6 = reinterpret_cast<const sockaddr_in6*>(peer)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&v6) || IN6_IS_ADDR_UNSPECIFIED(&v6)) return true;
  } else {
    return false;
  }
  ifaddrs* interfaces = nullptr;
  if (getifaddrs(&interfaces) != 0) {
    PLOG_EVERY_N(WARNING, 100) << "ucx: cannot list this host's interfaces (getifaddrs); treating a peer as remote";
    return false;
  }
  bool mine = false;
  for (const ifaddrs* i = interfaces; i != nullptr && !mine; i = i->ifa_next) {
    if (i->ifa_addr != nullptr) mine = SameHost(i->ifa_addr, peer);
  }
  freeifaddrs(interfaces);
  return mine;
}

}  // namespace pstrain::ucx
