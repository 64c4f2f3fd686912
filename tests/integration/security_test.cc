// Security end to end: a 2 PS + 2 worker sync run with mutual TLS and a
// token trains as usual; clients without the token, with another token,
// with a certificate from another CA or in plaintext are refused and leave
// a real shard's parameters as they were; bad security configs stop
// pstrain-launch before anything starts; a running PS refuses a worker with
// another token, naming it; cluster.listen_address binds the cluster host
// only. Certificates come from openssl (skipped, saying so, without it).
#include "common/transport/security.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/metrics/result_json.h"
#include "common/transport/transport.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster_test_util.h"
#include "tests/ps/ps_test_util.h"
#include "tests/util/process_test_util.h"
#include "tests/util/test_certificates.h"

namespace pstrain::test {
namespace {

class SecurityIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<TestPki> pki = MakeTestPki(dir_.path());
    if (absl::IsFailedPrecondition(pki.status())) GTEST_SKIP() << pki.status().message();
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = *pki;
  }

  // The YAML of a security section with mutual TLS and the token.
  std::string SecurityYaml(const std::string& extra = "") const {
    return absl::StrCat("security: {tls: {cert: ", pki_.node_cert, ", key: ", pki_.node_key, ", ca: ", pki_.ca_cert,
                        ", require_client_cert: true}, token_file: ", pki_.token, extra, "}\n");
  }

  // The loaded security of SecurityYaml's section.
  TransportSecurity Loaded() const {
    ExperimentConfig config;
    SetMutualTlsAndToken(pki_, config.mutable_security());
    absl::StatusOr<TransportSecurity> s = LoadTransportSecurity(config);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : TransportSecurity();
  }

  struct Launched {
    int exit_code = -1;
    std::string output;
  };
  Launched Launch(const std::string& name, const std::string& yaml) {
    const std::string config = dir_.path() + "/" + name + ".yaml";
    WriteFile(config, yaml);
    Subprocess launch =
        Spawn({BinDir() + "/pstrain-launch", config, "--run_dir", dir_.path() + "/" + name}, dir_.path());
    std::optional<int> status = WaitForExit(launch.pid, std::chrono::minutes(5));
    Launched out;
    out.output = launch.out() + launch.err();
    if (status && WIFEXITED(*status)) out.exit_code = WEXITSTATUS(*status);
    return out;
  }

  TempDir dir_;
  TestPki pki_;
};

TEST_F(SecurityIntegrationTest, MutualTlsAndATokenTrainToTheUsualAccuracy) {
  // The shipped sync experiment (2 PS + 2 workers), every channel on mutual
  // TLS with the token, every role bound to its cluster host only.
  std::string yaml = ReadFile(SourcePath("configs/fashion_mnist_mlp_sync.yaml"));
  yaml = absl::StrReplaceAll(yaml, {{"cluster:\n", "cluster:\n  listen_address: cluster\n"}});
  yaml += SecurityYaml();
  const Launched run = Launch("secure_sync", yaml);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  absl::StatusOr<RunResult> result = ReadResultJson(dir_.path() + "/secure_sync/result.json");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_GE(result->test_accuracy(), 0.85) << "the same target as without security (training_test)";
  EXPECT_FALSE(absl::StrContains(run.output, "refused calls")) << run.output;
}

TEST_F(SecurityIntegrationTest, RefusedClientsLeaveTheShardAsItWas) {
  const TransportSecurity good = Loaded();
  TransportOptions options;
  options.security = good;
  std::unique_ptr<Transport> server_transport = *CreateTransport("grpc", options);
  ps_testing::PsHarness ps(ps_testing::SgdOptions(1, "sync", 0.5f), server_transport.get(), "127.0.0.1:0");
  ASSERT_TRUE(ps.ok());
  const ps_testing::Var a{"a", {3}, {1, 2, 3}};
  const ps_testing::Var grad{"a", {3}, {10, 10, 10}};
  ASSERT_TRUE(ps.Init({a}).ok());
  const std::string before = ps.Snapshot();

  TransportSecurity no_token = good;
  no_token.token.clear();
  TransportSecurity other_token = good;
  other_token.token = ReadFile(pki_.other_token).substr(0, 64);
  TransportSecurity other_ca = good;  // trusts the cluster's CA, shows a rogue certificate
  other_ca.cert_chain_pem = ReadFile(pki_.rogue_cert);
  other_ca.private_key_pem = ReadFile(pki_.rogue_key);
  TransportSecurity plaintext;
  plaintext.token = good.token;
  struct Client {
    std::string what;
    TransportSecurity security;
    absl::StatusCode code;
  };
  for (const Client& c : {Client{"no token", no_token, absl::StatusCode::kPermissionDenied},
                          Client{"another token", other_token, absl::StatusCode::kPermissionDenied},
                          Client{"a certificate from another CA", other_ca, absl::StatusCode::kUnavailable},
                          Client{"plaintext", plaintext, absl::StatusCode::kUnavailable}}) {
    TransportOptions client_options;
    client_options.security = c.security;
    std::unique_ptr<Transport> client = *CreateTransport("grpc", client_options);
    std::unique_ptr<Channel> good_channel = ps.SwapChannel(*client->Connect(ps.address()));
    absl::StatusOr<PushResponse> push = ps.Push(0, 0, {grad});
    ps_testing::PullResult pull = ps.Pull();
    ps.SwapChannel(std::move(good_channel));
    EXPECT_EQ(push.status().code(), c.code) << c.what << ": " << push.status();
    EXPECT_EQ(pull.status.code(), c.code) << c.what << ": " << pull.status;
    EXPECT_TRUE(pull.values.empty()) << c.what << " read parameters";
    EXPECT_EQ(ps.Snapshot(), before) << c.what << " changed the shard";
  }
  // The same push with the cluster's credentials does change it.
  ASSERT_TRUE(ps.Push(0, 0, {grad}).ok());
  EXPECT_NE(ps.Snapshot(), before);
}

TEST_F(SecurityIntegrationTest, BadSecurityConfigsStopTheLaunchBeforeAnythingStarts) {
  const std::string base = absl::StrCat(R"(
cluster: {ps_hosts: ["localhost:1"], worker_hosts: ["localhost:2"]}
model: {name: mlp, hidden_units: [8]}
data: {source: synthetic, synthetic_examples: 64}
train: {batch_size_per_device: 8, steps: 2, warmup_steps: 0, evaluate: false}
)");
  struct Case {
    std::string what, yaml, says;
  };
  const std::string missing = dir_.path() + "/missing.key";
  const std::vector<Case> cases = {
      {"missing key file",
       absl::StrCat(base, "security: {tls: {cert: ", pki_.node_cert, ", key: ", missing, ", ca: ", pki_.ca_cert,
                    "}}\n"),
       "field 'security.tls.key': " + missing + ": cannot read it"},
      {"key of another certificate",
       absl::StrCat(base, "security: {tls: {cert: ", pki_.node_cert, ", key: ", pki_.rogue_key, ", ca: ", pki_.ca_cert,
                    "}}\n"),
       "field 'security.tls.key': " + pki_.rogue_key + " does not match the certificate"},
      {"TLS asked of ucx", absl::StrCat(base, "transport: ucx\n", SecurityYaml()),
       "field 'security.tls': transport 'ucx'"},
      {"expired certificate",
       absl::StrCat(base, "security: {tls: {cert: ", pki_.expired_cert, ", key: ", pki_.node_key,
                    ", ca: ", pki_.ca_cert, "}}\n"),
       "field 'security.tls.cert': " + pki_.expired_cert + ": the certificate expired on"},
      {"listen address with a port",
       absl::StrReplaceAll(base, {{"[\"localhost:2\"]}", "[\"localhost:2\"], listen_address: \"127.0.0.1:80\"}"}}),
       "field 'cluster.listen_address'"},
  };
  for (const Case& c : cases) {
    const Launched run = Launch("bad", c.yaml);
    EXPECT_EQ(run.exit_code, 2) << c.what << ":\n" << run.output;
    EXPECT_TRUE(absl::StrContains(run.output, c.says)) << c.what << ":\n" << run.output;
    EXPECT_FALSE(absl::StrContains(run.output, "--ps_hosts=")) << c.what << ": roles were started:\n" << run.output;
  }
}

// `yaml` for one PS and one worker on `hosts` (from FreeLoopbackHosts(2)).
std::string OnePsOneWorker(const std::string& hosts, const std::string& extra) {
  return absl::StrCat("cluster: {ps_hosts: [\"", NthHost(hosts, 0), "\"], worker_hosts: [\"", NthHost(hosts, 1), "\"]",
                      extra, R"(}
model: {name: mlp, hidden_units: [8]}
data: {source: synthetic, synthetic_examples: 64}
train: {batch_size_per_device: 8, steps: 3, warmup_steps: 0, evaluate: false}
timeouts: {startup_seconds: 60, rpc_seconds: 10}
)");
}

TEST_F(SecurityIntegrationTest, ARunningPsRefusesAWorkerWithAnotherTokenAndNamesIt) {
  const std::string hosts = FreeLoopbackHosts(2);
  const std::string ps_config = dir_.path() + "/ps.yaml";
  const std::string worker_config = dir_.path() + "/worker.yaml";
  WriteFile(ps_config, OnePsOneWorker(hosts, "") + SecurityYaml());
  WriteFile(worker_config,
            OnePsOneWorker(hosts, "") + absl::StrReplaceAll(SecurityYaml(), {{pki_.token, pki_.other_token}}));
  Subprocess ps = Spawn({BinDir() + "/pstrain-ps", "--config", ps_config, "--index", "0"}, dir_.path());
  Subprocess worker = Spawn(
      {BinDir() + "/pstrain-worker", "--config", worker_config, "--index", "0", "--run_dir", dir_.path() + "/run"},
      dir_.path());
  std::optional<int> status = WaitForExit(worker.pid, std::chrono::seconds(60));
  kill(ps.pid, SIGKILL);
  WaitForExit(ps.pid);
  ASSERT_TRUE(status.has_value()) << "the worker did not stop";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << worker.err();
  EXPECT_TRUE(absl::StrContains(worker.err(), "no or wrong token")) << worker.err();
  EXPECT_TRUE(absl::StrContains(ps.err(), "refused calls from")) << ps.err();
}

// Whether a TCP connection to ip:port is accepted.
bool Accepts(const std::string& ip, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, ip.c_str(), &addr.sin_addr);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

TEST_F(SecurityIntegrationTest, ListenAddressClusterBindsTheClusterHostOnly) {
  // 127.0.0.1 and 127.0.0.2 are both this machine: a PS listening on every
  // interface answers on both, one bound to its cluster host on one only.
  const std::string hosts = FreeLoopbackHosts(2);
  const std::string ps_host = absl::StrReplaceAll(NthHost(hosts, 0), {{"localhost", "127.0.0.1"}});
  const int port = std::stoi(ps_host.substr(ps_host.rfind(':') + 1));
  for (const std::string& listen : {std::string(""), std::string("cluster")}) {
    const std::string config = dir_.path() + "/listen.yaml";
    WriteFile(config, absl::StrReplaceAll(OnePsOneWorker(hosts, absl::StrCat(", listen_address: \"", listen, "\"")),
                                          {{NthHost(hosts, 0), ps_host}}));
    Subprocess ps = Spawn({BinDir() + "/pstrain-ps", "--config", config, "--index", "0"}, dir_.path());
    ASSERT_TRUE(WaitUntil([&] { return Accepts("127.0.0.1", port); }, std::chrono::seconds(60))) << ps.err();
    EXPECT_EQ(Accepts("127.0.0.2", port), listen.empty()) << "listen_address '" << listen << "'";
    kill(ps.pid, SIGKILL);
    WaitForExit(ps.pid);
  }
}

}  // namespace
}  // namespace pstrain::test
