#include "tools/launch/free_ports.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pstrain::launch {
namespace {

// Closes every descriptor it holds when it goes out of scope.
struct SocketSet {
  std::vector<int> fds;
  ~SocketSet() {
    for (int fd : fds) close(fd);
  }
};

absl::Status SocketError(const char* call) {
  return absl::InternalError(absl::StrCat("choosing a free port: ", call, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::vector<int>> PickFreeLoopbackPorts(int n) {
  if (n < 0) return absl::InvalidArgumentError("PickFreeLoopbackPorts: negative count");
  SocketSet sockets;
  std::vector<int> ports;
  ports.reserve(n);
  for (int i = 0; i < n; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return SocketError("socket");
    sockets.fds.push_back(fd);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      return SocketError("bind 127.0.0.1:0");
    }
    socklen_t len = sizeof(addr);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      return SocketError("getsockname");
    }
    ports.push_back(ntohs(addr.sin_port));
  }
  return ports;
}

}  // namespace pstrain::launch
