// Sparse training on real PS processes: two `pstrain-ps` shards and two
// worker processes (this binary again, running SparsePsWorker.Run) that
// pull the rows their batches touch and push one gradient row per row key
// through EmbeddingClient, sync, for a regression of every row onto a
// target. The rows the workers read at the end must be the rows one device
// gets from the whole batch (the same steps computed here on an in-process
// SparseTables with one worker): a gradient row dropped or counted twice
// anywhere moves them off.
//
// Over grpc on loopback, and over grpc and ucx with every role on an
// emulated host of its own (network namespaces on a bridge, as the other
// between-hosts tests do; those need root and skip saying so otherwise).
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/config/config_loader.h"
#include "common/transport/transport.h"
#include "gtest/gtest.h"
#include "ps/embedding/sparse_tables.h"
#include "tests/integration/cluster_test_util.h"
#include "tests/util/process_test_util.h"
#include "tools/launch/emulated_hosts.h"
#include "worker/embedding_client.h"
#include "worker/ps_client.h"

namespace pstrain::test {
namespace {

namespace fs = std::filesystem;
using launch::EmulatedHosts;

constexpr int kShards = 2;
constexpr int kWorkers = 2;
constexpr int kSteps = 12;
constexpr int kExamplesPerWorker = 16;
constexpr int kIds = 40;  // feature ids 0..kIds-1
constexpr int kDim = 4;
// Children learn their part from these.
constexpr char kConfigEnv[] = "PSTRAIN_SPARSE_CONFIG";
constexpr char kWorkerEnv[] = "PSTRAIN_SPARSE_WORKER";
constexpr char kOutEnv[] = "PSTRAIN_SPARSE_OUT";

std::string Config(const std::string& ps_hosts, const std::string& worker_hosts, const std::string& transport,
                   const std::string& optimizer) {
  return absl::StrCat("cluster: {ps_hosts: [", ps_hosts, "], worker_hosts: [", worker_hosts, "]}\n",
                      "transport: ", transport, "\nconsistency: sync\n", "optimizer: {name: ", optimizer,
                      ", learning_rate: 0.3, l1: 0.001}\n", "model: {tables: [{name: ads, dim: ", kDim,
                      ", init_scale: 0.5}]}\n", "train: {init_seed: 11}\n",
                      "timeouts: {rpc_seconds: 30, heartbeat_seconds: 1, worker_lost_seconds: 60}\n");
}

// Example i of worker w's batch at `step`: a feature id, skewed towards the
// small ones and shared between workers and steps.
uint64_t ExampleId(int step, int worker, int i) {
  const uint64_t h = (static_cast<uint64_t>(step) * 7919 + worker * 104729 + i * 131) % 1000;
  return (h * h / 1000) % kIds;
}

float Target(uint64_t id, int d) { return std::sin(static_cast<float>(id) + d); }

// One step's gradient rows for `ids` (examples) given their pulled `rows`
// (one per key of `keys`): the mean over `batch` examples of
// d/drow 0.5 * |row - target(id)|^2.
std::vector<float> Gradients(const SparseKeys& keys, const std::vector<uint64_t>& ids, const std::vector<float>& rows,
                             int batch) {
  std::vector<float> grads(keys.keys.size() * kDim, 0.0f);
  for (size_t i = 0; i < ids.size(); ++i) {
    const int k = keys.index[i];
    for (int d = 0; d < kDim; ++d) grads[k * kDim + d] += (rows[k * kDim + d] - Target(ids[i], d)) / batch;
  }
  return grads;
}

std::vector<uint64_t> AllIds() {
  std::vector<uint64_t> ids(kIds);
  for (int i = 0; i < kIds; ++i) ids[i] = i;
  return ids;
}

// The child: worker `w` of the config's cluster; writes every row at the end.
absl::Status RunWorker(const std::string& config_path, int w, const std::string& out) {
  PSTRAIN_ASSIGN_OR_RETURN(ExperimentConfig config, LoadExperimentConfig(config_path));
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Transport> transport, CreateTransport(config.transport(), {}));
  std::vector<Variable> no_variables;
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<PsClient> ps,
                           PsClient::Create(config, w, transport.get(), &no_variables, {}));
  if (w == 0) PSTRAIN_RETURN_IF_ERROR(ps->Init(kSteps));
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<EmbeddingClient> tables,
                           EmbeddingClient::Create(config, w, transport.get()));
  for (int step = 0; step < kSteps; ++step) {
    std::vector<uint64_t> ids;
    for (int i = 0; i < kExamplesPerWorker; ++i) ids.push_back(ExampleId(step, w, i));
    const SparseKeys keys = tables->Deduplicate(0, ids);
    std::vector<float> rows(keys.keys.size() * kDim);
    // Worker 1 may come before the chief's Init: the shards then refuse.
    absl::Status pulled;
    for (int attempt = 0; attempt < 300; ++attempt) {
      pulled = tables->Pull(0, keys.keys, step, absl::Seconds(30), rows.data());
      if (pulled.code() != absl::StatusCode::kFailedPrecondition) break;
      absl::SleepFor(absl::Milliseconds(100));
    }
    PSTRAIN_RETURN_IF_ERROR(pulled);
    PSTRAIN_RETURN_IF_ERROR(tables->Push(0, step, keys.keys, Gradients(keys, ids, rows, kExamplesPerWorker).data()));
  }
  const SparseKeys all = tables->Deduplicate(0, AllIds());
  std::vector<float> rows(all.keys.size() * kDim);
  PSTRAIN_RETURN_IF_ERROR(tables->Pull(0, all.keys, kSteps, absl::Seconds(30), rows.data()));
  std::ofstream(out) << absl::StrJoin(rows, " ");
  WorkerReport report;
  report.set_worker(w);
  return ps->Done(report);
}

TEST(SparsePsWorker, Run) {
  const char* config = std::getenv(kConfigEnv);
  if (config == nullptr) GTEST_SKIP() << "a child of SparsePsTest only";
  int w = 0;
  ASSERT_TRUE(absl::SimpleAtoi(std::getenv(kWorkerEnv), &w));
  absl::Status s = RunWorker(config, w, std::getenv(kOutEnv));
  ASSERT_TRUE(s.ok()) << s;
}

// The same steps on one device with the whole batch: every row at the end.
std::vector<float> OneDeviceRows(const std::string& optimizer) {
  SparseTablesOptions o;
  o.sync = true;
  o.seed = 11;
  o.default_optimizer.set_name(optimizer);
  o.default_optimizer.set_learning_rate(0.3f);
  o.default_optimizer.set_l1(0.001f);
  o.total_steps = kSteps;
  EmbeddingTableConfig& t = o.tables.emplace_back();
  t.set_name("ads");
  t.set_dim(kDim);
  t.set_init_scale(0.5f);
  std::unique_ptr<SparseTables> tables = *SparseTables::Create(o);
  auto read = [&](const std::vector<uint64_t>& keys) {
    std::vector<float> rows;
    SparsePullRequest request;
    request.set_table("ads");
    request.set_num_ids(static_cast<int64_t>(keys.size()));
    OutgoingFrame out = OutgoingFrame::FromHeader(request);
    auto bytes = std::make_shared<std::vector<uint64_t>>(keys);
    out.chunks.push_back(ConstChunk{bytes->data(), bytes->size() * 8, bytes});
    IncomingFrame frame = IncomingFrame::FromOutgoing(std::move(out));
    tables->Pull(request, frame, [&rows](absl::Status s, OutgoingFrame answer) {
      ASSERT_TRUE(s.ok()) << s;
      IncomingFrame in = IncomingFrame::FromOutgoing(std::move(answer));
      rows.resize(in.remaining() / sizeof(float));
      ASSERT_TRUE(in.Read(rows.data(), in.remaining()).ok());
    });
    return rows;
  };
  for (int step = 0; step < kSteps; ++step) {
    std::vector<uint64_t> ids;
    for (int w = 0; w < kWorkers; ++w) {
      for (int i = 0; i < kExamplesPerWorker; ++i) ids.push_back(ExampleId(step, w, i));
    }
    const SparseKeys keys = DeduplicateIds(t, ids);
    const std::vector<float> grads = Gradients(keys, ids, read(keys.keys), kWorkers * kExamplesPerWorker);
    SparsePushRequest request;
    request.set_table("ads");
    request.set_num_ids(static_cast<int64_t>(keys.keys.size()));
    request.set_dim(kDim);
    request.set_step(step);
    OutgoingFrame out = OutgoingFrame::FromHeader(request);
    auto k = std::make_shared<std::vector<uint64_t>>(keys.keys);
    auto g = std::make_shared<std::vector<float>>(grads);
    out.chunks.push_back(ConstChunk{k->data(), k->size() * 8, k});
    out.chunks.push_back(ConstChunk{g->data(), g->size() * 4, g});
    IncomingFrame frame = IncomingFrame::FromOutgoing(std::move(out));
    EXPECT_TRUE(tables->Push(request, frame).ok());
  }
  return read(AllIds());
}

std::vector<float> ReadRows(const std::string& path) {
  std::vector<float> rows;
  for (absl::string_view v : absl::StrSplit(ReadFile(path), ' ', absl::SkipEmpty())) {
    float f = 0;
    EXPECT_TRUE(absl::SimpleAtof(v, &f)) << v;
    rows.push_back(f);
  }
  return rows;
}

class SparsePsTest : public ::testing::Test {
 protected:
  // Runs the cluster: shard i with the argv prefix `on[i]`, worker w with
  // `on[kShards + w]`; every process must exit 0 by itself. Then compares
  // each worker's rows with one device's.
  void RunAndCompare(const std::string& ps_hosts, const std::string& worker_hosts, const std::string& transport,
                     const std::string& optimizer, const std::vector<std::vector<std::string>>& on) {
    const std::string config = dir_.path() + "/sparse.yaml";
    WriteFile(config, Config(ps_hosts, worker_hosts, transport, optimizer));
    std::vector<Subprocess> roles;
    for (int r = 0; r < kShards + kWorkers; ++r) {
      const bool ps = r < kShards;
      const std::string capture = absl::StrCat(dir_.path(), "/", transport, r);
      fs::create_directories(capture);
      std::vector<std::string> argv = on[r];
      argv.push_back("/usr/bin/env");
      if (ps) {
        argv.insert(argv.end(), {BinDir() + "/pstrain-ps", "--config=" + config, "--job_name=ps",
                                 absl::StrCat("--task_index=", r)});
      } else {
        argv.insert(argv.end(), {absl::StrCat(kConfigEnv, "=", config), absl::StrCat(kWorkerEnv, "=", r - kShards),
                                 absl::StrCat(kOutEnv, "=", capture, "/rows"),
                                 fs::read_symlink("/proc/self/exe").string(), "--gtest_filter=SparsePsWorker.Run"});
      }
      roles.push_back(Spawn(argv, capture));
    }
    for (int r = 0; r < kShards + kWorkers; ++r) {
      std::optional<int> status = WaitForExit(roles[r].pid, std::chrono::minutes(2));
      EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << transport << " role " << r << ":\n"
                                                                             << roles[r].out() << roles[r].err();
    }
    const std::vector<float> expected = OneDeviceRows(optimizer);
    ASSERT_EQ(expected.size(), static_cast<size_t>(kIds * kDim));
    for (int w = 0; w < kWorkers; ++w) {
      const std::vector<float> rows = ReadRows(absl::StrCat(dir_.path(), "/", transport, kShards + w, "/rows"));
      ASSERT_EQ(rows.size(), expected.size()) << "worker " << w;
      for (size_t i = 0; i < rows.size(); ++i) {
        ASSERT_NEAR(rows[i], expected[i], 1e-5 + 1e-5 * std::abs(expected[i])) << "worker " << w << " value " << i;
      }
    }
  }

  TempDir dir_;
};

std::string Quoted(const std::string& hosts) {
  std::vector<std::string> quoted;
  for (absl::string_view h : absl::StrSplit(hosts, ',')) quoted.push_back(absl::StrCat("\"", h, "\""));
  return absl::StrJoin(quoted, ", ");
}

TEST_F(SparsePsTest, TwoWorkersSyncEqualOneDeviceOverGrpcOnLoopback) {
  const std::string hosts = FreeLoopbackHosts(kShards + kWorkers);
  std::vector<std::string> ps, workers;
  for (int i = 0; i < kShards; ++i) ps.push_back(NthHost(hosts, i));
  for (int i = 0; i < kWorkers; ++i) workers.push_back(NthHost(hosts, kShards + i));
  RunAndCompare(Quoted(absl::StrJoin(ps, ",")), Quoted(absl::StrJoin(workers, ",")), "grpc", "adagrad",
                std::vector<std::vector<std::string>>(kShards + kWorkers));
}

// Every role on a host of its own, over both transports, with FTRL.
TEST_F(SparsePsTest, TwoWorkersSyncEqualOneDeviceBetweenEmulatedHosts) {
  if (absl::Status s = launch::CanEmulateHosts(); !s.ok()) GTEST_SKIP() << s.message();
  std::vector<std::vector<std::string>> names;
  for (int i = 0; i < kShards + kWorkers; ++i) names.push_back({absl::StrCat("sparse-", i, ".pstrain.svc")});
  absl::StatusOr<std::unique_ptr<EmulatedHosts>> hosts = EmulatedHosts::Create(names, /*subnet=*/215 * 256 + 47);
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  std::vector<std::string> ps, workers;
  std::vector<std::vector<std::string>> on;
  for (int i = 0; i < kShards + kWorkers; ++i) {
    (i < kShards ? ps : workers).push_back(absl::StrCat("\"", (*hosts)->address(i), ":2222\""));
    on.push_back((*hosts)->RunOn(i));
  }
  for (const std::string transport : {"grpc", "ucx"}) {
    if (transport == "ucx" && !TransportRegistry().Find("ucx").ok()) continue;  // a build without UCX
    RunAndCompare(absl::StrJoin(ps, ", "), absl::StrJoin(workers, ", "), transport, "ftrl", on);
  }
}

}  // namespace
}  // namespace pstrain::test
