// Whether an address is this process's own: one of its network namespace
// (a loopback or wildcard address, or one assigned to one of its
// interfaces). A server there runs on this host, in this namespace, and is
// reached without crossing a link; any other address is another host's, or
// another network namespace's on this host (a container, a pod, an emulated
// host).
#pragma once

#include <sys/socket.h>

#include <string_view>

namespace pstrain {

// `address` (IPv4, IPv6 or IPv4-mapped IPv6) as above. False, with a
// warning, when the interfaces cannot be listed (getifaddrs).
bool InThisNetworkNamespace(const sockaddr* address);

// The same for a host as an address list names it: "localhost" or a numeric
// IPv4 or IPv6 address. Any other name counts as another host's: it is not
// looked up, so no resolver can stall the caller.
bool HostInThisNetworkNamespace(std::string_view host);

}  // namespace pstrain
