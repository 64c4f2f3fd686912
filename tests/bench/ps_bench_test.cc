#include "tools/bench/ps_bench.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/bench/memcpy_bandwidth.h"
#include "tools/bench/port_reservation.h"
#include "tools/bench/ps_bench_tcp.h"

namespace pstrain::bench {
namespace {

using ::testing::HasSubstr;

PsBenchOptions TinyOptions() {
  PsBenchOptions options;
  options.workers = 2;
  options.servers = 2;
  options.keys = 4;
  options.key_bytes = 4096;
  options.transport = "grpc";
  options.rounds = 5;
  options.warmup_rounds = 1;
  options.memcpy_seconds = 0.05;
  return options;
}

void ExpectPositiveFinite(double v, const char* what) {
  EXPECT_TRUE(std::isfinite(v)) << what << " = " << v;
  EXPECT_GT(v, 0) << what;
}

TEST(PsBenchTest, TinyGrpcClusterGivesSaneFiguresAndExactByteAccounting) {
  const PsBenchOptions options = TinyOptions();
  absl::StatusOr<PsBenchResult> result = RunPsBench(options);
  ASSERT_TRUE(result.ok()) << result.status();

  ExpectPositiveFinite(result->push.gbps, "push_gbps");
  ExpectPositiveFinite(result->pull.gbps, "pull_gbps");
  ExpectPositiveFinite(result->pushpull.gbps, "pushpull_gbps");
  ExpectPositiveFinite(result->memcpy_gbps, "memcpy_gbps");
  ExpectPositiveFinite(result->ratio, "ratio");
  EXPECT_DOUBLE_EQ(result->ratio, result->pushpull.gbps / result->memcpy_gbps);
  ExpectPositiveFinite(result->tcp_oneway.gbps, "tcp_oneway_gbps");
  ExpectPositiveFinite(result->tcp.gbps, "tcp_gbps");
  EXPECT_DOUBLE_EQ(result->pushpull_to_tcp, result->pushpull.gbps / result->tcp.gbps);
  EXPECT_EQ(result->memcpy_buffer_bytes, int64_t{64} << 20);

  // Timed rounds: exactly `rounds` per worker per phase.
  const int64_t timed = options.rounds * options.workers;
  EXPECT_EQ(result->push.rounds, timed);
  EXPECT_EQ(result->pull.rounds, timed);
  EXPECT_EQ(result->pushpull.rounds, timed);
  EXPECT_EQ(result->tcp_oneway.rounds, timed);
  EXPECT_EQ(result->tcp.rounds, timed);

  // Calls, warm-up included: push phase and push+pull phase push; pull and
  // push+pull phases pull, plus each worker's first (wait-for-Init) pull.
  const int64_t per_phase = (options.warmup_rounds + options.rounds) * options.workers;
  EXPECT_EQ(result->push_calls, 2 * per_phase);
  EXPECT_EQ(result->pull_calls, 2 * per_phase + options.workers);

  // What the shards saw: Init once, then every key of every push in; every
  // key of every pull out.
  const int64_t round_bytes = options.keys * options.key_bytes;
  ASSERT_EQ(result->shard_loads.size(), static_cast<size_t>(options.servers));
  EXPECT_EQ(result->init_bytes, round_bytes);
  EXPECT_EQ(result->shard_bytes_in, result->init_bytes + result->push_calls * round_bytes);
  EXPECT_EQ(result->shard_bytes_out, result->pull_calls * round_bytes);
  int64_t applied = 0;
  for (const ShardLoad& load : result->shard_loads) {
    // round_robin: keys/servers keys of key_bytes each per shard.
    EXPECT_EQ(load.variables(), options.keys / options.servers);
    EXPECT_EQ(load.variable_bytes(), round_bytes / options.servers);
    EXPECT_EQ(load.bytes_in(), (1 + result->push_calls) * round_bytes / options.servers);
    EXPECT_EQ(load.dropped_gradients(), 0);
    applied += load.applied_updates();
  }
  // Async: every pushed key is applied on arrival.
  EXPECT_EQ(applied, result->push_calls * options.keys);

  // Per-phase shard snapshots are taken while every worker is quiescent, so
  // they see exactly the timed rounds' updates.
  EXPECT_EQ(result->push.cost.shard_applied_updates, result->push.rounds * options.keys);
  EXPECT_EQ(result->pull.cost.shard_applied_updates, 0);
  EXPECT_EQ(result->pushpull.cost.shard_applied_updates, result->pushpull.rounds * options.keys);
  EXPECT_GT(result->push.push_call_seconds, 0);
  EXPECT_EQ(result->push.pull_call_seconds, 0);
  EXPECT_GT(result->pull.pull_call_seconds, 0);
  EXPECT_EQ(result->pull.push_call_seconds, 0);
  const std::string profile = FormatPsBenchProfile(options, *result);
  EXPECT_THAT(profile, HasSubstr("push+pull"));
  EXPECT_THAT(profile, HasSubstr("shard 1:"));
}

TEST(PsBenchTest, SingleWorkerSingleShardTimedBySeconds) {
  PsBenchOptions options = TinyOptions();
  options.workers = 1;
  options.servers = 1;
  options.rounds = 0;
  options.seconds = 0.1;
  absl::StatusOr<PsBenchResult> result = RunPsBench(options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_GE(result->push.rounds, 1);
  EXPECT_GE(result->push.max_seconds, 0.1);
  ExpectPositiveFinite(result->pushpull.gbps, "pushpull_gbps");
  EXPECT_EQ(result->shard_bytes_in, (1 + result->push_calls) * options.keys * options.key_bytes);
  EXPECT_EQ(result->shard_bytes_out, result->pull_calls * options.keys * options.key_bytes);
}

TEST(PsBenchTest, RejectsBadOptions) {
  auto expect_invalid = [](PsBenchOptions options, const std::string& flag) {
    absl::Status s = RunPsBench(options).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << flag << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(flag));
  };
  PsBenchOptions o = TinyOptions();
  o.workers = 0;
  expect_invalid(o, "--workers");
  o = TinyOptions();
  o.servers = 0;
  expect_invalid(o, "--servers");
  o = TinyOptions();
  o.key_bytes = 6;
  expect_invalid(o, "--key_bytes");
  o.key_bytes = 0;
  expect_invalid(o, "--key_bytes");
  o = TinyOptions();
  o.keys = 0;
  expect_invalid(o, "--keys");
  o = TinyOptions();
  o.transport = "carrier-pigeon";
  expect_invalid(o, "--transport");
  o = TinyOptions();
  o.rounds = 0;
  o.seconds = 0;
  expect_invalid(o, "--seconds");
  o = TinyOptions();
  o.window_bytes = -1;
  expect_invalid(o, "--window_bytes");
}

TEST(PsBenchTest, JsonIsOneObjectWithTheAgreedFields) {
  PsBenchOptions options = TinyOptions();
  PsBenchResult result;
  result.push.gbps = 1.5;
  result.pull.gbps = 2.5;
  result.pushpull.gbps = 1.25;
  result.memcpy_gbps = 50;
  result.ratio = 0.025;
  result.tcp_oneway.gbps = 5;
  result.tcp.gbps = 2.5;
  result.pushpull_to_tcp = 0.5;
  result.pull.heartbeats = 20;
  result.pull.heartbeat_max_ms = 12.5;
  result.push.heartbeat_failures = 1;
  const std::string json = FormatPsBenchJson(options, result);
  EXPECT_EQ(json,
            "{\"push_gbps\":1.5,\"pull_gbps\":2.5,\"pushpull_gbps\":1.25,\"memcpy_gbps\":50,\"ratio\":0.025,"
            "\"tcp_oneway_gbps\":5,\"tcp_gbps\":2.5,\"pushpull_to_tcp\":0.5,"
            "\"push_heartbeat_max_ms\":0,\"pull_heartbeat_max_ms\":12.5,\"pushpull_heartbeat_max_ms\":0,"
            "\"heartbeats\":20,\"heartbeat_failures\":1,"
            "\"workers\":2,\"servers\":2,\"keys\":4,\"key_bytes\":4096,\"window_bytes\":0,"
            "\"pushes_per_shard\":1,\"transport\":\"grpc\",\"mode\":\"threads\"}");
  result.ratio = std::nan("");
  EXPECT_THAT(FormatPsBenchJson(options, result), HasSubstr("\"ratio\":null"));

  const std::string table = FormatPsBenchTable(options, result);
  EXPECT_THAT(table, HasSubstr("ps bench: workers=2 servers=2 keys=4 key_bytes=4096 transport=grpc\n"));
  EXPECT_THAT(table, HasSubstr("push+pull"));
  EXPECT_THAT(table, HasSubstr("(pipelined, window 0 bytes, 1 pushes per shard)"));
  EXPECT_THAT(table, HasSubstr("; 20 heartbeats, round trip max 12.5 ms"));
  EXPECT_THAT(table, HasSubstr("memcpy (1 thread)"));
  EXPECT_THAT(table, HasSubstr("ratio push+pull/memcpy"));
  EXPECT_THAT(table, HasSubstr("tcp both ways"));
  EXPECT_THAT(table, HasSubstr("ratio push+pull/tcp"));
}

// One source, two sinks (one with nothing to carry), both kinds of round;
// then a sink that goes away mid-run is an error naming it, not a hang.
TEST(PsBenchTcpTest, SourceMovesRoundsToSinksAndNamesOneThatGoes) {
  auto port = [] {
    absl::StatusOr<std::unique_ptr<PortReservation>> r = PortReservation::Take();
    return r.ok() ? absl::StrCat("127.0.0.1:", (*r)->port()) : std::string("127.0.0.1:1");
  };
  const std::vector<std::string> addresses = {port(), port(), port()};
  std::vector<std::unique_ptr<TcpSink>> sinks;
  for (const std::string& a : addresses) {
    absl::StatusOr<std::unique_ptr<TcpSink>> sink = TcpSink::Listen(a);
    ASSERT_TRUE(sink.ok()) << sink.status();
    sinks.push_back(*std::move(sink));
  }
  for (bool both : {false, true}) {
    absl::StatusOr<std::unique_ptr<TcpSource>> source =
        TcpSource::Connect(addresses, {1 << 20, 0, 3 << 18}, both, absl::Seconds(10));
    ASSERT_TRUE(source.ok()) << source.status();
    for (int r = 0; r < 3; ++r) ASSERT_TRUE((*source)->Round(absl::Seconds(10)).ok()) << both << " round " << r;
  }
  absl::StatusOr<std::unique_ptr<TcpSource>> source =
      TcpSource::Connect(addresses, {1 << 20, 0, 1 << 20}, true, absl::Seconds(10));
  ASSERT_TRUE(source.ok()) << source.status();
  sinks[2].reset();
  const absl::Status gone = (*source)->Round(absl::Seconds(10));
  EXPECT_FALSE(gone.ok());
  EXPECT_THAT(std::string(gone.message()), HasSubstr(addresses[2]));
}

TEST(MemcpyBandwidthTest, CopiesForAboutTheGivenTime) {
  MemcpyBandwidth bw = MeasureMemcpyBandwidth(1 << 20, 0.02);
  EXPECT_GE(bw.seconds, 0.02);
  EXPECT_GT(bw.bytes, 0);
  EXPECT_EQ(bw.bytes % (1 << 20), 0);
  EXPECT_GE(bw.bytes, 10 << 20);  // at least one copy per slice
  ExpectPositiveFinite(bw.gbps, "gbps");
  ExpectPositiveFinite(bw.mean_gbps, "mean_gbps");
  EXPECT_GE(bw.gbps, bw.mean_gbps * 0.999);  // the best slice is no worse than the mean
}

}  // namespace
}  // namespace pstrain::bench
