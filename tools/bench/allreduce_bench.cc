#include "tools/bench/allreduce_bench.h"

#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/compression/compression.h"
#include "common/tensor.h"
#include "tools/bench/memcpy_bandwidth.h"
#include "worker/collective/kv_store.h"
#include "worker/fused_allreduce.h"

namespace pstrain {
namespace {

constexpr int kWarmupCalls = 2;

// `variables` gradients of equal size (the last takes the remainder) holding
// `bytes` together, adjacent in one buffer as a model lays them out.
std::vector<Tensor> AdjacentGradients(int64_t bytes, int variables) {
  const int64_t total = bytes / static_cast<int64_t>(sizeof(float));
  Tensor arena(Shape{total});
  std::fill_n(arena.data(), total, 1.0f);
  std::vector<Tensor> gradients;
  const int64_t each = total / variables;
  int64_t offset = 0;
  for (int v = 0; v < variables; ++v) {
    const int64_t n = v + 1 == variables ? total - offset : each;
    gradients.emplace_back(
        Shape{n}, DType::kFloat32,
        Buffer::Borrow(arena.data() + offset, static_cast<size_t>(n) * sizeof(float), arena.buffer()));
    offset += n;
  }
  return gradients;
}

// Runs `call` kWarmupCalls times, a barrier, then `iterations` times; the
// timed loop's seconds.
absl::StatusOr<double> TimeLoop(Collective* collective, int iterations, const std::function<absl::Status()>& call) {
  for (int i = 0; i < kWarmupCalls; ++i) {
    if (absl::Status s = call(); !s.ok()) return s;
  }
  if (absl::Status s = collective->Barrier(); !s.ok()) return s;
  const absl::Time start = absl::Now();
  for (int i = 0; i < iterations; ++i) {
    if (absl::Status s = call(); !s.ok()) return s;
  }
  return absl::ToDoubleSeconds(absl::Now() - start);
}

}  // namespace

absl::Status ValidateAllReduceBenchOptions(const AllReduceBenchOptions& o) {
  if (o.backend != "gloo" && o.backend != "mpi") {
    return absl::InvalidArgumentError(absl::StrCat("--backend: gloo or mpi, not '", o.backend, "'"));
  }
  if (o.ranks < 1) return absl::InvalidArgumentError(absl::StrCat("--ranks ", o.ranks, " < 1"));
  if (o.iterations < 1) return absl::InvalidArgumentError(absl::StrCat("--iterations ", o.iterations, " < 1"));
  if (o.variables < 1) return absl::InvalidArgumentError(absl::StrCat("--variables ", o.variables, " < 1"));
  if (o.bytes <= 0 || o.bytes % (4 * o.variables) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--bytes ", o.bytes,
                                                   " must be > 0 and a multiple of 4 x --variables (", 4 * o.variables,
                                                   "): float32 gradients"));
  }
  if (absl::StatusOr<Compression> c = ParseCompression(o.compression); !c.ok() || *c == Compression::kTopK) {
    return absl::InvalidArgumentError(
        absl::StrCat("--compression: none, fp16 or bf16 (what all-reduce supports), not '", o.compression, "'"));
  }
  if (o.fusion_threshold_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--fusion_threshold_bytes ", o.fusion_threshold_bytes, " < 0"));
  }
  return absl::OkStatus();
}

absl::StatusOr<RankSeconds> TimeRank(Collective* collective,
                                     const std::function<absl::Status(float* data, size_t count)>& reference,
                                     const AllReduceBenchOptions& options) {
  RankSeconds seconds;
  // Values stay finite for many calls (they grow by `ranks` per call and
  // saturate at inf, which costs the same; never denormal).
  const size_t count = static_cast<size_t>(options.bytes / 4);
  std::vector<float> data(count, 1.0f);
  absl::StatusOr<double> ref = TimeLoop(collective, options.iterations, [&] { return reference(data.data(), count); });
  if (!ref.ok()) return ref.status();
  seconds.reference = *ref;

  std::vector<Tensor> gradients = AdjacentGradients(options.bytes, options.variables);
  absl::StatusOr<std::unique_ptr<FusedAllReducer>> reducer =
      FusedAllReducer::Create(collective, {gradients}, options.fusion_threshold_bytes, options.ranks,
                              DenseWireDType(*ParseCompression(options.compression)));
  if (!reducer.ok()) return reducer.status();
  seconds.fusion_buckets = static_cast<int>((*reducer)->plan().buckets.size());
  seconds.buckets_in_place = (*reducer)->buckets_in_place();
  absl::StatusOr<double> strategy = TimeLoop(collective, options.iterations, [&] {
    (*reducer)->BeginStep();
    for (int v = options.variables - 1; v >= 0; --v) (*reducer)->GradientReady(v);  // backward order
    return (*reducer)->FinishStep(nullptr);
  });
  if (!strategy.ok()) return strategy.status();
  seconds.strategy = *strategy;
  // Nobody tears down its connections while a peer still finishes.
  if (absl::Status s = collective->Barrier(); !s.ok()) return s;
  return seconds;
}

void CompleteFigures(const AllReduceBenchOptions& options, double memcpy_gbytes_per_sec, AllReducePathFigures* f) {
  if (f->seconds_per_call <= 0) return;
  f->algbw_gbytes_per_sec = static_cast<double>(options.bytes) / f->seconds_per_call / 1e9;
  f->busbw_gbytes_per_sec = f->algbw_gbytes_per_sec * 2.0 * (options.ranks - 1) / options.ranks;
  if (memcpy_gbytes_per_sec > 0) f->busbw_to_memcpy = f->busbw_gbytes_per_sec / memcpy_gbytes_per_sec;
}

AllReduceBenchResult MakeResult(const AllReduceBenchOptions& options, const RankSeconds& slowest,
                                double memcpy_gbytes_per_sec, int64_t memcpy_buffer_bytes) {
  AllReduceBenchResult r;
  r.options = options;
  r.memcpy_gbytes_per_sec = memcpy_gbytes_per_sec;
  r.memcpy_buffer_bytes = memcpy_buffer_bytes;
  r.reference.seconds_per_call = slowest.reference / options.iterations;
  r.strategy.seconds_per_call = slowest.strategy / options.iterations;
  CompleteFigures(options, memcpy_gbytes_per_sec, &r.reference);
  CompleteFigures(options, memcpy_gbytes_per_sec, &r.strategy);
  // With one rank busbw is 0 by definition; compare times then.
  if (r.strategy.seconds_per_call > 0)
    r.strategy_to_reference = r.reference.seconds_per_call / r.strategy.seconds_per_call;
  r.fusion_buckets = slowest.fusion_buckets;
  r.buckets_in_place = slowest.buckets_in_place;
  return r;
}

absl::StatusOr<AllReduceBenchResult> RunGlooAllReduceBench(const AllReduceBenchOptions& options) {
  if (absl::Status s = ValidateAllReduceBenchOptions(options); !s.ok()) return s;
  const int64_t memcpy_bytes = std::max<int64_t>(options.bytes, int64_t{64} << 20);
  // MemcpyBandwidth counts Gbit/s.
  const double memcpy_gbytes_per_sec = bench::MeasureMemcpyBandwidth(static_cast<size_t>(memcpy_bytes), 0.3).gbps / 8;

  InMemoryKeyValueStore store;
  std::vector<absl::StatusOr<RankSeconds>> ranks(options.ranks, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < options.ranks; ++r) {
    threads.emplace_back([&, r] {
      CollectiveOptions c;
      c.rank = r;
      c.size = options.ranks;
      c.host = "127.0.0.1";
      c.store = &store;
      c.prefix = "allreduce_bench";
      c.timeout = absl::Seconds(120);
      c.connect_timeout = absl::Seconds(60);
      absl::StatusOr<std::unique_ptr<Collective>> collective = CreateGlooCollective(c);
      if (!collective.ok()) {
        ranks[r] = collective.status();
        return;
      }
      Collective* gloo = collective->get();
      ranks[r] = TimeRank(
          gloo, [gloo](float* data, size_t count) { return gloo->AllReduceSum(data, count); }, options);
    });
  }
  for (std::thread& t : threads) t.join();
  RankSeconds slowest;
  for (const absl::StatusOr<RankSeconds>& r : ranks) {
    if (!r.ok()) return r.status();
    slowest.reference = std::max(slowest.reference, r->reference);
    slowest.strategy = std::max(slowest.strategy, r->strategy);
    slowest.fusion_buckets = r->fusion_buckets;
    slowest.buckets_in_place = r->buckets_in_place;
  }
  return MakeResult(options, slowest, memcpy_gbytes_per_sec, memcpy_bytes);
}

std::string FormatAllReduceBenchJson(const AllReduceBenchResult& r) {
  auto path = [](const AllReducePathFigures& f) {
    return absl::StrFormat(
        "{\"seconds_per_call\":%.6g,\"algbw_gbytes_per_sec\":%.4g,\"busbw_gbytes_per_sec\":%.4g,\"busbw_to_memcpy\":%."
        "4g}",
        f.seconds_per_call, f.algbw_gbytes_per_sec, f.busbw_gbytes_per_sec, f.busbw_to_memcpy);
  };
  const AllReduceBenchOptions& o = r.options;
  return absl::StrFormat(
      "{\"backend\":\"%s\",\"compression\":\"%s\",\"ranks\":%d,\"bytes\":%d,\"iterations\":%d,\"variables\":%d,"
      "\"fusion_threshold_bytes\":%d,\"fusion_buckets\":%d,\"buckets_in_place\":%d,\"reference\":%s,"
      "\"strategy\":%s,\"strategy_to_reference\":%.4g,\"memcpy_gbytes_per_sec\":%.4g,\"memcpy_buffer_bytes\":%d}",
      o.backend, o.compression, o.ranks, o.bytes, o.iterations, o.variables, o.fusion_threshold_bytes, r.fusion_buckets,
      r.buckets_in_place, path(r.reference), path(r.strategy), r.strategy_to_reference, r.memcpy_gbytes_per_sec,
      r.memcpy_buffer_bytes);
}

std::string FormatAllReduceBenchTable(const AllReduceBenchResult& r) {
  const AllReduceBenchOptions& o = r.options;
  const char* reference = o.backend == "mpi" ? "MPI_Allreduce (Open MPI)" : "Gloo ring (loopback TCP)";
  auto line = [](const char* name, const AllReducePathFigures& f) {
    return absl::StrFormat("  %-34s %8.3f ms/call   algbw %7.3f GB/s   busbw %7.3f GB/s   busbw/memcpy %.3f\n", name,
                           f.seconds_per_call * 1e3, f.algbw_gbytes_per_sec, f.busbw_gbytes_per_sec, f.busbw_to_memcpy);
  };
  return absl::StrCat(absl::StrFormat("all-reduce over %s: %d ranks x %d bytes, %d calls per path\n", o.backend,
                                      o.ranks, o.bytes, o.iterations),
                      line(reference, r.reference),
                      line(absl::StrFormat("strategy path (%d vars, %d buckets%s)", o.variables, r.fusion_buckets,
                                           o.compression == "none" ? "" : absl::StrCat(", ", o.compression))
                               .c_str(),
                           r.strategy),
                      absl::StrFormat("  strategy / reference %.3f   memcpy (1 thread, %d MiB) %.3f GB/s\n",
                                      r.strategy_to_reference, r.memcpy_buffer_bytes >> 20, r.memcpy_gbytes_per_sec));
}

}  // namespace pstrain
