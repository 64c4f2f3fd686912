// data.source ctr_tfrecord end to end: TFRecord files of click-log Examples
// written here from the synthetic generator (bags of several ids, missing
// features) load as the generator's examples in the CTR layout, bags padded
// to the longest; a record that is not such an Example is refused naming its
// file and offset, or skipped with data.skip_corrupt; the config check
// names the field.
#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/config/config_loader.h"
#include "common/data/criteo/criteo_reader.h"
#include "common/data/data_source.h"
#include "common/data/records/record_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/data/ctr_tf_records.h"
#include "tests/util/process_test_util.h"

namespace pstrain {
namespace {

using ::pstrain::test::TempDir;
using ::pstrain::test::WriteFile;
using ::testing::HasSubstr;

constexpr int kDense = criteo::kNumDense;
constexpr int kSparse = criteo::kNumCategorical;

// C2 bags of up to 4 ids, C6 of up to 2, the rest one id; 100 ids each.
criteo::SyntheticCtr Generator() {
  criteo::SyntheticCtrOptions o;
  o.seed = 11;
  o.cardinalities.assign(kSparse, 100);
  o.bag_sizes.assign(kSparse, 1);
  o.bag_sizes[1] = 4;
  o.bag_sizes[5] = 2;
  absl::StatusOr<criteo::SyntheticCtr> g = criteo::SyntheticCtr::Create(o);
  EXPECT_TRUE(g.ok()) << g.status();
  return *std::move(g);
}

class CtrTfRecordSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(test::WriteCtrTfRecords(generator_, 600, 400, dir_ / "train-1").ok());  // sorted after train-0
    ASSERT_TRUE(test::WriteCtrTfRecords(generator_, 0, 600, dir_ / "train-0").ok());
    ASSERT_TRUE(test::WriteCtrTfRecords(generator_, 1000, 200, dir_ / "test-0").ok());
  }

  ExperimentConfig Config() const {
    ExperimentConfig c;
    c.mutable_data()->set_source("ctr_tfrecord");
    c.mutable_data()->set_path(dir_.path());
    c.mutable_data()->set_train_files("train-*");
    c.mutable_data()->set_eval_files("test-*");
    return c;
  }

  // Example `i` of `data` is the generator's example `first + i`.
  void ExpectGenerated(const Dataset& data, uint64_t first) const {
    const int bag = data.bag_size;
    for (int64_t i = 0; i < data.num_examples; ++i) {
      const criteo::CtrExample e = generator_.Example(first + static_cast<uint64_t>(i));
      ASSERT_EQ(data.labels[i], static_cast<int32_t>(e.record.label)) << i;
      const std::array<float, kDense> dense = criteo::TransformDense(e.record);
      ASSERT_TRUE(std::equal(dense.begin(), dense.end(), data.images.begin() + i * kDense)) << i;
      for (int f = 0; f < kSparse; ++f) {
        std::vector<uint64_t> want(e.bags.bag(f).begin(), e.bags.bag(f).end());
        want.resize(bag, Dataset::kMissingId);
        const uint64_t* ids = data.sparse_ids.data() + (i * kSparse + f) * bag;
        ASSERT_EQ(std::vector<uint64_t>(ids, ids + bag), want) << "example " << i << " C" << f + 1;
      }
    }
  }

  const criteo::SyntheticCtr generator_ = Generator();
  TempDir dir_;
};

TEST_F(CtrTfRecordSourceTest, LoadsTheGeneratorsExamplesWithTheirBags) {
  absl::StatusOr<Datasets> data = LoadDatasets(Config(), /*with_test=*/true);
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_EQ(data->train.num_examples, 1000);
  ASSERT_EQ(data->test.num_examples, 200);
  EXPECT_EQ(data->train.bag_size, 4);  // C2's longest, in both splits
  EXPECT_EQ(data->test.bag_size, 4);
  EXPECT_TRUE(ValidateDataset(data->train).ok()) << ValidateDataset(data->train);
  ExpectGenerated(data->train, 0);
  ExpectGenerated(data->test, 1000);
  int64_t missing = 0;
  for (uint64_t id : data->train.sparse_ids) missing += id == Dataset::kMissingId;
  EXPECT_GT(missing, 0);
  EXPECT_TRUE(std::isnan(data->train.planted_auc));
}

TEST_F(CtrTfRecordSourceTest, ARecordThatIsNoClickLogExampleIsRefusedNamingFileAndOffsetOrSkipped) {
  const criteo::CtrExample first = generator_.Example(0);
  const std::string good = criteo::SerializeCtrTfExample({first.record, first.bags});
  std::string file;
  data::AppendRecord(good, &file);
  const size_t offset = file.size();
  data::AppendRecord("not an example", &file);
  data::AppendRecord(good, &file);
  WriteFile(dir_ / "train-1", file);

  absl::StatusOr<Datasets> data = LoadDatasets(Config(), false);
  ASSERT_FALSE(data.ok());
  EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(data.status().message()),
              HasSubstr(absl::StrCat(dir_ / "train-1", ": record at byte ", offset, ": not a tf.train.Example")));

  ExperimentConfig skipping = Config();
  skipping.mutable_data()->set_skip_corrupt(true);
  data = LoadDatasets(skipping, false);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->train.num_examples, 600 + 2);
}

// The message ValidateExperimentConfig gives for `c` (with a cluster), ""
// when valid.
std::string Refusal(ExperimentConfig c) {
  c.mutable_cluster()->add_ps_hosts("localhost:2222");
  c.mutable_cluster()->add_worker_hosts("localhost:2223");
  return std::string(ValidateExperimentConfig(c, "x.yaml").message());
}

TEST_F(CtrTfRecordSourceTest, TheConfigCheckNamesBadFields) {
  ASSERT_EQ(Refusal(Config()), "");
  ExperimentConfig c = Config();
  c.mutable_data()->set_path(dir_ / "absent");
  EXPECT_THAT(Refusal(c), HasSubstr("field 'data.path'"));
  c = Config();
  c.mutable_data()->set_train_files("nothing-*");
  EXPECT_THAT(Refusal(c), HasSubstr("field 'data.train_files'"));
}

}  // namespace
}  // namespace pstrain
