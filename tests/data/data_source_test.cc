// Data sources by name (common/data/sources/): what data.source selects.
#include "common/data/data_source.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;

TEST(DataSourceTest, SourcesAreRegisteredByName) {
  EXPECT_THAT(DataSourceRegistry().Names(), ElementsAre("cifar10", "criteo", "ctr_tfrecord", "fashion_mnist",
                                                        "image_folder", "synthetic", "synthetic_ctr", "tfrecord"));
}

TEST(DataSourceTest, SyntheticTakesItsShapeFromTheModelConfig) {
  ExperimentConfig c;
  c.mutable_data()->set_source("synthetic");
  c.mutable_data()->set_synthetic_examples(12);
  for (int d : {3, 8, 8}) c.mutable_model()->add_input_shape(d);
  c.mutable_model()->set_num_classes(5);
  absl::StatusOr<Datasets> data = LoadDatasets(c, /*with_test=*/true);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->train.num_examples, 12);
  EXPECT_EQ(data->train.example_shape, (Shape{3, 8, 8}));
  EXPECT_EQ(data->train.num_classes, 5);
  EXPECT_EQ(data->test.num_examples, 12);
  EXPECT_NE(data->train.images, data->test.images);  // another seed

  absl::StatusOr<Datasets> no_test = LoadDatasets(c, /*with_test=*/false);
  ASSERT_TRUE(no_test.ok());
  EXPECT_EQ(no_test->test.num_examples, 0);
}

TEST(DataSourceTest, UnknownSourceListsTheKnownOnes) {
  ExperimentConfig c;
  c.mutable_data()->set_source("cifar100");
  absl::StatusOr<Datasets> data = LoadDatasets(c, false);
  ASSERT_FALSE(data.ok());
  EXPECT_EQ(data.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(
      data.status().message(),
      "unknown data.source 'cifar100'; known: cifar10, criteo, ctr_tfrecord, fashion_mnist, image_folder, synthetic, "
      "synthetic_ctr, tfrecord");
}

}  // namespace
}  // namespace pstrain
