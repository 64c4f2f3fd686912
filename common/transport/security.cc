#include "common/transport/security.h"

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/config/config_checks.h"
#include "common/transport/transport.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

constexpr size_t kMinTokenBytes = 16;
constexpr uint32_t kMaxReloadSeconds = 86400;

// A problem with one field of `security`.
struct FieldError {
  std::string field;  // e.g. "security.tls.key"
  std::string problem;
};

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct StoreFree {
  void operator()(X509_STORE* s) const { X509_STORE_free(s); }
};
struct StoreCtxFree {
  void operator()(X509_STORE_CTX* c) const { X509_STORE_CTX_free(c); }
};
struct StackFree {
  void operator()(STACK_OF(X509) * s) const { sk_X509_pop_free(s, X509_free); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
using Cert = std::unique_ptr<X509, X509Free>;

// OpenSSL's queued errors as one line (and the queue cleared).
std::string OpenSslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    absl::StrAppend(&out, out.empty() ? "" : "; ", buf);
  }
  return out.empty() ? "no details" : out;
}

Bio MemoryBio(const std::string& text) { return Bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size()))); }

// Every certificate in `pem` (none when it holds none).
std::vector<Cert> ReadCertificates(const std::string& pem) {
  std::vector<Cert> certs;
  Bio bio = MemoryBio(pem);
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) certs.emplace_back(x);
  ERR_clear_error();  // the read that ends the loop leaves "no start line"
  return certs;
}

std::string TimeText(const ASN1_TIME* t) {
  Bio bio(BIO_new(BIO_s_mem()));
  ASN1_TIME_print(bio.get(), t);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, n);
}

// The contents of the file `field` names, or why not.
// Certificates, keys and tokens are small: a larger file is not one (and a
// device such as /dev/zero would never end).
constexpr off_t kMaxSecurityFileBytes = 1 << 20;

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot read it (", std::strerror(errno), ")"));
  }
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  if (st.st_size > kMaxSecurityFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", st.st_size, " bytes, more than a certificate, key or token file holds (1 MiB)"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read it (", std::strerror(errno), ")"));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Reads security.tls's files into `out` and checks them (PEM contents, the
// key matches, validity dates, the chain to the CA); appends what is wrong
// to `errors`, which it expects empty.
void LoadTlsFiles(const TlsConfig& tls, TransportSecurity& out, std::vector<FieldError>& errors) {
  struct File {
    const char* field;
    const std::string& path;
    std::string* text;
  };
  const File files[] = {{"security.tls.cert", tls.cert(), &out.cert_chain_pem},
                        {"security.tls.key", tls.key(), &out.private_key_pem},
                        {"security.tls.ca", tls.ca(), &out.ca_pem}};
  for (const File& f : files) {
    if (f.path.empty()) {
      errors.push_back({f.field, "required with security.tls: a PEM file"});
      continue;
    }
    absl::StatusOr<std::string> text = ReadWholeFile(f.path);
    if (!text.ok()) {
      errors.push_back({f.field, std::string(text.status().message())});
      continue;
    }
    *f.text = *std::move(text);
  }
  if (!errors.empty()) return;

  std::vector<Cert> chain = ReadCertificates(out.cert_chain_pem);
  if (chain.empty()) errors.push_back({"security.tls.cert", absl::StrCat(tls.cert(), ": holds no PEM certificate")});
  std::vector<Cert> cas = ReadCertificates(out.ca_pem);
  if (cas.empty()) errors.push_back({"security.tls.ca", absl::StrCat(tls.ca(), ": holds no PEM certificate")});
  Bio key_bio = MemoryBio(out.private_key_pem);
  std::unique_ptr<EVP_PKEY, KeyFree> key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (key == nullptr) {
    errors.push_back({"security.tls.key", absl::StrCat(tls.key(),
                                                       ": holds no PEM private key (or one protected by a "
                                                       "passphrase, which is not supported): ",
                                                       OpenSslErrors())});
  }
  if (!errors.empty()) return;

  X509* leaf = chain.front().get();
  if (X509_check_private_key(leaf, key.get()) != 1) {
    ERR_clear_error();
    errors.push_back({"security.tls.key",
                      absl::StrCat(tls.key(), " does not match the certificate in security.tls.cert ", tls.cert())});
  }
  if (X509_cmp_current_time(X509_get0_notAfter(leaf)) <= 0) {
    errors.push_back({"security.tls.cert",
                      absl::StrCat(tls.cert(), ": the certificate expired on ", TimeText(X509_get0_notAfter(leaf)))});
  } else if (X509_cmp_current_time(X509_get0_notBefore(leaf)) >= 0) {
    errors.push_back({"security.tls.cert", absl::StrCat(tls.cert(), ": the certificate is not valid before ",
                                                        TimeText(X509_get0_notBefore(leaf)))});
  }
  if (!errors.empty()) return;

  // The certificate (with the intermediates after it in its file) must chain
  // to the CA: peers will check it against their own copy of the same CA.
  std::unique_ptr<X509_STORE, StoreFree> store(X509_STORE_new());
  for (const Cert& ca : cas) X509_STORE_add_cert(store.get(), ca.get());
  std::unique_ptr<STACK_OF(X509), StackFree> intermediates(sk_X509_new_null());
  for (size_t i = 1; i < chain.size(); ++i) {
    X509_up_ref(chain[i].get());
    sk_X509_push(intermediates.get(), chain[i].get());
  }
  std::unique_ptr<X509_STORE_CTX, StoreCtxFree> ctx(X509_STORE_CTX_new());
  if (X509_STORE_CTX_init(ctx.get(), store.get(), leaf, intermediates.get()) != 1 || X509_verify_cert(ctx.get()) != 1) {
    const int code = X509_STORE_CTX_get_error(ctx.get());
    ERR_clear_error();
    errors.push_back({"security.tls.cert", absl::StrCat(tls.cert(), " does not chain to the CA in security.tls.ca ",
                                                        tls.ca(), ": ", X509_verify_cert_error_string(code))});
  }
}

// The checks of security.tls; appends what is wrong to `errors`.
void LoadTls(const TlsConfig& tls, TransportSecurity& out, std::vector<FieldError>& errors) {
  LoadTlsFiles(tls, out, errors);
  if (tls.reload_seconds() > kMaxReloadSeconds) {
    errors.push_back({"security.tls.reload_seconds",
                      absl::StrCat(tls.reload_seconds(), " is above ", kMaxReloadSeconds, " (one day)")});
  }
  out.tls = true;
  out.require_client_cert = tls.require_client_cert();
  out.server_name = tls.server_name();
  out.reload_seconds = tls.reload_seconds();
  out.cert_path = tls.cert();
  out.key_path = tls.key();
  out.ca_path = tls.ca();
}

// `warn`: log what is allowed but unwise (a token file others can read).
void LoadToken(const SecurityConfig& security, bool warn, TransportSecurity& out, std::vector<FieldError>& errors) {
  const std::string& path = security.token_file();
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (!text.ok()) {
    errors.push_back({"security.token_file", std::string(text.status().message())});
    return;
  }
  absl::string_view line = *text;
  line = line.substr(0, line.find('\n'));
  line = absl::StripAsciiWhitespace(line);
  if (line.size() < kMinTokenBytes) {
    errors.push_back({"security.token_file", absl::StrCat(path, ": the token (its first line) has ", line.size(),
                                                          " bytes; at least ", kMinTokenBytes, " are needed")});
    return;
  }
  for (char c : line) {
    // gRPC metadata values must be printable ASCII.
    if (c < 0x20 || c > 0x7e) {
      errors.push_back({"security.token_file", absl::StrCat(path,
                                                            ": the token must be printable ASCII (e.g. from "
                                                            "`openssl rand -hex 32`)")});
      return;
    }
  }
  struct stat st;
  if (warn && stat(path.c_str(), &st) == 0 && (st.st_mode & S_IROTH)) {
    LOG(WARNING) << "security.token_file " << path << " is readable by every user of this machine (chmod 600 it)";
  }
  out.token = std::string(line);
}

// Every problem of `config.security()` (empty: none), filling `out`.
std::vector<FieldError> Check(const ExperimentConfig& config, bool warn, TransportSecurity& out) {
  std::vector<FieldError> errors;
  if (!config.has_security()) return errors;
  const SecurityConfig& security = config.security();
  const bool asks = security.has_tls() || !security.token_file().empty();
  if (asks && !TransportSupportsSecurity(config.transport())) {
    errors.push_back({security.has_tls() ? "security.tls" : "security.token_file",
                      absl::StrCat("transport '", config.transport(),
                                   "' cannot carry TLS or a token (docs/SECURITY.md): ", SecurityTransportsHint(),
                                   ", or drop the security section")});
    return errors;
  }
  if (security.has_tls()) LoadTls(security.tls(), out, errors);
  if (!security.token_file().empty()) LoadToken(security, warn, out, errors);
  if (security.metrics_require_token() && security.token_file().empty()) {
    errors.push_back({"security.metrics_require_token", "needs security.token_file (the token to ask for)"});
  }
  return errors;
}

// Every problem, one per line, each as "<prefix>field 'f': problem" or,
// with `quote` false, "f: problem".
std::string Describe(const std::vector<FieldError>& errors, absl::string_view prefix, bool quote) {
  return absl::StrJoin(errors, "\n", [&](std::string* out, const FieldError& e) {
    absl::StrAppend(out, prefix, quote ? absl::StrCat("field '", e.field, "'") : e.field, ": ", e.problem);
  });
}

// security: checked as the roles will load it.
const bool kConfigCheck =
    ConfigCheckRegistry().Register("security", [](const ExperimentConfig& config, const ConfigChecker& ck) {
      TransportSecurity ignored;
      std::vector<FieldError> errors = Check(config, /*warn=*/false, ignored);
      if (errors.empty()) return absl::OkStatus();
      return absl::InvalidArgumentError(Describe(errors, absl::StrCat(ck.file(), ": "), /*quote=*/true));
    });

}  // namespace

bool TransportSupportsSecurity(std::string_view transport) { return CapabilitiesOf(std::string(transport)).security; }

std::string SecurityTransportsHint() {
  std::vector<std::string> able;
  for (const std::string& name : TransportRegistry().Names()) {
    if (CapabilitiesOf(name).security) able.push_back(name);
  }
  if (able.empty()) return "no transport of this build can";
  return absl::StrCat("use transport ", absl::StrJoin(able, " or "));
}

absl::StatusOr<TransportSecurity> LoadTransportSecurity(const ExperimentConfig& config) {
  TransportSecurity out;
  std::vector<FieldError> errors = Check(config, /*warn=*/true, out);
  if (!errors.empty()) return absl::InvalidArgumentError(Describe(errors, "", /*quote=*/false));
  return out;
}

std::string BearerValue(std::string_view token) { return "Bearer " + std::string(token); }

bool PresentsToken(std::string_view presented, std::string_view token) {
  constexpr std::string_view kScheme = "Bearer ";  // the scheme is case-insensitive
  if (!absl::StartsWithIgnoreCase(absl::string_view(presented.data(), presented.size()),
                                  absl::string_view(kScheme.data(), kScheme.size()))) {
    return false;
  }
  presented.remove_prefix(kScheme.size());
  if (presented.size() != token.size()) return false;
  return CRYPTO_memcmp(presented.data(), token.data(), token.size()) == 0;
}

void RefusedPeerLog::Refused(const std::string& peer, std::string_view why) {
  // "ipv4:10.0.0.7:53122" and "ipv6:%5B::1%5D:53122" carry a port; a bare
  // address given by the caller does not.
  const size_t colon = peer.rfind(':');
  const bool has_port = colon != std::string::npos && absl::StartsWith(peer, "ipv") && colon > peer.find(':');
  const std::string host = has_port ? peer.substr(0, colon) : peer;
  absl::MutexLock lock(&mu_);
  if (logged_.size() >= kMaxLogged || !logged_.insert(host).second) return;
  LOG(WARNING) << "refused calls from " << host << ": " << why;
}

}  // namespace pstrain
