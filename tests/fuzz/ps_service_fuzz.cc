// Fuzz target: the PS request handlers (PsService::Handle, ps/ps_service.h)
// against a real PsShard of the tiny model (fuzz_util.h), in process.
//
// Feeds: input byte 0 picks the consistency policy (sync, async, ssp) and,
// for sync, replicas_to_aggregate 1 or all. A fresh shard 0 of 2 workers is
// created per input and initialised through a real Init request (the
// chief's: the tiny model's variables on shard 0), so later requests reach
// the push decoder, the optimizer, the policies and parked pulls. Then the
// input is a sequence of requests, each: a method byte (the methods of
// common/ps_rpc.h, or an unknown name), a split byte (how the frame is cut
// into pieces), and a record (uint16 length, wire frame: varint32 header
// length, header, payload) that IncomingFrame::FromWire splits. Files stay
// inside a scratch directory: a Checkpoint's path and an Init's
// restore.path are replaced by one file there (so a Checkpoint then an
// Init of a newer generation restores what was written). The Init sets up a
// small data ledger, so Chunk requests reach it (ps/shard/data_ledger.h). After the last
// request the shard's periodic Check runs a year ahead (expiring every
// parked pull) and CancelPendingPulls answers the rest, so nothing parks
// past its input and nothing accumulates across inputs.
// Asserts: every Responder is called exactly once; an error carries a
// message and no response; an OK response's header parses as the method's
// response type, a Pull's lists one version per tensor, and its payload is
// exactly the tensors' num_bytes, each dense tensor's bytes its elements
// times its dtype's size; a Chunk's answer is exactly one of a non-empty
// chunk, wait or end; a SparsePull's payload is exactly its rows; an unknown method is UNIMPLEMENTED; a responder
// is never called with the shard's lock held (it takes that lock itself:
// a deadlock would be reported as a timeout).
// Seeds: tests/fuzz/corpus/ps_service/ (shard 0's requests of a tiny
// in-process sync run, recorded by tests/fuzz/record_seeds.cc, in batches;
// crash-* regression inputs).
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/ps_rpc.h"
#include "ps/ps_service.h"
#include "ps/shard/shard.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/ps_fuzz_shard.h"

namespace pstrain::fuzz {
namespace {

struct Call {
  std::string method;
  int answers = 0;
};

int64_t DTypeSize(WireDType dtype) { return dtype == DT_FLOAT32 ? 4 : 2; }

// Checks one answer (see the header comment).
void CheckAnswer(PsShard& shard, Call& call, const absl::Status& status, OutgoingFrame response) {
  ++call.answers;
  FUZZ_CHECK(call.answers == 1, call.method, " answered ", call.answers, " times");
  (void)shard.Finished();  // takes the shard's lock: deadlocks if the responder was called holding it
  if (!status.ok()) {
    CheckErrorExplains(status, call.method);
    FUZZ_CHECK(response.header.empty() && response.chunks.empty(), call.method, " error ", status.ToString(),
               " came with a response");
    return;
  }
  IncomingFrame frame = IncomingFrame::FromOutgoing(std::move(response));
  auto parses = [&](google::protobuf::MessageLite* m) {
    FUZZ_CHECK(frame.ParseHeader(m), call.method, ": OK response header does not parse");
  };
  if (call.method == ps_rpc::kPull) {
    PullResponse r;
    parses(&r);
    FUZZ_CHECK(r.versions_size() == r.tensors_size(), "Pull: ", r.versions_size(), " versions for ", r.tensors_size(),
               " tensors");
    uint64_t total = 0;
    for (const TensorHeader& t : r.tensors()) {
      int64_t elements = 1;
      for (int64_t d : t.shape()) elements *= d;
      FUZZ_CHECK(t.sparse_count() != 0 || t.num_bytes() == static_cast<uint64_t>(elements * DTypeSize(t.dtype())),
                 "Pull: ", t.name(), " has ", t.num_bytes(), " bytes for ", elements, " elements");
      total += t.num_bytes();
    }
    FUZZ_CHECK(total == frame.payload_bytes(), "Pull: tensors say ", total, " bytes, payload has ",
               frame.payload_bytes());
    FUZZ_CHECK(frame.Consume(frame.payload_bytes(), [](const char*, size_t) {}).ok(), "Pull payload unreadable");
  } else if (call.method == ps_rpc::kPush) {
    PushResponse r;
    parses(&r);
    FUZZ_CHECK(r.accepted() >= 0 && r.dropped_stale() >= 0, "Push: negative counts");
  } else if (call.method == ps_rpc::kInit) {
    InitResponse r;
    parses(&r);
    FUZZ_CHECK(r.generation() >= 1, "Init: generation ", r.generation(), " after an accepted Init");
  } else if (call.method == ps_rpc::kStats) {
    StatsResponse r;
    parses(&r);
  } else if (call.method == ps_rpc::kCheckpoint) {
    CheckpointResponse r;
    parses(&r);
  } else if (call.method == ps_rpc::kHeartbeat) {
    HeartbeatResponse r;
    parses(&r);
  } else if (call.method == ps_rpc::kDone) {
    DoneResponse r;
    parses(&r);
  } else if (call.method == ps_rpc::kChunk) {
    ChunkResponse r;
    parses(&r);
    FUZZ_CHECK(int{r.has_chunk()} + int{r.wait()} + int{r.end()} == 1, "Chunk: not exactly one of chunk, wait, end");
    FUZZ_CHECK(!r.has_chunk() || (r.chunk().count() > 0 && r.chunk().first() >= 0), "Chunk: an empty chunk");
  } else if (call.method == ps_rpc::kSparsePull) {
    SparsePullResponse r;
    parses(&r);
    FUZZ_CHECK(r.num_ids() >= 0 &&
                   frame.payload_bytes() == static_cast<uint64_t>(r.num_ids() * r.dim() * DTypeSize(r.dtype())),
               "SparsePull: ", r.num_ids(), " rows of dim ", r.dim(), " in ", frame.payload_bytes(), " bytes");
  } else if (call.method == ps_rpc::kSparsePush) {
    SparsePushResponse r;
    parses(&r);
    FUZZ_CHECK(r.applied_rows() >= 0 && r.version() >= 0, "SparsePush: negative counts");
  } else {
    Fail(__FILE__, __LINE__, "unknown method", absl::StrCat("'", call.method, "' answered OK"));
  }
}

// `frame` with its header replaced (its payload copied).
IncomingFrame WithHeader(IncomingFrame& frame, const google::protobuf::MessageLite& header) {
  auto payload = std::make_shared<std::string>();
  (void)frame.Consume(frame.remaining(), [&](const char* p, size_t n) { payload->append(p, n); });
  std::vector<IncomingFrame::Piece> pieces;
  if (!payload->empty()) pieces.push_back({payload->data(), payload->size()});
  return IncomingFrame(header.SerializeAsString(), std::move(pieces), payload);
}

// Keeps the request's files inside the scratch directory.
IncomingFrame Sandboxed(std::string_view method, IncomingFrame frame) {
  const std::string file = ScratchDir() + "/shard-0.ckpt";
  if (method == ps_rpc::kCheckpoint) {
    CheckpointRequest r;
    if (frame.ParseHeader(&r) && !r.path().empty()) {
      r.set_path(file);
      return WithHeader(frame, r);
    }
  } else if (method == ps_rpc::kInit) {
    InitRequest r;
    if (frame.ParseHeader(&r) && !r.restore().path().empty()) {
      r.mutable_restore()->set_path(file);
      return WithHeader(frame, r);
    }
  }
  return frame;
}

}  // namespace
}  // namespace pstrain::fuzz

using namespace pstrain;        // NOLINT
using namespace pstrain::fuzz;  // NOLINT

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader in(data, size);
  const uint8_t options_byte = in.U8();
  static const char* kPolicies[] = {"sync", "async", "ssp", "sync"};
  PsShardOptions options = TinyShardOptions(0, kPolicies[options_byte % 4]);
  if (options.consistency == "sync" && (options_byte & 4)) options.replicas_to_aggregate = 1;
  absl::StatusOr<std::unique_ptr<PsShard>> created = PsShard::Create(options);
  FUZZ_CHECK(created.ok(), created.status().ToString());
  PsShard& shard = **created;
  PsService service(&shard);
  std::vector<std::unique_ptr<Call>> calls;
  auto handle = [&](std::string_view method, IncomingFrame frame) {
    calls.push_back(std::make_unique<Call>());
    Call* call = calls.back().get();
    call->method = std::string(method);
    service.Handle(method, std::move(frame), [&shard, call](absl::Status status, OutgoingFrame response) {
      CheckAnswer(shard, *call, status, std::move(response));
    });
  };

  handle(ps_rpc::kInit, TinyInit(0).Incoming());
  FUZZ_CHECK(calls.back()->answers == 1, "the chief's Init was not answered at once");
  FUZZ_CHECK(shard.MinVersion() == 0, "fresh shard at version ", shard.MinVersion());

  while (!in.empty()) {
    const uint8_t m = in.U8();
    const uint8_t split = in.U8();
    const absl::string_view wire = in.Record();
    const std::string method = m % 8 < 7 ? std::string(ps_rpc::kAll[m % 8]) : "Bogus";
    auto owned = std::make_shared<std::string>(wire);
    std::vector<IncomingFrame::Piece> pieces;
    const size_t cut = split == 0 ? owned->size() : split;
    for (size_t at = 0; at < owned->size(); at += cut) {
      pieces.push_back({owned->data() + at, std::min(cut, owned->size() - at)});
    }
    absl::StatusOr<IncomingFrame> frame = IncomingFrame::FromWire(std::move(pieces), owned);
    if (!frame.ok()) continue;
    handle(method, Sandboxed(method, *std::move(frame)));
    if (method == "Bogus") FUZZ_CHECK(calls.back()->answers == 1, "unknown method not answered");
  }
  // Nothing parks past its input: expire, then cancel, whatever still waits.
  absl::Status check = shard.Check(absl::Now() + absl::Hours(24 * 365));
  CheckErrorExplains(check, "Check");
  shard.CancelPendingPulls(absl::CancelledError("fuzz input done"));
  for (const auto& call : calls) {
    FUZZ_CHECK(call->answers == 1, call->method, " was answered ", call->answers, " times by the end");
  }
  return 0;
}
