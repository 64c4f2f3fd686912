// partitioned placement spreads VGG16's 138M parameters (fc6 alone is 74% of
// the bytes) over 4 shards with the largest shard at most 30%; greedy and
// round_robin are printed beside it.
#include <algorithm>
#include <cstdio>

#include "common/placement.h"
#include "gtest/gtest.h"
#include "models/model.h"

namespace pstrain {
namespace {

TEST(Vgg16PlacementTest, PartitionedKeepsTheLargestShardUnderThirtyPercent) {
  absl::StatusOr<std::unique_ptr<DeviceContext>> ctx = CreateDeviceContext(Device::Cpu());
  ASSERT_TRUE(ctx.ok());
  ModelConfig config;
  config.set_name("vgg16");
  for (int d : {3, 224, 224}) config.add_input_shape(d);
  config.set_num_classes(1000);
  absl::StatusOr<std::unique_ptr<Model>> model = CreateModel(config, ctx->get());
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<VariableShape> shapes;
  int64_t total = 0;
  for (const Variable& v : (*model)->variables()) {
    shapes.push_back({v.name, v.value.shape()});
    total += NumElements(v.value.shape()) * 4;
  }
  model->reset();  // the plan needs only the shapes
  double partitioned = 0;
  for (const char* policy : {"round_robin", "greedy", "partitioned"}) {
    absl::StatusOr<std::vector<VariablePart>> parts = PlanPlacement(shapes, 4, policy, 8 << 20);
    ASSERT_TRUE(parts.ok()) << parts.status();
    std::vector<int64_t> bytes = ShardBytes(*parts, 4);
    const double largest = static_cast<double>(*std::max_element(bytes.begin(), bytes.end())) / total;
    std::printf("vgg16 over 4 shards, %-11s: largest shard %5.1f%% of %.1f MB [%.1f, %.1f, %.1f, %.1f] MB\n", policy,
                100 * largest, total / 1e6, bytes[0] / 1e6, bytes[1] / 1e6, bytes[2] / 1e6, bytes[3] / 1e6);
    if (std::string(policy) == "partitioned") partitioned = largest;
  }
  EXPECT_LE(partitioned, 0.30);
}

}  // namespace
}  // namespace pstrain
