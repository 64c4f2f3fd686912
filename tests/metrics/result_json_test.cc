#include "common/metrics/result_json.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

ShardLoad Load(int shard, int64_t variables, int64_t variable_bytes, int64_t bytes_in, int64_t bytes_out,
               int64_t applied_updates, int64_t dropped_gradients, double apply_seconds) {
  ShardLoad l;
  l.set_shard(shard);
  l.set_variables(variables);
  l.set_variable_bytes(variable_bytes);
  l.set_bytes_in(bytes_in);
  l.set_bytes_out(bytes_out);
  l.set_applied_updates(applied_updates);
  l.set_dropped_gradients(dropped_gradients);
  l.set_apply_seconds(apply_seconds);
  return l;
}

RunResult Sample() {
  RunResult r;
  r.set_experiment("fashion_mnist_mlp_sync");
  r.set_model("mlp");
  r.set_variable_update("parameter_server");
  r.set_local_parameter_device("cpu");
  r.set_all_reduce_spec("");
  r.set_consistency("ssp");
  r.set_staleness(3);
  r.set_transport("grpc");
  r.set_num_ps(2);
  r.set_num_workers(4);
  r.set_devices_per_worker(1);
  r.set_device("cpu");
  r.set_batch_size_per_device(32);
  r.set_global_batch_size(128);
  r.set_steps(5000000000LL);  // Beyond 32 bits.
  r.set_images_per_sec(12345.678901234567);
  r.set_images_per_sec_stddev(0.1);
  r.set_final_loss(0.3141592653589793);
  r.set_test_accuracy(0.8731);
  r.set_wall_seconds(61.25);
  *r.add_ps_load() = Load(0, 3, 1024, 4096, 8192, 10, 0, 0.5);
  *r.add_ps_load() = Load(1, 2, 2048, 1LL << 40, 7, 11, 2, 1e-6);
  r.mutable_ps_load(1)->set_ssp_blocked_pulls(7);
  r.mutable_ps_load(1)->set_ssp_wait_seconds(0.25);
  return r;
}

void ExpectSame(const RunResult& a, const RunResult& b) {
  EXPECT_EQ(a.experiment(), b.experiment());
  EXPECT_EQ(a.model(), b.model());
  EXPECT_EQ(a.variable_update(), b.variable_update());
  EXPECT_EQ(a.local_parameter_device(), b.local_parameter_device());
  EXPECT_EQ(a.all_reduce_spec(), b.all_reduce_spec());
  EXPECT_EQ(a.consistency(), b.consistency());
  EXPECT_EQ(a.staleness(), b.staleness());
  EXPECT_EQ(a.transport(), b.transport());
  EXPECT_EQ(a.num_ps(), b.num_ps());
  EXPECT_EQ(a.num_workers(), b.num_workers());
  EXPECT_EQ(a.devices_per_worker(), b.devices_per_worker());
  EXPECT_EQ(a.device(), b.device());
  EXPECT_EQ(a.batch_size_per_device(), b.batch_size_per_device());
  EXPECT_EQ(a.global_batch_size(), b.global_batch_size());
  EXPECT_EQ(a.steps(), b.steps());
  EXPECT_EQ(a.images_per_sec(), b.images_per_sec());  // Exact: doubles are written round-trip.
  EXPECT_EQ(a.images_per_sec_stddev(), b.images_per_sec_stddev());
  EXPECT_EQ(a.final_loss(), b.final_loss());
  EXPECT_EQ(a.test_accuracy(), b.test_accuracy());
  EXPECT_EQ(a.wall_seconds(), b.wall_seconds());
  ASSERT_EQ(a.ps_load_size(), b.ps_load_size());
  for (int i = 0; i < a.ps_load_size(); ++i) {
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(a.ps_load(i), b.ps_load(i)))
        << a.ps_load(i).DebugString() << " vs " << b.ps_load(i).DebugString();
  }
}

std::string TempPath(absl::string_view name) { return absl::StrCat(::testing::TempDir(), "/result_json_", name); }

TEST(ResultJsonTest, RoundTripThroughAFile) {
  const std::string path = TempPath("roundtrip.json");
  RunResult r = Sample();
  ASSERT_TRUE(WriteResultJson(r, path).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  absl::StatusOr<RunResult> back = ReadResultJson(path);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSame(*back, r);
  std::filesystem::remove(path);
}

TEST(ResultJsonTest, ContractFieldsOnePerLineInOrderThenPsLoad) {
  const std::string json = ToJson(Sample());
  std::vector<std::string> lines = absl::StrSplit(json, '\n');
  const std::vector<std::string> keys = {"experiment",
                                         "model",
                                         "variable_update",
                                         "local_parameter_device",
                                         "all_reduce_spec",
                                         "consistency",
                                         "staleness",
                                         "transport",
                                         "num_ps",
                                         "num_workers",
                                         "devices_per_worker",
                                         "device",
                                         "batch_size_per_device",
                                         "global_batch_size",
                                         "steps",
                                         "images_per_sec",
                                         "images_per_sec_stddev",
                                         "final_loss",
                                         "test_accuracy",
                                         "wall_seconds",
                                         "ps_load"};
  ASSERT_GT(lines.size(), keys.size() + 1);
  EXPECT_EQ(lines[0], "{");
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_THAT(lines[i + 1], ::testing::StartsWith(absl::StrCat("  \"", keys[i], "\": "))) << i;
  }
  EXPECT_THAT(json, HasSubstr("  \"steps\": 5000000000,\n"));
  EXPECT_THAT(json, HasSubstr("  \"wall_seconds\": 61.25,\n"));
  EXPECT_THAT(json, HasSubstr("  \"images_per_sec_stddev\": 0.1,\n"));
  EXPECT_THAT(json,
              HasSubstr("{\"shard\": 1, \"variables\": 2, \"variable_bytes\": 2048, \"bytes_in\": 1099511627776"));
}

// The shards' ssp statistics travel in ps_load; a file written before they
// existed still reads (its shards without them).
TEST(ResultJsonTest, SspStatisticsReachPsLoadAndOlderFilesStillRead) {
  const std::string json = ToJson(Sample());
  // Then the table and memory figures (docs/EMBEDDINGS.md), newer still.
  const std::string tables = ", \"table_rows\": 0, \"table_bytes\": 0, \"peak_rss_bytes\": 0}";
  EXPECT_THAT(json, HasSubstr(absl::StrCat("\"ssp_blocked_pulls\": 7, \"ssp_wait_seconds\": 0.25", tables)));
  const std::string older = absl::StrReplaceAll(
      json, {{absl::StrCat(", \"ssp_blocked_pulls\": 0, \"ssp_wait_seconds\": 0", tables), "}"},
             {absl::StrCat(", \"ssp_blocked_pulls\": 7, \"ssp_wait_seconds\": 0.25", tables), "}"}});
  ASSERT_THAT(older, ::testing::Not(HasSubstr("ssp_")));
  absl::StatusOr<RunResult> back = ParseResultJson(older, "mem");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->ps_load_size(), 2);
  EXPECT_EQ(back->ps_load(1).bytes_in(), 1LL << 40);
  EXPECT_EQ(back->ps_load(1).ssp_blocked_pulls(), 0);
}

// Warnings are a list of strings, quoted and escaped, and read back; a list
// of anything else is refused naming the field.
TEST(ResultJsonTest, WarningsRoundTripAndOtherListsAreRefused) {
  RunResult r;
  r.add_warnings("worker 0: not learning: loss \"2.3\"");
  r.add_warnings("chief: at chance");
  const std::string json = ToJson(r);
  EXPECT_THAT(json,
              HasSubstr("  \"warnings\": [\"worker 0: not learning: loss \\\"2.3\\\"\", \"chief: at chance\"],\n"));
  absl::StatusOr<RunResult> back = ParseResultJson(json, "mem");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->warnings_size(), 2);
  EXPECT_EQ(back->warnings(0), r.warnings(0));
  std::string bad = json;
  bad.replace(bad.find("\"chief: at chance\""), 18, "3");
  absl::StatusOr<RunResult> refused = ParseResultJson(bad, "mem");
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("\"warnings\": expected strings, got a number"));
}

TEST(ResultJsonTest, EmptyPsLoadAndDefaults) {
  RunResult r;
  const std::string json = ToJson(r);
  EXPECT_THAT(json,
              HasSubstr("  \"ps_load\": [],\n  \"workers\": [],\n  \"compression\": \"\",\n  \"collective\": \"\",\n"
                        "  \"recoveries\": [],\n  \"emulation\": null,\n  \"precision\": \"\",\n"
                        "  \"loss_scaling\": \"\",\n  \"membership\": [],\n  \"data_ledger\": null,\n"
                        "  \"test_auc\": null,\n  \"test_log_loss\": null,\n  \"planted_auc\": null,\n"
                        "  \"warnings\": [],\n  \"initial_loss\": 0,\n  \"stragglers\": [],\n"
                        "  \"training_time_ratio\": 0,\n  \"fp32_math\": \"\"\n}"));
  absl::StatusOr<RunResult> back = ParseResultJson(json, "mem");
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSame(*back, r);
}

// Elastic runs (docs/ELASTIC.md): membership changes and the data ledger's
// lists of counts travel through the file unchanged; a list that is not of
// integers is refused naming the field.
TEST(ResultJsonTest, MembershipAndTheDataLedgerRoundTrip) {
  RunResult r;
  MembershipChange* lost = r.add_membership();
  lost->set_step(57);
  lost->set_worker(2);
  lost->set_change("lost");
  lost->set_why("no heartbeat for 3s");
  lost->set_seconds(6.5);
  LedgerReport* ledger = r.mutable_data_ledger();
  ledger->set_examples_per_epoch(59968);
  ledger->set_total_examples(179712);
  for (int64_t n : {59968, 59968, 59776}) ledger->add_examples_done(n);
  for (int64_t n : {74496, 74432, 30784}) ledger->add_examples_by_worker(n);
  ledger->set_chunks_reassigned(1);
  const std::string json = ToJson(r);
  EXPECT_THAT(json, HasSubstr("\"examples_done\": [59968, 59968, 59776]"));
  absl::StatusOr<RunResult> back = ParseResultJson(json, "mem");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->membership_size(), 1);
  EXPECT_EQ(back->membership(0).why(), "no heartbeat for 3s");
  EXPECT_EQ(back->data_ledger().SerializeAsString(), ledger->SerializeAsString());

  std::string bad = json;
  bad.replace(bad.find("[59968, 59968, 59776]"), 21, "[\"x\"]");
  EXPECT_THAT(ParseResultJson(bad, "mem").status().message(), HasSubstr("examples_done"));
}

// The workers' reports (with the bytes each moved and their loss scaling),
// compression, collective, precision and loss scaling travel through
// result.json.
TEST(ResultJsonTest, WorkersAndTrafficRoundTrip) {
  RunResult r = Sample();
  r.set_compression("fp16");
  r.set_collective("mpi");
  WorkerReport* w = r.add_workers();
  w->set_worker(1);
  w->set_images_per_sec(99.5);
  w->set_bytes_pushed(1LL << 41);
  w->set_bytes_pulled(12345);
  w->set_bytes_allreduced(7);
  w->set_overflow_steps(3);
  w->set_loss_scale(32768);
  r.set_precision("bf16");
  r.set_loss_scaling("dynamic");
  Recovery* recovery = r.add_recoveries();
  recovery->set_restored_step(400);
  recovery->set_failure("Pull to PS shard 1 (h:1): \"lost\"");
  const std::string json = ToJson(r);
  EXPECT_THAT(json, HasSubstr("\"bytes_pushed\": 2199023255552"));
  absl::StatusOr<RunResult> back = ParseResultJson(json, "mem");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->workers_size(), 1);
  EXPECT_EQ(back->workers(0).bytes_pushed(), 1LL << 41);
  EXPECT_EQ(back->workers(0).bytes_pulled(), 12345);
  EXPECT_EQ(back->workers(0).bytes_allreduced(), 7);
  EXPECT_EQ(back->compression(), "fp16");
  ASSERT_EQ(back->recoveries_size(), 1);
  EXPECT_EQ(back->recoveries(0).restored_step(), 400);
  EXPECT_EQ(back->recoveries(0).failure(), "Pull to PS shard 1 (h:1): \"lost\"");
  EXPECT_EQ(back->collective(), "mpi");
  EXPECT_EQ(back->workers(0).overflow_steps(), 3);
  EXPECT_EQ(back->workers(0).loss_scale(), 32768);
  EXPECT_EQ(back->precision(), "bf16");
  EXPECT_EQ(back->loss_scaling(), "dynamic");
}

// A worker's layout tuning holds a list of records (its decisions): it
// travels as a list of objects inside the worker's object and reads back;
// an item that is not an object is refused naming the list.
TEST(ResultJsonTest, LayoutTuningDecisionsRoundTrip) {
  RunResult r = Sample();
  LayoutTuning* tuning = r.add_workers()->mutable_layout_tuning();
  for (int k = 0; k < 2; ++k) {
    LayoutTuning::Decision* d = tuning->add_decisions();
    d->set_step(6 + 5 * k);
    d->set_batch_bytes(int64_t{262144} << (2 * k));
    d->set_window_bytes(1 << 20);
    d->set_pushes_per_shard(1);
    d->set_previous_step_seconds(0.5 - 0.1 * k);
    d->set_why(k == 0 ? "try batch 256 KiB" : "settled on \"batch 1 MiB\"");
  }
  tuning->set_batch_bytes(1 << 20);
  tuning->set_settled(true);
  tuning->set_settled_step(11);
  const std::string json = ToJson(r);
  EXPECT_THAT(json, HasSubstr("\"decisions\": [{\"step\": 6, \"batch_bytes\": 262144"));
  absl::StatusOr<RunResult> back = ParseResultJson(json, "mem");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->workers_size(), 1);
  const LayoutTuning& t = back->workers(0).layout_tuning();
  ASSERT_EQ(t.decisions_size(), 2);
  EXPECT_EQ(t.decisions(1).step(), 11);
  EXPECT_EQ(t.decisions(1).batch_bytes(), 1 << 20);
  EXPECT_DOUBLE_EQ(t.decisions(1).previous_step_seconds(), 0.4);
  EXPECT_EQ(t.decisions(1).why(), "settled on \"batch 1 MiB\"");
  EXPECT_TRUE(t.settled());
  EXPECT_EQ(t.settled_step(), 11);
  std::string bad = json;
  bad.replace(bad.find("[{\"step\": 6"), 2, "[3, {");
  absl::StatusOr<RunResult> refused = ParseResultJson(bad, "mem");
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("\"decisions\": expected objects, got a number"));
}

// An emulated run's record travels as one object; runs without one write null.
TEST(ResultJsonTest, EmulationRoundTrips) {
  RunResult r = Sample();
  Emulation* e = r.mutable_emulation();
  e->set_time_scale(10);
  e->set_hosts(6);
  e->set_scaling_efficiency(0.875);
  e->set_cpu_bound(true);
  e->set_cpu_bound_reason("worker 3 kept 0.80 cores busy");
  e->set_suggested_time_scale(32);
  e->set_byte_scale(4);
  WorkerReport* w = r.add_workers();
  w->set_cpu_cores(0.125);
  const std::string json = ToJson(r);
  EXPECT_THAT(json, HasSubstr("\"emulation\": {\"time_scale\": 10, \"link_gbps\": 0, \"hosts\": 6,"));
  absl::StatusOr<RunResult> back = ParseResultJson(json, "mem");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_TRUE(back->has_emulation());
  EXPECT_EQ(back->emulation().scaling_efficiency(), 0.875);
  EXPECT_TRUE(back->emulation().cpu_bound());
  EXPECT_EQ(back->emulation().cpu_bound_reason(), "worker 3 kept 0.80 cores busy");
  EXPECT_EQ(back->emulation().suggested_time_scale(), 32);
  EXPECT_EQ(back->emulation().byte_scale(), 4);
  EXPECT_EQ(back->workers(0).cpu_cores(), 0.125);
  // A record of the wrong kind is refused naming it.
  absl::StatusOr<RunResult> bad = ParseResultJson(
      absl::StrReplaceAll(json,
                          {{"\"emulation\": {", "\"emulation\": [{"}, {"\"byte_scale\": 4}", "\"byte_scale\": 4}]"}}),
      "mem");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("field \"emulation\": expected an object or null"));
}

TEST(ResultJsonTest, AbsentAccuracyIsNull) {
  RunResult r = Sample();
  r.clear_test_accuracy();
  const std::string json = ToJson(r);
  EXPECT_THAT(json, HasSubstr("  \"test_accuracy\": null,\n"));
  absl::StatusOr<RunResult> back = ParseResultJson(json, "mem");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->has_test_accuracy());
}

TEST(ResultJsonTest, QuotesAndControlCharactersAreEscaped) {
  RunResult r = Sample();
  r.set_experiment("say \"hi\"\\ back\nslash\ttab \x01 caf\xc3\xa9");
  const std::string json = ToJson(r);
  EXPECT_THAT(json, HasSubstr(R"("experiment": "say \"hi\"\\ back\nslash\ttab \u0001 café",)"));
  absl::StatusOr<RunResult> back = ParseResultJson(json, "mem");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->experiment(), r.experiment());
}

TEST(ResultJsonTest, NonFiniteNumbersAreWrittenAsNullAndReadAsNaN) {
  RunResult r = Sample();
  r.set_final_loss(std::numeric_limits<double>::quiet_NaN());
  r.set_images_per_sec_stddev(std::numeric_limits<double>::infinity());
  r.set_test_accuracy(std::numeric_limits<double>::quiet_NaN());
  const std::string json = ToJson(r);
  EXPECT_THAT(json, AllOf(HasSubstr("  \"final_loss\": null,\n"), HasSubstr("  \"images_per_sec_stddev\": null,\n"),
                          HasSubstr("  \"test_accuracy\": null,\n")));
  EXPECT_THAT(json, ::testing::Not(HasSubstr("nan")));
  EXPECT_THAT(json, ::testing::Not(HasSubstr("inf")));
  absl::StatusOr<RunResult> back = ParseResultJson(json, "mem");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(std::isnan(back->final_loss()));
  EXPECT_TRUE(std::isnan(back->images_per_sec_stddev()));
  EXPECT_FALSE(back->has_test_accuracy());
}

TEST(ResultJsonTest, UnknownFieldsAreIgnoredAndPsLoadIsOptional) {
  std::string json = ToJson(Sample());
  json = absl::StrReplaceAll(json, {{"  \"experiment\"", "  \"added_later\": {\"x\": [1, 2]},\n  \"experiment\""}});
  json = json.substr(0, json.find(",\n  \"ps_load\"")) + "\n}\n";
  absl::StatusOr<RunResult> back = ParseResultJson(json, "mem");
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << json;
  EXPECT_EQ(back->experiment(), "fashion_mnist_mlp_sync");
  EXPECT_TRUE(back->ps_load().empty());
}

TEST(ResultJsonTest, ErrorsNameTheFileAndField) {
  const std::string json = ToJson(Sample());
  auto parse = [](const std::string& text) { return ParseResultJson(text, "runs/x/result.json").status(); };

  absl::Status missing = parse(absl::StrReplaceAll(json, {{"\"num_ps\"", "\"num_pss\""}}));
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.message(), AllOf(HasSubstr("runs/x/result.json"), HasSubstr("\"num_ps\""), HasSubstr("missing")));

  absl::Status wrong_type = parse(absl::StrReplaceAll(json, {{"\"model\": \"mlp\"", "\"model\": 3"}}));
  EXPECT_THAT(wrong_type.message(), AllOf(HasSubstr("\"model\""), HasSubstr("expected a string")));

  absl::Status fractional = parse(absl::StrReplaceAll(json, {{"\"num_workers\": 4", "\"num_workers\": 4.5"}}));
  EXPECT_THAT(fractional.message(), AllOf(HasSubstr("\"num_workers\""), HasSubstr("integer")));

  absl::Status too_big = parse(absl::StrReplaceAll(json, {{"\"num_workers\": 4", "\"num_workers\": 1e12"}}));
  EXPECT_THAT(too_big.message(), AllOf(HasSubstr("\"num_workers\""), HasSubstr("integer")));

  absl::Status shard = parse(absl::StrReplaceAll(json, {{"\"shard\": 1,", "\"shard\": \"1\","}}));
  EXPECT_THAT(shard.message(), AllOf(HasSubstr("ps_load[1]"), HasSubstr("\"shard\"")));

  absl::Status cut = parse(json.substr(0, json.size() / 2));
  EXPECT_EQ(cut.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(cut.message(), HasSubstr("runs/x/result.json"));

  EXPECT_EQ(parse("[1, 2]").code(), absl::StatusCode::kInvalidArgument);
}

TEST(ResultJsonTest, MissingFileIsNotFound) {
  absl::StatusOr<RunResult> r = ReadResultJson(TempPath("does_not_exist.json"));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("does_not_exist.json"));
}

TEST(ResultJsonTest, WriteReplacesAnExistingFileAndReportsBadDirectories) {
  const std::string path = TempPath("replace.json");
  RunResult r = Sample();
  ASSERT_TRUE(WriteResultJson(r, path).ok());
  r.set_experiment("second");
  ASSERT_TRUE(WriteResultJson(r, path).ok());
  absl::StatusOr<RunResult> back = ReadResultJson(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->experiment(), "second");
  std::filesystem::remove(path);

  absl::Status s = WriteResultJson(r, TempPath("no_such_dir/result.json"));
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("no_such_dir/result.json.tmp"));
}

}  // namespace
}  // namespace pstrain
