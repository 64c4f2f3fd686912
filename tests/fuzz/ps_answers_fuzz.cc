// Fuzz target: a worker's reading of the PS shards' answers to its pulls
// (PsClient::Pull, worker/ps_client.h; EmbeddingClient::Pull,
// worker/embedding_client.h): what a broken or hostile shard can send.
//
// Feeds: two shards of the tiny model (fuzz_util.h) served in process by a
// handler that answers every request from the input; the clients reach them
// through an InprocTransport, which answers inline, so one input is one
// thread's deterministic run. Input byte 0 picks the call: a whole-model
// Pull by a dense client with compression none, fp16 or bf16, or a sparse
// pull of one table row (wire dtype fp32 or bf16; one key, so one request).
// Byte 1 is the pull's min_version. Then each request the call sends is
// answered with the next answer of the input: a status byte (OK, or
// UNAVAILABLE, ABORTED or INTERNAL), a split byte (the payload's piece
// size; 0: one piece) and a record (uint16 length, wire frame: varint32
// header length, header, payload; bytes that do not split as a frame become
// the header of an answer without payload). Past the input's end a request
// gets an empty OK answer.
// Asserts: the call returns (no crash, no read past a buffer under ASan)
// with OK or an error that says what was wrong. A dense pull that returns
// OK read every answer's tensors into the parts they name, decoded from the
// wire dtype and equal bit for bit, and returned the smallest version the
// answers carried. A sparse pull that returns OK had exactly one row of the
// table's dim in the dtype asked for.
// Seeds: tests/fuzz/corpus/ps_answers/ (the answers of worker 0's pulls in
// a tiny in-process sync run, recorded by tests/fuzz/record_seeds.cc, and a
// sparse answer of each wire dtype; crash-* regression inputs).
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/compression/compression.h"
#include "common/ps_rpc.h"
#include "common/transport/inproc/inproc_transport.h"
#include "proto/ps.pb.h"
#include "tests/fuzz/fuzz_util.h"
#include "worker/embedding_client.h"
#include "worker/ps_client.h"

namespace pstrain::fuzz {
namespace {

constexpr int kDim = 4;

// One answer given, as the client got it.
struct Given {
  std::string method;
  absl::Status status;
  std::string header;
  std::string payload;
};

// Answers every request with the next answer of the current input.
class HostileShard : public Handler {
 public:
  void Start(Reader* in, std::vector<Given>* given) {
    in_ = in;
    given_ = given;
  }
  void Handle(std::string_view method, IncomingFrame, Responder respond) override {
    Given g{std::string(method), absl::OkStatus(), "", ""};
    const uint8_t code = in_->U8();
    const uint8_t split = in_->U8();
    const std::string wire(in_->Record());
    if (code % 8 == 5) g.status = absl::UnavailableError("the shard is gone");
    if (code % 8 == 6) g.status = absl::AbortedError("the shard was restored");
    if (code % 8 == 7) g.status = absl::InternalError("the shard failed");
    OutgoingFrame answer;
    auto owned = std::make_shared<std::string>(wire);
    absl::StatusOr<IncomingFrame> frame =
        IncomingFrame::FromWire({{owned->data(), owned->size()}}, std::shared_ptr<const void>(owned));
    if (frame.ok()) {
      g.header = frame->header();
      (void)frame->Consume(frame->remaining(), [&](const char* p, size_t n) { g.payload.append(p, n); });
    } else {
      g.header = wire;
    }
    answer.header = g.header;
    auto payload = std::make_shared<std::string>(g.payload);
    const size_t cut = split == 0 ? payload->size() : split;
    for (size_t at = 0; at < payload->size(); at += cut) {
      answer.chunks.push_back({payload->data() + at, std::min(cut, payload->size() - at), payload});
    }
    given_->push_back(g);
    if (g.status.ok()) {
      respond(absl::OkStatus(), std::move(answer));
    } else {
      respond(g.status, {});
    }
  }

 private:
  Reader* in_ = nullptr;
  std::vector<Given>* given_ = nullptr;
};

// The tiny model's clients and shards, made once.
struct World {
  World() {
    ExperimentConfig config = TinyModelConfig();
    for (int s = 0; s < kTinyShards; ++s) {
      const std::string address = absl::StrCat("shard", s, ":1");
      config.mutable_cluster()->add_ps_hosts(address);
      auto server = transport.Serve(address, &shards[s]);
      FUZZ_CHECK(server.ok(), server.status().ToString());
      servers.push_back(*std::move(server));
    }
    for (const VariableShape& v : TinyModelVariables()) {
      variables.push_back({v.name, Tensor(v.shape), Tensor(v.shape)});
    }
    for (const char* compression : {"none", "fp16", "bf16"}) {
      config.set_compression(compression);
      auto client = PsClient::Create(config, /*worker_index=*/0, &transport, &variables, TinyModelParts());
      FUZZ_CHECK(client.ok(), client.status().ToString());
      dense.push_back(*std::move(client));
    }
    config.set_compression("none");
    EmbeddingTableConfig* table = config.mutable_model()->add_tables();
    table->set_name("ids");
    table->set_dim(kDim);
    for (auto dtype : {EmbeddingTableConfig::fp32, EmbeddingTableConfig::bf16}) {
      table->set_wire_dtype(dtype);
      auto client = EmbeddingClient::Create(config, /*worker_index=*/0, &transport);
      FUZZ_CHECK(client.ok(), client.status().ToString());
      sparse.push_back(*std::move(client));
    }
  }

  InprocTransport transport;
  HostileShard shards[kTinyShards];
  std::vector<std::unique_ptr<Server>> servers;
  std::vector<Variable> variables;
  std::vector<std::unique_ptr<PsClient>> dense;
  std::vector<std::unique_ptr<EmbeddingClient>> sparse;
};

// After a dense pull returned OK: every answer's tensors are in their
// parts, and `version` is the smallest version answered.
void CheckDensePull(const PsClient& client, const std::vector<Variable>& variables, const std::vector<Given>& given,
                    int64_t version) {
  int64_t smallest = INT64_MAX;
  for (const Given& g : given) {
    FUZZ_CHECK(g.status.ok(), "OK although a shard answered ", g.status.ToString());
    PullResponse header;
    FUZZ_CHECK(header.ParseFromString(g.header), "OK although an answer's header does not parse");
    FUZZ_CHECK(header.versions_size() == header.tensors_size(), "OK with ", header.versions_size(), " versions for ",
               header.tensors_size(), " tensors");
    size_t at = 0;
    for (int k = 0; k < header.tensors_size(); ++k) {
      const TensorHeader& h = header.tensors(k);
      smallest = std::min(smallest, header.versions(k));
      auto part = std::find_if(client.parts().begin(), client.parts().end(),
                               [&](const VariablePart& p) { return p.name == h.name(); });
      FUZZ_CHECK(part != client.parts().end(), "OK with an answer naming ", h.name());
      FUZZ_CHECK(at + h.num_bytes() <= g.payload.size(), "OK with ", h.name(), " past its answer's payload");
      std::vector<float> decoded(part->count);
      DecodeFloats(h.dtype(), g.payload.data() + at, decoded.size(), decoded.data());
      const float* value = variables[part->variable].value.data() + part->offset;
      FUZZ_CHECK(std::memcmp(decoded.data(), value, decoded.size() * sizeof(float)) == 0, h.name(),
                 " does not hold what its answer carried");
      at += h.num_bytes();
    }
  }
  FUZZ_CHECK(smallest == INT64_MAX || smallest == version, "returned version ", version, ", the answers' smallest is ",
             smallest);
}

// After a sparse pull returned OK: one answer, one row of kDim in `dtype`.
void CheckSparsePull(const std::vector<Given>& given, WireDType dtype) {
  FUZZ_CHECK(given.size() == 1, "one key, ", given.size(), " answers");
  SparsePullResponse header;
  FUZZ_CHECK(header.ParseFromString(given[0].header), "OK although the answer's header does not parse");
  FUZZ_CHECK(header.dtype() == dtype && header.num_ids() == 1 && header.dim() == kDim, "OK with ", header.num_ids(),
             " rows of dim ", header.dim(), " in dtype ", header.dtype());
  FUZZ_CHECK(given[0].payload.size() == kDim * WireDTypeSize(dtype), "OK with ", given[0].payload.size(), " bytes");
}

}  // namespace
}  // namespace pstrain::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pstrain;
  using namespace pstrain::fuzz;
  static World* world = new World();
  Reader in(data, size);
  const int call = in.U8() % 5;
  const int64_t min_version = in.U8();
  std::vector<Given> given;
  for (HostileShard& shard : world->shards) shard.Start(&in, &given);
  if (call < 3) {
    PsClient& client = *world->dense[call];
    absl::StatusOr<int64_t> pulled = client.Pull(min_version, absl::Seconds(1), /*wait_for_ready=*/false, 0);
    CheckErrorExplains(pulled.status(), "Pull");
    if (pulled.ok()) CheckDensePull(client, world->variables, given, *pulled);
  } else {
    EmbeddingClient& client = *world->sparse[call - 3];
    std::vector<float> row(kDim);
    const absl::Status pulled = client.Pull(0, {7}, min_version, absl::Seconds(1), row.data());
    CheckErrorExplains(pulled, "sparse Pull");
    if (pulled.ok()) CheckSparsePull(given, call == 3 ? DT_FLOAT32 : DT_BFLOAT16);
  }
  return 0;
}
