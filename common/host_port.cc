#include "common/host_port.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace pstrain {
namespace {

absl::Status BadHost(absl::string_view why) { return absl::InvalidArgumentError(why); }

bool IsHostNameChar(char c) { return absl::ascii_isalnum(c) || c == '-' || c == '.' || c == '_'; }
bool IsIpv6Char(char c) {
  return absl::ascii_isxdigit(c) || c == ':' || c == '.' || c == '%' || absl::ascii_isalnum(c);
}

}  // namespace

std::string HostPort::ToString() const {
  return is_ipv6() ? absl::StrCat("[", host, "]:", port) : absl::StrCat(host, ":", port);
}

std::string HostPort::AnyInterface() const {
  return is_ipv6() ? absl::StrCat("[::]:", port) : absl::StrCat("0.0.0.0:", port);
}

absl::StatusOr<HostPort> ParseHostPort(std::string_view text_in) {
  const absl::string_view text(text_in.data(), text_in.size());
  if (text.empty()) return BadHost("it is empty");
  absl::string_view host, port;
  if (text.front() == '[') {
    const size_t close = text.find(']');
    if (close == absl::string_view::npos) return BadHost("the IPv6 address has no closing ']'");
    host = text.substr(1, close - 1);
    const absl::string_view rest = text.substr(close + 1);
    if (rest.empty() || rest.front() != ':') return BadHost("no ':port' after the ']'");
    port = rest.substr(1);
    if (host.empty()) return BadHost("the host is empty");
    if (host.find(':') == absl::string_view::npos || !std::all_of(host.begin(), host.end(), IsIpv6Char)) {
      return BadHost(absl::StrCat("'", host, "' is not an IPv6 address"));
    }
  } else {
    const size_t colon = text.rfind(':');
    if (colon == absl::string_view::npos) return BadHost("no ':port'");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.empty()) return BadHost("the host is empty");
    if (host.find(':') != absl::string_view::npos) {
      return BadHost("an IPv6 address needs brackets, e.g. [::1]:5000");
    }
    if (!std::all_of(host.begin(), host.end(), IsHostNameChar)) {
      return BadHost(absl::StrCat("'", host, "' is not a host name or address"));
    }
  }
  if (port.empty()) return BadHost("the port is empty");
  if (port.size() > 5 || !std::all_of(port.begin(), port.end(), absl::ascii_isdigit)) {
    return BadHost(absl::StrCat("the port '", port, "' is not a number in 1..65535"));
  }
  int p = 0;
  if (!absl::SimpleAtoi(port, &p) || p < 1 || p > 65535) {
    return BadHost(absl::StrCat("the port ", port, " is out of range 1..65535"));
  }
  return HostPort{std::string(host), p};
}

std::string ListenHost(std::string_view setting, const HostPort& entry) {
  if (setting.empty()) return entry.is_ipv6() ? "::" : "0.0.0.0";
  if (setting == "cluster") return entry.host;
  return std::string(setting);
}

std::string ListenAddress(std::string_view setting, const HostPort& entry) {
  return HostPort{ListenHost(setting, entry), entry.port}.ToString();
}

absl::Status CheckHost(std::string_view host_in) {
  const absl::string_view host(host_in.data(), host_in.size());
  const bool ipv6 = host.find(':') != absl::string_view::npos;
  absl::StatusOr<HostPort> parsed = ParseHostPort(ipv6 ? absl::StrCat("[", host, "]:1") : absl::StrCat(host, ":1"));
  if (parsed.ok()) return absl::OkStatus();
  return BadHost(absl::StrCat("'", host, "' is not a host name or address (", parsed.status().message(), ")"));
}

absl::Status CheckListenSetting(std::string_view setting_in) {
  const absl::string_view setting(setting_in.data(), setting_in.size());
  if (setting.empty() || setting == "cluster") return absl::OkStatus();
  if (setting.front() == '[') return BadHost("an IPv6 address is written without brackets here");
  if (absl::StatusOr<HostPort> with_port = ParseHostPort(setting_in); with_port.ok() && !with_port->is_ipv6()) {
    return BadHost(absl::StrCat("'", setting, "' has a port: give the host alone (the port is the cluster entry's)"));
  }
  return CheckHost(setting_in);
}

}  // namespace pstrain
