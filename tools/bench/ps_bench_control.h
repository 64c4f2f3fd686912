// The control channel of `pstrain-bench ps --processes`
// (ps_bench_role.proto): length-prefixed RoleMessages over a Unix socket.
// A path in the file system, not an address: it reaches roles in other
// network namespaces (emulated hosts) unchanged.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tools/bench/ps_bench_role.pb.h"

namespace pstrain::bench {

// One end of a connection. Not thread-safe.
class ControlChannel {
 public:
  // Connects to the listener at `path`. Unavailable naming it.
  static absl::StatusOr<std::unique_ptr<ControlChannel>> Connect(const std::string& path);
  explicit ControlChannel(int fd) : fd_(fd) {}  // owns `fd`
  ~ControlChannel();
  ControlChannel(const ControlChannel&) = delete;
  ControlChannel& operator=(const ControlChannel&) = delete;

  // Unavailable when the peer is gone.
  absl::Status Send(const RoleMessage& message);
  // The next message: Unavailable when the peer closed the channel (or sent
  // garbage), DeadlineExceeded at `deadline`, Cancelled as soon as
  // `stop_fd` (when >= 0) becomes readable.
  absl::StatusOr<RoleMessage> Receive(absl::Time deadline, int stop_fd = -1);

 private:
  absl::Status ReadExactly(char* out, size_t n, absl::Time deadline, int stop_fd);
  const int fd_;
};

// A listening Unix socket at a fresh path (in a fresh directory, removed
// with it).
class ControlListener {
 public:
  static absl::StatusOr<std::unique_ptr<ControlListener>> Create();
  ~ControlListener();
  ControlListener(const ControlListener&) = delete;
  ControlListener& operator=(const ControlListener&) = delete;

  const std::string& path() const { return path_; }
  // The next connection; errors as ControlChannel::Receive.
  absl::StatusOr<std::unique_ptr<ControlChannel>> Accept(absl::Time deadline, int stop_fd = -1);

 private:
  ControlListener(int fd, std::string dir, std::string path) : fd_(fd), dir_(std::move(dir)), path_(std::move(path)) {}
  const int fd_;
  const std::string dir_;
  const std::string path_;
};

}  // namespace pstrain::bench
