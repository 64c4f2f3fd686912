// The input benchmark: tiny sizes for a fraction of a second give one run
// per thread count with positive figures whose ratio is their quotient, in
// the table and the JSON; `pstrain-bench input --json` prints the same
// fields and bad flags exit 2. No speed thresholds (a shared machine).
#include "tools/bench/input_bench.h"

#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/process_test_util.h"

namespace pstrain::bench {
namespace {

using ::testing::HasSubstr;

TEST(InputBenchTest, FiguresPerThreadCount) {
  InputBenchOptions o;
  o.image_width = 96;
  o.image_height = 64;
  o.images = 4;
  o.out_size = 32;
  o.threads = {1, 2};
  o.seconds = 0.1;
  absl::StatusOr<InputBenchResult> r = RunInputBench(o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->runs.size(), 2u);
  EXPECT_GT(r->mean_jpeg_bytes, 0);
  for (size_t i = 0; i < 2; ++i) {
    const InputBenchRun& run = r->runs[i];
    EXPECT_EQ(run.threads, o.threads[i]);
    EXPECT_GT(run.decode_images_per_sec, 0);
    EXPECT_GT(run.augment_images_per_sec, 0);
    EXPECT_DOUBLE_EQ(run.decode_per_thread, run.decode_images_per_sec / run.threads);
    EXPECT_DOUBLE_EQ(run.augment_per_thread, run.augment_images_per_sec / run.threads);
    EXPECT_DOUBLE_EQ(run.ratio, run.augment_images_per_sec / run.decode_images_per_sec);
  }
  EXPECT_THAT(FormatInputBenchTable(*r), HasSubstr("4 JPEGs of 96x64"));
  const std::string json = FormatInputBenchJson(*r);
  EXPECT_THAT(json, HasSubstr("{\"image_width\":96,\"image_height\":64,\"images\":4,\"out_size\":32,"));
  EXPECT_THAT(json, HasSubstr("\"runs\":[{\"threads\":1,\"decode_images_per_sec\":"));
  EXPECT_THAT(json, HasSubstr("},{\"threads\":2,"));
}

TEST(InputBenchTest, BadOptionsAreNamed) {
  InputBenchOptions o;
  o.threads = {};
  EXPECT_THAT(ValidateInputBenchOptions(o).message(), HasSubstr("--threads"));
  o.threads = {1};
  o.images = 0;
  EXPECT_THAT(ValidateInputBenchOptions(o).message(), HasSubstr("--images"));
}

// pstrain-bench input with `flags`: exit code, stdout and stderr.
struct Ran {
  int code = -1;
  std::string out, err;
};
Ran RunBench(const std::vector<std::string>& flags) {
  test::TempDir dir;
  std::vector<std::string> argv = {test::BinDir() + "/pstrain-bench", "input"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  test::Subprocess bench = test::Spawn(argv, dir.path());
  const std::optional<int> status = test::WaitForExit(bench.pid, std::chrono::seconds(60));
  return {status && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1, bench.out(), bench.err()};
}

TEST(InputBenchTest, CommandPrintsOneJsonObject) {
  const Ran ran = RunBench({"--image_width=80", "--image_height=60", "--images=3", "--out_size=24", "--threads=1,2",
                            "--seconds=0.2", "--json"});
  ASSERT_EQ(ran.code, 0) << ran.err;
  EXPECT_EQ(ran.out.front(), '{');
  EXPECT_EQ(ran.out.substr(ran.out.size() - 2), "}\n");
  for (const char* field :
       {"\"image_width\":80", "\"image_height\":60", "\"images\":3", "\"out_size\":24", "\"seconds\":0.2",
        "\"mean_jpeg_bytes\":", "\"threads\":1,", "\"threads\":2,", "\"decode_images_per_sec_per_thread\":",
        "\"augment_images_per_sec\":", "\"augment_images_per_sec_per_thread\":", "\"ratio\":"}) {
    EXPECT_THAT(ran.out, HasSubstr(field));
  }
  const Ran bad = RunBench({"--threads=1,x"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--threads"));
}

}  // namespace
}  // namespace pstrain::bench
