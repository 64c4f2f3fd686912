// Addresses of the ucx transport: "host:port" as Connect and Serve take it,
// resolved to the socket address UCX connects to (ucp_ep_create) or listens
// on (ucp_listener_create).
#pragma once

#include <sys/socket.h>

#include <string>

#include "absl/status/statusor.h"
#include "common/host_port.h"

namespace pstrain::ucx {

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

// "host:port" (port 0 allowed where `allow_port_zero`: a listener picks one).
absl::StatusOr<HostPort> ParseAddress(const std::string& address, bool allow_port_zero);

// Resolves with getaddrinfo, preferring IPv4 (a server listening on 0.0.0.0
// is then reachable through "localhost", which may also resolve to ::1).
// `passive`: an address to listen on. UNAVAILABLE naming the host when it
// does not resolve.
absl::StatusOr<SocketAddress> Resolve(const HostPort& hp, bool passive);

// The port of an IPv4 or IPv6 address; 0 for any other family.
int PortOf(const sockaddr_storage& address);

// Whether `address` belongs to this process's network namespace
// (common/network_namespace.h); any other the ucx transport reaches without
// shared memory (engine.h).
bool InThisNetworkNamespace(const SocketAddress& address);

}  // namespace pstrain::ucx
