#include "tools/bench/ps_bench_control.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace pstrain::bench {
namespace {

// Far above any setup (a config and PEM text) or result.
constexpr uint32_t kMaxMessageBytes = 64 << 20;

absl::Status Errno(const std::string& what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", strerror(errno)));
}

absl::StatusOr<sockaddr_un> UnixAddress(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("control socket path too long: ", path));
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

// Waits until `fd` is readable: Cancelled when `stop_fd` is readable first,
// DeadlineExceeded at `deadline`.
absl::Status WaitReadable(int fd, absl::Time deadline, int stop_fd) {
  while (true) {
    const int64_t ms = std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now()));
    pollfd fds[2] = {{fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
    const int ready = poll(fds, stop_fd >= 0 ? 2 : 1, static_cast<int>(std::min<int64_t>(ms, 1 << 30)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return Errno("poll");
    if (stop_fd >= 0 && fds[1].revents != 0) return absl::CancelledError("stopped");
    if (fds[0].revents != 0) return absl::OkStatus();
    if (absl::Now() >= deadline) return absl::DeadlineExceededError("no message in time");
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<ControlChannel>> ControlChannel::Connect(const std::string& path) {
  absl::StatusOr<sockaddr_un> addr = UnixAddress(path);
  if (!addr.ok()) return addr.status();
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("control: socket");
  auto channel = std::make_unique<ControlChannel>(fd);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) != 0) {
    return Errno(absl::StrCat("control: connect to ", path));
  }
  return channel;
}

ControlChannel::~ControlChannel() { close(fd_); }

absl::Status ControlChannel::Send(const RoleMessage& message) {
  std::string body;
  message.SerializeToString(&body);
  std::string frame(4, '\0');
  for (int i = 0; i < 4; ++i) frame[i] = static_cast<char>((body.size() >> (8 * i)) & 0xff);
  frame += body;
  for (size_t done = 0; done < frame.size();) {
    const ssize_t n = send(fd_, frame.data() + done, frame.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Errno("control: send");
    done += n;
  }
  return absl::OkStatus();
}

absl::Status ControlChannel::ReadExactly(char* out, size_t n, absl::Time deadline, int stop_fd) {
  for (size_t done = 0; done < n;) {
    if (absl::Status s = WaitReadable(fd_, deadline, stop_fd); !s.ok()) return s;
    const ssize_t got = recv(fd_, out + done, n - done, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got == 0) return absl::UnavailableError("control: closed by the peer");
    if (got < 0) return Errno("control: recv");
    done += got;
  }
  return absl::OkStatus();
}

absl::StatusOr<RoleMessage> ControlChannel::Receive(absl::Time deadline, int stop_fd) {
  unsigned char head[4];
  if (absl::Status s = ReadExactly(reinterpret_cast<char*>(head), 4, deadline, stop_fd); !s.ok()) return s;
  const uint32_t size = head[0] | head[1] << 8 | head[2] << 16 | static_cast<uint32_t>(head[3]) << 24;
  if (size > kMaxMessageBytes) return absl::UnavailableError(absl::StrCat("control: a message of ", size, " bytes"));
  std::string body(size, '\0');
  if (absl::Status s = ReadExactly(body.data(), size, deadline, stop_fd); !s.ok()) return s;
  RoleMessage message;
  if (!message.ParseFromString(body)) return absl::UnavailableError("control: a message that does not parse");
  return message;
}

absl::StatusOr<std::unique_ptr<ControlListener>> ControlListener::Create() {
  std::string dir = (std::filesystem::temp_directory_path() / "pstrain-bench-XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) return Errno(absl::StrCat("control: mkdtemp ", dir));
  const std::string path = dir + "/control";
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  std::unique_ptr<ControlListener> listener(new ControlListener(fd, dir, path));
  if (fd < 0) return Errno("control: socket");
  absl::StatusOr<sockaddr_un> addr = UnixAddress(path);
  if (!addr.ok()) return addr.status();
  if (bind(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) != 0 || listen(fd, 256) != 0) {
    return Errno(absl::StrCat("control: listen on ", path));
  }
  return listener;
}

ControlListener::~ControlListener() {
  if (fd_ >= 0) close(fd_);
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

absl::StatusOr<std::unique_ptr<ControlChannel>> ControlListener::Accept(absl::Time deadline, int stop_fd) {
  while (true) {
    if (absl::Status s = WaitReadable(fd_, deadline, stop_fd); !s.ok()) return s;
    const int fd = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) return std::make_unique<ControlChannel>(fd);
    if (errno != EINTR && errno != ECONNABORTED) return Errno("control: accept");
  }
}

}  // namespace pstrain::bench
