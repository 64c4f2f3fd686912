// Comparison matrices: reading with the config loader, merging (messages
// field by field, scalars and lists replaced), the workers/ps shorthands, the
// written config.yaml, and errors that name the matrix file, the variant label
// and the field.
#include "tools/compare/matrix.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/config/config_loader.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/util/process_test_util.h"

namespace pstrain::compare {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::pstrain::test::Exists;
using ::pstrain::test::ReadFile;
using ::pstrain::test::TempDir;
using ::pstrain::test::WriteFile;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kBase[] = R"yaml(name: tiny
cluster:
  ps_hosts: ["localhost:2222"]
  worker_hosts: ["localhost:2223"]
model: {name: mlp, hidden_units: [16]}
data: {source: synthetic, synthetic_examples: 256}
optimizer: {name: momentum, learning_rate: 0.05}
train: {batch_size_per_device: 8, steps: 10, evaluate: false}
consistency: sync
all_reduce_spec: ""
)yaml";

class MatrixTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_ / "configs");
    WriteFile(dir_ / "base.yaml", kBase);
    WriteFile(dir_ / "bad.yaml", "train: {steps: x}\n");
  }
  // Writes `text` as <dir>/configs/<name> (base is then "../base.yaml").
  absl::StatusOr<Matrix> Load(const std::string& text, const std::string& name = "m.yaml") {
    path_ = dir_ / ("configs/" + name);
    WriteFile(path_, text);
    return LoadMatrix(path_);
  }

  TempDir dir_;
  std::string path_;
};

TEST(SlugTest, LowercasesAndCollapsesPunctuation) {
  EXPECT_EQ(Slug("Sync, 2 workers!"), "sync-2-workers");
  EXPECT_EQ(Slug("  ps/cpu -- async  "), "ps-cpu-async");
  EXPECT_EQ(Slug("???"), "variant");
  EXPECT_EQ(Slug(std::string(100, 'a')).size(), 40u);
  EXPECT_EQ(Slug(std::string(39, 'a') + " bc"), std::string(39, 'a'));
}

TEST(MergeConfigTest, MessagesMergeFieldByFieldScalarsAndListsReplace) {
  ExperimentConfig config;
  config.set_name("base");
  config.set_consistency("sync");
  config.mutable_model()->set_name("mlp");
  config.mutable_model()->add_hidden_units(128);
  config.mutable_model()->add_hidden_units(32);
  config.mutable_train()->set_steps(10);
  config.mutable_train()->set_batch_size_per_device(8);
  config.mutable_cluster()->add_worker_hosts("a:1");

  ExperimentConfig patch;
  patch.set_consistency("async");
  patch.mutable_model()->add_hidden_units(64);
  patch.mutable_train()->set_steps(30);
  patch.mutable_optimizer()->set_learning_rate(0.5f);
  MergeConfig(patch, &config);

  EXPECT_EQ(config.name(), "base");                             // not in the patch: kept
  EXPECT_EQ(config.consistency(), "async");                     // scalar replaced
  EXPECT_EQ(config.model().name(), "mlp");                      // sibling of a replaced list: kept
  EXPECT_THAT(config.model().hidden_units(), ElementsAre(64));  // list replaced, not appended to
  EXPECT_EQ(config.train().steps(), 30);
  EXPECT_EQ(config.train().batch_size_per_device(), 8);
  EXPECT_FLOAT_EQ(config.optimizer().learning_rate(), 0.5f);  // a new section
  EXPECT_FALSE(config.optimizer().has_name());                // ... with only what the patch set
  EXPECT_THAT(config.cluster().worker_hosts(), ElementsAre("a:1"));
}

TEST(MergeConfigTest, RepeatedMessagesAreReplacedAsAWhole) {
  ComparisonMatrix config;
  config.set_name("m");
  config.add_variants()->set_label("a");
  config.add_variants()->set_label("b");
  config.mutable_overrides()->mutable_train()->set_steps(5);
  ComparisonMatrix patch;
  patch.add_variants()->set_label("c");
  patch.mutable_overrides()->set_consistency("ssp");
  MergeConfig(patch, &config);
  ASSERT_EQ(config.variants_size(), 1);
  EXPECT_EQ(config.variants(0).label(), "c");
  EXPECT_EQ(config.name(), "m");
  EXPECT_EQ(config.overrides().train().steps(), 5);
  EXPECT_EQ(config.overrides().consistency(), "ssp");
}

TEST_F(MatrixTest, MergesBaseOverridesSetAndShorthandsInOrder) {
  absl::StatusOr<Matrix> m = Load(R"yaml(name: demo
base: ../base.yaml
overrides: {train: {steps: 20, evaluate: true}, optimizer: {learning_rate: 0.1}}
variants:
  - {label: "sync, 1 worker"}
  - label: "async, 2 workers"
    set: {consistency: async, train: {steps: 30}, model: {hidden_units: [8, 4]}}
    workers: 2
    ps: 3
  - {label: "no ps", set: {variable_update: allreduce}, ps: 0}
)yaml");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->name, "demo");
  EXPECT_EQ(m->base_path, (std::filesystem::path(dir_.path()) / "base.yaml").string());
  EXPECT_EQ(m->baseline, 0);
  ASSERT_EQ(m->variants.size(), 3u);
  EXPECT_EQ(m->variants[0].dir_name, "01-sync-1-worker");
  EXPECT_EQ(m->variants[1].dir_name, "02-async-2-workers");

  const ExperimentConfig& v0 = m->variants[0].config;
  EXPECT_EQ(v0.name(), "demo-sync-1-worker");
  EXPECT_EQ(v0.train().steps(), 20);                 // overrides
  EXPECT_EQ(v0.train().batch_size_per_device(), 8);  // base kept
  EXPECT_TRUE(v0.train().evaluate());
  EXPECT_EQ(v0.consistency(), "sync");
  EXPECT_THAT(v0.cluster().worker_hosts(), ElementsAre("localhost:2223"));
  EXPECT_EQ(v0.data().source(), "synthetic");
  EXPECT_THAT(v0.model().hidden_units(), ElementsAre(16));

  const ExperimentConfig& v1 = m->variants[1].config;
  EXPECT_EQ(v1.consistency(), "async");
  EXPECT_EQ(v1.train().steps(), 30);  // set beats overrides
  EXPECT_TRUE(v1.train().evaluate());
  EXPECT_FLOAT_EQ(v1.optimizer().learning_rate(), 0.1f);
  EXPECT_EQ(v1.optimizer().name(), "momentum");
  EXPECT_THAT(v1.model().hidden_units(), ElementsAre(8, 4));  // lists replace
  EXPECT_EQ(v1.model().name(), "mlp");
  EXPECT_THAT(v1.cluster().worker_hosts(), ElementsAre(absl::StrCat("localhost:", kWorkerShorthandPort),
                                                       absl::StrCat("localhost:", kWorkerShorthandPort + 1)));
  ASSERT_EQ(v1.cluster().ps_hosts_size(), 3);
  EXPECT_EQ(v1.cluster().ps_hosts(2), absl::StrCat("localhost:", kPsShorthandPort + 2));

  const ExperimentConfig& v2 = m->variants[2].config;
  EXPECT_EQ(v2.cluster().ps_hosts_size(), 0);  // ps: 0 empties the list
  EXPECT_THAT(v2.cluster().worker_hosts(), ElementsAre("localhost:2223"));
}

TEST_F(MatrixTest, DefaultsNameToStemAndFindsTheBaselineByLabel) {
  absl::StatusOr<Matrix> m = Load(R"yaml(base: ../base.yaml
baseline: two
variants: [{label: one}, {label: two, workers: 2}, {label: three}]
)yaml");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->name, "m");
  EXPECT_EQ(m->baseline, 1);
  EXPECT_EQ(m->variants[2].config.name(), "m-three");
}

TEST_F(MatrixTest, AcceptsAProtobufTextBase) {
  WriteFile(dir_ / "base.pbtxt", R"(cluster { ps_hosts: "localhost:1" worker_hosts: "localhost:2" }
data { source: "synthetic" }
train { steps: 7 }
all_reduce_spec: ""
)");
  absl::StatusOr<Matrix> m = Load("base: ../base.pbtxt\nvariants: [{label: a, workers: 3}]\n");
  ASSERT_TRUE(m.ok()) << m.status();
  const ExperimentConfig& v = m->variants[0].config;
  EXPECT_EQ(v.train().steps(), 7);
  EXPECT_EQ(v.cluster().worker_hosts_size(), 3);
  EXPECT_THAT(v.cluster().ps_hosts(), ElementsAre("localhost:1"));
}

TEST_F(MatrixTest, AVariantMayNameItsOwnBaseline) {
  absl::StatusOr<Matrix> m =
      Load("base: ../base.yaml\nbaseline: b\nvariants: [{label: a}, {label: b}, {label: c, baseline: a}]\n");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->baseline, 1);
  EXPECT_EQ(m->variants[0].baseline, 1);
  EXPECT_EQ(m->variants[1].baseline, 1);
  EXPECT_EQ(m->variants[2].baseline, 0);
}

// --only: the variants whose label the pattern matches and the baselines
// they are measured against, in the matrix's order, numbered afresh; a
// pattern that matches nothing or does not parse is refused naming it.
TEST_F(MatrixTest, OnlyKeepsMatchingVariantsAndTheirBaselines) {
  const std::string text =
      "base: ../base.yaml\nbaseline: one\n"
      "variants: [{label: one}, {label: 'ps, 2 shards'}, {label: ring}, {label: 'ring, fp16', baseline: ring}]\n";
  WriteFile(dir_ / "configs/m.yaml", text);
  const std::string path = dir_ / "configs/m.yaml";
  absl::StatusOr<Matrix> m = LoadMatrix(path, "fp16|shards");
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<std::string> labels;
  for (const Variant& v : m->variants) labels.push_back(v.label);
  EXPECT_THAT(labels, ElementsAre("one", "ps, 2 shards", "ring", "ring, fp16"));
  m = LoadMatrix(path, "^ps");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->variants.size(), 2u);
  EXPECT_EQ(m->variants[1].label, "ps, 2 shards");
  EXPECT_EQ(m->variants[1].dir_name, "02-ps-2-shards");
  EXPECT_EQ(m->baseline, 0);
  absl::StatusOr<Matrix> none = LoadMatrix(path, "allreduce");
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("--only 'allreduce' matches no label"));
  absl::StatusOr<Matrix> bad = LoadMatrix(path, "(");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("--only '('"));
}

TEST_F(MatrixTest, AcceptsAProtobufTextMatrix) {
  absl::StatusOr<Matrix> m = Load(R"(name: "text"
base: "../base.yaml"
overrides { train { steps: 3 } }
variants { label: "a" workers: 2 }
variants { label: "b" set { consistency: "async" } }
baseline: "b"
)",
                                  "m.pbtxt");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->name, "text");
  EXPECT_EQ(m->baseline, 1);
  EXPECT_EQ(m->variants[0].config.cluster().worker_hosts_size(), 2);
  EXPECT_EQ(m->variants[1].config.consistency(), "async");
  EXPECT_EQ(m->variants[1].config.train().steps(), 3);
}

TEST_F(MatrixTest, PrepareWritesReadsBackAndValidatesEveryConfig) {
  absl::StatusOr<Matrix> m = Load(R"yaml(name: demo
base: ../base.yaml
variants:
  - {label: "sync", workers: 2}
  - {label: "async: 'quoted' \"label\"", set: {consistency: async, data: {path: "/data/a b: c"}}, workers: 2, ps: 2}
)yaml");
  ASSERT_TRUE(m.ok()) << m.status();
  const ExperimentConfig merged = m->variants[1].config;
  TempDir out;
  ASSERT_TRUE(PrepareVariants(*m, out.path()).ok());
  for (const Variant& v : m->variants) {
    EXPECT_EQ(v.config_path, out / (v.dir_name + "/config.yaml"));
    EXPECT_THAT(ReadFile(v.config_path), HasSubstr("# Generated by pstrain-compare"));
  }
  // What was written is what was merged: it reads back to the same message.
  EXPECT_TRUE(MessageDifferencer::Equals(m->variants[1].config, merged))
      << m->variants[1].config.DebugString() << "\nvs\n"
      << merged.DebugString();
  absl::StatusOr<ExperimentConfig> reread = ReadExperimentConfig(m->variants[1].config_path);
  ASSERT_TRUE(reread.ok()) << reread.status();
  EXPECT_EQ(reread->data().path(), "/data/a b: c");
  EXPECT_TRUE(reread->has_all_reduce_spec());  // the base's explicit "" survives
  EXPECT_EQ(m->variants[0].config.consistency(), "sync");
  EXPECT_EQ(m->variants[0].config.cluster().worker_hosts_size(), 2);
  EXPECT_EQ(m->variants[1].config.consistency(), "async");
  EXPECT_EQ(m->variants[1].config.cluster().ps_hosts_size(), 2);
  EXPECT_EQ(m->variants[1].config.name(), "demo-async-quoted-label");
  EXPECT_EQ(m->variants[1].config.train().steps(), 10);
  const std::string text = ReadFile(m->variants[1].config_path);
  EXPECT_THAT(text, HasSubstr("\nconsistency: async\n"));
  EXPECT_THAT(text, HasSubstr("  worker_hosts: [localhost:21000, localhost:21001]\n"));
}

TEST_F(MatrixTest, SemanticErrorNamesMatrixLabelAndFieldAndWritesEveryConfig) {
  absl::StatusOr<Matrix> m = Load(R"yaml(base: ../base.yaml
variants:
  - {label: fine}
  - {label: "too many replicas", set: {replicas_to_aggregate: 5}, workers: 2}
  - {label: later}
)yaml");
  ASSERT_TRUE(m.ok()) << m.status();
  TempDir out;
  const absl::Status status = PrepareVariants(*m, out.path());
  ASSERT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr(path_ + ": variant 'too many replicas' (#2): "));
  EXPECT_THAT(status.message(), HasSubstr(out / "02-too-many-replicas/config.yaml"));
  EXPECT_THAT(status.message(), HasSubstr("field 'replicas_to_aggregate'"));
  EXPECT_TRUE(Exists(out / "03-later/config.yaml"));
}

TEST_F(MatrixTest, UnknownModelIsCaughtBeforeAnythingRuns) {
  absl::StatusOr<Matrix> m = Load("base: ../base.yaml\nvariants: [{label: x, set: {model: {name: resnet9000}}}]\n");
  ASSERT_TRUE(m.ok()) << m.status();
  TempDir out;
  const absl::Status status = PrepareVariants(*m, out.path());
  EXPECT_THAT(status.message(), HasSubstr("variant 'x'"));
  EXPECT_THAT(status.message(), HasSubstr("model.name"));
  EXPECT_THAT(status.message(), HasSubstr("resnet9000"));
}

TEST_F(MatrixTest, UnknownFieldInSetIsReportedByTheLoaderWithLineFieldAndValidKeys) {
  absl::StatusOr<Matrix> m = Load(R"yaml(base: ../base.yaml
variants:
  - label: ok
  - label: typo
    set: {train: {batch_sise: 3}}
)yaml");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr(path_ + ":5: unknown field 'variants[1].set.train.batch_sise'"));
  EXPECT_THAT(m.status().message(), HasSubstr("did you mean 'batch_size_per_device'?"));
  EXPECT_THAT(m.status().message(), HasSubstr("(TrainConfig) are: batch_size_per_device, steps,"));
}

TEST_F(MatrixTest, WrongTypeInOverridesIsReportedAtItsLine) {
  absl::StatusOr<Matrix> m = Load("base: ../base.yaml\noverrides: {train: {steps: many}}\nvariants: [{label: a}]\n");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(),
              HasSubstr(path_ + ":2: field 'overrides.train.steps': expected an integer, got 'many'"));
}

struct BadMatrix {
  const char* name;
  const char* text;
  const char* expected;  // A substring of the error.
};

class BadMatrixTest : public MatrixTest, public ::testing::WithParamInterface<BadMatrix> {};

TEST_P(BadMatrixTest, IsRejectedWithAUsefulMessage) {
  absl::StatusOr<Matrix> m = Load(GetParam().text);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr(path_));
  EXPECT_THAT(m.status().message(), HasSubstr(GetParam().expected));
}

INSTANTIATE_TEST_SUITE_P(
    Errors, BadMatrixTest,
    ::testing::Values(
        BadMatrix{"UnknownTopKey", "base: ../base.yaml\nvariant: []\n",
                  ":2: unknown field 'variant' (did you mean 'variants'?); the valid keys of top-level "
                  "(ComparisonMatrix) are: name, description, base, overrides, baseline, variants"},
        BadMatrix{"MissingBase", "variants: [{label: a}]\n", ": field 'base': expected the path of the experiment"},
        BadMatrix{"BaseNotFound", "base: nope.yaml\nvariants: [{label: a}]\n",
                  "m.yaml: field 'base': " /* then the base's own error */},
        BadMatrix{"BaseNotFoundNamesIt", "base: nope.yaml\nvariants: [{label: a}]\n",
                  "/configs/nope.yaml: cannot read config file: no such file"},
        BadMatrix{"BadBase", "base: ../bad.yaml\nvariants: [{label: a}]\n",
                  "bad.yaml:1: field 'train.steps': expected an integer, got 'x'"},
        BadMatrix{"NoVariants", "base: ../base.yaml\nvariants: []\n",
                  ": field 'variants': expected a non-empty list of variants"},
        BadMatrix{"MissingLabel", "base: ../base.yaml\nvariants: [{workers: 2}]\n",
                  ": field 'variants[0].label': expected a non-empty label"},
        BadMatrix{"DuplicateLabel", "base: ../base.yaml\nvariants: [{label: a}, {label: a}]\n",
                  ": variant 'a' (#2): field 'variants[1].label': expected a label no other variant has, got 'a' "
                  "again"},
        BadMatrix{"UnknownVariantKey", "base: ../base.yaml\nvariants:\n  - label: a\n    wokers: 2\n",
                  ":4: unknown field 'variants[0].wokers' (did you mean 'workers'?); the valid keys of "
                  "'variants[0]' (ComparisonVariant) are: label, set, workers, ps"},
        BadMatrix{"ZeroWorkers", "base: ../base.yaml\nvariants: [{label: a, workers: 0}]\n",
                  ": variant 'a' (#1): field 'variants[0].workers': expected an integer in [1, 512], got 0"},
        BadMatrix{"TooManyPs", "base: ../base.yaml\nvariants: [{label: a, ps: 513}]\n",
                  ": variant 'a' (#1): field 'variants[0].ps': expected an integer in [0, 512], got 513"},
        BadMatrix{"TextPs", "base: ../base.yaml\nvariants: [{label: a, ps: two}]\n",
                  ":2: field 'variants[0].ps': expected an integer, got 'two'"},
        BadMatrix{"WorkersAndHosts",
                  "base: ../base.yaml\nvariants: [{label: a, workers: 2, set: {cluster: {worker_hosts: ['h:1']}}}]\n",
                  "field 'variants[0].workers': expected either 'workers: N' or 'set: {cluster: {worker_hosts: "
                  "[...]}}', not both"},
        BadMatrix{"SetNotAMap", "base: ../base.yaml\nvariants: [{label: a, set: [1]}]\n",
                  ":2: field 'variants[0].set': expected a map of ExperimentConfig fields, got a list"},
        BadMatrix{"UnknownBaseline", "base: ../base.yaml\nbaseline: zz\nvariants: [{label: a}, {label: b}]\n",
                  ": field 'baseline': expected one of the variant labels 'a', 'b', got 'zz'"},
        BadMatrix{"UnknownVariantBaseline", "base: ../base.yaml\nvariants: [{label: a}, {label: b, baseline: zz}]\n",
                  ": variant 'b' (#2): field 'variants[1].baseline': expected one of the variant labels 'a', 'b', "
                  "got 'zz'"},
        BadMatrix{"EmptyName", "name: \"\"\nbase: ../base.yaml\nvariants: [{label: a}]\n",
                  ": field 'name': expected a non-empty name"},
        BadMatrix{"InvalidYaml", "base: ../base.yaml\nvariants: [{label: a}\n", "invalid YAML"},
        BadMatrix{"NotAMap", "- a\n- b\n", "expected a map of ComparisonMatrix fields at the top level"}),
    [](const ::testing::TestParamInfo<BadMatrix>& info) { return info.param.name; });

// The single-node article's table as shipped: 5 models x 5 strategies x
// 1/2/4/8 devices, every config valid, every row against the same model and
// strategy on one device.
TEST(ShippedMatrixTest, TheSingleNodeTableIsValidAndEachRowHasItsOneDeviceBaseline) {
  const std::string path = std::string(PSTRAIN_TEST_SOURCE_DIR) + "/configs/compare/seed_single_node_8xP100.yaml";
  absl::StatusOr<Matrix> m = LoadMatrix(path);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->variants.size(), 100u);
  TempDir out;
  ASSERT_TRUE(PrepareVariants(*m, out.path()).ok());
  for (const Variant& v : m->variants) {
    const Variant& base = m->variants[v.baseline];
    EXPECT_EQ(base.config.devices_per_worker(), 1) << v.label;
    EXPECT_EQ(base.config.model().name(), v.config.model().name()) << v.label;
    EXPECT_EQ(base.config.variable_update(), v.config.variable_update()) << v.label;
    EXPECT_EQ(base.config.all_reduce_spec(), v.config.all_reduce_spec()) << v.label;
    EXPECT_EQ(base.config.local_parameter_device(), v.config.local_parameter_device()) << v.label;
    EXPECT_EQ(v.config.emulation().topology(), "p100_pcie") << v.label;
  }
}

}  // namespace
}  // namespace pstrain::compare
