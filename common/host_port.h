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

// Whether `host` is a host name or address (IPv6 without brackets) that a
// host:port entry accepts: InvalidArgument "'<host>' is not a host name or
// address (<why>)" otherwise.
absl::Status CheckHost(std::string_view host);

// cluster.listen_address: where a role whose cluster entry is `entry`
// binds. `setting` "" is every interface (AnyInterface), "cluster" the
// entry's own host, anything else a host of this machine (a name, an IPv4
// or an IPv6 address without brackets); the port is always the entry's.
// ListenHost is the host alone ("0.0.0.0" / "::" for every interface).
std::string ListenHost(std::string_view setting, const HostPort& entry);
std::string ListenAddress(std::string_view setting, const HostPort& entry);
// Whether `setting` is one of those: InvalidArgument saying what is wrong
// (e.g. a port given with it), naming no source.
absl::Status CheckListenSetting(std::string_view setting);

}  // namespace pstrain
