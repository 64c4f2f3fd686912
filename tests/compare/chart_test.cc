// The chart: chart.dat, the gnuplot script, and running gnuplot (real when
// installed, fakes for the failure paths).
#include "tools/compare/chart.h"

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/process_test_util.h"

namespace pstrain::compare {
namespace {

using ::pstrain::test::Exists;
using ::pstrain::test::ReadFile;
using ::pstrain::test::TempDir;
using ::pstrain::test::WriteExecutable;
using ::testing::HasSubstr;
using ::testing::Not;

VariantOutcome Ok(const std::string& label, int workers, double ips, const std::string& consistency = "sync") {
  VariantOutcome o;
  o.label = label;
  o.run_dir = "out/" + label;
  o.ok = true;
  RunResult r;
  r.set_model("mlp");
  r.set_variable_update("parameter_server");
  r.set_local_parameter_device("cpu");
  r.set_consistency(consistency);
  r.set_num_ps(1);
  r.set_num_workers(workers);
  r.set_devices_per_worker(1);
  r.set_device("cpu");
  r.set_images_per_sec(ips);
  r.set_images_per_sec_stddev(ips / 20);
  r.set_final_loss(0.4);
  o.result = r;
  return o;
}

VariantOutcome Failed(const std::string& label) {
  VariantOutcome o;
  o.label = label;
  o.exit_code = 1;
  o.error = "boom";
  return o;
}

std::vector<ReportRow> Rows() {
  return ComputeReport(
      {Ok("sync 1", 1, 1000), Ok("sync 2", 2, 1800), Ok("async 2", 2, 1900, "async"), Failed("sync 4")}, 0);
}

TEST(ChartTest, DataHasOneTabSeparatedLinePerVariant) {
  const std::string data = ChartData(Rows());
  const std::vector<std::string> lines = absl::StrSplit(data, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0][0], '#');
  EXPECT_EQ(lines[1], "0\tsync 1\t1000\t50\t1\t1,000\t1.00×\t100\t100%");
  EXPECT_EQ(lines[2], "1\tsync 2\t1800\t90\t1\t1,800\t1.80×\t90\t90%");
  // A second strategy gets the second colour.
  EXPECT_EQ(lines[3], "2\tasync 2\t1900\t95\t2\t1,900\t1.90×\t95\t95%");
  EXPECT_EQ(lines[4], "3\tsync 4\t0\t0\t9\tfailed (exit 1)\t\t0\tfailed");
}

TEST(ChartTest, ScriptDrawsBothFormatsBothPanelsAndALegend) {
  const std::string gp = ChartScript(Rows(), {"demo: \"throughput\"", "model mlp"});
  EXPECT_THAT(gp, HasSubstr("set terminal svg"));
  EXPECT_THAT(gp, HasSubstr("set output \"chart.svg\""));
  EXPECT_THAT(gp, HasSubstr("pngcairo"));
  EXPECT_THAT(gp, HasSubstr("set output \"chart.png\""));
  EXPECT_THAT(gp, HasSubstr("title = \"demo: \\\"throughput\\\"\""));
  EXPECT_THAT(gp, HasSubstr("xticlabels(tick(1, 2))"));
  EXPECT_THAT(gp, HasSubstr("baseline = 0\n"));
  EXPECT_THAT(gp, HasSubstr("with vectors heads"));  // the ± stddev error bars
  EXPECT_THAT(gp, HasSubstr("images/sec"));
  EXPECT_THAT(gp, HasSubstr("scaling efficiency"));
  EXPECT_THAT(gp, HasSubstr("first 100"));  // the 100% line
  EXPECT_THAT(gp, HasSubstr("title \"parameter_server · sync\""));
  EXPECT_THAT(gp, HasSubstr("title \"parameter_server · async\""));
  EXPECT_THAT(gp, HasSubstr("title \"failed\""));
  EXPECT_THAT(gp, Not(HasSubstr("rotate")));  // short labels stay horizontal
}

TEST(ChartTest, LongLabelsAreRotated) {
  std::vector<VariantOutcome> outcomes;
  for (int i = 0; i < 8; ++i)
    outcomes.push_back(Ok("parameter server, synchronous, worker count " + std::to_string(i), i + 1, 100.0 * (i + 1)));
  EXPECT_THAT(ChartScript(ComputeReport(outcomes, 0), {"t", "s"}), HasSubstr("rotate by"));
}

TEST(ChartTest, FindGnuplot) {
  EXPECT_EQ(FindGnuplot("no-such-gnuplot-binary-here"), "");
  EXPECT_EQ(FindGnuplot("/nonexistent/gnuplot"), "");
  EXPECT_EQ(FindGnuplot(""), "");
  EXPECT_EQ(FindGnuplot("/bin/sh"), "/bin/sh");
}

TEST(ChartTest, MissingGnuplotStillWritesTheScriptAndSaysSo) {
  TempDir out;
  const absl::Status status = DrawChart(Rows(), {"t", "s"}, out.path(), "");
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("gnuplot not found"));
  EXPECT_TRUE(Exists(out / "chart.gp"));
  EXPECT_TRUE(Exists(out / "chart.dat"));
  EXPECT_FALSE(Exists(out / "chart.svg"));
}

TEST(ChartTest, FailingGnuplotIsAnErrorWithItsOutput) {
  TempDir out;
  TempDir bin;
  WriteExecutable(bin / "gnuplot", "#!/bin/sh\necho 'line 3: undefined variable: oops' >&2\nexit 1\n");
  const absl::Status status = DrawChart(Rows(), {"t", "s"}, out.path(), bin / "gnuplot");
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr("exit code 1"));
  EXPECT_THAT(status.message(), HasSubstr("undefined variable: oops"));
}

TEST(ChartTest, GnuplotThatWritesNothingIsAnError) {
  TempDir out;
  TempDir bin;
  WriteExecutable(bin / "gnuplot", "#!/bin/sh\nexit 0\n");
  const absl::Status status = DrawChart(Rows(), {"t", "s"}, out.path(), bin / "gnuplot");
  EXPECT_THAT(status.message(), HasSubstr("chart.svg/chart.png missing"));
}

TEST(ChartTest, RealGnuplotDrawsSvgAndPng) {
  const std::string gnuplot = FindGnuplot();
  if (gnuplot.empty()) GTEST_SKIP() << "gnuplot is not installed";
  TempDir out;
  const absl::Status status = DrawChart(Rows(), {"demo", "model mlp"}, out.path(), gnuplot);
  ASSERT_TRUE(status.ok()) << status;
  const std::string svg = ReadFile(out / "chart.svg");
  EXPECT_THAT(svg, HasSubstr("<svg"));
  EXPECT_THAT(svg, HasSubstr("sync 1"));
  EXPECT_THAT(svg, HasSubstr("(baseline)"));
  EXPECT_THAT(svg, HasSubstr("scaling efficiency"));
  const std::string png = ReadFile(out / "chart.png");
  ASSERT_GT(png.size(), 8u);
  EXPECT_EQ(png.substr(1, 3), "PNG");
}

}  // namespace
}  // namespace pstrain::compare
