// TcpLaneServer: a grpc server's TCP lanes (tcp_lane_client.h,
// tcp_lane_wire.h): a listener beside gRPC's, on the same host address and a
// port of its own, and the connections clients made to it.
//
// A connection must open with kTcpLaneHello and the server's secret (which
// only a client that passed gRPC's checks, TLS excepted, learned from the
// attach call) within 10 s, or it is closed. Each request then goes to the
// Handler with its payload in one buffer; its answer is written back on the
// same connection whenever the handler responds. Answers to a connection
// that broke meanwhile are dropped, as gRPC drops an answer to a cancelled
// call.
//
// Thread-safe. Requests are handled on the lanes' threads.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/transport/grpc/tcp_lane_wire.h"
#include "common/transport/transport.h"

namespace pstrain {

class TcpLaneServer {
 public:
  // Listens on `host` (an address, a name, or empty / "0.0.0.0" / "::" for
  // every address) at a port of its own, handing requests to `handler` (not
  // owned; must outlive Close). Payloads over `max_payload_bytes` are
  // malformed. UNAVAILABLE naming the host when it cannot listen there.
  static absl::StatusOr<std::unique_ptr<TcpLaneServer>> Listen(const std::string& host, Handler* handler,
                                                               uint64_t max_payload_bytes);
  ~TcpLaneServer();
  TcpLaneServer(const TcpLaneServer&) = delete;
  TcpLaneServer& operator=(const TcpLaneServer&) = delete;

  // What a client needs to connect: the port and the secret.
  const TcpLaneOffer& offer() const { return offer_; }
  // Stops accepting, breaks every connection and waits for the lanes'
  // threads (and so for the handler calls they are in). Idempotent.
  void Close();
  // Connections accepted and welcomed so far (for tests).
  int welcomed() const;

 private:
  class Session;
  struct Io;
  TcpLaneServer(std::unique_ptr<Io> io, TcpLaneOffer offer, Handler* handler, uint64_t max_payload_bytes);
  void Accept();

  std::unique_ptr<Io> io_;
  const TcpLaneOffer offer_;
  Handler* const handler_;
  const uint64_t max_payload_bytes_;
  std::vector<std::thread> threads_;
  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  int welcomed_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::weak_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain
