// Writes the recorded seed corpora of the fuzz targets (docs/FUZZING.md):
// runs tiny in-process clusters (tests/worker/in_process_cluster.h: every
// role a thread, the binaries' code) over a recording transport, an
// in-process transport whose servers write down every request they receive
// (method and wire bytes) before handling it, and keeps the checkpoints the
// run wrote.
//
//   1. the tiny model (tests/fuzz/fuzz_util.h), parameter_server, sync,
//      2 PS shards, 2 workers, 4 steps, a checkpoint every 2 steps;
//   2. the same model, allreduce over Gloo (its rendezvous goes through the
//      chief's key-value store), 2 workers, 2 steps.
// Output, under <corpus dir> (default: tests/fuzz/corpus of the source tree):
//   frame/recorded-*         requests of both runs (a split byte and a read seed in front)
//   ps_service/recorded-*    shard 0's requests in order, in batches, as ps_service_fuzz reads them
//   kv_store/recorded-*      the key-value requests of run 2
//   checkpoint/recorded-*    each committed checkpoint: MANIFEST and both shard files
//   ps_answers/built-*       shards' answers to worker 0's pulls, built (WriteAnswerSeeds)
// Files named recorded-* are replaced; others (hand-written seeds, crash-*
// regression inputs) are kept. It also checks that the run's variables are
// the tiny model the fuzz targets install, and fails if not.
//
// Usage: pstrain_fuzz_record_seeds [corpus dir]
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/compression/compression.h"
#include "common/durable_file.h"
#include "common/ps_rpc.h"
#include "common/transport/inproc/inproc_transport.h"
#include "common/transport/transport.h"
#include "proto/ps.pb.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/worker/in_process_cluster.h"

namespace pstrain::fuzz {
namespace {

namespace fs = std::filesystem;

struct Request {
  std::string address;
  std::string method;
  std::string wire;  // varint32 header length, header, payload
};

class Recorder {
 public:
  void Add(Request r) {
    absl::MutexLock lock(&mu_);
    requests_.push_back(std::move(r));
  }
  std::vector<Request> Take() {
    absl::MutexLock lock(&mu_);
    return std::move(requests_);
  }

 private:
  absl::Mutex mu_;
  std::vector<Request> requests_ ABSL_GUARDED_BY(mu_);
};

// Writes each request down, then hands an identical frame to `inner`.
class RecordingHandler : public Handler {
 public:
  RecordingHandler(std::string address, Handler* inner, Recorder* recorder)
      : address_(std::move(address)), inner_(inner), recorder_(recorder) {}
  void Handle(std::string_view method, IncomingFrame request, Responder respond) override {
    auto payload = std::make_shared<std::string>();
    (void)request.Consume(request.remaining(), [&](const char* p, size_t n) { payload->append(p, n); });
    recorder_->Add({address_, std::string(method), EncodeWireHeader(request.header()) + *payload});
    std::vector<IncomingFrame::Piece> pieces;
    if (!payload->empty()) pieces.push_back({payload->data(), payload->size()});
    inner_->Handle(method, IncomingFrame(request.header(), std::move(pieces), payload), std::move(respond));
  }

 private:
  const std::string address_;
  Handler* const inner_;
  Recorder* const recorder_;
};

class RecordingTransport : public Transport {
 public:
  explicit RecordingTransport(Recorder* recorder) : recorder_(recorder) {}
  absl::StatusOr<std::unique_ptr<Channel>> Connect(const std::string& address) override {
    return inner_.Connect(address);
  }
  absl::StatusOr<std::unique_ptr<Server>> Serve(const std::string& address, Handler* handler) override {
    auto recording = std::make_unique<RecordingHandler>(address, handler, recorder_);
    absl::StatusOr<std::unique_ptr<Server>> server = inner_.Serve(address, recording.get());
    if (server.ok()) {
      absl::MutexLock lock(&mu_);
      handlers_.push_back(std::move(recording));  // outlives the server: kept with the transport
    }
    return server;
  }

 private:
  Recorder* const recorder_;
  InprocTransport inner_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<RecordingHandler>> handlers_ ABSL_GUARDED_BY(mu_);
};

Recorder* TheRecorder() {
  static Recorder* recorder = new Recorder;
  return recorder;
}

const bool kRegistered = RegisterTransport("fuzz_recording", [](const TransportOptions&) {
  return std::unique_ptr<Transport>(new RecordingTransport(TheRecorder()));
});

void Write(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Removes the recorded-* files of `dir` (a new recording replaces them).
void ClearRecorded(const fs::path& dir) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (absl::StartsWith(e.path().filename().string(), "recorded-")) fs::remove(e.path());
  }
}

uint8_t MethodByte(const std::string& method) {
  for (size_t i = 0; i < ps_rpc::kAll.size(); ++i) {
    if (ps_rpc::kAll[i] == method) return static_cast<uint8_t>(i);
  }
  return 7;
}

[[noreturn]] void Die(const std::string& why) {
  std::fprintf(stderr, "record_seeds: %s\n", why.c_str());
  std::exit(1);
}

// The address of the shard whose Init installs shard 0's parts (and checks
// they are the tiny model's).
std::string ShardZeroAddress(const std::vector<Request>& requests) {
  std::vector<std::string> expected;
  for (const VariablePart& p : TinyModelParts()) {
    if (p.shard == 0) expected.push_back(p.name);
  }
  for (const Request& r : requests) {
    if (r.method != ps_rpc::kInit) continue;
    absl::StatusOr<IncomingFrame> frame = IncomingFrame::FromWire({{r.wire.data(), r.wire.size()}}, nullptr);
    InitRequest init;
    if (!frame.ok() || !frame->ParseHeader(&init)) Die("a recorded Init does not parse");
    std::vector<std::string> names;
    for (const TensorHeader& t : init.tensors()) names.push_back(t.name());
    if (names == expected) return r.address;
  }
  Die("no recorded Init installs shard 0 of the tiny model (tests/fuzz/fuzz_util.h): update TinyModelVariables");
}

// One pull answer of the tiny model's shard `shard` at version 3, in `dtype`,
// as ps_answers_fuzz reads it (OK, one piece, the record); without versions
// when `versions` is false.
std::string DenseAnswer(int shard, WireDType dtype, bool versions = true) {
  PullResponse header;
  std::string payload;
  for (const VariablePart& p : TinyModelParts()) {
    if (p.shard != shard) continue;
    std::vector<float> values(p.count);
    for (int64_t i = 0; i < p.count; ++i) values[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
    std::string bytes(p.count * WireDTypeSize(dtype), '\0');
    EncodeFloats(dtype, values.data(), values.size(), bytes.data());
    TensorHeader* h = header.add_tensors();
    h->set_name(p.name);
    for (int64_t d : p.shape) h->add_shape(d);
    h->set_dtype(dtype);
    h->set_num_bytes(bytes.size());
    if (versions) header.add_versions(3);
    payload += bytes;
  }
  return std::string(2, '\0') + EncodeRecord(EncodeWireHeader(header.SerializeAsString()) + payload);
}

// One sparse pull answer of one row of dim 4 in `dtype` (`rows` rows of payload).
std::string SparseAnswer(WireDType dtype, int rows = 1) {
  SparsePullResponse header;
  header.set_dim(4);
  header.set_num_ids(1);
  header.set_dtype(dtype);
  const std::vector<float> values = {0.5f, -1.0f, 2.0f, 0.125f};
  std::string bytes(rows * 4 * WireDTypeSize(dtype), '\0');
  if (rows > 0) EncodeFloats(dtype, values.data(), values.size(), bytes.data());
  return std::string(2, '\0') + EncodeRecord(EncodeWireHeader(header.SerializeAsString()) + bytes);
}

// ps_answers: built, not recorded (the shards' answers as the tiny model's
// worker 0 gets them): a whole-model pull at version 3 in each dense dtype,
// the same with shard 1 lost, a one-row sparse answer in each wire dtype;
// and the regression inputs of two answers workers once misread.
int WriteAnswerSeeds(const fs::path& dir) {
  const WireDType dense[] = {DT_FLOAT32, DT_FLOAT16, DT_BFLOAT16};
  for (int call = 0; call < 3; ++call) {
    Write(dir / absl::StrCat("built-pull-", call),
          std::string{static_cast<char>(call), 3} + DenseAnswer(0, dense[call]) + DenseAnswer(1, dense[call]));
  }
  const std::string lost = std::string{5, 0} + EncodeRecord("");
  Write(dir / "built-pull-shard-lost", std::string{0, 3} + DenseAnswer(0, DT_FLOAT32) + lost);
  Write(dir / "built-sparse-fp32", std::string{3, 0} + SparseAnswer(DT_FLOAT32));
  Write(dir / "built-sparse-bf16", std::string{4, 0} + SparseAnswer(DT_BFLOAT16));
  Write(dir / "crash-pull-without-versions",
        std::string{0, 3} + DenseAnswer(0, DT_FLOAT32, /*versions=*/false) + DenseAnswer(1, DT_FLOAT32));
  Write(dir / "crash-sparse-unknown-dtype", std::string{3, 0} + SparseAnswer(static_cast<WireDType>(7), 0));
  return 8;
}
}  // namespace
}  // namespace pstrain::fuzz

int main(int argc, char** argv) {
  using namespace pstrain;        // NOLINT
  using namespace pstrain::fuzz;  // NOLINT
  const fs::path corpus = argc > 1 ? fs::path(argv[1]) : fs::path(PSTRAIN_TEST_SOURCE_DIR) / "tests/fuzz/corpus";
  const fs::path ckpt_dir = fs::temp_directory_path() / absl::StrCat("pstrain-record-seeds-", getpid());
  fs::remove_all(ckpt_dir);

  // 1. parameter_server, sync, with checkpoints.
  ExperimentConfig ps_run = TinyModelConfig();
  for (int i = 0; i < kTinyShards; ++i) ps_run.mutable_cluster()->add_ps_hosts(absl::StrCat("ps", i, ":1"));
  for (int i = 0; i < kTinyWorkers; ++i) ps_run.mutable_cluster()->add_worker_hosts(absl::StrCat("w", i, ":1"));
  ps_run.set_variable_update("parameter_server");
  ps_run.mutable_checkpoint()->set_dir(ckpt_dir.string());
  ps_run.mutable_checkpoint()->set_every_steps(2);
  ps_run.mutable_checkpoint()->set_keep(3);
  absl::StatusOr<ClusterRun> run = RunClusterOverTransport(ps_run, "fuzz_recording");
  if (!run.ok()) Die(absl::StrCat("the parameter_server run failed: ", run.status().ToString()));
  const std::vector<Request> ps_requests = TheRecorder()->Take();

  // 2. allreduce: the key-value store's traffic.
  ExperimentConfig ar_run = TinyModelConfig();
  for (int i = 0; i < kTinyWorkers; ++i) ar_run.mutable_cluster()->add_worker_hosts(absl::StrCat("w", i, ":1"));
  ar_run.set_variable_update("allreduce");
  ar_run.mutable_train()->set_steps(2);
  run = RunClusterOverTransport(ar_run, "fuzz_recording");
  if (!run.ok()) Die(absl::StrCat("the allreduce run failed: ", run.status().ToString()));
  const std::vector<Request> ar_requests = TheRecorder()->Take();

  for (const char* target : {"frame", "ps_service", "kv_store", "checkpoint"}) ClearRecorded(corpus / target);
  int counts[4] = {0, 0, 0, 0};

  // frame: at most 4 of each method, each with another split.
  std::map<std::string, int> per_method;
  for (const std::vector<Request>* list : {&ps_requests, &ar_requests}) {
    for (const Request& r : *list) {
      int& n = per_method[r.method];
      if (n >= 4) continue;
      const std::string prefix = {static_cast<char>(n % 3), static_cast<char>(17 * n + 1)};
      Write(corpus / "frame" / absl::StrCat("recorded-", r.method, "-", n++), prefix + r.wire);
      ++counts[0];
    }
  }

  // ps_service: shard 0's requests in order, 12 per file (the first file
  // starts with the chief's Init, answered as a retry), under sync; the
  // last batch again under async and ssp.
  const std::string shard0 = ShardZeroAddress(ps_requests);
  std::vector<std::string> batches(1);
  int in_batch = 0;
  for (const Request& r : ps_requests) {
    if (r.address != shard0) continue;
    if (in_batch == 12) {
      batches.emplace_back();
      in_batch = 0;
    }
    batches.back() += std::string{static_cast<char>(MethodByte(r.method)), 0} + EncodeRecord(r.wire);
    ++in_batch;
  }
  for (size_t b = 0; b < batches.size(); ++b) {
    Write(corpus / "ps_service" / absl::StrCat("recorded-sync-", b), std::string(1, '\0') + batches[b]);
    ++counts[1];
  }
  Write(corpus / "ps_service" / "recorded-async", std::string(1, '\1') + batches.back());
  Write(corpus / "ps_service" / "recorded-ssp", std::string(1, '\2') + batches.back());
  counts[1] += 2;

  // kv_store: the whole rendezvous in one input, and each request alone.
  std::string all_kv;
  int kv = 0;
  for (const Request& r : ar_requests) {
    const char method = r.method == "KvSet" ? 0 : r.method == "KvGet" ? 1 : r.method == "KvWait" ? 2 : -1;
    if (method < 0) continue;
    const std::string one = std::string(1, method) + EncodeRecord(r.wire);
    all_kv += one;
    if (kv < 8) Write(corpus / "kv_store" / absl::StrCat("recorded-", r.method, "-", kv), one);
    ++kv;
  }
  if (kv == 0) Die("the allreduce run made no key-value requests");
  Write(corpus / "kv_store" / "recorded-rendezvous", all_kv);
  counts[2] = std::min(kv, 8) + 1;

  // checkpoint: every committed checkpoint of run 1.
  for (const fs::directory_entry& e : fs::directory_iterator(ckpt_dir)) {
    const fs::path manifest = e.path() / "MANIFEST";
    if (!fs::exists(manifest)) continue;
    std::string seed;
    for (const fs::path& f : {manifest, e.path() / "shard-0-of-2.ckpt", e.path() / "shard-1-of-2.ckpt"}) {
      absl::StatusOr<std::string> bytes = ReadWholeFile(f.string());
      if (!bytes.ok()) Die(bytes.status().ToString());
      if (bytes->size() > 0xffff) Die(absl::StrCat(f.string(), " is too large for a record"));
      seed += EncodeRecord(*bytes);
    }
    Write(corpus / "checkpoint" / absl::StrCat("recorded-", e.path().filename().string()), seed);
    ++counts[3];
  }
  if (counts[3] == 0) Die("the parameter_server run committed no checkpoint");
  // Every shard's variables are the tiny model's (checkpoint_fuzz restores them).
  for (const fs::directory_entry& e : fs::directory_iterator(ckpt_dir)) {
    CheckpointManifest manifest;
    absl::StatusOr<std::string> bytes = ReadWholeFile((e.path() / "MANIFEST").string());
    if (!bytes.ok() || !manifest.ParseFromString(*bytes)) continue;
    const std::vector<VariablePart> parts = TinyModelParts();
    bool same = manifest.parts_size() == static_cast<int>(parts.size());
    for (int i = 0; same && i < manifest.parts_size(); ++i) {
      same = manifest.parts(i).name() == parts[i].name && manifest.parts(i).shard() == parts[i].shard &&
             Shape(manifest.parts(i).shape().begin(), manifest.parts(i).shape().end()) == parts[i].shape;
    }
    if (!same) Die("the run's variables are not the tiny model's (tests/fuzz/fuzz_util.h): update TinyModelVariables");
  }
  fs::remove_all(ckpt_dir);
  const int answers = WriteAnswerSeeds(corpus / "ps_answers");
  std::printf("record_seeds: wrote %d frame, %d ps_service, %d kv_store, %d checkpoint, %d ps_answers seeds under %s\n",
              counts[0], counts[1], counts[2], counts[3], answers, corpus.c_str());
  return 0;
}
