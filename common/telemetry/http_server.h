// MetricsHttpServer: a role's observability endpoint over HTTP/1.1.
//
//   GET /metrics  200, the registry in the text exposition format 0.0.4
//                 (Content-Type: text/plain; version=0.0.4; charset=utf-8)
//   GET /healthz  200 "ok", or 503 with the message of the health check
//   other paths   404;  other methods on these paths: 405 (Allow: GET)
//   with `authorize` set: a request whose Authorization header it refuses
//                 (or that has none): 401 (WWW-Authenticate: Bearer)
//   a request that does not parse (or whose header or body exceeds 8 KiB): 400, then the connection closes
//
// A query string is ignored. Connections are kept alive between requests; a
// connection is closed when reading one request or writing one response
// takes longer than `io_timeout`, or when it stays idle that long, so a slow
// or silent client never holds the server. Whatever bytes a client sends,
// the server answers or closes that connection and goes on serving others.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/telemetry/metric_registry.h"

namespace pstrain {

// The health of a role: OK answers 200 "ok"; an error answers 503 with its
// message (or its code's name when the message is empty). Called on an io thread for every GET /healthz: must be
// thread-safe and quick. An empty function means always healthy.
using HealthCheck = std::function<absl::Status()>;

struct MetricsHttpServerOptions {
  // The deadline for reading one request, writing one response, and for an
  // idle connection between requests: above 0, at most 24 hours.
  absl::Duration io_timeout = absl::Seconds(10);
  // Threads serving connections (1..16). Callback gauges run on them.
  int io_threads = 1;
  // When set, every request must pass it: it gets the Authorization
  // header's value ("" when absent) and the client's address, and says
  // whether to answer (logging a refusal is its business). Runs on an io
  // thread: thread-safe and quick. (The roles check their token here.)
  std::function<bool(std::string_view authorization, const std::string& peer)> authorize;
};

class MetricsHttpServer {
 public:
  // Listens on host:port (port 0: one the system picks; see port()) and
  // serves `registry` (not owned; must outlive the server) and `health`.
  // `host` is an IPv4 or IPv6 address or a name; "0.0.0.0" listens on every
  // IPv4 interface. A port taken by another socket is UNAVAILABLE
  // "metrics_port <port>: address already in use"; a port outside 0..65535
  // or a host that does not resolve is INVALID_ARGUMENT.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(const std::string& host, int port,
                                                                  const MetricRegistry* registry, HealthCheck health,
                                                                  const MetricsHttpServerOptions& options = {});

  // Stops as Stop() does.
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // The port listened on.
  int port() const { return port_; }

  // Stops listening, closes every connection (a response being written is
  // cut off) and joins the io threads; returns once they have exited and
  // the port is released. Idempotent; thread-safe; must not be called from
  // a health check or a callback gauge (it would wait for itself).
  void Stop();

 private:
  struct State;  // Boost.Asio objects and io threads (http_server.cc)
  MetricsHttpServer(std::unique_ptr<State> state, int port);

  const int port_;
  absl::Mutex mu_;
  std::unique_ptr<State> state_ ABSL_GUARDED_BY(mu_);  // null once stopped
};

}  // namespace pstrain
