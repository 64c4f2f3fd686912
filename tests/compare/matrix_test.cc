// Comparison matrices: parsing, deep merging, the workers/ps shorthands, and
// errors that name the matrix file, the variant label and the field.
#include "tools/compare/matrix.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/process_test_util.h"

namespace pstrain::compare {
namespace {

using ::pstrain::test::Exists;
using ::pstrain::test::ReadFile;
using ::pstrain::test::TempDir;
using ::pstrain::test::WriteFile;
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
  }
  // Writes `text` as <dir>/configs/m.yaml (base is then "../base.yaml").
  absl::StatusOr<Matrix> Load(const std::string& text) {
    path_ = dir_ / "configs/m.yaml";
    WriteFile(path_, text);
    return LoadMatrix(path_);
  }
  YAML::Node VariantYaml(const Matrix& m, int i) { return YAML::Load(m.variants[i].yaml); }

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

TEST(MergeTest, MapsMergeScalarsAndSequencesReplace) {
  absl::StatusOr<std::string> merged = MergeYamlText("a: 1\nb: {x: 1, y: [1, 2, 3], z: {p: 1}}\nc: [1, 2]\n",
                                                     "b: {y: [9], z: {q: 2}, w: new}\nc: [3]\nd: added\n");
  ASSERT_TRUE(merged.ok()) << merged.status();
  const YAML::Node n = YAML::Load(*merged);
  EXPECT_EQ(n["a"].as<int>(), 1);
  EXPECT_EQ(n["b"]["x"].as<int>(), 1);
  ASSERT_EQ(n["b"]["y"].size(), 1u);
  EXPECT_EQ(n["b"]["y"][0].as<int>(), 9);
  EXPECT_EQ(n["b"]["z"]["p"].as<int>(), 1);
  EXPECT_EQ(n["b"]["z"]["q"].as<int>(), 2);
  EXPECT_EQ(n["b"]["w"].as<std::string>(), "new");
  ASSERT_EQ(n["c"].size(), 1u);
  EXPECT_EQ(n["d"].as<std::string>(), "added");
}

TEST(MergeTest, AMapReplacesAScalarAndQuotedStringsStayStrings) {
  absl::StatusOr<std::string> merged = MergeYamlText("a: 1\ns: x\n", "a: {k: v}\ns: \"\"\nt: \"null\"\n");
  ASSERT_TRUE(merged.ok()) << merged.status();
  const YAML::Node n = YAML::Load(*merged);
  EXPECT_EQ(n["a"]["k"].as<std::string>(), "v");
  ASSERT_TRUE(n["s"].IsScalar()) << *merged;
  EXPECT_EQ(n["s"].Scalar(), "");
  ASSERT_TRUE(n["t"].IsScalar()) << *merged;
  EXPECT_EQ(n["t"].Scalar(), "null");
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
)yaml");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->name, "demo");
  EXPECT_EQ(m->base_path, (std::filesystem::path(dir_.path()) / "base.yaml").string());
  EXPECT_EQ(m->baseline, 0);
  ASSERT_EQ(m->variants.size(), 2u);
  EXPECT_EQ(m->variants[0].dir_name, "01-sync-1-worker");
  EXPECT_EQ(m->variants[1].dir_name, "02-async-2-workers");
  EXPECT_EQ(m->variants[1].line, 6);

  const YAML::Node v0 = VariantYaml(*m, 0);
  EXPECT_EQ(v0["name"].as<std::string>(), "demo-sync-1-worker");
  EXPECT_EQ(v0["train"]["steps"].as<int>(), 20);                 // overrides
  EXPECT_EQ(v0["train"]["batch_size_per_device"].as<int>(), 8);  // base kept
  EXPECT_TRUE(v0["train"]["evaluate"].as<bool>());
  EXPECT_EQ(v0["consistency"].as<std::string>(), "sync");
  EXPECT_EQ(v0["cluster"]["worker_hosts"].size(), 1u);
  EXPECT_EQ(v0["data"]["source"].as<std::string>(), "synthetic");

  const YAML::Node v1 = VariantYaml(*m, 1);
  EXPECT_EQ(v1["consistency"].as<std::string>(), "async");
  EXPECT_EQ(v1["train"]["steps"].as<int>(), 30);  // set beats overrides
  EXPECT_TRUE(v1["train"]["evaluate"].as<bool>());
  EXPECT_FLOAT_EQ(v1["optimizer"]["learning_rate"].as<float>(), 0.1f);
  ASSERT_EQ(v1["model"]["hidden_units"].size(), 2u);  // sequences replace
  EXPECT_EQ(v1["model"]["hidden_units"][1].as<int>(), 4);
  ASSERT_EQ(v1["cluster"]["worker_hosts"].size(), 2u);
  EXPECT_EQ(v1["cluster"]["worker_hosts"][1].as<std::string>(), absl::StrCat("localhost:", kWorkerShorthandPort + 1));
  ASSERT_EQ(v1["cluster"]["ps_hosts"].size(), 3u);
  EXPECT_EQ(v1["cluster"]["ps_hosts"][2].as<std::string>(), absl::StrCat("localhost:", kPsShorthandPort + 2));
}

TEST_F(MatrixTest, DefaultsNameToStemAndFindsTheBaselineByLabel) {
  absl::StatusOr<Matrix> m = Load(R"yaml(base: ../base.yaml
baseline: two
variants: [{label: one}, {label: two, workers: 2}, {label: three}]
)yaml");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->name, "m");
  EXPECT_EQ(m->baseline, 1);
}

TEST_F(MatrixTest, AcceptsAProtobufTextBase) {
  WriteFile(dir_ / "base.pbtxt", R"(cluster { ps_hosts: "localhost:1" worker_hosts: "localhost:2" }
data { source: "synthetic" }
train { steps: 7 }
all_reduce_spec: ""
)");
  absl::StatusOr<Matrix> m = Load("base: ../base.pbtxt\nvariants: [{label: a, workers: 3}]\n");
  ASSERT_TRUE(m.ok()) << m.status();
  const YAML::Node v = VariantYaml(*m, 0);
  EXPECT_EQ(v["train"]["steps"].as<int>(), 7);
  EXPECT_EQ(v["cluster"]["worker_hosts"].size(), 3u);
  EXPECT_EQ(v["cluster"]["ps_hosts"][0].as<std::string>(), "localhost:1");
}

TEST_F(MatrixTest, PrepareWritesAndValidatesEveryConfig) {
  absl::StatusOr<Matrix> m = Load(R"yaml(name: demo
base: ../base.yaml
variants:
  - {label: "sync", workers: 2}
  - {label: "async", set: {consistency: async}, workers: 2, ps: 2}
)yaml");
  ASSERT_TRUE(m.ok()) << m.status();
  TempDir out;
  ASSERT_TRUE(PrepareVariants(*m, out.path()).ok());
  for (const Variant& v : m->variants) {
    EXPECT_EQ(v.config_path, out / (v.dir_name + "/config.yaml"));
    EXPECT_TRUE(Exists(v.config_path));
    EXPECT_THAT(ReadFile(v.config_path), HasSubstr("# Generated by pstrain-compare"));
  }
  EXPECT_EQ(m->variants[0].config.consistency(), "sync");
  EXPECT_EQ(m->variants[0].config.cluster().worker_hosts_size(), 2);
  EXPECT_EQ(m->variants[1].config.consistency(), "async");
  EXPECT_EQ(m->variants[1].config.cluster().ps_hosts_size(), 2);
  EXPECT_EQ(m->variants[1].config.name(), "demo-async");
  EXPECT_EQ(m->variants[1].config.train().steps(), 10);
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
  EXPECT_THAT(status.message(), HasSubstr(path_));
  EXPECT_THAT(status.message(), HasSubstr("variant 'too many replicas'"));
  EXPECT_THAT(status.message(), HasSubstr("line 4"));
  EXPECT_THAT(status.message(), HasSubstr("'replicas_to_aggregate'"));
  EXPECT_TRUE(Exists(out / "03-later/config.yaml"));
}

TEST_F(MatrixTest, UnknownModelIsCaughtBeforeAnythingRuns) {
  absl::StatusOr<Matrix> m = Load("base: ../base.yaml\nvariants: [{label: x, set: {model: {name: resnet9000}}}]\n");
  ASSERT_TRUE(m.ok()) << m.status();
  TempDir out;
  const absl::Status status = PrepareVariants(*m, out.path());
  EXPECT_THAT(status.message(), HasSubstr("variant 'x'"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("model.name"));
}

TEST_F(MatrixTest, UnknownFieldInSetNamesMatrixLineLabelAndField) {
  absl::StatusOr<Matrix> m = Load(R"yaml(base: ../base.yaml
variants:
  - label: ok
  - label: typo
    set: {train: {batch_sise: 3}}
)yaml");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr(path_ + ":5: variant 'typo': set: "));
  EXPECT_THAT(m.status().message(), HasSubstr("'train.batch_sise'"));
  EXPECT_THAT(m.status().message(), ::testing::Not(HasSubstr("snippet")));
}

TEST_F(MatrixTest, WrongTypeInOverridesIsReportedAsOverrides) {
  absl::StatusOr<Matrix> m = Load("base: ../base.yaml\noverrides: {train: {steps: many}}\nvariants: [{label: a}]\n");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr(path_ + ":2: overrides: "));
  EXPECT_THAT(m.status().message(), HasSubstr("'train.steps'"));
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
    ::testing::Values(BadMatrix{"UnknownTopKey", "base: ../base.yaml\nvariant: []\n",
                                ":2: unknown key 'variant'; the valid keys of a matrix are: name,"},
                      BadMatrix{"MissingBase", "variants: [{label: a}]\n", "missing key 'base'"},
                      BadMatrix{"BaseNotFound", "base: nope.yaml\nvariants: [{label: a}]\n", ":1: base: "},
                      BadMatrix{"NoVariants", "base: ../base.yaml\nvariants: []\n", "non-empty list"},
                      BadMatrix{"MissingLabel", "base: ../base.yaml\nvariants: [{workers: 2}]\n",
                                "variant #1: expected a non-empty 'label'"},
                      BadMatrix{"DuplicateLabel", "base: ../base.yaml\nvariants: [{label: a}, {label: a}]\n",
                                "variant 'a': the label is used twice"},
                      BadMatrix{"UnknownVariantKey", "base: ../base.yaml\nvariants:\n  - label: a\n    wokers: 2\n",
                                ":4: variant 'a': unknown key 'wokers'; the valid keys of a variant are: label, "
                                "set, workers, ps"},
                      BadMatrix{"ZeroWorkers", "base: ../base.yaml\nvariants: [{label: a, workers: 0}]\n",
                                "variant 'a': workers: expected an integer in [1, 512], got '0'"},
                      BadMatrix{"TextPs", "base: ../base.yaml\nvariants: [{label: a, ps: two}]\n",
                                "variant 'a': ps: expected an integer"},
                      BadMatrix{"WorkersAndHosts",
                                "base: ../base.yaml\nvariants: [{label: a, workers: 2, set: {cluster: "
                                "{worker_hosts: ['h:1']}}}]\n",
                                "give either 'workers: N' or 'set: cluster: worker_hosts'"},
                      BadMatrix{"SetNotAMap", "base: ../base.yaml\nvariants: [{label: a, set: [1]}]\n",
                                "variant 'a': set: expected a map"},
                      BadMatrix{"UnknownBaseline",
                                "base: ../base.yaml\nbaseline: zz\nvariants: [{label: a}, {label: b}]\n",
                                ":2: baseline: 'zz' is not a variant label; the labels are: 'a', 'b'"},
                      BadMatrix{"InvalidYaml", "base: ../base.yaml\nvariants: [{label: a}\n", "invalid YAML"},
                      BadMatrix{"NotAMap", "- a\n- b\n", "expected a map with the keys"}),
    [](const ::testing::TestParamInfo<BadMatrix>& info) { return info.param.name; });

}  // namespace
}  // namespace pstrain::compare
