// Certificates for TLS tests, made by the openssl command line tool in a
// directory the caller owns: a CA, a node certificate it signs (for
// localhost, 127.0.0.1 and ::1, server and client use), an expired one, and
// a rogue CA with a certificate of its own (same names), plus two tokens.
#ifndef PSTRAIN_TESTS_UTIL_TEST_CERTIFICATES_H_
#define PSTRAIN_TESTS_UTIL_TEST_CERTIFICATES_H_

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "proto/config.pb.h"

namespace pstrain::test {

struct TestPki {
  std::string dir;
  std::string ca_cert, ca_key;      // the cluster's CA
  std::string node_cert, node_key;  // signed by it
  std::string expired_cert;         // node_key's, signed by it, expired yesterday
  std::string rogue_ca_cert;        // another CA
  std::string rogue_cert, rogue_key;
  std::string token, other_token;  // token files (mode 600), 64 hex characters each
};

// Writes the files into `dir`. FailedPrecondition when openssl is missing
// (callers skip with the message), Internal when a command fails.
inline absl::StatusOr<TestPki> MakeTestPki(const std::string& dir) {
  if (std::system("command -v openssl > /dev/null 2>&1") != 0) {
    return absl::FailedPreconditionError("the openssl command is not installed (Debian package openssl)");
  }
  TestPki p;
  p.dir = dir;
  p.ca_cert = dir + "/ca.crt";
  p.ca_key = dir + "/ca.key";
  p.node_cert = dir + "/node.crt";
  p.node_key = dir + "/node.key";
  p.expired_cert = dir + "/expired.crt";
  p.rogue_ca_cert = dir + "/rogue-ca.crt";
  p.rogue_cert = dir + "/rogue.crt";
  p.rogue_key = dir + "/rogue.key";
  p.token = dir + "/token";
  p.other_token = dir + "/other-token";
  const std::string script = absl::StrCat(R"(
set -e
cd ')",
                                          dir, R"('
ec="-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
openssl req -x509 $ec -keyout ca.key -out ca.crt -days 2 -subj /CN=pstrain-test-ca
openssl req -x509 $ec -keyout rogue-ca.key -out rogue-ca.crt -days 2 -subj /CN=rogue-ca
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\nextendedKeyUsage=serverAuth,clientAuth\n' > node.ext
openssl req $ec -keyout node.key -out node.csr -subj /CN=node
openssl x509 -req -in node.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out node.crt -days 1 -extfile node.ext
openssl x509 -req -in node.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out expired.crt -days -1 -extfile node.ext
openssl req $ec -keyout rogue.key -out rogue.csr -subj /CN=node
openssl x509 -req -in rogue.csr -CA rogue-ca.crt -CAkey rogue-ca.key -CAcreateserial -out rogue.crt -days 1 \
  -extfile node.ext
umask 077
openssl rand -hex 32 > token
openssl rand -hex 32 > other-token
)");
  const std::string script_path = dir + "/make-pki.sh";
  if (FILE* f = std::fopen(script_path.c_str(), "w")) {
    std::fputs(script.c_str(), f);
    std::fclose(f);
  } else {
    return absl::InternalError("cannot write " + script_path);
  }
  if (std::system(absl::StrCat("bash '", script_path, "' > '", dir, "/make-pki.log' 2>&1").c_str()) != 0) {
    return absl::InternalError(absl::StrCat("making test certificates failed: see ", dir, "/make-pki.log"));
  }
  return p;
}

// `security` with mutual TLS from `pki` (node certificate, its CA) and its token.
inline void SetMutualTlsAndToken(const TestPki& pki, SecurityConfig* security) {
  TlsConfig* tls = security->mutable_tls();
  tls->set_cert(pki.node_cert);
  tls->set_key(pki.node_key);
  tls->set_ca(pki.ca_cert);
  tls->set_require_client_cert(true);
  security->set_token_file(pki.token);
}

}  // namespace pstrain::test

#endif  // PSTRAIN_TESTS_UTIL_TEST_CERTIFICATES_H_
