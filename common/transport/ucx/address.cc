#include "common/transport/ucx/address.h"

#include <netdb.h>
#include <netinet/in.h>

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/network_namespace.h"

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

bool InThisNetworkNamespace(const SocketAddress& address) { return pstrain::InThisNetworkNamespace(address.get()); }

}  // namespace pstrain::ucx
