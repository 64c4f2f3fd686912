// pstrain-bench model on tiny models: every figure present and positive, the
// JSON carries them, the profile attributes time to layer types. No speed
// thresholds.
#include "tools/bench/model_bench.h"

#include <cmath>
#include <string>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain::bench {
namespace {

using ::testing::HasSubstr;

ModelBenchOptions Tiny(const std::string& model) {
  ModelBenchOptions options;
  options.model = model;
  options.batch_size = 4;
  options.steps = 2;
  options.warmup = 1;
  options.num_classes = 10;
  options.matmul_size = 256;
  options.matmul_reps = 2;
  return options;
}

void ExpectPositiveFinite(double v, const char* what) {
  EXPECT_TRUE(std::isfinite(v)) << what << " = " << v;
  EXPECT_GT(v, 0) << what;
}

void ExpectSane(const ModelBenchResult& r) {
  ExpectPositiveFinite(r.images_per_sec, "images_per_sec");
  ExpectPositiveFinite(r.forward_gflop_per_image, "forward_gflop_per_image");
  EXPECT_DOUBLE_EQ(r.gflop_per_image, 3 * r.forward_gflop_per_image);
  ExpectPositiveFinite(r.achieved_gflops, "achieved_gflops");
  EXPECT_NEAR(r.achieved_gflops, r.images_per_sec * r.gflop_per_image, 1e-9 * r.achieved_gflops);
  ExpectPositiveFinite(r.matmul.gflops, "matmul_gflops");
  ExpectPositiveFinite(r.ratio, "ratio");
  EXPECT_GT(r.peak_rss_bytes, 0);
  EXPECT_GT(r.num_parameters, 0);
  EXPECT_GE(r.threads, 1);
  EXPECT_EQ(r.step_seconds.size(), 2u);
  EXPECT_GT(r.step_memory.arena_bytes, 0);
  EXPECT_LE(r.step_memory.arena_bytes, r.step_memory.separate_bytes);
  EXPECT_GE(r.step_memory.arena_bytes, r.step_memory.live_peak_bytes);
  for (float loss : r.losses) EXPECT_TRUE(std::isfinite(loss)) << loss;
}

TEST(ModelBenchTest, TrivialGivesPositiveFigures) {
  absl::StatusOr<ModelBenchResult> r = RunModelBench(Tiny("trivial"));
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectSane(*r);
  EXPECT_EQ(r->input_shape, (Shape{1, 28, 28}));
  EXPECT_EQ(r->num_parameters, 784 * 10 + 10);
  // trivial is one 784 x 10 dense layer: 2 * 7840 FLOPs forward.
  EXPECT_NEAR(r->forward_gflop_per_image, 2 * 7840 / 1e9, 1e-3 * 2 * 7840 / 1e9 + 1e-12);
}

TEST(ModelBenchTest, LenetJsonCarriesEveryFigure) {
  absl::StatusOr<ModelBenchResult> r = RunModelBench(Tiny("lenet"));
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectSane(*r);
  const std::string json = FormatModelBenchJson(*r);
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.back(), '}');
  for (const char* key :
       {"\"model\":\"lenet\"", "\"batch_size\":4", "\"steps\":2",
        "\"images_per_sec\":", "\"gflop_per_image\":", "\"achieved_gflops\":", "\"matmul_gflops\":", "\"ratio\":",
        "\"peak_rss_bytes\":", "\"step_arena_bytes\":", "\"precision\":\"fp32\"", "\"activations\":\"float32\""}) {
    EXPECT_THAT(json, HasSubstr(key));
  }
  EXPECT_THAT(json, ::testing::Not(HasSubstr("null")));
  const std::string summary = FormatModelBenchSummary(*r);
  EXPECT_THAT(summary, HasSubstr("GFLOP/s"));
  EXPECT_THAT(summary, HasSubstr("3 x"));
  EXPECT_THAT(summary, HasSubstr("Peak RSS"));
  EXPECT_THAT(summary, HasSubstr("Step memory"));
  EXPECT_THAT(summary, ::testing::Not(HasSubstr("bf16 matmul")));
}

// bf16: the same figures, plus oneDNN's bf16 matmul as a second roofline.
// Skipped where the processor lacks bf16 (the bench then refuses it).
TEST(ModelBenchTest, Bf16AddsItsOwnRoofline) {
  ModelBenchOptions options = Tiny("lenet");
  options.precision = "bf16";
  absl::StatusOr<ModelBenchResult> r = RunModelBench(options);
  if (!r.ok() && absl::StrContains(r.status().message(), "needs a processor with AVX-512 BF16")) {
    GTEST_SKIP() << r.status();
  }
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectSane(*r);
  ExpectPositiveFinite(r->bf16_matmul.gflops, "bf16 matmul gflops");
  EXPECT_NEAR(r->bf16_ratio, r->achieved_gflops / r->bf16_matmul.gflops, 1e-9);
  const std::string json = FormatModelBenchJson(*r);
  EXPECT_THAT(json, HasSubstr("\"precision\":\"bf16\""));
  EXPECT_THAT(json, HasSubstr("\"bf16_ratio\":"));
  EXPECT_THAT(FormatModelBenchSummary(*r), HasSubstr("Ratio to bf16 matmul"));
}

TEST(ModelBenchTest, ProfileAttributesTimeToLayerTypesAndPhases) {
  ModelBenchOptions options = Tiny("lenet");
  options.profile = true;
  options.profile_steps = 1;
  absl::StatusOr<ModelBenchResult> r = RunModelBench(options);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE(r->profile.empty());
  ExpectPositiveFinite(r->profile_step_ms, "profile_step_ms");
  EXPECT_GT(r->profile_dnnl_ms, 0);
  bool conv_forward = false, conv_backward = false, dense_backward = false, loss = false;
  for (const ProfileRow& row : r->profile) {
    if (row.layer_type == "conv2d" && row.phase == "forward") {
      conv_forward = true;
      EXPECT_GT(row.gflop_per_step, 0);
      EXPECT_EQ(row.calls_per_step, 2);  // conv1, conv2
    }
    if (row.layer_type == "conv2d" && row.phase == "backward") conv_backward = true;
    if (row.layer_type == "dense" && row.phase == "backward") dense_backward = true;
    if (row.phase == "loss") loss = true;
  }
  EXPECT_TRUE(conv_forward);
  EXPECT_TRUE(conv_backward);
  EXPECT_TRUE(dense_backward);
  EXPECT_TRUE(loss);
  const std::string table = FormatModelBenchProfile(*r);
  EXPECT_THAT(table, HasSubstr("conv2d"));
  EXPECT_THAT(table, HasSubstr("outside oneDNN"));
  EXPECT_THAT(FormatModelBenchJson(*r), HasSubstr("\"profile\":["));
}

TEST(ModelBenchTest, BadOptionsAreInvalidArgument) {
  ModelBenchOptions options = Tiny("lenet");
  options.steps = 0;
  EXPECT_EQ(RunModelBench(options).status().code(), absl::StatusCode::kInvalidArgument);
  options = Tiny("no_such_model");
  absl::StatusOr<ModelBenchResult> r = RunModelBench(options);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("no_such_model"));
  options = Tiny("lenet");
  options.input_shape = {1, 28};
  EXPECT_EQ(RunModelBench(options).status().code(), absl::StatusCode::kInvalidArgument);
  options = Tiny("lenet");
  options.precision = "fp16";  // GPUs only
  r = RunModelBench(options);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("--precision"));
}

}  // namespace
}  // namespace pstrain::bench
