// Fuzz target: the rendezvous key-value store's requests
// (KvStoreService::Handle, worker/collective/kv_store.h).
//
// Feeds: a fresh KvStoreService per input, then a sequence of requests, each
// a method byte (KvSet, KvGet, KvWait or an unknown name) and a record
// (uint16 length, wire frame: varint32 header length, KvRequest header,
// payload) that IncomingFrame::FromWire splits. Waits longer than 50 ms are
// cut to 50 ms (the store's reaper answers them at the deadline; inputs are
// not meant to sleep), and after the last request CancelPending answers
// whatever still waits, so nothing outlives its input.
// Asserts: every Responder is called exactly once; an error carries a
// message and no response; an OK answer's header parses as a KvResponse; a
// KvGet answered OK returns the value last set for its key, a KvWait an
// empty value; an unknown method is UNIMPLEMENTED.
// Seeds: tests/fuzz/corpus/kv_store/ (the key-value requests of a tiny
// in-process allreduce run, recorded by tests/fuzz/record_seeds.cc; crash-*
// regression inputs).
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "tests/fuzz/fuzz_util.h"
#include "worker/collective/kv_store.h"
#include "worker/collective/kv_store.pb.h"

using namespace pstrain;        // NOLINT
using namespace pstrain::fuzz;  // NOLINT

namespace {

struct Call {
  std::string method;
  std::string key;  // KvGet's
  std::atomic<int> answers{0};
};

// The values set so far (what a KvGet must return).
struct Model {
  absl::Mutex mu;
  std::map<std::string, std::string> values ABSL_GUARDED_BY(mu);
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const char* kMethods[] = {"KvSet", "KvGet", "KvWait", "KvBogus"};
  Reader in(data, size);
  Model model;
  std::vector<std::unique_ptr<Call>> calls;
  {
    KvStoreService service;
    while (!in.empty()) {
      const std::string method = kMethods[in.U8() % 4];
      auto owned = std::make_shared<std::string>(in.Record());
      absl::StatusOr<IncomingFrame> frame = IncomingFrame::FromWire({{owned->data(), owned->size()}}, owned);
      if (!frame.ok()) continue;
      collective::KvRequest request;
      const bool parses = frame->ParseHeader(&request);
      if (parses && request.wait_ms() > 50) {
        request.set_wait_ms(50);
        frame = IncomingFrame(request.SerializeAsString(), {}, nullptr);
      }
      calls.push_back(std::make_unique<Call>());
      Call* call = calls.back().get();
      call->method = method;
      if (parses && request.keys_size() == 1) call->key = request.keys(0);
      if (method == "KvSet" && parses && request.keys_size() == 1) {
        absl::MutexLock lock(&model.mu);
        model.values[request.keys(0)] = request.value();
      }
      service.Handle(method, *std::move(frame), [call, &model](absl::Status status, OutgoingFrame response) {
        const int answers = ++call->answers;
        FUZZ_CHECK(answers == 1, call->method, " answered ", answers, " times");
        if (!status.ok()) {
          CheckErrorExplains(status, call->method);
          FUZZ_CHECK(response.header.empty() && response.chunks.empty(), call->method, " error came with a response");
          if (call->method == "KvBogus") FUZZ_CHECK(absl::IsUnimplemented(status), status.ToString());
          return;
        }
        FUZZ_CHECK(call->method != "KvBogus", "unknown method answered OK");
        collective::KvResponse r;
        FUZZ_CHECK(r.ParseFromString(response.header), call->method, ": OK response does not parse");
        if (call->method == "KvGet") {
          absl::MutexLock lock(&model.mu);
          auto it = model.values.find(call->key);
          FUZZ_CHECK(it != model.values.end(), "KvGet of '", call->key, "' answered OK though it was never set");
          FUZZ_CHECK(r.value() == it->second, "KvGet of '", call->key, "' returned another value");
        } else if (call->method == "KvWait") {
          FUZZ_CHECK(r.value().empty(), "KvWait returned a value");
        }
      });
    }
    service.CancelPending(absl::CancelledError("fuzz input done"));
    for (const auto& call : calls) {
      FUZZ_CHECK(call->answers == 1, call->method, " was answered ", call->answers.load(), " times by the end");
    }
  }
  return 0;
}
