// Test-only workaround for a teardown race in common/transport/grpc: a call's
// completion callback runs on one of gRPC's "nexting" threads and notifies the
// caller before the call's ClientContext (which holds a reference to the
// grpc::Channel) is destroyed. A test that then drops its last Channel and
// Server lets that thread release gRPC's shared callback completion queue,
// which joins and deletes itself under that very thread -> intermittent
// "ref_counted.h: assertion failed: prior > 0" or SIGSEGV in
// grpc_completion_queue_next. Keeping one gRPC server alive for the whole
// test binary keeps that queue referenced, so it is never torn down mid-run.
// (Fix in the transport: destroy the CallState before invoking `done`.)
#pragma once

#include <memory>

#include "common/transport/transport.h"

namespace pstrain {

inline void KeepGrpcCallbackQueueAlive() {
  struct NoHandler : Handler {
    void Handle(std::string_view, IncomingFrame, Responder respond) override {
      respond(absl::UnimplementedError("keep-alive server"), {});
    }
  };
  static Server* const server = [] {
    static NoHandler handler;
    static std::unique_ptr<Transport> transport = CreateTransport("grpc", TransportOptions()).value();
    return transport->Serve("127.0.0.1:0", &handler).value().release();  // never destroyed
  }();
  (void)server;
}

}  // namespace pstrain
