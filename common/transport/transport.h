// Transport: the narrow seam under the PS client and service.
//
// A transport moves request/response frames between a Channel (client side,
// one per server address) and a Server (which hands every request to a
// Handler). Implementations: "grpc" (common/transport/grpc), "ucx"
// (common/transport/ucx, UCX builds: RDMA, shared memory or TCP), both
// registered by name with their capabilities, and "inproc" (one address
// space, for tests and benchmarks; never registered: all roles must share one
// InprocTransport object). The PS client and service see only this seam.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/registry.h"
#include "common/transport/frame.h"
#include "common/transport/security.h"

namespace pstrain {

// Completes one call. Invoked exactly once, from any thread; must not block.
using ResponseCallback = std::function<void(absl::Status status, IncomingFrame response)>;
// The server's way to answer one request. Call it exactly once, from any thread.
using Responder = std::function<void(absl::Status status, OutgoingFrame response)>;

class Handler {
 public:
  virtual ~Handler() = default;
  // Must not block for long: a request that has to wait (e.g. a pull for a
  // version not applied yet) keeps `respond` and answers later.
  virtual void Handle(std::string_view method, IncomingFrame request, Responder respond) = 0;
};

// Where the bytes [offset, offset + bytes) of an answer's payload may be
// received in place: memory of that many bytes, or null (the transport's
// own buffer). Called on a transport thread; must not block.
using PayloadDestination = std::function<void*(uint64_t offset, size_t bytes)>;

struct CallOptions {
  absl::Time deadline = absl::InfiniteFuture();
  // Wait for the server to come up (until the deadline) instead of failing
  // at once with UNAVAILABLE. Used while a cluster starts.
  bool wait_for_ready = false;
  // Optional. A transport that receives a large answer piece by piece (ucx)
  // may receive a piece of its payload straight into the memory this names,
  // and the answer's pieces then point there: reading them into that same
  // memory (IncomingFrame::Read) copies nothing. The memory must stay valid
  // until `done` has run, and may hold any bytes of the answer once the call
  // started, also when the call fails. Other transports ignore it.
  PayloadDestination receive_into;
};

class Channel {
 public:
  virtual ~Channel() = default;
  // Sends `request` to `method`. `done` runs when the answer arrives, the
  // deadline passes (DEADLINE_EXCEEDED) or the peer is unreachable (UNAVAILABLE).
  virtual void Call(std::string_view method, OutgoingFrame request, const CallOptions& options,
                    ResponseCallback done) = 0;
  // Blocking convenience wrapper around Call.
  absl::Status CallSync(std::string_view method, OutgoingFrame request, const CallOptions& options,
                        IncomingFrame* response);
};

class Server {
 public:
  virtual ~Server() = default;
  // The port actually bound (useful with port 0).
  virtual int port() const = 0;
  // Stops accepting calls and waits (up to `grace`) for calls in flight.
  virtual void Shutdown(absl::Duration grace) = 0;
};

struct TransportOptions {
  int64_t max_message_bytes = 2147483647;
  // TLS and the token (security.h); a transport that cannot carry what is
  // enabled here is refused before it is created (TransportSupportsSecurity).
  TransportSecurity security;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual absl::StatusOr<std::unique_ptr<Channel>> Connect(const std::string& address) = 0;
  // Serves `handler` (not owned; must outlive the server) at "host:port".
  virtual absl::StatusOr<std::unique_ptr<Server>> Serve(const std::string& address, Handler* handler) = 0;
};

// Transports by name (transport: in configs), each registered from its own
// directory with what it can do; registering also makes config validation
// accept the name, and the checks of other sections read the capabilities
// (a `security` section needs a transport that carries it).
using TransportFactory = std::function<std::unique_ptr<Transport>(const TransportOptions&)>;
struct TransportCapabilities {
  // Carries TransportOptions::security: TLS and the shared token (grpc).
  bool security = false;
  // Moves large messages between processes of one host without copying them
  // through the kernel (shared memory, cross-memory attach: ucx).
  bool same_host_zero_copy = false;
  // Moves large messages between hosts by RDMA where the NIC offers it
  // (InfiniBand, RoCE: ucx).
  bool rdma = false;
};
struct TransportEntry {
  TransportFactory create;
  TransportCapabilities capabilities;
};
Registry<TransportEntry>& TransportRegistry();
bool RegisterTransport(const std::string& name, TransportFactory factory, TransportCapabilities capabilities = {});
// The capabilities of a registered transport; none for an unknown name or
// one this build lacks.
TransportCapabilities CapabilitiesOf(const std::string& name);
// Unknown names are NotFound listing the known ones; security asked of a
// transport that cannot carry it is INVALID_ARGUMENT.
absl::StatusOr<std::unique_ptr<Transport>> CreateTransport(const std::string& name, const TransportOptions& options);
std::vector<std::string> RegisteredTransports();

}  // namespace pstrain
