// Click logs as tf.train.Example records (common/data/criteo/ctr_tf_example.h):
// bags of ids, missing features and both label types round trip; what the
// format refuses names the key.
#include "common/data/criteo/ctr_tf_example.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/tf_example.pb.h"

namespace pstrain::criteo {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Bags: C1 {5, 9, 5}, C2 {-(2^40)} as uint64, C26 {7}; every other missing.
CtrTfExample Example() {
  CtrTfExample example;
  example.record.label = 1;
  example.record.dense[0] = 3;
  example.record.dense[12] = -2;
  std::vector<std::vector<uint64_t>> bags(kNumCategorical);
  bags[0] = {5, 9, 5};
  bags[1] = {static_cast<uint64_t>(-(int64_t{1} << 40))};
  bags[25] = {7};
  for (int f = 0; f < kNumCategorical; ++f) {
    example.bags.begin[f] = static_cast<int32_t>(example.bags.ids.size());
    example.bags.ids.insert(example.bags.ids.end(), bags[f].begin(), bags[f].end());
    if (!bags[f].empty()) example.record.categorical[f] = bags[f][0];
  }
  example.bags.begin[kNumCategorical] = static_cast<int32_t>(example.bags.ids.size());
  return example;
}

TEST(CtrTfExampleTest, BagsMissingFeaturesAndTheLabelRoundTrip) {
  const CtrTfExample example = Example();
  absl::StatusOr<CtrTfExample> parsed = ParseCtrTfExample(SerializeCtrTfExample(example));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->record, example.record);
  EXPECT_THAT(parsed->bags.bag(0), ElementsAre(5, 9, 5));
  EXPECT_THAT(parsed->bags.bag(1), ElementsAre(static_cast<uint64_t>(-(int64_t{1} << 40))));
  EXPECT_THAT(parsed->bags.bag(2), IsEmpty());
  EXPECT_THAT(parsed->bags.bag(25), ElementsAre(7));
  EXPECT_FALSE(parsed->record.dense[1].has_value());
  EXPECT_FALSE(parsed->record.categorical[2].has_value());
}

// Builds an Example key by key.
class Builder {
 public:
  Builder& Int64(const std::string& key, std::vector<int64_t> values) {
    auto* list = Feature(key).mutable_int64_list();
    for (int64_t v : values) list->add_value(v);
    return *this;
  }
  Builder& Float(const std::string& key, std::vector<float> values) {
    auto* list = Feature(key).mutable_float_list();
    for (float v : values) list->add_value(v);
    return *this;
  }
  Builder& Bytes(const std::string& key, const std::string& value) {
    Feature(key).mutable_bytes_list()->add_value(value);
    return *this;
  }
  std::string Serialized() const { return example_.SerializeAsString(); }

 private:
  tfexample::Feature& Feature(const std::string& key) { return (*example_.mutable_features()->mutable_feature())[key]; }
  tfexample::Example example_;
};

TEST(CtrTfExampleTest, AFloatLabelAndEmptyListsAreRead) {
  absl::StatusOr<CtrTfExample> parsed = ParseCtrTfExample(
      Builder().Float("label", {0.0f}).Int64("I4", {}).Int64("C3", {}).Bytes("note", "x").Serialized());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->record.label, 0);
  EXPECT_FALSE(parsed->record.dense[3].has_value());
  EXPECT_THAT(parsed->bags.bag(2), IsEmpty());
}

TEST(CtrTfExampleTest, WhatTheFormatRefusesNamesTheKey) {
  struct Case {
    std::string bytes;
    std::string message;
  };
  const std::vector<int64_t> too_long(kMaxCtrBag + 1, 3);
  const std::vector<Case> cases = {
      {"\x0a\x05garbage", "not a tf.train.Example"},
      {Builder().Int64("C1", {1}).Serialized(), "tf.train.Example: label: missing"},
      {Builder().Int64("label", {2}).Serialized(), "tf.train.Example: label: expected 0 or 1, got 2"},
      {Builder().Float("label", {0.5f}).Serialized(), "tf.train.Example: label: expected 0 or 1, got 0.5"},
      {Builder().Int64("label", {0, 1}).Serialized(), "tf.train.Example: label: expected 1 value, got 2"},
      {Builder().Int64("label", {1}).Float("I2", {1.0f}).Serialized(),
       "tf.train.Example: I2: expected an int64 list, got a float list"},
      {Builder().Int64("label", {1}).Int64("I2", {1, 2}).Serialized(), "tf.train.Example: I2: expected 1 value"},
      {Builder().Int64("label", {1}).Bytes("C7", "ab").Serialized(),
       "tf.train.Example: C7: expected an int64 list, got a bytes list"},
      {Builder().Int64("label", {1}).Int64("C3", {4, -1}).Serialized(),
       "tf.train.Example: C3: id -1 is reserved for a missing feature"},
      {Builder().Int64("label", {1}).Int64("C9", too_long).Serialized(), "tf.train.Example: C9: 1025 ids"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<CtrTfExample> parsed = ParseCtrTfExample(c.bytes);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(parsed.status().message(), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace pstrain::criteo
