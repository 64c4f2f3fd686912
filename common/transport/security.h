// TransportSecurity: what the config's `security` section asks of the wire,
// loaded and checked once per process (docs/SECURITY.md).
//
// LoadTransportSecurity reads the PEM files and the token file and checks
// them with OpenSSL before anything starts: each file readable and holding
// what its field says, the key matching the certificate, the certificate
// valid now and chaining to the CA, the token long enough. Every error names
// the field and the file ("security.tls.key: /etc/pstrain/w0.key does not
// match the certificate in security.tls.cert /etc/pstrain/w0.crt"). Only
// transports that can carry it accept security: gRPC does (TLS channel and
// server credentials, the token as call metadata); the others are refused
// by name. The same checks run as a config check, so --check_config and
// pstrain-launch report a bad security section with exit 2.
#pragma once

#include <set>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "proto/config.pb.h"

namespace pstrain {

struct TransportSecurity {
  // TLS: off when empty. PEM text, already checked.
  bool tls = false;
  std::string cert_chain_pem;
  std::string private_key_pem;
  std::string ca_pem;
  bool require_client_cert = false;
  // > 0: re-read the files below this often (security.tls.reload_seconds);
  // the PEM text above is what they held at start.
  uint32_t reload_seconds = 0;
  std::string cert_path, key_path, ca_path;
  // Clients check server certificates against this name instead of the
  // host of the address they dial (empty: the host).
  std::string server_name;
  // The shared secret every call must carry (empty: none).
  std::string token;

  bool enabled() const { return tls || !token.empty(); }
};

// Whether `transport` can carry TLS and the token (its registered
// capabilities, transport.h).
bool TransportSupportsSecurity(std::string_view transport);
// "use transport grpc" (the transports whose capabilities include security).
std::string SecurityTransportsHint();

// Reads and checks `config.security()` for `config.transport()`. An absent
// section gives a TransportSecurity with nothing enabled. Errors are
// INVALID_ARGUMENT naming every problem found, one line each as
// "field: problem" (with the file, for file fields).
absl::StatusOr<TransportSecurity> LoadTransportSecurity(const ExperimentConfig& config);

// The metadata key and value a client sends the token as (gRPC lower-case
// key): "authorization: Bearer <token>".
inline constexpr char kTokenMetadataKey[] = "authorization";
std::string BearerValue(std::string_view token);
// Whether `presented` (a whole "authorization" value) carries `token`;
// compares in constant time for equal lengths.
bool PresentsToken(std::string_view presented, std::string_view token);

// The servers' log of refused peers: each host once (the first 1024 hosts,
// then no more lines), so a peer retrying in a loop fills no disk.
// Thread-safe.
class RefusedPeerLog {
 public:
  // `peer`: an address, optionally with a port ("ipv4:10.0.0.7:53122",
  // "10.0.0.7"); the port is dropped. Logs "refused calls from <host>: <why>".
  void Refused(const std::string& peer, std::string_view why);

 private:
  static constexpr size_t kMaxLogged = 1024;
  absl::Mutex mu_;
  std::set<std::string> logged_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain
