// Holding a loopback port until a server binds it.
#pragma once

#include <memory>

#include "absl/status/statusor.h"

namespace pstrain::bench {

// A port of 127.0.0.1 held by a bound (not listening) socket with
// SO_REUSEPORT, so no other process is handed it while a PS shard (gRPC also
// sets SO_REUSEPORT) binds it. Release it (destroy it) once the shard is up.
class PortReservation {
 public:
  // Internal naming the socket call that failed.
  static absl::StatusOr<std::unique_ptr<PortReservation>> Take();
  ~PortReservation();
  PortReservation(const PortReservation&) = delete;
  PortReservation& operator=(const PortReservation&) = delete;

  int port() const { return port_; }

 private:
  explicit PortReservation(int fd) : fd_(fd) {}
  int fd_;
  int port_ = 0;
};

}  // namespace pstrain::bench
