// The multi-tensor update's CPU side: how variables are cut into chunks
// (tensor_chunks.h), and ApplyAll on the CPU: every optimizer updates many
// variables to exactly the values Apply gives each in turn. (On a GPU the
// one-launch kernels are checked against Apply in cuda_optimizer_test.)
#include "optim/tensor_chunks.h"

#include <cmath>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "optim/optimizer.h"

namespace pstrain {
namespace {

TEST(TensorChunksTest, EveryElementOnceInOrderAndNoChunkLongerThanAsked) {
  const std::vector<int64_t> lengths = {5, 0, 8, 1, 17};
  const std::vector<TensorChunk> chunks = ChunkTensors(lengths, 4);
  std::vector<std::vector<int>> seen(lengths.size());
  for (size_t t = 0; t < lengths.size(); ++t) seen[t].assign(lengths[t], 0);
  for (size_t i = 0; i < chunks.size(); ++i) {
    const TensorChunk& c = chunks[i];
    ASSERT_GE(c.length, 1);
    ASSERT_LE(c.length, 4);
    ASSERT_LE(c.offset + c.length, lengths[c.tensor]);
    if (i > 0) {  // tensor order, then offset order
      const TensorChunk& p = chunks[i - 1];
      EXPECT_TRUE(p.tensor < c.tensor || (p.tensor == c.tensor && p.offset + p.length == c.offset)) << i;
    }
    for (int64_t e = c.offset; e < c.offset + c.length; ++e) ++seen[c.tensor][e];
  }
  for (size_t t = 0; t < lengths.size(); ++t) {
    for (int64_t e = 0; e < lengths[t]; ++e) EXPECT_EQ(seen[t][e], 1) << "tensor " << t << " element " << e;
  }
  // 5 = 4 + 1, 8 = 4 + 4, 1, 17 = 4 x 4 + 1; the empty tensor has none.
  EXPECT_EQ(chunks.size(), 2u + 2u + 1u + 5u);
  EXPECT_EQ(chunks[2], (TensorChunk{2, 0, 4}));
  EXPECT_TRUE(ChunkTensors({}, 4).empty());
  EXPECT_EQ(ChunkTensors({3}, 100), (std::vector<TensorChunk>{{0, 0, 3}}));
}

std::vector<float> Wave(int64_t n, float a, float b) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = a * std::sin(b * static_cast<float>(i) + 0.3f);
  return v;
}

class ApplyAllTest : public ::testing::TestWithParam<std::string> {};

// Three steps over variables of several lengths (one empty), with a gradient
// scale: ApplyAll and Apply reach bitwise equal values and slots.
TEST_P(ApplyAllTest, EqualsApplyOnEachVariable) {
  OptimizerConfig config;
  config.set_name(GetParam());
  config.set_momentum(0.9f);
  config.set_weight_decay(1e-4f);
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = CreateOptimizer(config);
  ASSERT_TRUE(optimizer.ok()) << optimizer.status();
  const Optimizer& opt = **optimizer;
  const std::vector<int64_t> lengths = {7, 0, 130, 1};
  struct Variable {
    std::vector<float> w, g;
    std::vector<std::vector<float>> slots;
    std::vector<float*> slot_ptrs;
  };
  auto make = [&] {
    std::vector<Variable> vars(lengths.size());
    for (size_t v = 0; v < lengths.size(); ++v) {
      vars[v].w = Wave(lengths[v], 0.5f, 0.1f * (v + 1));
      vars[v].g = Wave(lengths[v], 0.2f, 0.37f * (v + 1));
      vars[v].slots.assign(opt.num_slots(), std::vector<float>(lengths[v], 0.0f));
      for (auto& s : vars[v].slots) vars[v].slot_ptrs.push_back(s.data());
    }
    return vars;
  };
  std::vector<Variable> one_by_one = make(), all = make();
  for (int step = 0; step < 3; ++step) {
    const OptimizerStep update{
        .learning_rate = 0.05f, .gradient_scale = step == 1 ? 0.25f : 1.0f, .updates_before = step};
    std::vector<VariableUpdate> updates;
    for (size_t v = 0; v < lengths.size(); ++v) {
      Variable& a = one_by_one[v];
      opt.Apply(a.w.data(), a.g.data(), lengths[v], update, a.slot_ptrs.data(), a.w.data());
      updates.push_back({all[v].w.data(), all[v].g.data(), lengths[v], all[v].slot_ptrs.data()});
    }
    opt.ApplyAll(updates, update);
  }
  for (size_t v = 0; v < lengths.size(); ++v) {
    EXPECT_EQ(all[v].w, one_by_one[v].w) << "variable " << v;
    EXPECT_EQ(all[v].slots, one_by_one[v].slots) << "variable " << v;
    if (lengths[v] > 0) EXPECT_NE(all[v].w, Wave(lengths[v], 0.5f, 0.1f * (v + 1))) << "nothing was updated";
  }
}

INSTANTIATE_TEST_SUITE_P(EveryCpuOptimizer, ApplyAllTest,
                         ::testing::ValuesIn(OptimizerRegistry(DeviceKind::kCpu).Names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace pstrain
