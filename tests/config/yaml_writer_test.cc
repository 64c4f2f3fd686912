// MessageToYaml: the YAML it writes reads back (ParseYamlIntoMessage) into an
// equal message, with only the fields that were set, strings quoted where YAML
// would read them as something else.
#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/config/yaml_to_proto.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "proto/compare.pb.h"
#include "proto/config.pb.h"

namespace pstrain {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;
using ::testing::Not;

// Parses `yaml` into a fresh message of `like`'s type; fails the test on error.
template <typename M>
M ReadBack(const std::string& yaml) {
  M message;
  const absl::Status status = ParseYamlIntoMessage(yaml, "written.yaml", &message);
  EXPECT_TRUE(status.ok()) << status << "\n" << yaml;
  return message;
}

template <typename M>
void ExpectRoundTrip(const M& message) {
  const std::string yaml = MessageToYaml(message);
  const M back = ReadBack<M>(yaml);
  EXPECT_TRUE(MessageDifferencer::Equals(back, message)) << "written:\n"
                                                         << yaml << "read back:\n"
                                                         << back.DebugString() << "expected:\n"
                                                         << message.DebugString();
}

ExperimentConfig RichConfig() {
  ExperimentConfig c;
  c.set_name("rich: \"experiment\" #1");
  c.mutable_cluster()->add_ps_hosts("localhost:2222");
  c.mutable_cluster()->add_ps_hosts("[::1]:2223");
  c.mutable_cluster()->add_worker_hosts("10.0.0.1:2224");
  c.mutable_cluster()->add_worker_hosts("host-b.example.org:2225");
  c.mutable_model()->set_name("mlp");
  c.mutable_model()->add_hidden_units(128);
  c.mutable_model()->add_hidden_units(32);
  c.mutable_model()->add_input_shape(1);
  c.mutable_model()->add_input_shape(28);
  c.mutable_model()->add_input_shape(28);
  c.mutable_model()->set_num_classes(10);
  c.mutable_data()->set_source("synthetic");
  c.mutable_data()->set_path("/usr/share/datasets/fashion mnist: copy");
  c.mutable_data()->set_shuffle_seed(std::numeric_limits<uint64_t>::max());
  c.mutable_data()->set_shuffle(false);
  c.mutable_data()->set_synthetic_examples(4096);
  c.mutable_optimizer()->set_name("momentum");
  c.mutable_optimizer()->set_learning_rate(0.1f);
  c.mutable_optimizer()->set_momentum(0.9f);
  c.mutable_optimizer()->set_lr_schedule("step");
  c.mutable_optimizer()->set_lr_decay_factor(1e-7f);
  c.mutable_optimizer()->set_lr_decay_steps(std::numeric_limits<int64_t>::min());
  c.mutable_optimizer()->set_weight_decay(std::numeric_limits<float>::max());
  c.mutable_train()->set_batch_size_per_device(-1);
  c.mutable_train()->set_steps(std::numeric_limits<int64_t>::max());
  c.mutable_train()->set_epochs(std::numeric_limits<float>::denorm_min());
  c.mutable_train()->set_warmup_steps(0);
  c.mutable_train()->set_display_every(std::numeric_limits<int32_t>::min());
  c.mutable_train()->set_init_seed(0);
  c.mutable_train()->set_evaluate(true);
  c.mutable_train()->set_eval_batch_size(1000);
  c.mutable_timeouts();  // set, but empty
  c.set_variable_update("null");
  c.set_consistency("yes");
  c.set_staleness(2);
  c.set_replicas_to_aggregate(0);
  c.set_transport("0.5");
  c.set_placement("line one\nline two\ttab \\ backslash");
  c.set_partition_bytes(8388608);
  c.set_fusion_threshold_bytes(0);
  c.set_device(" leading and trailing ");
  c.set_devices_per_worker(16);
  c.set_max_message_bytes(2147483647);
  c.set_local_parameter_device("gpu·ünïcode");
  c.set_all_reduce_spec("");
  return c;
}

TEST(MessageToYamlTest, RichExperimentConfigReadsBackEqual) { ExpectRoundTrip(RichConfig()); }

TEST(MessageToYamlTest, WritesOnlySetFieldsAsBlockMapsAndFlowLists) {
  ExperimentConfig c;
  c.set_name("exp");
  c.mutable_cluster()->add_worker_hosts("localhost:2223");
  c.mutable_model()->add_hidden_units(128);
  c.mutable_model()->add_hidden_units(32);
  c.mutable_train()->set_steps(20);
  c.mutable_timeouts();
  c.set_consistency("sync");  // the default value, but set: written
  c.set_all_reduce_spec("");
  EXPECT_EQ(MessageToYaml(c),
            "name: exp\n"
            "cluster:\n"
            "  worker_hosts: [localhost:2223]\n"
            "model:\n"
            "  hidden_units: [128, 32]\n"
            "train:\n"
            "  steps: 20\n"
            "timeouts: {}\n"
            "consistency: sync\n"
            "all_reduce_spec: \"\"\n");
  ExpectRoundTrip(c);
}

TEST(MessageToYamlTest, EmptyMessageIsAnEmptyMap) {
  EXPECT_EQ(MessageToYaml(ExperimentConfig()), "{}\n");
  ExpectRoundTrip(ExperimentConfig());
}

TEST(MessageToYamlTest, StringsAreQuotedWhenYamlWouldReadThemAsSomethingElse) {
  const struct {
    const char* value;
    const char* written;
  } cases[] = {
      {"mlp", "mlp"},
      {"/usr/share/datasets/fashion-mnist", "/usr/share/datasets/fashion-mnist"},
      {"localhost:2222", "localhost:2222"},
      {"", "\"\""},
      {"null", "\"null\""},
      {"Null", "\"Null\""},
      {"~", "\"~\""},
      {"true", "\"true\""},
      {"Off", "\"Off\""},
      {"y", "\"y\""},
      {"123", "\"123\""},
      {"0.5", "\"0.5\""},
      {".inf", "\".inf\""},
      {".NaN", "\".NaN\""},
      {".5", "\".5\""},
      {"../base.yaml", "../base.yaml"},
      {"-a", "\"-a\""},
      {"a: b", "\"a: b\""},
      {"a:", "\"a:\""},
      {"a #b", "\"a #b\""},
      {"[::1]:2222", "\"[::1]:2222\""},
      {"{x}", "\"{x}\""},
      {"a, b", "\"a, b\""},
      {"say \"hi\"", "\"say \\\"hi\\\"\""},
      {"back\\slash", "\"back\\\\slash\""},
      {"two\nlines", "\"two\\nlines\""},
      {"bell\a", "\"bell\\u0007\""},
      {"*alias", "\"*alias\""},
      {"&anchor", "\"&anchor\""},
      {"!tag", "\"!tag\""},
      {"%directive", "\"%directive\""},
      {"'single'", "\"'single'\""},
  };
  for (const auto& c : cases) {
    ExperimentConfig config;
    config.set_device(c.value);
    config.mutable_cluster()->add_ps_hosts(c.value);  // in a flow list, too
    EXPECT_EQ(MessageToYaml(config), absl::StrCat("cluster:\n  ps_hosts: [", c.written, "]\ndevice: ", c.written, "\n"))
        << c.value;
    ExpectRoundTrip(config);
  }
}

TEST(MessageToYamlTest, FloatsUseTheShortestExactForm) {
  ExperimentConfig c;
  c.mutable_optimizer()->set_learning_rate(0.05f);
  c.mutable_timeouts()->set_rpc_seconds(60);
  c.mutable_train()->set_epochs(1.5e-7f);
  const std::string yaml = MessageToYaml(c);
  EXPECT_THAT(yaml, HasSubstr("  learning_rate: 0.05\n"));
  EXPECT_THAT(yaml, HasSubstr("  rpc_seconds: 60\n"));
  EXPECT_THAT(yaml, HasSubstr("  epochs: 1.5e-07\n"));
  ExpectRoundTrip(c);
}

TEST(MessageToYamlTest, RepeatedMessagesAreBlockListsAndNestedMessagesIndent) {
  ComparisonMatrix m;
  m.set_name("matrix");
  m.set_base("../base.yaml");
  m.mutable_overrides()->mutable_train()->set_steps(300);
  m.mutable_overrides()->mutable_optimizer()->set_learning_rate(0.02f);
  ComparisonVariant* a = m.add_variants();
  a->set_label("sync, 1 worker");
  a->set_workers(1);
  a->set_ps(0);
  ComparisonVariant* b = m.add_variants();
  b->set_label("async");
  b->mutable_set()->set_consistency("async");
  b->mutable_set()->mutable_model()->add_hidden_units(64);
  b->mutable_set()->mutable_cluster()->add_worker_hosts("h:1");
  m.add_variants();                 // empty
  m.add_variants()->mutable_set();  // only an empty set
  const std::string yaml = MessageToYaml(m);
  EXPECT_EQ(yaml,
            "name: matrix\n"
            "base: ../base.yaml\n"
            "overrides:\n"
            "  optimizer:\n"
            "    learning_rate: 0.02\n"
            "  train:\n"
            "    steps: 300\n"
            "variants:\n"
            "  - label: \"sync, 1 worker\"\n"
            "    workers: 1\n"
            "    ps: 0\n"
            "  - label: async\n"
            "    set:\n"
            "      cluster:\n"
            "        worker_hosts: [h:1]\n"
            "      model:\n"
            "        hidden_units: [64]\n"
            "      consistency: async\n"
            "  - {}\n"
            "  - set: {}\n");
  ExpectRoundTrip(m);
}

TEST(MessageToYamlTest, UnsetFieldsAreNotWritten) {
  ExperimentConfig c = RichConfig();
  c.clear_model();
  c.mutable_data()->clear_path();
  c.clear_all_reduce_spec();
  const std::string yaml = MessageToYaml(c);
  EXPECT_THAT(yaml, Not(HasSubstr("model:")));
  EXPECT_THAT(yaml, Not(HasSubstr("  path:")));
  EXPECT_THAT(yaml, Not(HasSubstr("all_reduce_spec")));
  const ExperimentConfig back = ReadBack<ExperimentConfig>(yaml);
  EXPECT_FALSE(back.has_model());
  EXPECT_FALSE(back.data().has_path());
  EXPECT_FALSE(back.has_all_reduce_spec());
  ExpectRoundTrip(c);
}

}  // namespace
}  // namespace pstrain
