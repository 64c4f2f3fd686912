// CPU (oneDNN) specifics of the layer library: blocked layouts, batch-norm
// modes, the dropout mask, Setup errors and FLOP counts. The device-agnostic
// gradient checks are in layer_gradient_test.cc.
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "device/cpu/dnnl_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/models/gradient_checker.h"

namespace pstrain::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class CpuLayersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ctx = CreateDeviceContext(Device::Cpu());
    ASSERT_TRUE(ctx.ok()) << ctx.status();
    ctx_ = std::move(*ctx);
  }

  // nChw8c: oneDNN's AVX2 activation format.
  static TensorLayoutPtr Blocked(const Shape& nchw) {
    return std::make_shared<cpu::DnnlLayout>(dnnl::memory::desc(
        dnnl::memory::dims(nchw.begin(), nchw.end()), dnnl::memory::data_type::f32, dnnl::memory::format_tag::nChw8c));
  }

  static GradientCheckOptions BlockedInputs(const std::vector<Shape>& shapes, GradientCheckOptions options = {}) {
    for (const Shape& s : shapes) options.input_layouts.push_back(Blocked(s));
    return options;
  }

  // Gradient check with every input fed in nChw8c; also returns the report.
  GradientCheckReport CheckBlocked(const LayerSpec& spec, const std::vector<Shape>& shapes,
                                   GradientCheckOptions options = {}) {
    auto report = CheckLayerGradients(spec, *ctx_, shapes, BlockedInputs(shapes, options));
    EXPECT_TRUE(report.ok()) << report.status();
    if (!report.ok()) return {};
    EXPECT_LE(report->max_relative_error, options.tolerance) << spec.type << ": " << report->ToString();
    return *report;
  }

  static Tensor Random(const Shape& shape, uint64_t seed) {
    Tensor t(shape);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> dist(-1, 1);
    for (float& v : t.span()) v = dist(rng);
    return t;
  }

  std::unique_ptr<Layer> Make(const LayerSpec& spec, const std::vector<Shape>& per_example) {
    auto layer = CreateLayer(spec, DeviceKind::kCpu);
    EXPECT_TRUE(layer.ok()) << layer.status();
    auto shape = (*layer)->Setup(per_example);
    EXPECT_TRUE(shape.ok()) << shape.status();
    return std::move(*layer);
  }

  absl::Status SetupError(const LayerSpec& spec, const std::vector<Shape>& per_example) {
    auto layer = CreateLayer(spec, DeviceKind::kCpu);
    if (!layer.ok()) return layer.status();
    return (*layer)->Setup(per_example).status();
  }

  std::unique_ptr<DeviceContext> ctx_;
};

// ---- Layouts ----

TEST_F(CpuLayersTest, ConvChoosesABlockedOutputForWideChannels) {
  auto conv = Make(LayerSpec{"conv2d"}.Int("filters", 16).Ints("kernel", {3, 3}).Ints("padding", {1, 1}), {{16, 6, 6}});
  Tensor input({2, 16, 6, 6});
  TensorLayoutPtr layout = conv->OutputLayout(*ctx_, {input});
  ASSERT_NE(layout, nullptr) << "oneDNN chose plain nchw: the blocked path is not exercised";
  // The contract is a layout blocked over channels (dimension 1); the block
  // width is the processor's vector width in floats (8 with AVX2, 16 with
  // AVX-512), so any width that divides into whole vectors is accepted.
  std::smatch match;
  const std::string text = layout->ToString();
  ASSERT_TRUE(std::regex_search(text, match, std::regex("blocks (\\d+)@1"))) << text;
  const int block = std::stoi(match[1].str());
  EXPECT_TRUE(block == 4 || block == 8 || block == 16) << text;
  // 16 channels are a whole number of blocks of any of those widths: no padding.
  EXPECT_EQ(layout->num_bytes(), 2u * 16 * 6 * 6 * sizeof(float)) << text;
}

TEST_F(CpuLayersTest, GradientsWithBlockedInputs) {
  // Every layer that reads activations, fed nChw8c. The channel counts are
  // not multiples of 8 here and there, so padded blocks are covered too.
  auto conv = CheckBlocked(LayerSpec{"conv2d"}.Int("filters", 8).Ints("kernel", {3, 3}).Ints("padding", {1, 1}),
                           {{2, 8, 4, 4}});
  EXPECT_NE(conv.output_layout, "plain");
  CheckBlocked(LayerSpec{"conv2d"}.Int("filters", 5).Ints("kernel", {2, 2}).Ints("stride", {2, 2}), {{2, 3, 4, 4}});
  CheckBlocked(LayerSpec{"conv2d"}.Int("filters", 16).Int("kernel", 3).Int("groups", 2).Int("bias", 0),
               {{2, 16, 4, 4}});
  auto bn = CheckBlocked(LayerSpec{"batch_norm"}, {{3, 10, 2, 2}});
  EXPECT_NE(bn.output_layout, "plain");
  GradientCheckOptions relu;
  relu.input_min_abs = 0.05;
  CheckBlocked(LayerSpec{"relu"}, {{2, 9, 2, 3}}, relu);
  GradientCheckOptions max_pool;
  max_pool.step = 1e-3;
  CheckBlocked(LayerSpec{"max_pool"}.Int("kernel", 3).Int("stride", 2).Int("padding", 1), {{2, 8, 5, 5}}, max_pool);
  CheckBlocked(LayerSpec{"avg_pool"}.Int("kernel", 3).Int("stride", 2).Int("padding", 1), {{2, 8, 5, 5}});
  CheckBlocked(LayerSpec{"global_avg_pool"}, {{2, 12, 3, 3}});
  CheckBlocked(LayerSpec{"lrn"}.Int("size", 3).Float("alpha", 1.0).Float("k", 2.0), {{2, 11, 2, 2}});
  CheckBlocked(LayerSpec{"add"}, {{2, 8, 3, 3}, {2, 8, 3, 3}});
  CheckBlocked(LayerSpec{"dense"}.Int("units", 4), {{2, 9, 2, 2}});
  CheckBlocked(LayerSpec{"flatten"}, {{2, 9, 2, 2}});
  CheckBlocked(LayerSpec{"dropout"}.Float("rate", 0.0), {{2, 9, 2, 2}});
  // The sparse models' layers read plain features: a blocked input is
  // converted, and its gradient back.
  CheckBlocked(LayerSpec{"slice"}.Int("begin", 5).Int("size", 20), {{2, 9, 2, 2}});
  CheckBlocked(LayerSpec{"dot_interaction"}.Int("features", 3), {{2, 9, 2, 2}});
}

TEST_F(CpuLayersTest, AddOfMixedLayouts) {
  GradientCheckOptions options;
  options.input_layouts = {Blocked({2, 8, 3, 3}), nullptr};
  EXPECT_TRUE(LayerGradientsMatch(LayerSpec{"add"}, *ctx_, {{2, 8, 3, 3}, {2, 8, 3, 3}}, options));
}

// add + relu fused (the end of a residual block): the gradients of
// relu(x_0 + x_1) in blocked and mixed layouts and on features (plain
// [N, C, H, W] on every device: layer_gradient_test.cc).
TEST_F(CpuLayersTest, AddWithFusedRelu) {
  GradientCheckOptions options;
  options.fuse_next = LayerSpec{"relu"};
  options.step = 1e-3;
  // The kink is where x_0 + x_1 = 0, which input_min_abs cannot keep away:
  // seed 1 puts one sum within the step of it (element 73: 0.39 against 0.43).
  options.seed = 2;
  EXPECT_TRUE(LayerGradientsMatch(LayerSpec{"add"}, *ctx_, {{4, 7}, {4, 7}}, options));
  CheckBlocked(LayerSpec{"add"}, {{2, 8, 3, 3}, {2, 8, 3, 3}}, options);
  options.input_layouts = {nullptr, Blocked({2, 8, 3, 3})};
  EXPECT_TRUE(LayerGradientsMatch(LayerSpec{"add"}, *ctx_, {{2, 8, 3, 3}, {2, 8, 3, 3}}, options));
  // Only a relu fuses, and only into a sum of two.
  auto add = Make(LayerSpec{"add"}, {{3, 2, 2}, {3, 2, 2}});
  EXPECT_TRUE(add->PassesGradientThrough());
  EXPECT_FALSE(add->ReadsInBackward().output);
  EXPECT_FALSE(add->Fuse(LayerSpec{"dropout"}));
  EXPECT_TRUE(add->Fuse(LayerSpec{"relu"}));
  EXPECT_FALSE(add->PassesGradientThrough()) << "a fused relu masks the gradient";
  EXPECT_TRUE(add->ReadsInBackward().output) << "the mask is where the output is 0";
  EXPECT_FALSE(Make(LayerSpec{"add"}, {{3}, {3}, {3}})->Fuse(LayerSpec{"relu"}));
}

// The fused layer computes exactly what add and relu compute one after the
// other, forward and backward, whichever input's layout matches the output.
TEST_F(CpuLayersTest, AddWithFusedReluEqualsAddThenRelu) {
  const Shape shape = {2, 8, 3, 3};
  for (int blocked = 0; blocked < 4; ++blocked) {
    SCOPED_TRACE(absl::StrCat("blocked inputs (bit per input): ", blocked));
    std::vector<Tensor> inputs;
    for (int i = 0; i < 2; ++i) {
      inputs.emplace_back(shape, (blocked >> i) & 1 ? Blocked(shape) : nullptr);
      ctx_->Convert(Random(shape, 20 + i), inputs.back());
    }
    const Tensor grad_output = Random(shape, 30);
    auto add = Make(LayerSpec{"add"}, {{8, 3, 3}, {8, 3, 3}});
    auto relu = Make(LayerSpec{"relu"}, {{8, 3, 3}});
    Tensor sum(shape, add->OutputLayout(*ctx_, inputs));
    add->Forward(*ctx_, inputs, sum, true);
    Tensor want(shape, relu->OutputLayout(*ctx_, {sum}));
    relu->Forward(*ctx_, {sum}, want, true);
    Tensor grad_want(shape, want.layout()), grad_sum(shape, sum.layout());
    ctx_->Convert(grad_output, grad_want);
    relu->Backward(*ctx_, {sum}, want, grad_want, absl::MakeSpan(&grad_sum, 1));

    auto fused = Make(LayerSpec{"add"}, {{8, 3, 3}, {8, 3, 3}});
    ASSERT_TRUE(fused->Fuse(LayerSpec{"relu"}));
    Tensor got(shape, fused->OutputLayout(*ctx_, inputs));
    fused->Forward(*ctx_, inputs, got, true);
    Tensor grad_got(shape, got.layout());
    ctx_->Convert(grad_output, grad_got);
    std::vector<Tensor> grad_inputs = {Tensor(shape, inputs[0].layout()), Tensor(shape, inputs[1].layout())};
    for (Tensor& g : grad_inputs) std::fill(g.data(), g.data() + g.num_bytes() / sizeof(float), 7.25f);
    fused->Backward(*ctx_, inputs, got, grad_got, absl::MakeSpan(grad_inputs));

    Tensor a(shape), b(shape);
    ctx_->Convert(want, a);
    ctx_->Convert(got, b);
    EXPECT_EQ(std::vector<float>(a.span().begin(), a.span().end()),
              std::vector<float>(b.span().begin(), b.span().end()));
    int64_t zeros = 0;
    for (float v : b.span()) zeros += v == 0;
    EXPECT_GT(zeros, 0) << "the relu clipped nothing";
    ctx_->Convert(grad_sum, a);
    for (const Tensor& g : grad_inputs) {
      ctx_->Convert(g, b);
      EXPECT_EQ(std::vector<float>(a.span().begin(), a.span().end()),
                std::vector<float>(b.span().begin(), b.span().end()));
    }
  }
}

TEST_F(CpuLayersTest, ConcatOfBlockedInputs) {
  // Aligned to the 8-channel blocks: the output stays blocked.
  auto aligned = CheckBlocked(LayerSpec{"concat"}, {{2, 8, 3, 3}, {2, 16, 3, 3}, {2, 8, 3, 3}});
  EXPECT_NE(aligned.output_layout, "plain");
  // Off the blocks (3 + 5 + 2 channels): slices are not addressable in
  // nChw8c, so the output falls back to plain; gradients still match.
  auto unaligned = CheckBlocked(LayerSpec{"concat"}, {{2, 3, 2, 2}, {2, 5, 2, 2}, {2, 2, 2, 2}});
  EXPECT_EQ(unaligned.output_layout, "plain");
}

TEST_F(CpuLayersTest, ConvertRoundTripsThroughABlockedLayout) {
  Tensor plain = Random({2, 5, 3, 3}, 1);
  Tensor blocked({2, 5, 3, 3}, Blocked({2, 5, 3, 3}));
  EXPECT_EQ(blocked.num_bytes(), 2u * 8 * 3 * 3 * sizeof(float));  // padded to 8 channels
  ctx_->Convert(plain, blocked);
  Tensor back({2, 5, 3, 3});
  ctx_->Convert(blocked, back);
  for (int64_t i = 0; i < plain.num_elements(); ++i) ASSERT_EQ(plain.data()[i], back.data()[i]) << i;
  // Accumulate in a blocked layout = elementwise sum.
  Tensor twice = blocked.Clone();
  ctx_->Accumulate(twice, blocked);
  ctx_->Convert(twice, back);
  for (int64_t i = 0; i < plain.num_elements(); ++i) ASSERT_EQ(2 * plain.data()[i], back.data()[i]) << i;
}

// ---- batch_norm ----

TEST_F(CpuLayersTest, BatchNormWithFusedRelu) {
  GradientCheckOptions options;
  options.fuse_next = LayerSpec{"relu"};
  options.step = 1e-3;  // rarely straddles the relu's kink
  EXPECT_TRUE(LayerGradientsMatch(LayerSpec{"batch_norm"}, *ctx_, {{4, 3, 3, 3}}, options));
  options.input_layouts = {Blocked({3, 10, 2, 2})};
  EXPECT_TRUE(LayerGradientsMatch(LayerSpec{"batch_norm"}, *ctx_, {{3, 10, 2, 2}}, options));
  // Only a relu fuses.
  auto bn = Make(LayerSpec{"batch_norm"}, {{3, 2, 2}});
  EXPECT_FALSE(bn->Fuse(LayerSpec{"dropout"}));
  EXPECT_TRUE(bn->Fuse(LayerSpec{"relu"}));
  // The fused output is relu(bn(x)) in both modes.
  Tensor x = Random({2, 3, 2, 2}, 9), train({2, 3, 2, 2}), infer({2, 3, 2, 2});
  bn->Forward(*ctx_, {x}, train, true);
  bn->Forward(*ctx_, {x}, infer, false);
  int64_t zeros = 0;
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    ASSERT_GE(train.data()[i], 0);
    ASSERT_GE(infer.data()[i], 0);
    zeros += train.data()[i] == 0;
  }
  EXPECT_GT(zeros, 0);
}

TEST_F(CpuLayersTest, BatchNormInferenceUsesRunningStatistics) {
  const Shape shape = {4, 2, 3, 3};
  auto bn = Make(LayerSpec{"batch_norm"}.Float("momentum", 0.9).Float("epsilon", 1e-3), {{2, 3, 3}});
  Tensor x = Random(shape, 3);
  for (int64_t i = 0; i < x.num_elements(); ++i) x.data()[i] = 2 * x.data()[i] + 0.5f;  // mean 0.5, var ~ 4/3
  bn->parameters()[0].value.data()[0] = 1.5f;                                           // gamma
  bn->parameters()[0].value.data()[1] = 0.5f;
  bn->parameters()[1].value.data()[0] = 0.25f;  // beta
  bn->parameters()[1].value.data()[1] = -1.0f;
  Tensor train(shape), infer(shape);
  const int steps = 3;
  for (int s = 0; s < steps; ++s) bn->Forward(*ctx_, {x}, train, /*training=*/true);
  bn->Forward(*ctx_, {x}, infer, /*training=*/false);

  const int64_t m = 4 * 9;
  for (int c = 0; c < 2; ++c) {
    double sum = 0, sum_sq = 0;
    for (int n = 0; n < 4; ++n) {
      for (int i = 0; i < 9; ++i) {
        double v = x.data()[(n * 2 + c) * 9 + i];
        sum += v;
        sum_sq += v * v;
      }
    }
    const double mean = sum / m, var = sum_sq / m - mean * mean;
    // Running averages after `steps` updates from (0, 1), Bessel-corrected variance.
    const double decay = std::pow(0.9, steps);
    const double running_mean = (1 - decay) * mean;
    const double running_var = decay * 1 + (1 - decay) * var * m / (m - 1);
    const double gamma = bn->parameters()[0].value.data()[c], beta = bn->parameters()[1].value.data()[c];
    for (int n = 0; n < 4; ++n) {
      for (int i = 0; i < 9; ++i) {
        const int64_t k = (n * 2 + c) * 9 + i;
        const double v = x.data()[k];
        EXPECT_NEAR(train.data()[k], gamma * (v - mean) / std::sqrt(var + 1e-3) + beta, 1e-4) << k;
        EXPECT_NEAR(infer.data()[k], gamma * (v - running_mean) / std::sqrt(running_var + 1e-3) + beta, 1e-4) << k;
        EXPECT_GT(std::fabs(train.data()[k] - infer.data()[k]), 1e-3) << "the modes must differ at " << k;
      }
    }
  }
}

// ---- dropout ----

TEST_F(CpuLayersTest, DropoutMaskIsInvertedDeterministicAndSharedWithBackward) {
  const Shape shape = {8, 4, 16, 16};
  const double rate = 0.3;
  auto make = [&](int64_t seed) {
    return Make(LayerSpec{"dropout"}.Float("rate", rate).Int("seed", seed), {{4, 16, 16}});
  };
  auto a = make(7), b = make(7), c = make(8);
  Tensor x = Random(shape, 5);
  Tensor ya(shape), yb(shape), yc(shape), ya2(shape);
  a->Forward(*ctx_, {x}, ya, true);
  b->Forward(*ctx_, {x}, yb, true);
  c->Forward(*ctx_, {x}, yc, true);

  // Kept elements are scaled by 1 / (1 - rate); about `rate` are dropped.
  int64_t dropped = 0;
  const float keep = static_cast<float>(1 / (1 - rate));
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    if (ya.data()[i] == 0) {
      ++dropped;
    } else {
      ASSERT_FLOAT_EQ(ya.data()[i], x.data()[i] * keep) << i;
    }
  }
  const double fraction = static_cast<double>(dropped) / x.num_elements();
  EXPECT_NEAR(fraction, rate, 0.02);

  // Backward multiplies by the same mask: grad_x * x == grad_y * y elementwise.
  Tensor grad_y = Random(shape, 6), grad_x(shape);
  a->Backward(*ctx_, {x}, ya, grad_y, absl::MakeSpan(&grad_x, 1));
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    ASSERT_FLOAT_EQ(grad_x.data()[i] * x.data()[i], grad_y.data()[i] * ya.data()[i]) << i;
  }

  // Same seed, same masks; another seed or the next step, another mask.
  int64_t same_b = 0, same_c = 0, same_next = 0;
  a->Forward(*ctx_, {x}, ya2, true);
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    same_b += (ya.data()[i] == 0) == (yb.data()[i] == 0);
    same_c += (ya.data()[i] == 0) == (yc.data()[i] == 0);
    same_next += (ya.data()[i] == 0) == (ya2.data()[i] == 0);
  }
  EXPECT_EQ(same_b, x.num_elements());
  EXPECT_LT(same_c, x.num_elements() * 0.7);
  EXPECT_LT(same_next, x.num_elements() * 0.7);

  // Inference is the identity.
  Tensor inference(shape);
  a->Forward(*ctx_, {x}, inference, false);
  for (int64_t i = 0; i < x.num_elements(); ++i) ASSERT_EQ(inference.data()[i], x.data()[i]);
}

// ---- The sparse models' layers (CPU only) ----

// Values from a list, as a plain tensor of `shape`.
Tensor Values(const Shape& shape, const std::vector<float>& values) {
  Tensor t(shape);
  EXPECT_EQ(t.num_elements(), static_cast<int64_t>(values.size()));
  std::copy(values.begin(), values.end(), t.data());
  return t;
}

std::vector<float> ValuesOf(const Tensor& t) { return std::vector<float>(t.data(), t.data() + t.num_elements()); }

TEST_F(CpuLayersTest, SliceCopiesItsColumnsAndZerosTheRestOfTheGradient) {
  auto slice = Make(LayerSpec{"slice"}.Int("begin", 1).Int("size", 3), {{1, 5}});
  EXPECT_EQ(slice->ForwardFlopsPerExample(), 0);
  const Tensor x = Values({2, 1, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor y({2, 3});
  EXPECT_EQ(slice->OutputLayout(*ctx_, {x}), nullptr);
  slice->Forward(*ctx_, {x}, y, true);
  EXPECT_EQ(ValuesOf(y), (std::vector<float>{1, 2, 3, 6, 7, 8}));
  const Tensor grad_y = Values({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor grad_x({2, 1, 5});
  for (float& v : grad_x.span()) v = 7.25f;  // overwritten, not accumulated into
  slice->Backward(*ctx_, {x}, y, grad_y, absl::MakeSpan(&grad_x, 1));
  EXPECT_EQ(ValuesOf(grad_x), (std::vector<float>{0, 1, 2, 3, 0, 0, 4, 5, 6, 0}));
}

TEST_F(CpuLayersTest, DotInteractionIsTheLowerTriangleOfPairwiseDots) {
  // F = 3 vectors of d = 2: pairs (1,0), (2,0), (2,1).
  auto dot = Make(LayerSpec{"dot_interaction"}.Int("features", 3), {{6}});
  EXPECT_EQ(dot->ForwardFlopsPerExample(), 3 * 2 * 2);
  const Tensor x = Values({2, 6}, {1, 2, 3, 4, 5, 6,   /* v0 (1,2), v1 (3,4), v2 (5,6) */
                                   1, 0, 0, 1, 2, 3}); /* v0 (1,0), v1 (0,1), v2 (2,3) */
  Tensor y({2, 3});
  EXPECT_EQ(dot->OutputLayout(*ctx_, {x}), nullptr);
  dot->Forward(*ctx_, {x}, y, true);
  // 1*3+2*4, 1*5+2*6, 3*5+4*6; then 0, 2, 3.
  EXPECT_EQ(ValuesOf(y), (std::vector<float>{11, 17, 39, 0, 2, 3}));
  // dv_i = sum_j g_ij v_j. Example 0, g = (g10, g20, g21) = (1, 2, 3):
  // dv0 = 1*v1 + 2*v2 = (13, 16); dv1 = 1*v0 + 3*v2 = (16, 20);
  // dv2 = 2*v0 + 3*v1 = (11, 16). Example 1, g = (1, 0, -1):
  // dv0 = v1 = (0, 1); dv1 = v0 - v2 = (-1, -3); dv2 = -v1 = (0, -1).
  const Tensor grad_y = Values({2, 3}, {1, 2, 3, 1, 0, -1});
  Tensor grad_x({2, 6});
  for (float& v : grad_x.span()) v = 7.25f;
  dot->Backward(*ctx_, {x}, y, grad_y, absl::MakeSpan(&grad_x, 1));
  EXPECT_EQ(ValuesOf(grad_x), (std::vector<float>{13, 16, 16, 20, 11, 16, 0, 1, -1, -3, 0, -1}));
}

TEST_F(CpuLayersTest, SparseModelLayersSetupErrors) {
  auto slice = [](int64_t begin, int64_t size) { return LayerSpec{"slice"}.Int("begin", begin).Int("size", size); };
  EXPECT_EQ(SetupError(slice(0, 2), {{5}, {5}}).message(), "slice takes 1 input, got 2");
  EXPECT_EQ(SetupError(slice(-1, 2), {{5}}).message(), "slice \"begin\" must be >= 0, got -1");
  EXPECT_EQ(SetupError(slice(0, 0), {{5}}).message(), "slice needs a positive \"size\" attribute, got 0");
  EXPECT_EQ(SetupError(LayerSpec{"slice"}, {{5}}).message(), "slice needs a positive \"size\" attribute, got -1");
  EXPECT_EQ(SetupError(slice(3, 3), {{1, 1, 5}}).message(),
            "slice of features [3, 6) runs past the input's 5 features ([1,1,5])");
  EXPECT_TRUE(SetupError(slice(3, 2), {{1, 1, 5}}).ok());
  EXPECT_EQ(SetupError(slice(0, 1), {{0}}).code(), absl::StatusCode::kInvalidArgument);

  auto dot = [](int64_t f) { return LayerSpec{"dot_interaction"}.Int("features", f); };
  EXPECT_EQ(SetupError(dot(1), {{4}}).message(), "dot_interaction needs a \"features\" attribute >= 2, got 1");
  EXPECT_EQ(SetupError(LayerSpec{"dot_interaction"}, {{4}}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SetupError(dot(3), {{8}}).message(),
            "dot_interaction input [8] (8 values) does not split into 3 vectors of equal length");
  EXPECT_EQ(SetupError(dot(2), {{4}, {4}}).message(), "dot_interaction takes 1 input, got 2");
  auto ok = Make(dot(27), {{27 * 16}});
  EXPECT_EQ(ok->ForwardFlopsPerExample(), 2 * 16 * (27 * 26 / 2));
}

// No CUDA twins: on cuda the types are unavailable (with the reason), not unknown.
TEST_F(CpuLayersTest, SparseModelLayersAreCpuOnly) {
  for (const char* type : {"slice", "dot_interaction"}) {
    auto layer = CreateLayer(LayerSpec{type}, DeviceKind::kCuda);
    ASSERT_FALSE(layer.ok()) << type;
    EXPECT_EQ(layer.status().code(), absl::StatusCode::kFailedPrecondition) << layer.status();
    EXPECT_THAT(layer.status().message(), HasSubstr(absl::StrCat("'", type, "' is not available")));
    EXPECT_THAT(layer.status().message(), HasSubstr("CPUs only"));
    EXPECT_THAT(layer.status().message(), HasSubstr("device: cpu"));
    EXPECT_THAT(RegisteredLayerTypes(DeviceKind::kCuda), Not(::testing::Contains(type)));
    EXPECT_THAT(RegisteredLayerTypes(DeviceKind::kCpu), ::testing::Contains(type));
  }
}

// ---- Setup errors ----

TEST_F(CpuLayersTest, SetupErrorsNameTheLayerAndShapes) {
  auto conv = [](int64_t k) { return LayerSpec{"conv2d"}.Int("filters", 4).Ints("kernel", {k, k}); };
  absl::Status s = SetupError(conv(5), {{3, 4, 4}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("conv2d"));
  EXPECT_THAT(s.message(), HasSubstr("[3,4,4]"));
  EXPECT_THAT(s.message(), HasSubstr("kernel [5,5]"));
  EXPECT_TRUE(SetupError(conv(5).Ints("padding", {1, 1}), {{3, 4, 4}}).ok());  // fits once padded

  EXPECT_THAT(SetupError(conv(3), {{3, 8}}).message(), HasSubstr("[channels, height, width]"));
  EXPECT_THAT(SetupError(LayerSpec{"conv2d"}.Int("kernel", 3), {{3, 8, 8}}).message(), HasSubstr("filters"));
  EXPECT_THAT(SetupError(LayerSpec{"conv2d"}.Int("filters", 2), {{3, 8, 8}}).message(), HasSubstr("kernel"));
  EXPECT_THAT(SetupError(conv(3).Int("groups", 2), {{3, 8, 8}}).message(), HasSubstr("groups 2 must divide"));
  EXPECT_THAT(SetupError(conv(3).Ints("stride", {0, 1}), {{3, 8, 8}}).message(), HasSubstr("\"stride\" must be >= 1"));
  EXPECT_THAT(SetupError(conv(3).Ints("padding", {1, 1, 1}), {{3, 8, 8}}).message(), HasSubstr("1 or 2 ints"));
  EXPECT_THAT(SetupError(conv(3).Int("bias", 2), {{3, 8, 8}}).message(), HasSubstr("bias"));

  EXPECT_THAT(
      SetupError(LayerSpec{"max_pool"}.Int("kernel", 3), {{2, 2, 2}}).message(),
      HasSubstr("max_pool window (kernel [3,3] stride [3,3] padding [0,0]) is larger than the padded input [2,2,2]"));
  EXPECT_THAT(SetupError(LayerSpec{"avg_pool"}.Int("kernel", 2).Int("padding", 2), {{2, 4, 4}}).message(),
              HasSubstr("padding must be smaller than the kernel"));
  EXPECT_THAT(SetupError(LayerSpec{"global_avg_pool"}, {{10}}).message(), HasSubstr("global_avg_pool input"));

  absl::Status concat = SetupError(LayerSpec{"concat"}, {{2, 4, 4}, {3, 4, 5}});
  EXPECT_EQ(concat.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(concat.message(),
              HasSubstr("concat inputs must agree in all but the channel dim, got [2,4,4] and [3,4,5]"));
  EXPECT_FALSE(SetupError(LayerSpec{"concat"}, {}).ok());

  EXPECT_THAT(SetupError(LayerSpec{"batch_norm"}, {{2, 3}}).message(), HasSubstr("batch_norm input"));
  EXPECT_THAT(SetupError(LayerSpec{"batch_norm"}.Float("momentum", 1.5), {{2}}).message(), HasSubstr("momentum"));
  EXPECT_THAT(SetupError(LayerSpec{"lrn"}.Int("size", 0), {{2, 3, 3}}).message(), HasSubstr("lrn size"));
  EXPECT_THAT(SetupError(LayerSpec{"dropout"}.Float("rate", 1.0), {{2}}).message(), HasSubstr("dropout rate"));
  EXPECT_THAT(SetupError(LayerSpec{"add"}, {{2, 3}, {3, 2}}).message(), HasSubstr("add inputs differ"));
}

// ---- FLOPs ----

TEST_F(CpuLayersTest, ForwardFlops) {
  // 2 * (output elements) * (multiply-adds per output).
  auto conv = Make(LayerSpec{"conv2d"}.Int("filters", 16).Int("kernel", 3).Int("padding", 1), {{3, 32, 32}});
  EXPECT_EQ(conv->ForwardFlopsPerExample(), 2 * (16 * 32 * 32) * (3 * 3 * 3));
  auto strided =
      Make(LayerSpec{"conv2d"}.Int("filters", 64).Int("kernel", 7).Int("stride", 2).Int("padding", 3), {{3, 224, 224}});
  EXPECT_EQ(strided->ForwardFlopsPerExample(), 2LL * (64 * 112 * 112) * (3 * 7 * 7));  // ResNet's conv1: 236 MFLOP
  auto grouped =
      Make(LayerSpec{"conv2d"}.Int("filters", 8).Int("kernel", 3).Int("groups", 4).Int("bias", 0), {{8, 6, 6}});
  EXPECT_EQ(grouped->ForwardFlopsPerExample(), 2 * (8 * 4 * 4) * (2 * 3 * 3));
  auto dense = Make(LayerSpec{"dense"}.Int("units", 10), {{4, 2, 2}});
  EXPECT_EQ(dense->ForwardFlopsPerExample(), 2 * 16 * 10);
  EXPECT_EQ(Make(LayerSpec{"relu"}, {{4, 2, 2}})->ForwardFlopsPerExample(), 0);
  EXPECT_EQ(Make(LayerSpec{"batch_norm"}, {{4, 2, 2}})->ForwardFlopsPerExample(), 0);
}

// Parameters: shapes, initialisers and fan-in as the zoo relies on.
TEST_F(CpuLayersTest, ConvAndBatchNormParameters) {
  auto conv = Make(LayerSpec{"conv2d"}.Int("filters", 6).Ints("kernel", {3, 2}).Int("groups", 2), {{4, 8, 8}});
  ASSERT_EQ(conv->parameters().size(), 2u);
  EXPECT_EQ(conv->parameters()[0].name, "weights");
  EXPECT_EQ(conv->parameters()[0].value.shape(), (Shape{6, 2, 3, 2}));
  EXPECT_EQ(conv->parameters()[0].init, Initializer::kHeNormal);
  EXPECT_EQ(conv->parameters()[0].fan_in, 2 * 3 * 2);
  EXPECT_EQ(conv->parameters()[1].name, "bias");
  EXPECT_EQ(conv->parameters()[1].value.shape(), (Shape{6}));
  auto no_bias = Make(LayerSpec{"conv2d"}.Int("filters", 6).Int("kernel", 1).Int("bias", 0), {{4, 8, 8}});
  EXPECT_EQ(no_bias->parameters().size(), 1u);
  auto bn = Make(LayerSpec{"batch_norm"}, {{5, 2, 2}});
  ASSERT_EQ(bn->parameters().size(), 2u);
  EXPECT_EQ(bn->parameters()[0].name, "gamma");
  EXPECT_EQ(bn->parameters()[0].init, Initializer::kOnes);
  EXPECT_EQ(bn->parameters()[1].name, "beta");
  EXPECT_EQ(bn->parameters()[1].value.shape(), (Shape{5}));
}

// The loss queued and taken later (as a training step takes it once its
// backward is queued) is the batch's own: two batches in turn, each equal
// to a one-call ForwardBackward of it on a fresh loss layer.
TEST_F(CpuLayersTest, ALossQueuedThenTakenIsThatBatchsLoss) {
  auto loss = CreateSoftmaxCrossEntropy(DeviceKind::kCpu);
  ASSERT_TRUE(loss.ok()) << loss.status();
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> uniform(-3, 3);
  float previous = -1;
  for (int batch = 0; batch < 2; ++batch) {
    Tensor logits({6, 4}), grad({6, 4}), want_grad({6, 4});
    for (float& v : logits.span()) v = uniform(rng);
    std::vector<int32_t> labels(6);
    for (int32_t& l : labels) l = static_cast<int32_t>(rng() % 4);
    auto fresh = CreateSoftmaxCrossEntropy(DeviceKind::kCpu);
    ASSERT_TRUE(fresh.ok());
    const float want = (*fresh)->ForwardBackward(*ctx_, logits, labels.data(), &want_grad);
    (*loss)->Queue(*ctx_, logits, labels.data(), &grad, 1.0f);
    const float got = (*loss)->TakeLoss();
    EXPECT_EQ(got, want) << "batch " << batch;
    EXPECT_NE(got, previous) << "batch " << batch << " took the previous batch's loss";
    EXPECT_EQ(std::vector<float>(grad.span().begin(), grad.span().end()),
              std::vector<float>(want_grad.span().begin(), want_grad.span().end()));
    previous = got;
  }
}

}  // namespace
}  // namespace pstrain::testing
