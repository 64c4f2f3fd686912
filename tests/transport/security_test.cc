// The security section: LoadTransportSecurity's checks against real
// certificates (made by openssl), and the grpc transport with TLS and a
// token on loopback: who gets through, who is refused and with what reason.
#include "common/transport/security.h"

#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/config/config_loader.h"
#include "common/transport/transport.h"
#include "gtest/gtest.h"
#include "tests/util/process_test_util.h"
#include "tests/util/test_certificates.h"

namespace pstrain {
namespace {

using test::TempDir;
using test::TestPki;

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<TestPki> pki = test::MakeTestPki(dir_.path());
    if (absl::IsFailedPrecondition(pki.status())) GTEST_SKIP() << pki.status().message();
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = *pki;
  }

  // A config on transport grpc with mutual TLS from the test PKI and a token.
  ExperimentConfig Secure() const {
    ExperimentConfig config;
    config.set_transport("grpc");
    config.mutable_cluster()->add_ps_hosts("localhost:1");
    config.mutable_cluster()->add_worker_hosts("localhost:2");
    config.mutable_data()->set_source("synthetic");
    test::SetMutualTlsAndToken(pki_, config.mutable_security());
    return config;
  }

  // The error LoadTransportSecurity gives for `config` (OK when it loads).
  static absl::Status LoadError(const ExperimentConfig& config) { return LoadTransportSecurity(config).status(); }

  TempDir dir_;
  TestPki pki_;
};

TEST_F(SecurityTest, AGoodSectionLoadsTheFilesAndTheToken) {
  absl::StatusOr<TransportSecurity> s = LoadTransportSecurity(Secure());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->tls);
  EXPECT_TRUE(s->require_client_cert);
  EXPECT_TRUE(absl::StrContains(s->cert_chain_pem, "BEGIN CERTIFICATE"));
  EXPECT_TRUE(absl::StrContains(s->private_key_pem, "PRIVATE KEY"));
  EXPECT_EQ(s->token, test::ReadFile(pki_.token).substr(0, 64));
  EXPECT_TRUE(s->enabled());
  absl::StatusOr<TransportSecurity> none = LoadTransportSecurity(ExperimentConfig());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->enabled());
}

TEST_F(SecurityTest, EachBadFileIsNamedWithItsField) {
  struct Case {
    std::string what;
    std::function<void(ExperimentConfig&)> change;
    std::string field, says;
  };
  const std::string missing = dir_.path() + "/missing.crt";
  const std::vector<Case> cases = {
      {"missing cert file", [&](ExperimentConfig& c) { c.mutable_security()->mutable_tls()->set_cert(missing); },
       "security.tls.cert", missing + ": cannot read it"},
      {"cert field empty", [&](ExperimentConfig& c) { c.mutable_security()->mutable_tls()->clear_cert(); },
       "security.tls.cert", "required"},
      {"a key in the cert field",
       [&](ExperimentConfig& c) { c.mutable_security()->mutable_tls()->set_cert(pki_.node_key); }, "security.tls.cert",
       "holds no PEM certificate"},
      {"a cert in the key field",
       [&](ExperimentConfig& c) { c.mutable_security()->mutable_tls()->set_key(pki_.node_cert); }, "security.tls.key",
       "holds no PEM private key"},
      {"another certificate's key",
       [&](ExperimentConfig& c) { c.mutable_security()->mutable_tls()->set_key(pki_.rogue_key); }, "security.tls.key",
       "does not match the certificate"},
      {"expired certificate",
       [&](ExperimentConfig& c) { c.mutable_security()->mutable_tls()->set_cert(pki_.expired_cert); },
       "security.tls.cert", "expired on"},
      {"a CA that did not sign it",
       [&](ExperimentConfig& c) { c.mutable_security()->mutable_tls()->set_ca(pki_.rogue_ca_cert); },
       "security.tls.cert", "does not chain to the CA in security.tls.ca " + pki_.rogue_ca_cert},
      {"a device, not a file", [&](ExperimentConfig& c) { c.mutable_security()->mutable_tls()->set_ca("/dev/zero"); },
       "security.tls.ca", "/dev/zero: not a regular file"},
      {"missing token file", [&](ExperimentConfig& c) { c.mutable_security()->set_token_file(missing); },
       "security.token_file", missing + ": cannot read it"},
      {"transport ucx", [&](ExperimentConfig& c) { c.set_transport("ucx"); }, "security.tls",
       "transport 'ucx' cannot carry TLS or a token"},
      {"metrics token without a token",
       [&](ExperimentConfig& c) {
         c.mutable_security()->clear_token_file();
         c.mutable_security()->set_metrics_require_token(true);
       },
       "security.metrics_require_token", "needs security.token_file"},
  };
  for (const Case& c : cases) {
    ExperimentConfig config = Secure();
    c.change(config);
    absl::Status s = LoadError(config);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << c.what << ": " << s;
    EXPECT_TRUE(absl::StartsWith(s.message(), c.field + ": ")) << c.what << ": " << s;
    EXPECT_TRUE(absl::StrContains(s.message(), c.says)) << c.what << ": " << s;
    // The same check runs in config validation: what --check_config and
    // pstrain-launch report (exit 2), with the file name.
    absl::Status v = ValidateExperimentConfig(config, "exp.yaml");
    EXPECT_TRUE(absl::StrContains(v.message(), "exp.yaml: field '" + c.field + "'")) << c.what << ": " << v;
  }
}

TEST_F(SecurityTest, ShortOrUnprintableTokensAreRefused) {
  for (const std::string& token : {std::string("short\n"), std::string("0123456789abcdef\x01xyz\n"), std::string()}) {
    const std::string path = dir_.path() + "/bad-token";
    test::WriteFile(path, token);
    ExperimentConfig config = Secure();
    config.mutable_security()->set_token_file(path);
    absl::Status s = LoadError(config);
    EXPECT_TRUE(absl::StartsWith(s.message(), "security.token_file: " + path)) << s;
  }
  // The first line counts, surrounding blanks dropped.
  const std::string path = dir_.path() + "/padded-token";
  test::WriteFile(path, "  0123456789abcdef0123  \nsecond line\n");
  ExperimentConfig config = Secure();
  config.mutable_security()->set_token_file(path);
  absl::StatusOr<TransportSecurity> s = LoadTransportSecurity(config);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->token, "0123456789abcdef0123");
}

TEST_F(SecurityTest, EveryProblemIsNamedNotOnlyTheFirst) {
  ExperimentConfig config = Secure();
  const std::string short_token = dir_.path() + "/short-token";
  test::WriteFile(short_token, "short\n");
  config.mutable_security()->mutable_tls()->set_key(pki_.node_cert);  // a certificate where the key goes
  config.mutable_security()->set_token_file(short_token);
  const absl::Status s = LoadError(config);
  EXPECT_TRUE(absl::StrContains(s.message(), "security.tls.key: " + pki_.node_cert)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "\nsecurity.token_file: " + short_token)) << s;
  const absl::Status v = ValidateExperimentConfig(config, "exp.yaml");
  EXPECT_TRUE(absl::StrContains(v.message(), "exp.yaml: field 'security.tls.key'")) << v;
  EXPECT_TRUE(absl::StrContains(v.message(), "\nexp.yaml: field 'security.token_file'")) << v;
}

TEST(TokenTest, OnlyTheExactTokenAfterABearerSchemePasses) {
  const std::string token = "0123456789abcdef";
  EXPECT_TRUE(PresentsToken(BearerValue(token), token));
  EXPECT_TRUE(PresentsToken("bearer " + token, token)) << "the scheme is case-insensitive";
  EXPECT_FALSE(PresentsToken(token, token)) << "no scheme";
  EXPECT_FALSE(PresentsToken("Bearer " + token + "0", token));
  EXPECT_FALSE(PresentsToken("Bearer " + token.substr(1), token));
  EXPECT_FALSE(PresentsToken("Bearer 0123456789abcdeF", token));
  EXPECT_FALSE(PresentsToken("", token));
  EXPECT_FALSE(PresentsToken("Basic " + token, token));
}

// Answers every call with the request's header, counting them.
class EchoHandler : public Handler {
 public:
  void Handle(std::string_view, IncomingFrame request, Responder respond) override {
    ++calls;
    OutgoingFrame response;
    response.header = request.header();
    respond(absl::OkStatus(), std::move(response));
  }
  std::atomic<int> calls{0};
};

// Every case runs with the credentials read once (SslCredentials) and with
// security.tls.reload_seconds (gRPC's file-watching TLS credentials).
class GrpcSecurityTest : public SecurityTest, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    SecurityTest::SetUp();
    if (IsSkipped()) return;
    ExperimentConfig config = Secure();
    if (Reloading()) config.mutable_security()->mutable_tls()->set_reload_seconds(1);
    absl::StatusOr<TransportSecurity> security = LoadTransportSecurity(config);
    ASSERT_TRUE(security.ok()) << security.status();
    server_security_ = *security;
    TransportOptions options;
    options.security = server_security_;
    server_transport_ = *CreateTransport("grpc", options);
    absl::StatusOr<std::unique_ptr<Server>> server = server_transport_->Serve("127.0.0.1:0", &handler_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    address_ = absl::StrCat("localhost:", server_->port());
  }
  void TearDown() override {
    if (server_) server_->Shutdown(absl::Seconds(1));
  }

  // One call with a client of `security`; waits for the server up to
  // `wait` (wait_for_ready) when it is above zero.
  absl::Status CallWith(const TransportSecurity& security, std::string* answer = nullptr,
                        absl::Duration wait = absl::ZeroDuration()) {
    TransportOptions options;
    options.security = Reloading() ? OnFiles(security) : security;
    std::unique_ptr<Transport> transport = *CreateTransport("grpc", options);
    std::unique_ptr<Channel> channel = *transport->Connect(address_);
    CallOptions call;
    call.deadline = absl::Now() + (wait > absl::ZeroDuration() ? wait : absl::Seconds(10));
    call.wait_for_ready = wait > absl::ZeroDuration();
    OutgoingFrame request;
    request.header = "hello";
    IncomingFrame response;
    absl::Status s = channel->CallSync("Echo", std::move(request), call, &response);
    if (s.ok() && answer != nullptr) *answer = response.header();
    return s;
  }

  bool Reloading() const { return GetParam(); }

  // `security` with its PEM texts in files of their own, watched.
  TransportSecurity OnFiles(TransportSecurity security) {
    const std::string prefix = absl::StrCat(dir_.path(), "/client", ++clients_, "-");
    auto put = [&](const std::string& text, const char* name, std::string* path) {
      path->clear();
      if (text.empty()) return;
      *path = prefix + name;
      test::WriteFile(*path, text);
    };
    put(security.cert_chain_pem, "cert.pem", &security.cert_path);
    put(security.private_key_pem, "key.pem", &security.key_path);
    put(security.ca_pem, "ca.pem", &security.ca_path);
    security.reload_seconds = 1;
    return security;
  }

  int clients_ = 0;
  EchoHandler handler_;
  TransportSecurity server_security_;
  std::unique_ptr<Transport> server_transport_;
  std::unique_ptr<Server> server_;
  std::string address_;
};

TEST_P(GrpcSecurityTest, AClientWithTheCaTheCertificateAndTheTokenIsAnswered) {
  std::string answer;
  ASSERT_TRUE(CallWith(server_security_, &answer).ok());
  EXPECT_EQ(answer, "hello");
  EXPECT_EQ(handler_.calls.load(), 1);
}

TEST_P(GrpcSecurityTest, NoTokenOrAnotherTokenIsPermissionDeniedBeforeTheHandler) {
  TransportSecurity no_token = server_security_;
  no_token.token.clear();
  TransportSecurity other = server_security_;
  other.token = test::ReadFile(pki_.other_token).substr(0, 64);
  for (const TransportSecurity& client : {no_token, other}) {
    absl::Status s = CallWith(client);
    EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "no or wrong token")) << s;
  }
  EXPECT_EQ(handler_.calls.load(), 0);
}

TEST_P(GrpcSecurityTest, ACertificateFromAnotherCaIsRefusedInTheHandshake) {
  // The rogue client trusts the cluster's CA but shows a certificate the
  // cluster's CA did not sign.
  TransportSecurity rogue = server_security_;
  rogue.cert_chain_pem = test::ReadFile(pki_.rogue_cert);
  rogue.private_key_pem = test::ReadFile(pki_.rogue_key);
  absl::Status s = CallWith(rogue);
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  // And without any client certificate at all (mutual TLS required).
  TransportSecurity anonymous = server_security_;
  anonymous.cert_chain_pem.clear();
  anonymous.private_key_pem.clear();
  s = CallWith(anonymous);
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_EQ(handler_.calls.load(), 0);
}

TEST_P(GrpcSecurityTest, AServerWhoseCertificateTheClientCannotVerifyIsRefused) {
  TransportSecurity trusts_other_ca = server_security_;
  trusts_other_ca.ca_pem = test::ReadFile(pki_.rogue_ca_cert);
  absl::Status s = CallWith(trusts_other_ca);
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "certificate verify failed") ||
              absl::StrContains(s.message(), "Handshake") || absl::StrContains(s.message(), "handshake"))
      << s;
  EXPECT_EQ(handler_.calls.load(), 0);
}

TEST_P(GrpcSecurityTest, PlaintextAgainstTlsIsRefusedAndAWaitingClientSaysWhy) {
  TransportSecurity plaintext;
  plaintext.token = server_security_.token;
  absl::Status s = CallWith(plaintext);
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  // Waiting for the server (as workers do at start-up) ends at the deadline
  // with the connection's failure, not a bare "deadline exceeded".
  s = CallWith(plaintext, nullptr, absl::Seconds(2));
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "deadline passed while waiting to connect to " + address_)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "security.tls")) << s;
  EXPECT_EQ(handler_.calls.load(), 0);
}

TEST_P(GrpcSecurityTest, OneCertificateForTheClusterByServerName) {
  // The certificate names localhost; clients dialling 127.0.0.1 by a name
  // it does not list verify it as server_name instead.
  TransportSecurity named = server_security_;
  named.server_name = "localhost";
  address_ = absl::StrCat("127.0.0.1:", server_->port());
  EXPECT_TRUE(CallWith(named).ok());
  named.server_name = "somebody-else.example";
  absl::Status s = CallWith(named);
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
}

TEST_P(GrpcSecurityTest, TransportsThatCannotCarrySecurityAreRefused) {
  TransportOptions options;
  options.security = server_security_;
  absl::StatusOr<std::unique_ptr<Transport>> ucx = CreateTransport("ucx", options);
  ASSERT_FALSE(ucx.ok());
  EXPECT_TRUE(absl::StrContains(ucx.status().message(), "cannot carry TLS or a token")) << ucx.status();
}

INSTANTIATE_TEST_SUITE_P(Credentials, GrpcSecurityTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Reloaded" : "ReadOnce";
                         });

// security.tls.reload_seconds: a server whose certificate files are
// replaced presents the new certificate to new connections, no restart.
TEST_F(SecurityTest, ARotatedServerCertificateIsPresentedWithoutARestart) {
  const std::string live = dir_.path() + "/live";
  std::filesystem::create_directories(live);
  std::filesystem::copy_file(pki_.node_cert, live + "/cert.pem");
  std::filesystem::copy_file(pki_.node_key, live + "/key.pem");
  std::filesystem::copy_file(pki_.ca_cert, live + "/ca.pem");
  ExperimentConfig config = Secure();
  TlsConfig* tls = config.mutable_security()->mutable_tls();
  tls->set_cert(live + "/cert.pem");
  tls->set_key(live + "/key.pem");
  tls->set_ca(live + "/ca.pem");
  tls->set_require_client_cert(false);
  tls->set_reload_seconds(1);
  config.mutable_security()->clear_token_file();
  absl::StatusOr<TransportSecurity> server_security = LoadTransportSecurity(config);
  ASSERT_TRUE(server_security.ok()) << server_security.status();
  TransportOptions server_options;
  server_options.security = *server_security;
  std::unique_ptr<Transport> server_transport = *CreateTransport("grpc", server_options);
  EchoHandler handler;
  absl::StatusOr<std::unique_ptr<Server>> server = server_transport->Serve("127.0.0.1:0", &handler);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = absl::StrCat("localhost:", (*server)->port());

  // A new client each time: a new connection, a new handshake.
  auto call_trusting = [&](const std::string& ca_file) {
    TransportOptions options;
    options.security.tls = true;
    options.security.ca_pem = test::ReadFile(ca_file);
    std::unique_ptr<Transport> transport = *CreateTransport("grpc", options);
    std::unique_ptr<Channel> channel = *transport->Connect(address);
    CallOptions call;
    call.deadline = absl::Now() + absl::Seconds(10);
    OutgoingFrame request;
    request.header = "hello";
    IncomingFrame response;
    return channel->CallSync("Echo", std::move(request), call, &response);
  };
  EXPECT_TRUE(call_trusting(pki_.ca_cert).ok());
  EXPECT_TRUE(absl::IsUnavailable(call_trusting(pki_.rogue_ca_cert)));

  // Rotate to the other CA's certificate, each file replaced by rename.
  for (const auto& [from, to] : {std::pair{pki_.rogue_key, "key.pem"}, std::pair{pki_.rogue_cert, "cert.pem"}}) {
    std::filesystem::copy_file(from, live + "/next");
    std::filesystem::rename(live + "/next", live + "/" + to);
  }
  absl::Status rogue = call_trusting(pki_.rogue_ca_cert);
  for (const absl::Time give_up = absl::Now() + absl::Seconds(30); !rogue.ok() && absl::Now() < give_up;) {
    absl::SleepFor(absl::Milliseconds(200));
    rogue = call_trusting(pki_.rogue_ca_cert);
  }
  EXPECT_TRUE(rogue.ok()) << "the server never presented the rotated certificate: " << rogue;
  EXPECT_TRUE(absl::IsUnavailable(call_trusting(pki_.ca_cert))) << "the old certificate is still presented";
  (*server)->Shutdown(absl::Seconds(1));
}

TEST_F(SecurityTest, ReloadSecondsAboveADayIsRefused) {
  ExperimentConfig config = Secure();
  config.mutable_security()->mutable_tls()->set_reload_seconds(86401);
  const absl::Status s = LoadError(config);
  EXPECT_TRUE(absl::StrContains(s.message(), "security.tls.reload_seconds: 86401 is above 86400")) << s;
  // Named beside a problem with the files too, not only once they pass.
  config.mutable_security()->mutable_tls()->set_cert(dir_.path() + "/missing.pem");
  const absl::Status both = LoadError(config);
  EXPECT_TRUE(absl::StrContains(both.message(), "security.tls.cert: " + dir_.path() + "/missing.pem")) << both;
  EXPECT_TRUE(absl::StrContains(both.message(), "\nsecurity.tls.reload_seconds: 86401 is above 86400")) << both;
}

}  // namespace
}  // namespace pstrain
