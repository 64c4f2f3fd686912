#include "common/config/config_loader.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/transport/transport.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/collective.h"

namespace pstrain {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// A fresh directory under testing::TempDir() per test.
std::string TestDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "pstrain_config_test" /
                              (std::string(info->test_suite_name()) + "." + info->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::string WriteFile(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::path(dir) / name).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// A valid experiment that touches no files (synthetic data).
constexpr char kValidYaml[] = R"(# a comment
cluster:
  ps_hosts: [localhost:2222]
  worker_hosts:
    - localhost:2223
    - localhost:2224
data:
  source: synthetic
)";

std::string ErrorOf(std::string_view yaml) {
  absl::StatusOr<ExperimentConfig> c = ParseExperimentYaml(yaml, "exp.yaml");
  EXPECT_FALSE(c.ok()) << "parsed unexpectedly:\n" << yaml;
  if (c.ok()) return "";
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(c.status().message());
}

// ---------------------------------------------------------------- YAML parsing

TEST(ParseExperimentYaml, ParsesEverySection) {
  constexpr char kYaml[] = R"(
name: full
cluster:
  ps_hosts: ["ps0:1000", "ps1:1001"]
  worker_hosts: [w0:2000, w1:2001, w2:2002]
model:
  name: mlp
  hidden_units: [256, 64]
  input_shape: [1, 28, 28]
  num_classes: 10
data:
  source: fashion_mnist
  path: /tmp/fm
  shuffle_seed: 18446744073709551615
  shuffle: no
  synthetic_examples: 100
optimizer:
  name: sgd
  learning_rate: 0.1
  momentum: 0.5
  lr_schedule: step
  lr_decay_factor: 0.5
  lr_decay_steps: 1000
  weight_decay: 1e-4
train:
  batch_size_per_device: 64
  steps: 500
  epochs: 2.5
  warmup_steps: 5
  display_every: 20
  init_seed: 7
  evaluate: false
  eval_batch_size: 500
timeouts:
  rpc_seconds: 10
  sync_step_seconds: 20
  heartbeat_seconds: 0.5
  worker_lost_seconds: 5
  startup_seconds: 30
variable_update: parameter_server
consistency: async
staleness: 3
replicas_to_aggregate: 2
transport: grpc
placement: greedy
device: cpu
devices_per_worker: 1
max_message_bytes: 4194304
local_parameter_device: cpu
all_reduce_spec: ""
)";
  absl::StatusOr<ExperimentConfig> c = ParseExperimentYaml(kYaml, "full.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name(), "full");
  EXPECT_THAT(c->cluster().ps_hosts(), ::testing::ElementsAre("ps0:1000", "ps1:1001"));
  EXPECT_THAT(c->cluster().worker_hosts(), ::testing::ElementsAre("w0:2000", "w1:2001", "w2:2002"));
  EXPECT_THAT(c->model().hidden_units(), ::testing::ElementsAre(256, 64));
  EXPECT_THAT(c->model().input_shape(), ::testing::ElementsAre(1, 28, 28));
  EXPECT_EQ(c->model().num_classes(), 10);
  EXPECT_EQ(c->data().path(), "/tmp/fm");
  EXPECT_EQ(c->data().shuffle_seed(), 18446744073709551615ULL);
  EXPECT_FALSE(c->data().shuffle());
  EXPECT_EQ(c->data().synthetic_examples(), 100);
  EXPECT_EQ(c->optimizer().name(), "sgd");
  EXPECT_FLOAT_EQ(c->optimizer().learning_rate(), 0.1f);
  EXPECT_FLOAT_EQ(c->optimizer().weight_decay(), 1e-4f);
  EXPECT_EQ(c->optimizer().lr_decay_steps(), 1000);
  EXPECT_EQ(c->train().batch_size_per_device(), 64);
  EXPECT_EQ(c->train().steps(), 500);
  EXPECT_FLOAT_EQ(c->train().epochs(), 2.5f);
  EXPECT_FALSE(c->train().evaluate());
  EXPECT_EQ(c->train().init_seed(), 7u);
  EXPECT_FLOAT_EQ(c->timeouts().heartbeat_seconds(), 0.5f);
  EXPECT_EQ(c->consistency(), "async");
  EXPECT_EQ(c->staleness(), 3);
  EXPECT_EQ(c->replicas_to_aggregate(), 2);
  EXPECT_EQ(c->placement(), "greedy");
  EXPECT_EQ(c->max_message_bytes(), 4194304);
  EXPECT_TRUE(c->has_all_reduce_spec());
  EXPECT_EQ(c->all_reduce_spec(), "");
}

TEST(ParseExperimentYaml, UnsetFieldsKeepSchemaDefaults) {
  absl::StatusOr<ExperimentConfig> c = ParseExperimentYaml("cluster:\n  worker_hosts: [a:1]\n", "exp.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->consistency(), "sync");
  EXPECT_EQ(c->variable_update(), "parameter_server");
  EXPECT_EQ(c->transport(), "grpc");
  EXPECT_EQ(c->placement(), "balanced");
  EXPECT_EQ(c->partition_bytes(), 0);
  EXPECT_EQ(c->data().augmentation(), DataConfig::auto_);
  EXPECT_EQ(c->data().normalization().preset(), NormalizationConfig::auto_);
  EXPECT_EQ(c->train().learning_check_steps(), 200);
  EXPECT_EQ(c->max_message_bytes(), 2147483647);
  EXPECT_EQ(c->model().name(), "mlp");
  EXPECT_EQ(c->data().source(), "fashion_mnist");
  EXPECT_EQ(c->data().path(), "/usr/share/datasets/fashion-mnist");
  EXPECT_EQ(c->optimizer().name(), "momentum");
  EXPECT_FLOAT_EQ(c->optimizer().learning_rate(), 0.05f);
  EXPECT_EQ(c->train().batch_size_per_device(), 32);
  EXPECT_FLOAT_EQ(c->timeouts().worker_lost_seconds(), 30);
  EXPECT_FALSE(c->has_name());
  EXPECT_FALSE(c->has_train());
}

// Every closed choice of the schema is an enum: a value it lacks is refused
// at parse time, naming the field and listing every valid value.
struct ClosedChoice {
  std::string yaml;      // the field set to a value it does not have
  std::string expected;  // the error's tail
};

class ClosedChoiceTest : public ::testing::TestWithParam<ClosedChoice> {};

TEST_P(ClosedChoiceTest, AValueItLacksIsRefusedListingTheValidOnes) {
  EXPECT_THAT(ErrorOf(GetParam().yaml), HasSubstr(GetParam().expected));
}

INSTANTIATE_TEST_SUITE_P(
    Enums, ClosedChoiceTest,
    ::testing::Values(
        ClosedChoice{"model: {tables: [{name: a, pooling: max}]}\n",
                     "field 'model.tables[0].pooling': expected one of sum, mean, got 'max'"},
        ClosedChoice{"model: {tables: [{name: a, eviction: fifo}]}\n",
                     "field 'model.tables[0].eviction': expected one of lru, lfu, got 'fifo'"},
        ClosedChoice{"model: {tables: [{name: a, wire_dtype: int8}]}\n",
                     "field 'model.tables[0].wire_dtype': expected one of fp32, fp16, bf16, got 'int8'"},
        ClosedChoice{"data: {augmentation: mixup}\n",
                     "field 'data.augmentation': expected one of auto, crop, resize, got 'mixup'"},
        ClosedChoice{"data: {sharding: random}\n",
                     "field 'data.sharding': expected one of static, dynamic, got 'random'"},
        ClosedChoice{"data: {normalization: cifar}\n",
                     "field 'data.normalization.preset': expected one of auto, imagenet, none, got 'cifar'"},
        ClosedChoice{"loss_scaling: {mode: adaptive}\n",
                     "field 'loss_scaling.mode': expected one of none, static, dynamic, got 'adaptive'"},
        ClosedChoice{"emulation: {ps_placement: nearby}\n",
                     "field 'emulation.ps_placement': expected one of separate, colocated, got 'nearby'"},
        ClosedChoice{"precision: fp8\n", "field 'precision': expected one of fp32, bf16, fp16, got 'fp8'"},
        ClosedChoice{"fp32_math: fast\n",
                     "field 'fp32_math': expected one of tf32_convolutions, tf32, strict, got 'fast'"},
        ClosedChoice{"elastic: {on_worker_lost: ignore}\n",
                     "field 'elastic.on_worker_lost': expected one of stop, continue, got 'ignore'"}),
    [](const ::testing::TestParamInfo<ClosedChoice>& info) {
      std::string name = info.param.yaml.substr(0, info.param.yaml.find(':'));
      return absl::StrCat(name, info.index);
    });

// A message whose schema names a yaml_scalar_field may be written as that
// one scalar (data.normalization: none) or as a map of its fields; a list is
// neither, and the error says what was expected.
TEST(ParseExperimentYaml, AMessageMayBeWrittenAsItsScalar) {
  absl::StatusOr<ExperimentConfig> preset = ParseExperimentYaml("data: {normalization: none}\n", "exp.yaml");
  ASSERT_TRUE(preset.ok()) << preset.status();
  EXPECT_EQ(preset->data().normalization().preset(), NormalizationConfig::none);
  absl::StatusOr<ExperimentConfig> own =
      ParseExperimentYaml("data:\n  normalization: {mean: [0.5], std: [0.25]}\n", "exp.yaml");
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(own->data().normalization().preset(), NormalizationConfig::auto_);
  EXPECT_FLOAT_EQ(own->data().normalization().std(0), 0.25f);
  EXPECT_EQ(ErrorOf("data:\n  normalization: [1, 2]\n"),
            "exp.yaml:2: field 'data.normalization': expected a map of NormalizationConfig fields, got a list");
  EXPECT_EQ(ErrorOf("train: none\n"), "exp.yaml:1: field 'train': expected a map of TrainConfig fields, got 'none'");
}

TEST(ParseExperimentYaml, EmptyDocumentsAreAllDefaults) {
  for (const char* yaml : {"", "# only a comment\n", "\n\n", "cluster:\ntrain: ~\n"}) {
    absl::StatusOr<ExperimentConfig> c = ParseExperimentYaml(yaml, "exp.yaml");
    ASSERT_TRUE(c.ok()) << yaml << ": " << c.status();
    EXPECT_EQ(c->consistency(), "sync");
    EXPECT_EQ(c->train().batch_size_per_device(), 32);
    // GPUs compute convolutions in TF32 unless told otherwise, as PyTorch does.
    EXPECT_EQ(c->fp32_math(), ExperimentConfig::tf32_convolutions);
  }
  absl::StatusOr<ExperimentConfig> strict = ParseExperimentYaml("fp32_math: strict\n", "exp.yaml");
  ASSERT_TRUE(strict.ok()) << strict.status();
  EXPECT_EQ(strict->fp32_math(), ExperimentConfig::strict);
}

TEST(ParseExperimentYaml, WrongTypeNamesFileLineAndPath) {
  constexpr char kYaml[] = R"(cluster:
  worker_hosts: [a:1]
data:
  source: synthetic

train:
  batch_size_per_device: abc
)";
  EXPECT_EQ(ErrorOf(kYaml), "exp.yaml:7: field 'train.batch_size_per_device': expected an integer, got 'abc'");
}

TEST(ParseExperimentYaml, UnknownTopLevelFieldListsValidKeys) {
  const std::string e = ErrorOf("clustr:\n  worker_hosts: [a:1]\n");
  EXPECT_THAT(e, StartsWith("exp.yaml:1: unknown field 'clustr'"));
  EXPECT_THAT(e, HasSubstr("did you mean 'cluster'?"));
  EXPECT_THAT(e, HasSubstr("are: name, cluster, model, data, optimizer, train, timeouts, "
                           "variable_update, consistency"));
  EXPECT_THAT(e, HasSubstr("all_reduce_spec"));
}

TEST(ParseExperimentYaml, UnknownNestedFieldListsKeysOfItsMessage) {
  const std::string e = ErrorOf("name: x\ntrain:\n  steps: 3\n  batch_sise: 4\n");
  EXPECT_THAT(e, StartsWith("exp.yaml:4: unknown field 'train.batch_sise'"));
  EXPECT_THAT(e, HasSubstr("did you mean 'batch_size_per_device'?"));
  EXPECT_THAT(e, HasSubstr("valid keys of 'train' (TrainConfig) are: batch_size_per_device, "
                           "steps, epochs, warmup_steps, display_every, init_seed, evaluate, "
                           "eval_batch_size"));
  // A far-off name gets no suggestion.
  EXPECT_THAT(ErrorOf("timeouts:\n  zzzzzzzzzzzz: 1\n"), Not(HasSubstr("did you mean")));
}

TEST(ParseExperimentYaml, ScalarTypeErrors) {
  EXPECT_EQ(ErrorOf("train:\n  batch_size_per_device: 3000000000\n"),
            "exp.yaml:2: field 'train.batch_size_per_device': expected an integer in "
            "[-2147483648, 2147483647], got '3000000000'");
  EXPECT_EQ(ErrorOf("train:\n  steps: 1.5\n"), "exp.yaml:2: field 'train.steps': expected an integer, got '1.5'");
  EXPECT_THAT(ErrorOf("train:\n  steps: 99999999999999999999\n"),
              HasSubstr("expected an integer in [-9223372036854775808, 9223372036854775807]"));
  EXPECT_THAT(ErrorOf("data:\n  shuffle_seed: -1\n"),
              HasSubstr("field 'data.shuffle_seed': expected a non-negative integer in [0, "
                        "18446744073709551615], got '-1'"));
  EXPECT_EQ(ErrorOf("optimizer:\n  learning_rate: fast\n"),
            "exp.yaml:2: field 'optimizer.learning_rate': expected a finite number, got 'fast'");
  EXPECT_THAT(ErrorOf("optimizer:\n  learning_rate: .nan\n"), HasSubstr("expected a finite number"));
  EXPECT_THAT(ErrorOf("optimizer:\n  learning_rate: 1e40\n"),
              HasSubstr("expected a number within the range of a 32-bit float, got '1e40'"));
  EXPECT_EQ(ErrorOf("data:\n  shuffle: maybe\n"),
            "exp.yaml:2: field 'data.shuffle': expected true or false, got 'maybe'");
  EXPECT_EQ(ErrorOf("train:\n  steps:\n"), "exp.yaml:2: field 'train.steps': expected an integer, got nothing (null)");
  EXPECT_EQ(ErrorOf("train:\n  steps: [1, 2]\n"), "exp.yaml:2: field 'train.steps': expected an integer, got a list");
  EXPECT_EQ(ErrorOf("name: {a: 1}\n"), "exp.yaml:1: field 'name': expected a string, got a map");
}

TEST(ParseExperimentYaml, BoolsAndQuotedNumbers) {
  absl::StatusOr<ExperimentConfig> c = ParseExperimentYaml(
      "data:\n  shuffle: Off\ntrain:\n  evaluate: TRUE\n  steps: \"12\"\n"
      "name: 123\n",
      "exp.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->data().shuffle());
  EXPECT_TRUE(c->train().evaluate());
  EXPECT_EQ(c->train().steps(), 12);
  EXPECT_EQ(c->name(), "123");
}

TEST(ParseExperimentYaml, RepeatedFields) {
  EXPECT_EQ(ErrorOf("model:\n  hidden_units: 5\n"),
            "exp.yaml:2: field 'model.hidden_units': expected a list of integer values, got '5'");
  EXPECT_EQ(ErrorOf("model:\n  hidden_units:\n    - 64\n    - x\n"),
            "exp.yaml:4: field 'model.hidden_units[1]': expected an integer, got 'x'");
  EXPECT_EQ(ErrorOf("cluster:\n  worker_hosts: a:1\n"),
            "exp.yaml:2: field 'cluster.worker_hosts': expected a list of string values, got "
            "'a:1'");
  EXPECT_THAT(ErrorOf("cluster:\n  worker_hosts: [[a, b]]\n"),
              HasSubstr("field 'cluster.worker_hosts[0]': expected a string, got a list"));
  absl::StatusOr<ExperimentConfig> c = ParseExperimentYaml("model:\n  hidden_units: []\n  input_shape:\n", "exp.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model().hidden_units_size(), 0);
  EXPECT_EQ(c->model().input_shape_size(), 0);
}

TEST(ParseExperimentYaml, NestedMessageErrors) {
  EXPECT_EQ(ErrorOf("train: 5\n"), "exp.yaml:1: field 'train': expected a map of TrainConfig fields, got '5'");
  EXPECT_EQ(ErrorOf("cluster: [a:1]\n"),
            "exp.yaml:1: field 'cluster': expected a map of ClusterConfig fields, got a list");
  EXPECT_THAT(ErrorOf("- a\n- b\n"), StartsWith("exp.yaml:1: expected a map of ExperimentConfig fields at the top "
                                                "level, got a list"));
  EXPECT_THAT(ErrorOf("just text\n"), HasSubstr("at the top level, got 'just text'"));
}

TEST(ParseExperimentYaml, DuplicateKey) {
  EXPECT_EQ(ErrorOf("train:\n  steps: 1\n  steps: 2\n"),
            "exp.yaml:3: field 'train.steps': expected each key once, got it again (first "
            "given on line 2)");
}

TEST(ParseExperimentYaml, SyntaxErrorsAndMultipleDocuments) {
  EXPECT_THAT(ErrorOf("train:\n  steps: [1, 2\n"), AllOf(StartsWith("exp.yaml:"), HasSubstr("invalid YAML")));
  EXPECT_THAT(ErrorOf("train:\n\tsteps: 1\n"), AllOf(StartsWith("exp.yaml:2:"), HasSubstr("not tabs")));
  EXPECT_THAT(ErrorOf("name: a\n---\nname: b\n"),
              AllOf(StartsWith("exp.yaml:3:"), HasSubstr("expected one YAML document, got 2")));
}

// ---------------------------------------------------------------- text format

TEST(ParseExperimentTextProto, ParsesAndReportsLineColumn) {
  absl::StatusOr<ExperimentConfig> c = ParseExperimentTextProto(
      "cluster { worker_hosts: 'a:1' worker_hosts: 'b:2' }\ntrain { steps: 7 }\n"
      "consistency: 'async'\n",
      "exp.pbtxt");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->cluster().worker_hosts_size(), 2);
  EXPECT_EQ(c->train().steps(), 7);
  EXPECT_EQ(c->consistency(), "async");
  EXPECT_EQ(c->train().batch_size_per_device(), 32);

  absl::StatusOr<ExperimentConfig> bad =
      ParseExperimentTextProto("name: 'x'\ntrain {\n  batch_sise: 3\n}\n", "exp.pbtxt");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), StartsWith("exp.pbtxt:3:"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("batch_sise"));
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("The valid keys of TrainConfig are: batch_size_per_device, steps"));

  absl::StatusOr<ExperimentConfig> type = ParseExperimentTextProto("train { steps: 'many' }\n", "exp.pbtxt");
  ASSERT_FALSE(type.ok());
  EXPECT_THAT(std::string(type.status().message()), StartsWith("exp.pbtxt:1:"));
}

// ---------------------------------------------------------------- files

TEST(LoadExperimentConfig, YamlAndTextFormatFiles) {
  const std::string dir = TestDir();
  const std::string yaml = WriteFile(dir, "my_exp.yaml", kValidYaml);
  absl::StatusOr<ExperimentConfig> a = LoadExperimentConfig(yaml);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->name(), "my_exp");
  EXPECT_EQ(a->cluster().worker_hosts_size(), 2);

  const std::string yml = WriteFile(dir, "named.yml", std::string(kValidYaml) + "name: given\n");
  absl::StatusOr<ExperimentConfig> b = LoadExperimentConfig(yml);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->name(), "given");

  for (const char* ext : {".pbtxt", ".textproto", ".prototxt"}) {
    const std::string txt =
        WriteFile(dir, std::string("proto_exp") + ext,
                  "cluster { ps_hosts: 'p:1' worker_hosts: 'w:2' }\ndata { source: 'synthetic' }\n");
    absl::StatusOr<ExperimentConfig> c = LoadExperimentConfig(txt);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->name(), "proto_exp");
  }
}

TEST(LoadExperimentConfig, ErrorsNameThePath) {
  const std::string dir = TestDir();
  const std::string missing = dir + "/nope.yaml";
  absl::StatusOr<ExperimentConfig> a = LoadExperimentConfig(missing);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(a.status().message()), AllOf(HasSubstr(missing), HasSubstr("cannot read")));

  std::filesystem::create_directories(dir + "/adir.yaml");
  EXPECT_THAT(std::string(LoadExperimentConfig(dir + "/adir.yaml").status().message()), HasSubstr("is a directory"));

  const std::string json = WriteFile(dir, "exp.json", "{}");
  EXPECT_THAT(std::string(LoadExperimentConfig(json).status().message()),
              AllOf(HasSubstr(json), HasSubstr(".yaml"), HasSubstr(".pbtxt")));

  // Parse errors carry the path as given.
  const std::string bad = WriteFile(dir, "bad.yaml", "train:\n  steps: x\n");
  EXPECT_EQ(LoadExperimentConfig(bad).status().message(),
            bad + ":2: field 'train.steps': expected an integer, got 'x'");

  // Validation runs too, and names the path.
  const std::string invalid = WriteFile(dir, "invalid.yaml", "data:\n  source: synthetic\n");
  EXPECT_EQ(LoadExperimentConfig(invalid).status().message(),
            invalid + ": field 'cluster.worker_hosts': expected at least one host:port, got none");
  // ReadExperimentConfig does not validate.
  absl::StatusOr<ExperimentConfig> read = ReadExperimentConfig(invalid);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->name(), "invalid");
}

// ---------------------------------------------------------------- validation

ExperimentConfig ValidConfig() {
  absl::StatusOr<ExperimentConfig> c = ParseExperimentYaml(kValidYaml, "exp.yaml");
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

// Validation as a role runs it: this test links every module that registers
// config checks (models, optimizers, data sources, transports, PS
// consistency policies, strategies).
std::string ValidationError(const std::function<void(ExperimentConfig*)>& mutate) {
  ExperimentConfig c = ValidConfig();
  mutate(&c);
  absl::Status s = ValidateExperimentConfig(c, "exp.yaml");
  if (s.ok()) return "OK";
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  return std::string(s.message());
}

TEST(ValidateExperimentConfig, ValidConfigPasses) {
  EXPECT_EQ(ValidationError([](ExperimentConfig*) {}), "OK");
  EXPECT_EQ(ValidationError([](ExperimentConfig* c) {
              c->mutable_cluster()->add_ps_hosts("[::1]:5000");
              c->mutable_cluster()->add_worker_hosts("10.0.0.7:65535");
              c->mutable_train()->set_steps(10);
              c->mutable_train()->set_epochs(0);  // ignored when steps > 0
              c->set_replicas_to_aggregate(3);
              c->mutable_optimizer()->set_momentum(0);
            }),
            "OK");
}

TEST(ValidateExperimentConfig, Cluster) {
  EXPECT_EQ(ValidationError([](ExperimentConfig* c) { c->mutable_cluster()->clear_worker_hosts(); }),
            "exp.yaml: field 'cluster.worker_hosts': expected at least one host:port, got none");
  EXPECT_EQ(ValidationError([](ExperimentConfig* c) { c->mutable_cluster()->clear_ps_hosts(); }),
            "exp.yaml: field 'cluster.ps_hosts': expected at least one host:port when "
            "variable_update is parameter_server, got none");
  EXPECT_EQ(ValidationError([](ExperimentConfig* c) { c->mutable_cluster()->set_worker_hosts(1, "h:0"); }),
            "exp.yaml: field 'cluster.worker_hosts[1]': expected host:port with a port in 1..65535 "
            "(IPv6 as [addr]:port), got 'h:0' (the port 0 is out of range 1..65535)");
  EXPECT_THAT(ValidationError([](ExperimentConfig* c) { c->mutable_cluster()->set_ps_hosts(0, "h:65536"); }),
              HasSubstr("field 'cluster.ps_hosts[0]'"));
  EXPECT_THAT(ValidationError([](ExperimentConfig* c) { c->mutable_cluster()->set_ps_hosts(0, ":80"); }),
              HasSubstr("the host is empty"));
  EXPECT_THAT(ValidationError([](ExperimentConfig* c) { c->mutable_cluster()->set_ps_hosts(0, "host"); }),
              HasSubstr("no ':port'"));
  EXPECT_THAT(ValidationError([](ExperimentConfig* c) { c->mutable_cluster()->set_ps_hosts(0, "::1:80"); }),
              HasSubstr("an IPv6 address needs brackets"));
  EXPECT_EQ(ValidationError([](ExperimentConfig* c) { c->mutable_cluster()->add_worker_hosts("localhost:2222"); }),
            "exp.yaml: field 'cluster.worker_hosts[2]': expected a host:port no other task uses, "
            "got 'localhost:2222' (already used by cluster.ps_hosts[0])");
}

struct Case {
  const char* label;
  std::function<void(ExperimentConfig*)> mutate;
  const char* message;  // the whole message after "exp.yaml: "
};

TEST(ValidateExperimentConfig, EveryRule) {
  const std::vector<Case> cases = {
      {"batch 0", [](auto* c) { c->mutable_train()->set_batch_size_per_device(0); },
       "field 'train.batch_size_per_device': expected a number > 0, got 0"},
      {"steps", [](auto* c) { c->mutable_train()->set_steps(-1); },
       "field 'train.steps': expected a number >= 0, got -1"},
      {"epochs", [](auto* c) { c->mutable_train()->set_epochs(0); },
       "field 'train.epochs': expected a number > 0 when train.steps is 0, got 0"},
      {"warmup", [](auto* c) { c->mutable_train()->set_warmup_steps(-2); },
       "field 'train.warmup_steps': expected a number >= 0, got -2"},
      {"display", [](auto* c) { c->mutable_train()->set_display_every(0); },
       "field 'train.display_every': expected a number > 0, got 0"},
      {"eval batch", [](auto* c) { c->mutable_train()->set_eval_batch_size(0); },
       "field 'train.eval_batch_size': expected a number > 0, got 0"},
      {"lr", [](auto* c) { c->mutable_optimizer()->set_learning_rate(0); },
       "field 'optimizer.learning_rate': expected a number > 0, got 0"},
      {"momentum 1", [](auto* c) { c->mutable_optimizer()->set_momentum(1); },
       "field 'optimizer.momentum': expected a number in [0, 1), got 1"},
      {"momentum <0", [](auto* c) { c->mutable_optimizer()->set_momentum(-0.5); },
       "field 'optimizer.momentum': expected a number in [0, 1), got -0.5"},
      {"weight decay", [](auto* c) { c->mutable_optimizer()->set_weight_decay(-1); },
       "field 'optimizer.weight_decay': expected a number >= 0, got -1"},
      {"schedule", [](auto* c) { c->mutable_optimizer()->set_lr_schedule("linear"); },
       "field 'optimizer.lr_schedule': expected one of constant, cosine, step, got 'linear'"},
      {"step steps", [](auto* c) { c->mutable_optimizer()->set_lr_schedule("step"); },
       "field 'optimizer.lr_decay_steps': expected a number > 0 when lr_schedule is step, got 0"},
      {"step factor",
       [](auto* c) {
         c->mutable_optimizer()->set_lr_schedule("step");
         c->mutable_optimizer()->set_lr_decay_steps(10);
         c->mutable_optimizer()->set_lr_decay_factor(1.5);
       },
       "field 'optimizer.lr_decay_factor': expected a number in (0, 1], got 1.5"},
      {"optimizer", [](auto* c) { c->mutable_optimizer()->set_name("adamw"); },
       "field 'optimizer.name': expected one of adagrad, adam, ftrl, momentum, sgd, got 'adamw'"},
      {"model", [](auto* c) { c->mutable_model()->set_name("resnet"); },
       "field 'model.name': expected one of alexnet, dlrm, inception3, lenet, mlp, resnet101, resnet152, resnet50, "
       "trivial, vgg16, wide_deep, got 'resnet'"},
      {"hidden",
       [](auto* c) {
         c->mutable_model()->add_hidden_units(8);
         c->mutable_model()->add_hidden_units(0);
       },
       "field 'model.hidden_units[1]': expected a number of units > 0, got 0"},
      {"bottom", [](auto* c) { c->mutable_model()->add_bottom_units(-4); },
       "field 'model.bottom_units[0]': expected a number of units > 0, got -4"},
      {"top",
       [](auto* c) {
         c->mutable_model()->add_top_units(16);
         c->mutable_model()->add_top_units(0);
       },
       "field 'model.top_units[1]': expected a number of units > 0, got 0"},
      {"shape dims",
       [](auto* c) {
         c->mutable_model()->add_input_shape(28);
         c->mutable_model()->add_input_shape(28);
       },
       "field 'model.input_shape': expected 3 dimensions [channels, height, width], got 2 ([28, 28])"},
      {"shape zero",
       [](auto* c) {
         for (int d : {1, 0, 28}) c->mutable_model()->add_input_shape(d);
       },
       "field 'model.input_shape[1]': expected a dimension > 0, got 0"},
      {"classes", [](auto* c) { c->mutable_model()->set_num_classes(1); },
       "field 'model.num_classes': expected a number of classes > 1, got 1"},
      {"source", [](auto* c) { c->mutable_data()->set_source("cifar100"); },
       "field 'data.source': expected one of cifar10, criteo, ctr_tfrecord, fashion_mnist, image_folder, synthetic, "
       "synthetic_ctr, "
       "tfrecord, got 'cifar100'"},
      {"synthetic", [](auto* c) { c->mutable_data()->set_synthetic_examples(0); },
       "field 'data.synthetic_examples': expected a number > 0, got 0"},
      {"variable_update", [](auto* c) { c->set_variable_update("mirrored"); },
       "field 'variable_update': expected one of allreduce, distributed_replicated, independent, "
       "parameter_server, replicated, got 'mirrored'"},
      {"replicated on 2 workers", [](auto* c) { c->set_variable_update("replicated"); },
       "field 'cluster.worker_hosts': expected one worker for variable_update replicated (the devices of one "
       "worker each hold a copy and all-reduce their gradients), got 2 workers"},
      {"independent on 2 workers", [](auto* c) { c->set_variable_update("independent"); },
       "field 'cluster.worker_hosts': expected one worker for variable_update independent (no "
       "synchronisation: every device of one worker trains its own copy), got 2 workers"},
      {"consistency", [](auto* c) { c->set_consistency("bsp"); },
       "field 'consistency': expected one of async, ssp, sync, got 'bsp'"},
      {"staleness", [](auto* c) { c->set_staleness(-1); }, "field 'staleness': expected a number >= 0, got -1"},
      {"replicas", [](auto* c) { c->set_replicas_to_aggregate(3); },
       "field 'replicas_to_aggregate': expected a number in [0, 2] (0 means every worker; the "
       "cluster has 2 workers), got 3"},
      {"replicas <0", [](auto* c) { c->set_replicas_to_aggregate(-1); },
       "field 'replicas_to_aggregate': expected a number in [0, 2] (0 means every worker; the "
       "cluster has 2 workers), got -1"},
      {"placement", [](auto* c) { c->set_placement("random"); },
       "field 'placement': expected one of balanced, greedy, partitioned, round_robin, got 'random'"},
      {"partition_bytes", [](auto* c) { c->set_partition_bytes(-1); },
       "field 'partition_bytes': expected a number >= 0, got -1"},
      {"device", [](auto* c) { c->set_device("tpu"); },
       "field 'device': expected one of cpu, cpu_mirrored, emulated, gpu, got 'tpu'"},
      {"learning_check_steps", [](auto* c) { c->mutable_train()->set_learning_check_steps(-5); },
       "field 'train.learning_check_steps': expected a number >= 0, got -5"},
      {"lpd gpu for allreduce",
       [](auto* c) {
         c->set_device("gpu");
         c->set_variable_update("allreduce");
         c->set_local_parameter_device("gpu");
       },
       "field 'local_parameter_device': expected cpu for variable_update allreduce (Horovod-style all-reduce "
       "between workers, no parameter servers (collective: gloo or mpi on host buffers, nccl on GPUs); gpu places each "
       "variable's gradient "
       "sum on the least-loaded GPU of a worker whose variables live on parameter servers), got 'gpu'"},
      {"nccl for distributed_replicated",
       [](auto* c) {
         c->set_device("gpu");
         c->set_variable_update("distributed_replicated");
         c->set_all_reduce_spec("nccl");
       },
       "field 'all_reduce_spec': expected one of '' (default), none, pscpu for variable_update "
       "distributed_replicated, got 'nccl'"},
      {"devices", [](auto* c) { c->set_devices_per_worker(17); },
       "field 'devices_per_worker': expected a number in [1, 16], got 17"},
      {"devices 0", [](auto* c) { c->set_devices_per_worker(0); },
       "field 'devices_per_worker': expected a number in [1, 16], got 0"},
      {"lpd", [](auto* c) { c->set_local_parameter_device("gpu"); },
       "field 'local_parameter_device': expected cpu with device cpu or cpu_mirrored or emulated (gpu places "
       "variables on the replicas' devices; this experiment has none), got 'gpu'"},
      {"all_reduce_spec nccl on cpu",
       [](auto* c) {
         c->set_variable_update("replicated");
         c->mutable_cluster()->mutable_worker_hosts()->RemoveLast();
         c->set_all_reduce_spec("nccl");
       },
       "field 'device': expected one of gpu for variable_update replicated with all_reduce_spec nccl, "
       "got 'cpu'"},
      {"all_reduce_spec unknown",
       [](auto* c) {
         c->set_variable_update("distributed_replicated");
         c->set_all_reduce_spec("ring");
       },
       "field 'all_reduce_spec': expected one of '' (default), none, pscpu for variable_update "
       "distributed_replicated, got 'ring'"},
      {"all_reduce_spec for ps", [](auto* c) { c->set_all_reduce_spec("none"); },
       "field 'all_reduce_spec': expected empty for variable_update parameter_server (variables on parameter "
       "servers; each worker sums its devices' gradients and pushes once), got 'none'"},
      {"msg small", [](auto* c) { c->set_max_message_bytes(1000); },
       "field 'max_message_bytes': expected a number in [1048576, 2147483647], got 1000"},
      {"msg big", [](auto* c) { c->set_max_message_bytes(2147483648LL); },
       "field 'max_message_bytes': expected a number in [1048576, 2147483647], got 2147483648"},
      {"rpc", [](auto* c) { c->mutable_timeouts()->set_rpc_seconds(0); },
       "field 'timeouts.rpc_seconds': expected a number > 0, got 0"},
      {"sync step", [](auto* c) { c->mutable_timeouts()->set_sync_step_seconds(-1); },
       "field 'timeouts.sync_step_seconds': expected a number > 0, got -1"},
      {"heartbeat", [](auto* c) { c->mutable_timeouts()->set_heartbeat_seconds(0); },
       "field 'timeouts.heartbeat_seconds': expected a number > 0, got 0"},
      {"startup", [](auto* c) { c->mutable_timeouts()->set_startup_seconds(0); },
       "field 'timeouts.startup_seconds': expected a number > 0, got 0"},
      {"lost", [](auto* c) { c->mutable_timeouts()->set_worker_lost_seconds(1); },
       "field 'timeouts.worker_lost_seconds': expected a number > timeouts.heartbeat_seconds "
       "(1), got 1"},
  };
  for (const Case& tc : cases) {
    EXPECT_EQ(ValidationError(tc.mutate), std::string("exp.yaml: ") + tc.message) << tc.label;
  }
}

// Membership and data sharding (docs/ELASTIC.md): the fields' own rules,
// then what they need of the strategy.
TEST(ValidateExperimentConfig, EmbeddingTableFields) {
  auto table = [](ExperimentConfig* c) {
    EmbeddingTableConfig* t = c->mutable_model()->add_tables();
    t->set_name("ads");
    return t;
  };
  const std::vector<Case> cases = {
      {"name", [&](auto* c) { table(c)->set_name("ad-id"); },
       "field 'model.tables[0].name': expected letters, digits and underscores, got 'ad-id'"},
      {"twice",
       [&](auto* c) {
         table(c);
         table(c);
       },
       "field 'model.tables[1].name': expected a name no other table has, got 'ads'"},
      {"dim", [&](auto* c) { table(c)->set_dim(0); },
       "field 'model.tables[0].dim': expected a number in [1, 4096], got 0"},
      {"fixed and limited",
       [&](auto* c) {
         table(c)->set_cardinality(10);
         c->mutable_model()->mutable_tables(0)->set_max_rows(5);
       },
       "field 'model.tables[0].max_rows': expected 0 for a fixed-size table (cardinality > 0), got 5"},
      {"schedule", [&](auto* c) { table(c)->mutable_optimizer()->set_lr_schedule("linear"); },
       "field 'model.tables[0].optimizer.lr_schedule': expected one of constant, cosine, step, got 'linear'"},
      {"independent",
       [&](auto* c) {
         table(c);
         c->set_variable_update("independent");
       },
       "field 'model.tables': expected none for variable_update independent (embedding tables live on parameter "
       "servers; allreduce, distributed_replicated, parameter_server, replicated run them), got 1 tables"},
      {"ssp beside all-reduce",
       [&](auto* c) {
         table(c);
         c->set_variable_update("allreduce");
         c->set_consistency("ssp");
       },
       "field 'consistency': expected sync or async for the embedding tables beside variable_update allreduce (its "
       "workers run in lock step), got 'ssp'"},
      {"all-reduce without shards",
       [&](auto* c) {
         table(c);
         c->set_variable_update("allreduce");
         c->mutable_cluster()->clear_ps_hosts();
       },
       "field 'cluster.ps_hosts': expected at least one host:port for model.tables (the embedding tables live on "
       "parameter servers beside variable_update allreduce), got none"},
  };
  for (const Case& tc : cases) {
    EXPECT_EQ(ValidationError(tc.mutate), std::string("exp.yaml: ") + tc.message) << tc.label;
  }
  // The dense variables all-reduced, the tables on the listed shards.
  EXPECT_EQ(ValidationError([&](auto* c) {
              table(c);
              c->set_variable_update("allreduce");
            }),
            "OK");
  EXPECT_EQ(ValidationError([&](auto* c) {
              table(c)->set_max_rows(1000);
              c->mutable_model()->mutable_tables(0)->set_eviction(EmbeddingTableConfig::lfu);
              c->mutable_model()->mutable_tables(0)->mutable_optimizer()->set_name("ftrl");
            }),
            "OK");
}

TEST(ValidateExperimentConfig, ElasticFields) {
  const std::vector<Case> cases = {
      {"chunk", [](auto* c) { c->mutable_data()->set_chunk_batches(0); },
       "field 'data.chunk_batches': expected a number > 0, got 0"},
      {"too many", [](auto* c) { c->mutable_elastic()->set_min_workers(3); },
       "field 'elastic.min_workers': expected a number in [0, 2], got 3"},
      {"joins need dynamic", [](auto* c) { c->mutable_elastic()->set_min_workers(1); },
       "field 'data.sharding': expected dynamic when elastic.min_workers (1) is below the 2 listed workers (with "
       "static sharding an absent worker's examples are never trained, and a joining one's slice is fixed), got "
       "'static'"},
      {"replicated",
       [](auto* c) {
         c->set_variable_update("replicated");
         c->mutable_data()->set_sharding(DataConfig::dynamic);
       },
       "field 'data.sharding': expected static for variable_update replicated (membership changes and the data "
       "ledger need parameter servers, or variable_update allreduce over collective gloo, whose group re-forms), got "
       "'dynamic'"},
      {"all-reduce over mpi",
       [](auto* c) {
         c->set_variable_update("allreduce");
         c->set_collective("mpi");
         c->mutable_data()->set_sharding(DataConfig::dynamic);
       },
       "field 'collective': expected gloo for an elastic all-reduce (data.sharding dynamic, elastic.*: the group "
       "re-forms at step boundaries; an mpirun's ranks are fixed for its life), got 'mpi'"},
      {"all-reduce lost, static",
       [](auto* c) {
         c->set_variable_update("allreduce");
         c->mutable_elastic()->set_on_worker_lost(ElasticConfig::continue_);
       },
       "field 'data.sharding': expected dynamic for an elastic all-reduce (data.sharding dynamic, elastic.*: the "
       "group re-forms at step boundaries; static shards are cut by the listed workers), got 'static'"},
      {"all-reduce regroup",
       [](auto* c) {
         c->set_variable_update("allreduce");
         c->mutable_data()->set_sharding(DataConfig::dynamic);
         c->mutable_elastic()->set_regroup_seconds(0);
       },
       "field 'elastic.regroup_seconds': expected a number > 0, got 0"},
  };
  for (const Case& tc : cases) {
    EXPECT_EQ(ValidationError(tc.mutate), std::string("exp.yaml: ") + tc.message) << tc.label;
  }
  EXPECT_EQ(ValidationError([](auto* c) {
              c->mutable_data()->set_sharding(DataConfig::dynamic);
              c->mutable_elastic()->set_min_workers(1);
              c->mutable_elastic()->set_on_worker_lost(ElasticConfig::continue_);
            }),
            "OK");
}

// The transports this build has are named; one it was built without (ucx
// without UCX) is refused with the reason rather than as a typo.
TEST(ValidateExperimentConfig, TransportIsOneThisBuildHas) {
  EXPECT_EQ(ValidationError([](auto* c) { c->set_transport("rdma"); }),
            absl::StrCat("exp.yaml: field 'transport': expected one of ", absl::StrJoin(RegisteredTransports(), ", "),
                         ", got 'rdma'"));
  const std::string ucx = ValidationError([](auto* c) { c->set_transport("ucx"); });
  if (TransportRegistry().Contains("ucx")) {
    EXPECT_EQ(ucx, "OK");
  } else {
    EXPECT_THAT(ucx, HasSubstr("got 'ucx' (this pstrain was built without UCX"));
  }
}

// collective, hierarchical_allreduce and workers_per_host belong to the
// strategies that all-reduce between workers; the collective is one this
// build has (mpi without Open MPI is refused with the reason).
TEST(ValidateExperimentConfig, CollectiveFields) {
  EXPECT_EQ(ValidationError([](auto* c) { c->set_collective("gloo"); }),
            "exp.yaml: field 'collective': expected unset for variable_update parameter_server (it applies to the "
            "strategies that all-reduce between workers), got a value");
  EXPECT_EQ(ValidationError([](auto* c) { c->set_hierarchical_allreduce(true); }),
            "exp.yaml: field 'hierarchical_allreduce': expected unset for variable_update parameter_server (it "
            "applies to the strategies that all-reduce between workers), got a value");
  auto allreduce = [](ExperimentConfig* c) {
    c->set_variable_update("allreduce");
    c->mutable_cluster()->clear_ps_hosts();
  };
  EXPECT_EQ(ValidationError([&](auto* c) {
              allreduce(c);
              c->set_collective("gloo");
              c->set_hierarchical_allreduce(true);
              c->set_workers_per_host(1);
            }),
            "OK");
  EXPECT_EQ(ValidationError([&](auto* c) {
              allreduce(c);
              c->set_collective("horovod");
            }),
            absl::StrCat("exp.yaml: field 'collective': expected one of ",
                         absl::StrJoin(CollectiveRegistry().Names(), ", "), ", got 'horovod'"));
  EXPECT_EQ(ValidationError([&](auto* c) {
              allreduce(c);
              c->set_hierarchical_allreduce(true);
              c->set_workers_per_host(3);
            }),
            "exp.yaml: field 'workers_per_host': expected a number of workers per host that divides the workers, "
            "got workers_per_host 3 does not divide the 2 workers");
  EXPECT_EQ(ValidationError([&](auto* c) {
              allreduce(c);
              c->set_workers_per_host(-1);
            }),
            "exp.yaml: field 'workers_per_host': expected a number >= 0, got -1");
  const std::string mpi = ValidationError([&](auto* c) {
    allreduce(c);
    c->set_collective("mpi");
  });
  if (CollectiveRegistry().Contains("mpi")) {
    EXPECT_EQ(mpi, "OK");
  } else {
    EXPECT_THAT(mpi, HasSubstr("got 'mpi' (this pstrain was built without Open MPI"));
  }
}

// compression: a known name, supported by the strategy; topk_ratio in (0, 1].
TEST(ValidateExperimentConfig, Compression) {
  EXPECT_EQ(ValidationError([](auto* c) { c->set_compression("topk"); }), "OK");
  EXPECT_EQ(ValidationError([](auto* c) { c->set_compression("int8"); }),
            "exp.yaml: field 'compression': expected one of bf16, fp16, none, topk, got 'int8'");
  EXPECT_EQ(ValidationError([](auto* c) { c->set_topk_ratio(0); }),
            "exp.yaml: field 'topk_ratio': expected a number in (0, 1], got 0");
  EXPECT_EQ(ValidationError([](auto* c) { c->set_topk_ratio(1.5f); }),
            "exp.yaml: field 'topk_ratio': expected a number in (0, 1], got 1.5");
  auto allreduce = [](ExperimentConfig* c) {
    c->set_variable_update("allreduce");
    c->mutable_cluster()->clear_ps_hosts();
  };
  EXPECT_EQ(ValidationError([&](auto* c) {
              allreduce(c);
              c->set_compression("bf16");
            }),
            "OK");
  EXPECT_EQ(ValidationError([&](auto* c) {
              allreduce(c);
              c->set_compression("topk");
            }),
            "exp.yaml: field 'compression': expected one of none, fp16, bf16 for variable_update allreduce, got "
            "'topk'");
  EXPECT_EQ(ValidationError([](auto* c) {
              c->set_variable_update("replicated");
              c->mutable_cluster()->clear_ps_hosts();
              c->mutable_cluster()->mutable_worker_hosts()->DeleteSubrange(1, 1);
              c->set_all_reduce_spec("pscpu");
              c->set_compression("fp16");
            }),
            "exp.yaml: field 'compression': expected none for variable_update replicated (nothing travels between "
            "workers), got 'fp16'");
}

// The fields of adagrad, ftrl and adam (optim/optimizer.cc).
TEST(ValidateExperimentConfig, OptimizerFields) {
  for (const char* name : {"adagrad", "ftrl", "adam"}) {
    EXPECT_EQ(ValidationError([&](ExperimentConfig* c) { c->mutable_optimizer()->set_name(name); }), "OK") << name;
  }
  EXPECT_EQ(ValidationError([](ExperimentConfig* c) {
              OptimizerConfig* o = c->mutable_optimizer();
              o->set_name("ftrl");
              o->set_beta1(0);
              o->set_l1(2);
              o->set_l2(0);
              o->set_ftrl_beta(0);
            }),
            "OK");
  const std::vector<Case> cases = {
      {"accumulator 0", [](auto* c) { c->mutable_optimizer()->set_initial_accumulator(0); },
       "field 'optimizer.initial_accumulator': expected a number > 0, got 0"},
      {"beta1 1", [](auto* c) { c->mutable_optimizer()->set_beta1(1); },
       "field 'optimizer.beta1': expected a number in [0, 1), got 1"},
      {"beta2 <0", [](auto* c) { c->mutable_optimizer()->set_beta2(-0.5); },
       "field 'optimizer.beta2': expected a number in [0, 1), got -0.5"},
      {"epsilon 0", [](auto* c) { c->mutable_optimizer()->set_epsilon(0); },
       "field 'optimizer.epsilon': expected a number > 0, got 0"},
      {"l1", [](auto* c) { c->mutable_optimizer()->set_l1(-1); },
       "field 'optimizer.l1': expected a number >= 0, got -1"},
      {"l2", [](auto* c) { c->mutable_optimizer()->set_l2(-0.25); },
       "field 'optimizer.l2': expected a number >= 0, got -0.25"},
      {"ftrl_beta", [](auto* c) { c->mutable_optimizer()->set_ftrl_beta(-2); },
       "field 'optimizer.ftrl_beta': expected a number >= 0, got -2"},
      {"table's own",
       [](auto* c) {
         EmbeddingTableConfig* t = c->mutable_model()->add_tables();
         t->set_name("ids");
         t->mutable_optimizer()->set_name("ftrl");
         t->mutable_optimizer()->set_initial_accumulator(-1);
       },
       "field 'model.tables[0].optimizer.initial_accumulator': expected a number > 0, got -1"},
  };
  for (const Case& tc : cases) {
    EXPECT_EQ(ValidationError(tc.mutate), std::string("exp.yaml: ") + tc.message) << tc.label;
  }
}

TEST(ValidateExperimentConfig, AllowedNamesComeFromTheRegistries) {
  for (const char* model : {"lenet", "resnet50", "vgg16"}) {
    EXPECT_EQ(ValidationError([&](ExperimentConfig* c) { c->mutable_model()->set_name(model); }), "OK") << model;
  }
  for (const char* update : {"allreduce", "distributed_replicated"}) {
    EXPECT_EQ(ValidationError([&](ExperimentConfig* c) { c->set_variable_update(update); }), "OK") << update;
  }
  EXPECT_EQ(ValidationError([](ExperimentConfig* c) {
              c->set_variable_update("replicated");
              c->mutable_cluster()->mutable_worker_hosts()->RemoveLast();
              c->set_device("gpu");
              c->set_all_reduce_spec("nccl");
            }),
            "OK");
  // allreduce needs no parameter servers.
  EXPECT_EQ(ValidationError([](ExperimentConfig* c) {
              c->set_variable_update("allreduce");
              c->mutable_cluster()->clear_ps_hosts();
            }),
            "OK");
}

TEST(ValidateExperimentConfig, FashionMnistFilesMustExist) {
  const std::string dir = TestDir();
  WriteFile(dir, "train-images-idx3-ubyte.gz", "x");
  WriteFile(dir, "train-labels-idx1-ubyte.gz", "x");
  WriteFile(dir, "t10k-images-idx3-ubyte.gz", "x");
  auto use_dir = [&](ExperimentConfig* c) {
    c->mutable_data()->set_source("fashion_mnist");
    c->mutable_data()->set_path(dir);
  };
  const std::string e = ValidationError(use_dir);
  EXPECT_THAT(e, StartsWith("exp.yaml: field 'data.path': expected a directory holding the "
                            "fashion_mnist files train-images-idx3-ubyte.gz, "));
  EXPECT_THAT(e, HasSubstr("got '" + dir + "' where t10k-labels-idx1-ubyte.gz is missing"));

  WriteFile(dir, "t10k-labels-idx1-ubyte.gz", "x");
  EXPECT_EQ(ValidationError(use_dir), "OK");

  // The default source reads the default path.
  ExperimentConfig c = ValidConfig();
  c.mutable_data()->clear_source();
  c.mutable_data()->set_path(dir + "/missing");
  EXPECT_THAT(std::string(ValidateExperimentConfig(c, "exp.yaml").message()),
              HasSubstr("train-images-idx3-ubyte.gz is missing"));
}

}  // namespace
}  // namespace pstrain
