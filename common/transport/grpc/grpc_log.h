// gRPC's own log lines, in pstrain's words.
//
// gRPC prints ERROR lines by default (and more when GRPC_VERBOSITY, gRPC's
// own variable, asks: DEBUG or INFO bring them back). RouteGrpcLogs sends
// each line to stderr as one line, "grpc: <message> (<file>:<line>)", and
// lets a thread capture its lines instead: while a GrpcLogCapture lives on a
// thread, what gRPC logs on that thread goes into it, so the caller can say
// what went wrong once, in its own words (a server that cannot bind).
#pragma once

#include <string>

namespace pstrain {

// Installs the log function (once per process; later calls do nothing).
void RouteGrpcLogs();

// Captures this thread's gRPC log lines from construction to destruction.
// Not nestable on one thread.
class GrpcLogCapture {
 public:
  GrpcLogCapture();
  ~GrpcLogCapture();
  GrpcLogCapture(const GrpcLogCapture&) = delete;
  GrpcLogCapture& operator=(const GrpcLogCapture&) = delete;

  // The lines captured so far, each ending in '\n'.
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// Why a server could not listen, from what gRPC logged while it tried:
// "address in use", "not permitted (ports below 1024 need privileges)",
// "not an address of this host", "cannot resolve the host name", else the
// first line gRPC logged (or "unknown cause" when it logged nothing).
std::string ListenFailureCause(const std::string& grpc_log);

}  // namespace pstrain
