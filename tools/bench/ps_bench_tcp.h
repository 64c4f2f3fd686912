// The PS benchmark's plain-TCP yardstick: the same bytes a worker pushes and
// pulls, over plain sockets between the same endpoints (each shard's
// TcpSink lives where the shard does, each worker's TcpSource where the
// worker does), so `pushpull / tcp` is what the PS stack makes of the
// network it runs on.
//
// A source opens one connection to every sink and says, in a 16-byte header
// (two little-endian uint64), what the sink reads and writes per round.
// Then rounds until the source closes: per round the source writes its
// bytes for each sink and, at the same time, reads what each sink writes
// back -- the same number of bytes (both directions at once), or an 8-byte
// ack once the sink has read the round (one direction: the ack makes a
// round end when the bytes have arrived, not when they were buffered).
// Each end sends from, and receives into, memory of the round's size (as a
// worker's model and a shard's variables are; up to 256 MiB, then around
// again), never the same few cache-hot bytes. TCP_NODELAY on both ends, as
// gRPC sets it. IPv4 addresses only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pstrain::bench {

struct RoundMemory;  // where one connection's rounds are sent from and received into

// Accepts connections on one address and serves each on a thread of its
// own until its source closes it, or the sink is destroyed. Thread-safe.
class TcpSink {
 public:
  // Listens on `address` ("ipv4:port"), with SO_REUSEPORT so that a
  // PortReservation may hold the port until then. InvalidArgument for a bad
  // address; Unavailable naming the socket call that failed.
  static absl::StatusOr<std::unique_ptr<TcpSink>> Listen(const std::string& address);
  // Stops accepting, cuts every connection, joins every thread.
  ~TcpSink();
  TcpSink(const TcpSink&) = delete;
  TcpSink& operator=(const TcpSink&) = delete;

 private:
  explicit TcpSink(int listen_fd) : listen_fd_(listen_fd) {}
  void AcceptLoop();
  void Serve(int fd);

  const int listen_fd_;
  std::thread acceptor_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<int> connections_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> servers_ ABSL_GUARDED_BY(mu_);
};

// A worker's end: one connection to each sink. Not thread-safe.
class TcpSource {
 public:
  // Connects to every sink (`sinks[i]` gets `bytes[i]` per round; 0 is
  // allowed), retrying refused connections until `timeout`; both
  // directions at once when `both_directions`, else an ack comes back.
  static absl::StatusOr<std::unique_ptr<TcpSource>> Connect(const std::vector<std::string>& sinks,
                                                            const std::vector<int64_t>& bytes, bool both_directions,
                                                            absl::Duration timeout);
  ~TcpSource();
  TcpSource(const TcpSource&) = delete;
  TcpSource& operator=(const TcpSource&) = delete;

  // One round; an error naming the sink (a closed or reset connection,
  // nothing moving for `timeout`).
  absl::Status Round(absl::Duration timeout);

 private:
  TcpSource() = default;
  std::vector<std::string> sinks_;
  std::vector<int> fds_;
  std::vector<int64_t> send_;
  std::vector<int64_t> receive_;
  std::vector<std::unique_ptr<RoundMemory>> memory_;  // one per sink
};

}  // namespace pstrain::bench
