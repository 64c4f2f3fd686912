// Report math (speed-up, scaling efficiency) from synthetic RunResults, and
// the content of results.csv and the markdown table.
#include "tools/compare/report.h"

#include <cmath>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain::compare {
namespace {

using ::testing::HasSubstr;

RunResult Result(int workers, double ips, const std::string& consistency = "sync", int devices_per_worker = 1) {
  RunResult r;
  r.set_experiment("exp");
  r.set_model("mlp");
  r.set_variable_update("parameter_server");
  r.set_local_parameter_device("cpu");
  r.set_consistency(consistency);
  r.set_transport("grpc");
  r.set_num_ps(2);
  r.set_num_workers(workers);
  r.set_devices_per_worker(devices_per_worker);
  r.set_device("cpu");
  r.set_batch_size_per_device(64);
  r.set_global_batch_size(64 * workers * devices_per_worker);
  r.set_steps(300);
  r.set_images_per_sec(ips);
  r.set_images_per_sec_stddev(ips / 10);
  r.set_final_loss(0.5);
  r.set_test_accuracy(0.8125);
  r.set_wall_seconds(4.5);
  return r;
}

VariantOutcome Ok(const std::string& label, RunResult r) {
  VariantOutcome o;
  o.label = label;
  o.run_dir = "out/" + label;
  o.ok = true;
  o.result = std::move(r);
  return o;
}

VariantOutcome Failed(const std::string& label, int code) {
  VariantOutcome o;
  o.label = label;
  o.run_dir = "out/" + label;
  o.exit_code = code;
  o.error = "failed: worker1 exited with code 1, \"boom\"";
  return o;
}

TEST(ReportTest, SpeedupAndEfficiencyAgainstTheFirstVariant) {
  const std::vector<ReportRow> rows =
      ComputeReport({Ok("w1", Result(1, 1000)), Ok("w2", Result(2, 1800)), Ok("w4", Result(4, 2000))}, 0);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_TRUE(rows[0].is_baseline);
  EXPECT_FALSE(rows[1].is_baseline);
  EXPECT_DOUBLE_EQ(rows[0].speedup, 1.0);
  EXPECT_DOUBLE_EQ(rows[0].scaling_efficiency, 1.0);
  EXPECT_DOUBLE_EQ(rows[1].speedup, 1.8);
  EXPECT_DOUBLE_EQ(rows[1].scaling_efficiency, 0.9);
  EXPECT_DOUBLE_EQ(rows[2].speedup, 2.0);
  EXPECT_DOUBLE_EQ(rows[2].scaling_efficiency, 0.5);
}

TEST(ReportTest, EachVariantAgainstItsOwnBaseline) {
  // Two groups (e.g. two models), each against its own one-worker row.
  const std::vector<ReportRow> rows = ComputeReport(
      {Ok("a1", Result(1, 1000)), Ok("a2", Result(2, 1500)), Ok("b1", Result(1, 100)), Ok("b2", Result(2, 190))}, 0,
      {0, 0, 2, 2});
  EXPECT_TRUE(rows[0].is_baseline);
  EXPECT_FALSE(rows[2].is_baseline);
  EXPECT_DOUBLE_EQ(rows[1].speedup, 1.5);
  EXPECT_DOUBLE_EQ(rows[2].speedup, 1.0);
  EXPECT_DOUBLE_EQ(rows[3].speedup, 1.9);
  EXPECT_DOUBLE_EQ(rows[3].scaling_efficiency, 0.95);
}

TEST(ReportTest, DevicesCountWorkersTimesDevicesPerWorker) {
  EXPECT_EQ(DevicesTotal(Result(3, 1, "sync", 4)), 12);
  // Baseline: 2 workers × 1 device; other: 2 workers × 4 devices = 4x the devices.
  const std::vector<ReportRow> rows =
      ComputeReport({Ok("base", Result(2, 1000)), Ok("multi", Result(2, 3000, "sync", 4))}, 0);
  EXPECT_DOUBLE_EQ(rows[1].speedup, 3.0);
  EXPECT_DOUBLE_EQ(rows[1].scaling_efficiency, 0.75);
}

TEST(ReportTest, BaselineNeedNotBeFirst) {
  const std::vector<ReportRow> rows = ComputeReport({Ok("w4", Result(4, 3000)), Ok("w2", Result(2, 2000))}, 1);
  EXPECT_FALSE(rows[0].is_baseline);
  EXPECT_TRUE(rows[1].is_baseline);
  EXPECT_DOUBLE_EQ(rows[0].speedup, 1.5);
  EXPECT_DOUBLE_EQ(rows[0].scaling_efficiency, 0.75);
}

TEST(ReportTest, FailedVariantsAndAFailedBaselineGiveNaN) {
  std::vector<ReportRow> rows = ComputeReport({Ok("w1", Result(1, 1000)), Failed("w2", 1)}, 0);
  EXPECT_TRUE(std::isnan(rows[1].speedup));
  EXPECT_TRUE(std::isnan(rows[1].scaling_efficiency));
  rows = ComputeReport({Failed("w1", 1), Ok("w2", Result(2, 1000))}, 0);
  EXPECT_TRUE(std::isnan(rows[1].speedup));
  rows = ComputeReport({Ok("zero", Result(1, 0)), Ok("w2", Result(2, 1000))}, 0);
  EXPECT_TRUE(std::isnan(rows[1].speedup));
}

TEST(ReportTest, StrategySummaryNamesWhatTellsVariantsApart) {
  RunResult r = Result(2, 1);
  EXPECT_EQ(StrategySummary(r), "parameter_server · sync");
  r.set_consistency("ssp");
  r.set_staleness(3);
  EXPECT_EQ(StrategySummary(r), "parameter_server · ssp (staleness 3)");
  r.set_local_parameter_device("gpu");
  EXPECT_EQ(StrategySummary(r), "parameter_server · ssp (staleness 3) · params on gpu");
  RunResult rep = Result(1, 1);
  rep.set_variable_update("replicated");
  rep.set_num_ps(0);  // no parameter servers: consistency does not apply
  rep.set_all_reduce_spec("nccl");
  EXPECT_EQ(StrategySummary(rep), "replicated · nccl");
}

TEST(ReportTest, CsvHasEveryContractFieldAndQuotes) {
  RunResult no_eval = Result(2, 1800.5, "async");
  no_eval.clear_test_accuracy();
  no_eval.add_workers()->set_peak_rss_bytes(300);  // the largest worker's peak is the column
  no_eval.add_workers()->set_peak_rss_bytes(4096);
  // Loss scaling: the workers' overflowed steps are summed.
  no_eval.set_precision("bf16");
  no_eval.set_loss_scaling("dynamic");
  no_eval.mutable_workers(0)->set_overflow_steps(2);
  no_eval.mutable_workers(1)->set_overflow_steps(3);
  const std::string csv =
      FormatCsv(ComputeReport({Ok("one, sync", Result(1, 1000)), Ok("two", no_eval), Failed("three", 2)}, 0));
  const std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0],
            "label,experiment,model,variable_update,local_parameter_device,all_reduce_spec,"
            "consistency,staleness,transport,num_ps,num_workers,devices_per_worker,device,"
            "batch_size_per_device,global_batch_size,steps,images_per_sec,images_per_sec_stddev,"
            "final_loss,test_accuracy,wall_seconds,speedup,scaling_efficiency,worker_peak_rss_bytes,precision,"
            "fp32_math,loss_scaling,overflow_steps,status,"
            "exit_code,error,run_dir,test_auc,planted_auc,warnings");
  // No worker reports: no peak RSS; no precision recorded: empty fields.
  EXPECT_EQ(lines[1],
            "\"one, sync\",exp,mlp,parameter_server,cpu,,sync,0,grpc,2,1,1,cpu,64,64,300,1000,100,"
            "0.5,0.8125,4.5,1,1,,,,,,ok,0,,\"out/one, sync\",,,");
  // Absent test accuracy is an empty field; speed-up 1.8005, efficiency 0.90025.
  EXPECT_THAT(lines[2], HasSubstr(",1800.5,180.05,0.5,,4.5,1.8005,0.90025,4096,bf16,,dynamic,5,ok,0,,out/two"));
  EXPECT_EQ(lines[3],
            "three,,,,,,,,,,,,,,,,,,,,,,,,,,,,failed,2,\"failed: worker1 exited with code 1, "
            "\"\"boom\"\"\",out/three,,,");
}

TEST(ReportTest, MarkdownTableShowsStrategyDevicesRatesAndRatios) {
  const std::string table = FormatMarkdownTable(
      ComputeReport({Ok("sync 1", Result(1, 1000)), Ok("sync 2", Result(2, 1800)), Failed("sync 4", 1)}, 0));
  const std::vector<std::string> lines = absl::StrSplit(table, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 5u) << table;
  EXPECT_THAT(lines[0], HasSubstr("| variant"));
  EXPECT_THAT(lines[0], HasSubstr("| strategy"));
  EXPECT_THAT(lines[0], HasSubstr("workers × devices"));
  EXPECT_THAT(lines[0], HasSubstr("speed-up"));
  EXPECT_THAT(lines[0], HasSubstr("scaling eff."));
  EXPECT_THAT(lines[0], HasSubstr("test accuracy"));
  EXPECT_THAT(lines[1], HasSubstr("---:"));
  EXPECT_THAT(lines[2], HasSubstr("sync 1 (baseline)"));
  EXPECT_THAT(lines[2], HasSubstr("parameter_server · sync"));
  EXPECT_THAT(lines[2], HasSubstr("1 × 1 cpu"));
  EXPECT_THAT(lines[2], HasSubstr("1,000 ± 100"));
  EXPECT_THAT(lines[2], HasSubstr("1.00×"));
  EXPECT_THAT(lines[2], HasSubstr("100%"));
  EXPECT_THAT(lines[2], HasSubstr("0.5000"));
  EXPECT_THAT(lines[2], HasSubstr("81.25%"));
  EXPECT_THAT(lines[3], HasSubstr("2 × 1 cpu"));
  EXPECT_THAT(lines[3], HasSubstr("1,800 ± 180"));
  EXPECT_THAT(lines[3], HasSubstr("1.80×"));
  EXPECT_THAT(lines[3], HasSubstr("90%"));
  EXPECT_THAT(lines[4], HasSubstr("failed (exit 1)"));
  EXPECT_THAT(lines[4], HasSubstr("—"));
  // Padded: every line is equally wide (in characters).
  auto width = [](const std::string& s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
  };
  for (const std::string& line : lines) EXPECT_EQ(width(line), width(lines[0])) << line;
}

// Click models: the quality column is the test AUC beside the planted one,
// and the CSV carries both.
TEST(ReportTest, ClickModelsShowTheirAucBesideThePlantedOne) {
  RunResult dlrm = Result(2, 30000), files = Result(2, 28000);
  dlrm.set_test_auc(0.78331);
  dlrm.set_planted_auc(0.79187);
  files.set_test_auc(0.7225);
  const std::vector<ReportRow> rows = ComputeReport({Ok("synthetic", dlrm), Ok("files", files)}, 0);
  const std::vector<std::string> lines = absl::StrSplit(FormatMarkdownTable(rows), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_THAT(lines[0], HasSubstr("test AUC (planted)"));
  EXPECT_THAT(lines[0], ::testing::Not(HasSubstr("test accuracy")));
  EXPECT_THAT(lines[2], HasSubstr("0.7833 (0.7919)"));
  EXPECT_THAT(lines[3], HasSubstr("0.7225 |"));
  const std::vector<std::string> csv = absl::StrSplit(FormatCsv(rows), '\n', absl::SkipEmpty());
  ASSERT_EQ(csv.size(), 3u);
  EXPECT_THAT(csv[1], ::testing::EndsWith(",0.78331,0.79187,"));
  EXPECT_THAT(csv[2], ::testing::EndsWith(",0.7225,,"));
}

// A run that did not learn: "!" beside its accuracy, its warnings under the
// table and in the CSV.
TEST(ReportTest, ARunThatDidNotLearnIsMarkedWithItsReason) {
  RunResult learned = Result(2, 1000), flat = Result(2, 1000);
  flat.set_test_accuracy(0.1);
  flat.add_warnings("worker 0: not learning: training loss 2.3026 is within 1% of ln(10)");
  flat.add_warnings("chief: not learning: test accuracy 0.1000 is at chance");
  const std::vector<ReportRow> rows = ComputeReport({Ok("lr 0.05", learned), Ok("lr 0", flat)}, 0);
  const std::vector<std::string> lines = absl::StrSplit(FormatMarkdownTable(rows), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_THAT(lines[2], ::testing::Not(HasSubstr("!")));
  EXPECT_THAT(lines[3], HasSubstr("10.00% ! |"));
  ReportContext context;
  context.matrix_name = "lr";
  const std::string md = FormatMarkdownReport(rows, context);
  EXPECT_THAT(md, HasSubstr("**!** lr 0: worker 0: not learning: training loss 2.3026 is within 1% of ln(10)"));
  EXPECT_THAT(md, HasSubstr("**!** lr 0: chief: not learning: test accuracy 0.1000 is at chance"));
  const std::vector<std::string> csv = absl::StrSplit(FormatCsv(rows), '\n', absl::SkipEmpty());
  ASSERT_EQ(csv.size(), 3u);
  EXPECT_THAT(csv[1], ::testing::EndsWith(",,,"));
  EXPECT_THAT(csv[2], ::testing::EndsWith(",worker 0: not learning: training loss 2.3026 is within 1% of ln(10); "
                                          "chief: not learning: test accuracy 0.1000 is at chance"));
}

TEST(ReportTest, MarkdownDevicesNameAPrecisionOtherThanFp32) {
  RunResult fp32 = Result(2, 1000), bf16 = Result(2, 1300);
  fp32.set_precision("fp32");
  bf16.set_precision("bf16");
  const std::string table = FormatMarkdownTable(ComputeReport({Ok("fp32", fp32), Ok("bf16", bf16)}, 0));
  const std::vector<std::string> lines = absl::StrSplit(table, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 4u) << table;
  EXPECT_THAT(lines[2], HasSubstr(" 2 × 1 cpu |"));
  EXPECT_THAT(lines[3], HasSubstr(" 2 × 1 cpu bf16 |"));
}

// fp32 on GPUs with TF32 says so; strict fp32 (every CPU run) goes unmarked,
// and the CSV carries the value as it ran.
TEST(ReportTest, MarkdownDevicesNameTf32Products) {
  RunResult strict = Result(1, 870), conv = Result(1, 1900), all = Result(1, 1950), bf16 = Result(1, 3000);
  strict.set_fp32_math("strict");
  conv.set_fp32_math("tf32_convolutions");
  all.set_fp32_math("tf32");
  bf16.set_precision("bf16");
  bf16.set_fp32_math("tf32_convolutions");  // no float32 products to govern: bf16 is what it says
  for (RunResult* r : {&strict, &conv, &all, &bf16}) r->set_device("gpu");
  const std::vector<ReportRow> rows =
      ComputeReport({Ok("strict", strict), Ok("conv", conv), Ok("all", all), Ok("bf16", bf16)}, 0);
  const std::vector<std::string> lines = absl::StrSplit(FormatMarkdownTable(rows), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_THAT(lines[2], HasSubstr(" 1 × 1 gpu |"));
  EXPECT_THAT(lines[3], HasSubstr(" 1 × 1 gpu TF32 conv |"));
  EXPECT_THAT(lines[4], HasSubstr(" 1 × 1 gpu TF32 |"));
  EXPECT_THAT(lines[5], HasSubstr(" 1 × 1 gpu bf16 |"));
  const std::string csv = FormatCsv(rows);
  EXPECT_THAT(csv, HasSubstr(",tf32_convolutions,"));
  EXPECT_THAT(csv, HasSubstr(",strict,"));
}

TEST(ReportTest, MarkdownCellsEscapePipes) {
  const std::string table = FormatMarkdownTable(ComputeReport({Ok("a|b", Result(1, 10))}, 0));
  EXPECT_THAT(table, HasSubstr("a\\|b"));
}

TEST(ReportTest, NumberFormats) {
  EXPECT_EQ(FormatRate(39542.7), "39,543");
  EXPECT_EQ(FormatRate(1234567.0), "1,234,567");
  EXPECT_EQ(FormatRate(123.4), "123");
  EXPECT_EQ(FormatRate(12.34), "12.3");
  EXPECT_EQ(FormatRate(1.234), "1.23");
  EXPECT_EQ(FormatSpeedup(1.875), "1.88×");
  EXPECT_EQ(FormatSpeedup(NAN), "—");
  EXPECT_EQ(FormatPercent(0.934), "93%");
  EXPECT_EQ(FormatPercent(NAN), "—");
}

TEST(ReportTest, MarkdownReportExplainsAndLinks) {
  const std::vector<ReportRow> rows = ComputeReport({Ok("w1", Result(1, 1000)), Failed("w2", 1)}, 0);
  ReportContext context;
  context.matrix_name = "demo";
  context.description = "What we compare.";
  context.matrix_path = "configs/compare/demo.yaml";
  context.base_path = "configs/base.yaml";
  context.baseline_label = "w1";
  context.chart = true;
  const std::string md = FormatMarkdownReport(rows, context);
  EXPECT_THAT(md, HasSubstr("# Comparison: demo"));
  EXPECT_THAT(md, HasSubstr("What we compare."));
  EXPECT_THAT(md, HasSubstr("2 variants (1 failed)"));
  EXPECT_THAT(md, HasSubstr("Every variant: model mlp, batch 64 per device, 300 steps per worker"));
  EXPECT_THAT(md, HasSubstr("the baseline's (`w1`, or the variant's own `baseline`"));
  EXPECT_THAT(md, HasSubstr("![images/sec per variant and scaling efficiency](chart.png)"));
  EXPECT_THAT(md, HasSubstr("## Failed variants"));
  EXPECT_THAT(md, HasSubstr("**w2**: exit 1"));
  EXPECT_THAT(md, HasSubstr("- w1: [`w1/`](w1/)"));
}

}  // namespace
}  // namespace pstrain::compare
