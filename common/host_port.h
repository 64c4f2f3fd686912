// host:port endpoints: the one parser and formatter of the addresses in
// cluster lists, flags, TF_CONFIG and listen addresses.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace pstrain {

struct HostPort {
  std::string host;  // name, IPv4 address, or IPv6 address without brackets
  int port = 0;      // 1..65535

  bool is_ipv6() const { return host.find(':') != std::string::npos; }
  // "host:port", or "[ipv6]:port".
  std::string ToString() const;
  // The same port on every interface: "0.0.0.0:port", or "[::]:port" for an
  // IPv6 host. Where a role listens when it is given only its cluster entry.
  std::string AnyInterface() const;
};

// Parses "host:port" or "[ipv6]:port" (port 1..65535, host a name or
// address). InvalidArgument saying what is wrong with `text`, naming no
// source (callers add theirs).
absl::StatusOr<HostPort> ParseHostPort(std::string_view text);

}  // namespace pstrain
