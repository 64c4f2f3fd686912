// The click-log data sources end to end: data.source synthetic_ctr (shapes,
// determinism, the test split drawn like the training split, the planted
// AUC, the generator's examples whatever the thread split) and criteo (a
// directory of files written here, missing values, a malformed line refused
// naming its file and line), and the config checks of both naming the field.
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/config/config_loader.h"
#include "common/data/criteo/criteo_reader.h"
#include "common/data/criteo/synthetic_ctr.h"
#include "common/data/data_source.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/process_test_util.h"

namespace pstrain {
namespace {

using ::pstrain::test::TempDir;
using ::pstrain::test::WriteFile;
using ::testing::HasSubstr;

constexpr int kDense = criteo::kNumDense;
constexpr int kSparse = criteo::kNumCategorical;

// Cardinalities 10 .. 10^6 spread over the 26 features.
std::vector<uint64_t> TestCardinalities() {
  std::vector<uint64_t> out;
  for (int f = 0; f < kSparse; ++f) out.push_back(uint64_t{10} << (f % 17));
  return out;
}

ExperimentConfig CtrConfig(int64_t train, int64_t test) {
  ExperimentConfig c;
  c.mutable_data()->set_source("synthetic_ctr");
  CtrDataConfig* ctr = c.mutable_data()->mutable_ctr();
  ctr->set_train_examples(train);
  ctr->set_test_examples(test);
  for (uint64_t n : TestCardinalities()) ctr->add_cardinalities(n);
  return c;
}

// The generator the config above describes, made directly.
criteo::SyntheticCtr Generator(const ExperimentConfig& c) {
  criteo::SyntheticCtrOptions o;
  o.seed = c.data().ctr().seed();
  o.cardinalities = TestCardinalities();
  absl::StatusOr<criteo::SyntheticCtr> g = criteo::SyntheticCtr::Create(o);
  CHECK(g.ok()) << g.status();
  return *std::move(g);
}

// Example i of `data` is `record`: dense features log1p'd, ids or kMissingId.
void ExpectExample(const Dataset& data, int64_t i, const criteo::CriteoRecord& record) {
  const std::array<float, kDense> dense = criteo::TransformDense(record);
  for (int j = 0; j < kDense; ++j) ASSERT_EQ(data.images[i * kDense + j], dense[j]) << "example " << i << " I" << j + 1;
  ASSERT_EQ(data.labels[i], record.label == 1 ? 1 : 0) << "example " << i;
  for (int f = 0; f < kSparse; ++f) {
    ASSERT_EQ(data.sparse_ids[i * kSparse + f], record.categorical[f].value_or(Dataset::kMissingId))
        << "example " << i << " C" << f + 1;
  }
}

void ExpectCtrLayout(const Dataset& data, int64_t n) {
  EXPECT_EQ(data.num_examples, n);
  EXPECT_EQ(data.example_shape, (Shape{1, 1, kDense}));
  EXPECT_EQ(data.num_classes, 2);
  EXPECT_EQ(data.sparse_features, kSparse);
  EXPECT_EQ(data.images.size(), static_cast<size_t>(n * kDense));
  EXPECT_EQ(data.sparse_ids.size(), static_cast<size_t>(n * kSparse));
  EXPECT_TRUE(ValidateDataset(data).ok()) << ValidateDataset(data);
}

TEST(SyntheticCtrSourceTest, GivesTheGeneratorsTwoRangesInTheCtrLayout) {
  const ExperimentConfig c = CtrConfig(20000, 3000);  // 20000: two threads where there are two cores
  absl::StatusOr<Datasets> data = LoadDatasets(c, /*with_test=*/true);
  ASSERT_TRUE(data.ok()) << data.status();
  ExpectCtrLayout(data->train, 20000);
  ExpectCtrLayout(data->test, 3000);
  const criteo::SyntheticCtr g = Generator(c);
  for (int64_t i = 0; i < 20000; ++i) ExpectExample(data->train, i, g.Example(i).record);
  for (int64_t i = 0; i < 3000; ++i) ExpectExample(data->test, i, g.Example(20000 + i).record);
  const int64_t missing = std::count(data->train.sparse_ids.begin(), data->train.sparse_ids.end(), Dataset::kMissingId);
  EXPECT_NEAR(static_cast<double>(missing) / (20000.0 * kSparse), 0.02, 0.005);

  absl::StatusOr<double> planted = g.PlantedAuc(20000, 3000);
  ASSERT_TRUE(planted.ok()) << planted.status();
  EXPECT_DOUBLE_EQ(data->test.planted_auc, *planted);
  EXPECT_GT(data->test.planted_auc, 0.5);
  EXPECT_LT(data->test.planted_auc, 1.0);
  EXPECT_DOUBLE_EQ(data->train.planted_auc, *g.PlantedAuc(0, 20000));

  absl::StatusOr<Datasets> train_only = LoadDatasets(c, /*with_test=*/false);
  ASSERT_TRUE(train_only.ok()) << train_only.status();
  EXPECT_EQ(train_only->test.num_examples, 0);
}

TEST(SyntheticCtrSourceTest, TwoLoadsAreEqual) {
  const ExperimentConfig c = CtrConfig(5000, 1000);
  absl::StatusOr<Datasets> a = LoadDatasets(c, true);
  absl::StatusOr<Datasets> b = LoadDatasets(c, true);
  ASSERT_TRUE(a.ok() && b.ok());
  for (const auto& [x, y] : {std::pair{&a->train, &b->train}, std::pair{&a->test, &b->test}}) {
    EXPECT_EQ(x->images, y->images);
    EXPECT_EQ(x->labels, y->labels);
    EXPECT_EQ(x->sparse_ids, y->sparse_ids);
    EXPECT_EQ(x->planted_auc, y->planted_auc);
  }
  ExperimentConfig other = c;
  other.mutable_data()->mutable_ctr()->set_seed(8);
  absl::StatusOr<Datasets> d = LoadDatasets(other, false);
  ASSERT_TRUE(d.ok());
  EXPECT_NE(d->train.sparse_ids, a->train.sparse_ids);
}

// data.ctr.bag_sizes: bags as long as the longest, each the generator's
// ids then kMissingId.
TEST(SyntheticCtrSourceTest, BagsArePaddedToTheLongest) {
  ExperimentConfig c = CtrConfig(3000, 200);
  for (int f = 0; f < kSparse; ++f) c.mutable_data()->mutable_ctr()->add_bag_sizes(f == 1 ? 4 : f == 5 ? 2 : 1);
  absl::StatusOr<Datasets> data = LoadDatasets(c, /*with_test=*/true);
  ASSERT_TRUE(data.ok()) << data.status();
  const Dataset& train = data->train;
  EXPECT_EQ(train.bag_size, 4);
  ASSERT_EQ(train.sparse_ids.size(), static_cast<size_t>(3000 * kSparse * 4));
  EXPECT_TRUE(ValidateDataset(train).ok()) << ValidateDataset(train);
  criteo::SyntheticCtrOptions o;
  o.seed = c.data().ctr().seed();
  o.cardinalities = TestCardinalities();
  o.bag_sizes.assign(c.data().ctr().bag_sizes().begin(), c.data().ctr().bag_sizes().end());
  absl::StatusOr<criteo::SyntheticCtr> g = criteo::SyntheticCtr::Create(o);
  ASSERT_TRUE(g.ok()) << g.status();
  int64_t full = 0;
  for (int64_t i = 0; i < 3000; ++i) {
    const criteo::CtrExample e = g->Example(static_cast<uint64_t>(i));
    for (int f = 0; f < kSparse; ++f) {
      std::vector<uint64_t> want(e.bags.bag(f).begin(), e.bags.bag(f).end());
      full += want.size() == 4;
      want.resize(4, Dataset::kMissingId);
      const uint64_t* slots = train.sparse_ids.data() + (i * kSparse + f) * 4;
      ASSERT_EQ(std::vector<uint64_t>(slots, slots + 4), want) << "example " << i << " C" << f + 1;
    }
  }
  EXPECT_GT(full, 500);  // about a quarter of C2's bags
  EXPECT_DOUBLE_EQ(data->test.planted_auc, *g->PlantedAuc(3000, 200));
}

// Per feature: the share of each id among the present ones.
std::map<uint64_t, double> IdShares(const Dataset& data, int feature) {
  std::map<uint64_t, double> shares;
  int64_t present = 0;
  for (int64_t i = 0; i < data.num_examples; ++i) {
    const uint64_t id = data.sparse_ids[i * kSparse + feature];
    if (id == Dataset::kMissingId) continue;
    shares[id] += 1;
    ++present;
  }
  for (auto& [id, share] : shares) share /= static_cast<double>(present);
  return shares;
}

TEST(SyntheticCtrSourceTest, TestIdsFollowTheTrainingIdsDistribution) {
  absl::StatusOr<Datasets> data = LoadDatasets(CtrConfig(30000, 10000), true);
  ASSERT_TRUE(data.ok()) << data.status();
  for (int f = 0; f < kSparse; ++f) {
    const std::map<uint64_t, double> train = IdShares(data->train, f);
    const std::map<uint64_t, double> test = IdShares(data->test, f);
    // The most frequent id is the same one, and the test's ids are mostly
    // ones training saw (Zipf: the head carries most of the mass).
    const auto top = [](const std::map<uint64_t, double>& m) {
      return std::max_element(m.begin(), m.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
    };
    EXPECT_EQ(top(train), top(test)) << "C" << f + 1;
    double seen = 0, distance = 0;
    for (const auto& [id, share] : test) {
      const auto it = train.find(id);
      seen += it == train.end() ? 0 : share;
      distance += std::abs(share - (it == train.end() ? 0 : it->second));
    }
    EXPECT_GT(seen, 0.6) << "C" << f + 1;
    if (TestCardinalities()[f] <= 40) {  // few ids: shares well estimated from 10000 examples
      EXPECT_LT(distance / 2, 0.04) << "C" << f + 1 << ": total variation";
    }
  }
}

TEST(SyntheticCtrSourceTest, CardinalitiesComeFromTheTablesWhenNotGiven) {
  ExperimentConfig c = CtrConfig(2000, 500);
  c.mutable_data()->mutable_ctr()->clear_cardinalities();
  for (int f = 0; f < kSparse; ++f) {
    EmbeddingTableConfig* t = c.mutable_model()->add_tables();
    t->set_name(absl::StrCat("c", f));
    t->set_cardinality(f == 0 ? 3 : 1000);
  }
  absl::StatusOr<Datasets> data = LoadDatasets(c, true);
  ASSERT_TRUE(data.ok()) << data.status();
  ExpectCtrLayout(data->train, 2000);
  EXPECT_LE(IdShares(data->train, 0).size(), 3u);  // C1: three ids at most
  EXPECT_GT(IdShares(data->train, 1).size(), 3u);
}

TEST(SyntheticCtrSourceTest, LoadRefusesWhatTheCheckRefuses) {
  ExperimentConfig c = CtrConfig(2000, 500);
  c.mutable_data()->mutable_ctr()->set_zipf_s(0);
  absl::StatusOr<Datasets> data = LoadDatasets(c, true);
  ASSERT_FALSE(data.ok());
  EXPECT_THAT(std::string(data.status().message()), HasSubstr("data.ctr.zipf_s"));
}

ExperimentConfig WithCluster(ExperimentConfig c) {
  c.mutable_cluster()->add_ps_hosts("localhost:2222");
  c.mutable_cluster()->add_worker_hosts("localhost:2223");
  return c;
}

// The message ValidateExperimentConfig gives for `c`, "" when valid.
std::string Refusal(const ExperimentConfig& c) { return std::string(ValidateExperimentConfig(c, "x.yaml").message()); }

TEST(SyntheticCtrSourceTest, TheConfigCheckNamesBadFields) {
  const ExperimentConfig valid = WithCluster(CtrConfig(2000, 500));
  ASSERT_EQ(Refusal(valid), "");
  const auto refusal = [&](auto edit) {
    ExperimentConfig c = valid;
    edit(c.mutable_data()->mutable_ctr(), c.mutable_model());
    return Refusal(c);
  };
  EXPECT_THAT(refusal([](CtrDataConfig* d, ModelConfig*) { d->set_train_examples(0); }),
              HasSubstr("field 'data.ctr.train_examples'"));
  EXPECT_THAT(refusal([](CtrDataConfig* d, ModelConfig*) { d->set_test_examples(-1); }),
              HasSubstr("field 'data.ctr.test_examples'"));
  EXPECT_THAT(refusal([](CtrDataConfig* d, ModelConfig*) { d->set_zipf_s(-1); }), HasSubstr("field 'data.ctr.zipf_s'"));
  EXPECT_THAT(refusal([](CtrDataConfig* d, ModelConfig*) { d->set_weight_scale(-0.1); }),
              HasSubstr("field 'data.ctr.weight_scale'"));
  EXPECT_THAT(refusal([](CtrDataConfig* d, ModelConfig*) { d->set_target_positive_rate(1); }),
              HasSubstr("field 'data.ctr.target_positive_rate'"));
  EXPECT_THAT(refusal([](CtrDataConfig* d, ModelConfig*) { d->set_dense_missing(1.5); }),
              HasSubstr("field 'data.ctr.dense_missing'"));
  EXPECT_THAT(refusal([](CtrDataConfig* d, ModelConfig*) { d->add_cardinalities(5); }),
              HasSubstr("field 'data.ctr.cardinalities': expected 26 values"));
  EXPECT_THAT(refusal([](CtrDataConfig* d, ModelConfig*) { d->set_cardinalities(3, 0); }),
              HasSubstr("field 'data.ctr.cardinalities[3]'"));
  EXPECT_THAT(refusal([](CtrDataConfig* d, ModelConfig*) { d->set_cardinalities(4, (uint64_t{1} << 32) + 1); }),
              HasSubstr("field 'data.ctr.cardinalities[4]'"));
  EXPECT_THAT(refusal([](CtrDataConfig* d, ModelConfig*) { d->add_bag_sizes(2); }),
              HasSubstr("field 'data.ctr.bag_sizes': expected 26 values"));
  EXPECT_THAT(refusal([](CtrDataConfig* d, ModelConfig*) {
                for (int f = 0; f < kSparse; ++f) d->add_bag_sizes(f == 3 ? 65 : 1);
              }),
              HasSubstr("field 'data.ctr.bag_sizes[3]'"));
  EXPECT_THAT(refusal([](CtrDataConfig* d, ModelConfig* m) {
                d->clear_cardinalities();
                m->add_tables()->set_name("only");
              }),
              HasSubstr("field 'model.tables': expected 26 fixed-size tables"));
  EXPECT_THAT(refusal([](CtrDataConfig* d, ModelConfig* m) {
                d->clear_cardinalities();
                for (int f = 0; f < kSparse; ++f) {
                  m->add_tables()->set_name(absl::StrCat("c", f));
                  m->mutable_tables(f)->set_cardinality(f == 4 ? 0 : 100);  // C5's table dynamic
                }
              }),
              HasSubstr("field 'model.tables[4].cardinality'"));
}

// Criteo lines of known records, in files of a directory made here.
class CriteoSourceTest : public ::testing::Test {
 protected:
  // Record k: label k % 2, I_j = k + j except I2 missing when k % 3 == 0,
  // C_f = 0x1000 * k + f except C26 missing when k is even.
  static criteo::CriteoRecord Record(int k) {
    criteo::CriteoRecord r;
    r.label = static_cast<float>(k % 2);
    for (int j = 0; j < kDense; ++j) r.dense[j] = k + j;
    if (k % 3 == 0) r.dense[1].reset();
    for (int f = 0; f < kSparse; ++f) r.categorical[f] = uint64_t{0x1000} * k + f;
    if (k % 2 == 0) r.categorical[kSparse - 1].reset();
    return r;
  }

  // Records first .. first + n - 1, one a line (CRLF when `crlf`).
  static std::string Lines(int first, int n, bool crlf = false) {
    std::string text;
    for (int k = first; k < first + n; ++k)
      absl::StrAppend(&text, criteo::FormatCriteoLine(Record(k)), crlf ? "\r\n" : "\n");
    return text;
  }

  void SetUp() override {
    WriteFile(dir_ / "day_1", Lines(4, 3, /*crlf=*/true));  // sorted after day_0
    WriteFile(dir_ / "day_0", Lines(0, 4));
    WriteFile(dir_ / "eval_0", Lines(100, 5));
  }

  ExperimentConfig Config() const {
    ExperimentConfig c;
    c.mutable_data()->set_source("criteo");
    c.mutable_data()->set_path(dir_.path());
    c.mutable_data()->set_train_files("day_*");
    c.mutable_data()->set_eval_files("eval_*");
    return c;
  }

  TempDir dir_;
};

TEST_F(CriteoSourceTest, LoadsTheMatchedFilesInPathOrder) {
  absl::StatusOr<Datasets> data = LoadDatasets(Config(), true);
  ASSERT_TRUE(data.ok()) << data.status();
  ExpectCtrLayout(data->train, 7);
  ExpectCtrLayout(data->test, 5);
  for (int k = 0; k < 7; ++k) ExpectExample(data->train, k, Record(k));
  for (int k = 0; k < 5; ++k) ExpectExample(data->test, k, Record(100 + k));
  EXPECT_EQ(data->train.images[0 * kDense + 1], 0.0f);  // I2 missing
  EXPECT_EQ(data->train.sparse_ids[0 * kSparse + kSparse - 1], Dataset::kMissingId);
  EXPECT_NE(data->train.sparse_ids[1 * kSparse + kSparse - 1], Dataset::kMissingId);
  EXPECT_TRUE(std::isnan(data->train.planted_auc));
  EXPECT_TRUE(std::isnan(data->test.planted_auc));
}

TEST_F(CriteoSourceTest, AMalformedLineIsRefusedNamingItsFileAndLine) {
  WriteFile(dir_ / "day_1", Lines(4, 2) + "1\t2\t3\n" + Lines(6, 1));
  absl::StatusOr<Datasets> data = LoadDatasets(Config(), false);
  ASSERT_FALSE(data.ok());
  EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(data.status().message()),
              HasSubstr(dir_ / "day_1:3: 40 tab-separated fields expected (label, I1-I13, C1-C26), found 3"));

  std::string line = criteo::FormatCriteoLine(Record(9));
  line.replace(line.rfind('\t') + 1, std::string::npos, "ffffffffffffffff");
  WriteFile(dir_ / "day_1", line + "\n");
  data = LoadDatasets(Config(), false);
  ASSERT_FALSE(data.ok());
  EXPECT_THAT(std::string(data.status().message()), HasSubstr(dir_ / "day_1:1: field 40 (C26): id ffffffffffffffff"));
}

TEST_F(CriteoSourceTest, TheConfigCheckNamesBadFields) {
  const ExperimentConfig valid = WithCluster(Config());
  ASSERT_EQ(Refusal(valid), "");
  ExperimentConfig c = valid;
  c.mutable_data()->set_path(dir_ / "absent");
  EXPECT_THAT(Refusal(c), HasSubstr("field 'data.path'"));
  c = valid;
  c.mutable_data()->set_train_files("nothing-*");
  EXPECT_THAT(Refusal(c), HasSubstr("field 'data.train_files'"));
}

TEST(CtrDatasetTest, ValidateDatasetChecksTheSparseIds) {
  absl::StatusOr<Datasets> data = LoadDatasets(CtrConfig(100, 10), false);
  ASSERT_TRUE(data.ok()) << data.status();
  Dataset d = data->train;
  d.sparse_ids.pop_back();
  const absl::Status s = ValidateDataset(d);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("sparse_ids holds 2599 ids; 100 examples of 26 sparse features in bags of 1 need 2600"));
}

}  // namespace
}  // namespace pstrain
