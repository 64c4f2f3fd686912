// CUDA layers against the CPU ones. Every layer type registered on the CPU is
// built on both devices from one spec and input shapes, given the same
// parameters, inputs and output gradient (uniform in [-1, 1], fixed seed),
// run forward (training mode) and backward, and must agree on the output, the
// input gradients and the parameter gradients; so must the softmax
// cross-entropy loss and one training step of small zoo models.
//
// Setup (shapes, parameters, validation errors) and the registries need no
// GPU: those tests run in every CUDA build and skip in a CPU-only one. The
// numerical tests skip, with CreateDeviceContext's reason, when no CUDA device
// is usable.
//
// Tolerance: elementwise |cuda - cpu| <= abs + rel * |cpu|. Both devices do
// the same float32 arithmetic in different orders (cuBLAS/cuDNN vs oneDNN),
// which costs a few ulps per accumulated term: with O(1) values and sums of
// at most a few hundred terms that stays well inside rel 1e-4 with an abs
// floor of 1e-5 for results near zero (kFloat32). Convolutions get rel 1e-3,
// abs 1e-4 (kConvolution): cuDNN may choose Winograd, FFT or implicit-GEMM
// algorithms (oneDNN its own), whose transforms round differently from direct
// summation, by up to ~1e-5 of the sum of |terms| (O(10) here).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "models/layers/layer.h"
#include "models/model.h"
#include "tests/models/layer_specs.h"

#ifdef PSTRAIN_WITH_CUDA
#include "device/cuda/cuda_context.h"
#endif

namespace pstrain::testing {
namespace {

struct Tolerance {
  double rel;
  double abs;
};
constexpr Tolerance kFloat32{1e-4, 1e-5};
constexpr Tolerance kConvolution{1e-3, 1e-4};
constexpr Tolerance kExact{0, 0};

constexpr float kGarbage = 7.25f;  // pre-fills backward outputs

// ---- Cases: the configurations of layer_gradient_test.cc, and a few larger ----

struct AgreementCase {
  std::string name;  // test name suffix
  LayerSpec spec;
  std::vector<Shape> input_shapes;  // batched
  Tolerance tolerance;
  LayerSpec fuse_next;  // when its type is set: offered to both layers' Fuse(), which must accept
};

void PrintTo(const AgreementCase& c, std::ostream* os) { *os << c.name; }

AgreementCase Case(std::string name, LayerSpec spec, std::vector<Shape> input_shapes, Tolerance tolerance = kFloat32) {
  return {std::move(name), std::move(spec), std::move(input_shapes), tolerance, LayerSpec{}};
}

// The case with the layer taking over the `next` one (Layer::Fuse).
AgreementCase Fused(AgreementCase c, LayerSpec next) {
  c.fuse_next = std::move(next);
  return c;
}

std::vector<AgreementCase> Cases() {
  return {
      Case("Dense", LayerSpec{"dense"}.Int("units", 5), {{4, 7}}),
      Case("DenseFlattensFourDimensionalInput", LayerSpec{"dense"}.Int("units", 3), {{3, 2, 3, 4}}),
      Case("DenseBatchOfOne", LayerSpec{"dense"}.Int("units", 4), {{1, 6}}),
      Case("DenseLarge", LayerSpec{"dense"}.Int("units", 70), {{33, 300}}),
      Case("Relu", LayerSpec{"relu"}, {{4, 9}}),
      Case("ReluFourDimensional", LayerSpec{"relu"}, {{2, 3, 4, 5}}),
      Case("Flatten", LayerSpec{"flatten"}, {{2, 3, 2, 2}}),
      Case("Add", LayerSpec{"add"}, {{3, 4}, {3, 4}, {3, 4}}),
      Case("AddFourDimensional", LayerSpec{"add"}, {{2, 3, 4, 5}, {2, 3, 4, 5}}),
      Case("Conv2dSamePaddingWithBias", Conv(6, {3, 3}, {1, 1}, {1, 1}), {{2, 4, 5, 5}}, kConvolution),
      Case("Conv2dStridedNoBias", Conv(5, {3, 3}, {2, 2}, {1, 1}, 1, /*bias=*/0), {{2, 3, 7, 6}}, kConvolution),
      Case("Conv2dRectangularKernelUnevenStridePadding", Conv(4, {3, 2}, {2, 1}, {1, 0}), {{2, 3, 6, 5}}, kConvolution),
      Case("Conv2dGroups", Conv(6, {3, 3}, {1, 1}, {1, 1}, /*groups=*/2), {{2, 4, 4, 4}}, kConvolution),
      Case("Conv2dDepthwiseNoBias", Conv(4, {3, 3}, {1, 1}, {0, 0}, /*groups=*/4, 0), {{2, 4, 5, 5}}, kConvolution),
      Case("Conv2dOneByOneWideChannels", Conv(16, {1, 1}, {1, 1}, {0, 0}), {{2, 16, 3, 3}}, kConvolution),
      Case("Conv2dDefaultsAndSingleIntAttributes", LayerSpec{"conv2d"}.Int("filters", 3).Int("kernel", 2),
           {{1, 2, 4, 3}}, kConvolution),
      Case("Conv2dLarger", Conv(32, {5, 5}, {1, 1}, {2, 2}), {{4, 8, 12, 12}}, kConvolution),
      Case("BatchNormSpatial", LayerSpec{"batch_norm"}, {{4, 3, 3, 3}}),
      Case("BatchNormFeatures", LayerSpec{"batch_norm"}.Float("epsilon", 1e-5), {{8, 5}}),
      Case("BatchNormWideChannels", LayerSpec{"batch_norm"}, {{3, 16, 2, 2}}),
      Case("MaxPoolNonOverlapping", Pool("max_pool", 2, 2, 0), {{2, 3, 4, 6}}),
      Case("MaxPoolOverlappingPadded", Pool("max_pool", 3, 2, 1), {{2, 3, 7, 7}}),
      Case("MaxPoolOverlapping", Pool("max_pool", 3, 2, 0), {{2, 2, 6, 6}}),
      Case("AvgPool", Pool("avg_pool", 2, 2, 0), {{2, 3, 4, 4}}),
      Case("AvgPoolOverlappingPadded", Pool("avg_pool", 3, 2, 1), {{2, 3, 6, 5}}),
      Case("AvgPoolStrideOne", Pool("avg_pool", 3, 1, 1), {{1, 2, 4, 4}}),
      Case("GlobalAvgPool", LayerSpec{"global_avg_pool"}, {{2, 4, 3, 5}}),
      Case("LrnAlexNetParameters", LayerSpec{"lrn"}.Float("k", 2.0), {{2, 7, 3, 3}}),
      Case("LrnStronglyNonlinear",
           LayerSpec{"lrn"}.Int("size", 3).Float("alpha", 2.0).Float("beta", 0.75).Float("k", 1.0), {{2, 6, 2, 3}}),
      Case("ConcatThreeInputs", LayerSpec{"concat"}, {{2, 2, 3, 3}, {2, 3, 3, 3}, {2, 1, 3, 3}}),
      Case("ConcatFeatures", LayerSpec{"concat"}, {{3, 4}, {3, 2}}),
      Case("DropoutRateZeroIsIdentity", LayerSpec{"dropout"}.Float("rate", 0.0), {{3, 2, 2, 2}}),
      // Both devices hash (seed, step, index) the same way: the same mask.
      Case("DropoutDrawsTheCpuMask", LayerSpec{"dropout"}.Float("rate", 0.5).Int("seed", 7), {{4, 3, 5, 5}}),
      // Fusions the graph model makes (Layer::Fuse): the end of a residual
      // block, and batch norm's relu.
      Fused(Case("AddFusedRelu", LayerSpec{"add"}, {{2, 3, 4, 5}, {2, 3, 4, 5}}), LayerSpec{"relu"}),
      Fused(Case("BatchNormFusedRelu", LayerSpec{"batch_norm"}, {{3, 16, 2, 2}}), LayerSpec{"relu"}),
  };
}

std::vector<Shape> PerExample(const std::vector<Shape>& batched) {
  std::vector<Shape> shapes;
  for (const Shape& s : batched) shapes.emplace_back(s.begin() + 1, s.end());
  return shapes;
}

// ---- Host <-> device ----

// A plain host copy of `t`, ready to read.
Tensor ToHost(DeviceContext& ctx, const Tensor& t) {
  Tensor host(t.shape());
  ctx.Convert(t, host);
  ctx.Synchronize();
  return host;
}

Tensor ToDevice(DeviceContext& ctx, const Tensor& host, const TensorLayoutPtr& layout = nullptr) {
  Tensor t = ctx.Allocate(host.shape(), layout);
  ctx.Convert(host, t);
  return t;
}

// Makes `t` hold `host`'s values on ctx's device: in place when it is there
// already (a CPU layer's parameters), else in a tensor from ctx.Allocate(),
// as a model moves parameters to its device.
void Place(DeviceContext& ctx, const Tensor& host, Tensor& t) {
  if (t.device() != ctx.device()) t = ctx.Allocate(host.shape());
  ctx.Convert(host, t);
}

Tensor Uniform(std::mt19937_64& rng, const Shape& shape, double lo, double hi) {
  Tensor t(shape);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (float& v : t.span()) v = static_cast<float>(dist(rng));
  return t;
}

Tensor Garbage(const Shape& shape) {
  Tensor t(shape);
  std::fill(t.data(), t.data() + t.num_elements(), kGarbage);
  return t;
}

// ---- Comparison ----

::testing::AssertionResult Agree(const std::string& what, const Tensor& cpu, const Tensor& cuda, Tolerance tol) {
  if (cpu.shape() != cuda.shape()) {
    return ::testing::AssertionFailure() << what << ": cpu " << ShapeToString(cpu.shape()) << " vs cuda "
                                         << ShapeToString(cuda.shape());
  }
  int64_t bad = 0, worst = -1;
  double worst_ratio = 0;
  for (int64_t i = 0; i < cpu.num_elements(); ++i) {
    const double e = cpu.data()[i], a = cuda.data()[i];
    const double error = std::fabs(a - e), allowed = tol.abs + tol.rel * std::fabs(e);
    if (error <= allowed) continue;  // NaN fails
    ++bad;
    const double ratio = std::isnan(error) ? std::numeric_limits<double>::infinity()
                         : allowed > 0     ? error / allowed
                                           : error;
    if (worst < 0 || ratio > worst_ratio) {
      worst = i;
      worst_ratio = ratio;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << bad << " of " << cpu.num_elements()
                                       << " elements differ by more than " << tol.abs << " + " << tol.rel
                                       << " * |cpu|; worst [" << worst << "]: cpu " << cpu.data()[worst] << " cuda "
                                       << cuda.data()[worst];
}

std::string Describe(const absl::StatusOr<Shape>& s) { return s.ok() ? ShapeToString(*s) : s.status().ToString(); }

// Both layers accepted the same per-example shapes with the same result, or
// refused them with the same status; on success their parameters and FLOP
// counts agree.
::testing::AssertionResult SetupsAgree(const LayerSpec& spec, const std::vector<Shape>& per_example) {
  std::vector<std::string> shapes;
  for (const Shape& s : per_example) shapes.push_back(ShapeToString(s));
  const std::string what = absl::StrCat(spec.type, " on ", absl::StrJoin(shapes, " "));
  auto cpu = CreateLayer(spec, DeviceKind::kCpu);
  auto cuda = CreateLayer(spec, DeviceKind::kCuda);
  if (!cpu.ok() || !cuda.ok()) {
    return ::testing::AssertionFailure() << what << ": cpu " << cpu.status() << ", cuda " << cuda.status();
  }
  const absl::StatusOr<Shape> cpu_out = (*cpu)->Setup(per_example), cuda_out = (*cuda)->Setup(per_example);
  if (cpu_out.ok() != cuda_out.ok() || (cpu_out.ok() && *cpu_out != *cuda_out) ||
      (!cpu_out.ok() && cpu_out.status() != cuda_out.status())) {
    return ::testing::AssertionFailure() << what << ": cpu " << Describe(cpu_out) << ", cuda " << Describe(cuda_out);
  }
  if (!cpu_out.ok()) return ::testing::AssertionSuccess() << what << ": " << cpu_out.status();
  const std::vector<Parameter>& cp = (*cpu)->parameters();
  const std::vector<Parameter>& gp = (*cuda)->parameters();
  if (cp.size() != gp.size()) {
    return ::testing::AssertionFailure() << what << ": " << cp.size() << " cpu parameters, " << gp.size() << " cuda";
  }
  for (size_t i = 0; i < cp.size(); ++i) {
    if (cp[i].name != gp[i].name || cp[i].value.shape() != gp[i].value.shape() ||
        cp[i].grad.shape() != gp[i].grad.shape() || cp[i].init != gp[i].init || cp[i].fan_in != gp[i].fan_in ||
        cp[i].fan_out != gp[i].fan_out) {
      return ::testing::AssertionFailure()
             << what << ": parameter " << i << " differs: cpu " << cp[i].name << " "
             << ShapeToString(cp[i].value.shape()) << " fans " << cp[i].fan_in << "/" << cp[i].fan_out << ", cuda "
             << gp[i].name << " " << ShapeToString(gp[i].value.shape()) << " fans " << gp[i].fan_in << "/"
             << gp[i].fan_out;
    }
  }
  if ((*cpu)->ForwardFlopsPerExample() != (*cuda)->ForwardFlopsPerExample() ||
      (*cpu)->PassesGradientThrough() != (*cuda)->PassesGradientThrough()) {
    return ::testing::AssertionFailure() << what << ": FLOPs " << (*cpu)->ForwardFlopsPerExample() << " vs "
                                         << (*cuda)->ForwardFlopsPerExample() << ", passes gradient through "
                                         << (*cpu)->PassesGradientThrough() << " vs "
                                         << (*cuda)->PassesGradientThrough();
  }
  return ::testing::AssertionSuccess();
}

// ---- Running a layer ----

// What a layer produced, as plain host tensors, and the layout it chose.
struct LayerResults {
  TensorLayoutPtr output_layout;
  Tensor output;
  std::vector<Tensor> grad_inputs;
  std::vector<Tensor> param_grads;
};

// The layout an input of a batched shape is given on the device; null: plain.
using InputLayout = std::function<TensorLayoutPtr(const Shape&)>;

// Runs `layer` (after Setup) on ctx's device: parameters set to
// `param_values`, Forward() in training mode on `inputs` (laid out by
// `input_layout` when given), Backward() with `grad_output` (all plain host
// tensors). Backward's outputs start as garbage, so one that is accumulated
// into rather than overwritten shows.
LayerResults RunLayer(DeviceContext& ctx, Layer& layer, const std::vector<Tensor>& inputs,
                      const std::vector<Tensor>& param_values, const Tensor& grad_output,
                      const InputLayout& input_layout = nullptr) {
  std::vector<Tensor> device_inputs;
  for (const Tensor& in : inputs) {
    device_inputs.push_back(ToDevice(ctx, in, input_layout ? input_layout(in.shape()) : nullptr));
  }
  std::vector<Parameter>& params = layer.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    Place(ctx, param_values[i], params[i].value);
    Place(ctx, Garbage(param_values[i].shape()), params[i].grad);
  }
  Tensor output = ctx.Allocate(grad_output.shape(), layer.OutputLayout(ctx, device_inputs));
  layer.Forward(ctx, device_inputs, output, /*training=*/true);
  const Tensor device_grad_output = ToDevice(ctx, grad_output, output.layout());
  std::vector<Tensor> grad_inputs;
  for (const Tensor& in : device_inputs) grad_inputs.push_back(ToDevice(ctx, Garbage(in.shape()), in.layout()));
  layer.Backward(ctx, device_inputs, output, device_grad_output, absl::MakeSpan(grad_inputs));

  LayerResults results;
  results.output_layout = output.layout();
  results.output = ToHost(ctx, output);
  for (const Tensor& g : grad_inputs) results.grad_inputs.push_back(ToHost(ctx, g));
  for (const Parameter& p : params) results.param_grads.push_back(ToHost(ctx, p.grad));
  return results;
}

// The case's layer on each device, set up for its input shapes, and the
// batched output shape.
struct LayerPair {
  std::unique_ptr<Layer> cpu, cuda;
  Shape output;
};

::testing::AssertionResult MakeLayerPair(const AgreementCase& c, LayerPair* pair) {
  const std::vector<Shape> per_example = PerExample(c.input_shapes);
  auto cpu = CreateLayer(c.spec, DeviceKind::kCpu);
  auto cuda = CreateLayer(c.spec, DeviceKind::kCuda);
  if (!cpu.ok() || !cuda.ok()) return ::testing::AssertionFailure() << cpu.status() << "; " << cuda.status();
  absl::StatusOr<Shape> out = (*cpu)->Setup(per_example);
  absl::StatusOr<Shape> cuda_out = (*cuda)->Setup(per_example);
  if (!out.ok() || !cuda_out.ok()) return ::testing::AssertionFailure() << out.status() << "; " << cuda_out.status();
  if (!c.fuse_next.type.empty()) {
    if (!(*cpu)->Fuse(c.fuse_next) || !(*cuda)->Fuse(c.fuse_next)) {
      return ::testing::AssertionFailure() << c.spec.type << " refused to fuse " << c.fuse_next.type;
    }
    if ((*cpu)->PassesGradientThrough() != (*cuda)->PassesGradientThrough() ||
        (*cpu)->ReadsInBackward().output != (*cuda)->ReadsInBackward().output) {
      return ::testing::AssertionFailure() << c.spec.type << " fused with " << c.fuse_next.type
                                           << ": the devices differ in what backward passes or reads";
    }
  }
  out->insert(out->begin(), c.input_shapes[0][0]);
  *pair = {std::move(*cpu), std::move(*cuda), std::move(*out)};
  return ::testing::AssertionSuccess();
}

// ---- Fixtures ----

// CUDA layers exist in this build: CreateDeviceContext for CUDA says more
// than "built without CUDA" (Unimplemented).
bool BuiltWithCuda(absl::Status* reason) {
  auto ctx = CreateDeviceContext(Device{DeviceKind::kCuda, 0});
  if (ctx.ok() || ctx.status().code() != absl::StatusCode::kUnimplemented) return true;
  *reason = ctx.status();
  return false;
}

// A CPU and a CUDA context; skips when no CUDA device is usable.
template <typename Base>
class BothDevices : public Base {
 protected:
  void SetUp() override {
    auto cuda = CreateDeviceContext(Device{DeviceKind::kCuda, 0});
    if (!cuda.ok()) GTEST_SKIP() << "no CUDA device / built without CUDA: " << cuda.status();
    auto cpu = CreateDeviceContext(Device::Cpu());
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    cuda_ = std::move(*cuda);
    cpu_ = std::move(*cpu);
  }

  DeviceContext& cpu() { return *cpu_; }
  DeviceContext& cuda() { return *cuda_; }

 private:
  std::unique_ptr<DeviceContext> cpu_, cuda_;
};

// ---- Registries and Setup: no GPU needed ----

// Layer types with no CUDA twin, on purpose: the sparse models' (dlrm,
// wide_deep) layers, since sparse models train on CPU workers. On cuda they
// are registered as unavailable (CreateLayer says why); the two tests below
// leave them out, and cpu_layers_test.cc checks them.
const std::set<std::string>& CpuOnlyLayerTypes() {
  static const auto* types = new std::set<std::string>{"dot_interaction", "slice"};
  return *types;
}

TEST(CudaLayerRegistryTest, RegistersTheCpuLayerTypes) {
  absl::Status reason;
  if (!BuiltWithCuda(&reason)) GTEST_SKIP() << reason;
  const std::vector<std::string> cpu = RegisteredLayerTypes(DeviceKind::kCpu);
  const std::vector<std::string> cuda = RegisteredLayerTypes(DeviceKind::kCuda);
  std::vector<std::string> missing, extra;
  for (const std::string& t : cpu) {
    if (CpuOnlyLayerTypes().contains(t)) continue;
    if (std::find(cuda.begin(), cuda.end(), t) == cuda.end()) missing.push_back(t);
  }
  for (const std::string& t : cuda) {
    if (std::find(cpu.begin(), cpu.end(), t) == cpu.end()) extra.push_back(t);
  }
  EXPECT_TRUE(missing.empty()) << "registered on cpu but not on cuda: " << absl::StrJoin(missing, ", ");
  EXPECT_TRUE(extra.empty()) << "registered on cuda but not on cpu: " << absl::StrJoin(extra, ", ");
  auto loss = CreateSoftmaxCrossEntropy(DeviceKind::kCuda);
  EXPECT_TRUE(loss.ok()) << loss.status();
}

TEST(CudaCpuAgreementCasesTest, CoverEveryCpuLayerType) {
  std::set<std::string> covered;
  for (const AgreementCase& c : Cases()) covered.insert(c.spec.type);
  std::vector<std::string> missing;
  for (const std::string& t : RegisteredLayerTypes(DeviceKind::kCpu)) {
    if (!covered.contains(t) && !CpuOnlyLayerTypes().contains(t)) missing.push_back(t);
  }
  EXPECT_TRUE(missing.empty()) << "no agreement case for: " << absl::StrJoin(missing, ", ");
  // The list names real CPU types, none of them with a CUDA twin.
  const std::vector<std::string> cpu = RegisteredLayerTypes(DeviceKind::kCpu);
  for (const std::string& t : CpuOnlyLayerTypes()) {
    EXPECT_NE(std::find(cpu.begin(), cpu.end(), t), cpu.end()) << t << " is listed CPU-only but not registered";
    EXPECT_EQ(CreateLayer(LayerSpec{t}, DeviceKind::kCuda).status().code(), absl::StatusCode::kFailedPrecondition)
        << t << " is listed CPU-only: drop it from the list once it has a CUDA twin";
  }
}

TEST(CudaCpuSetupTest, ValidConfigurationsAgree) {
  absl::Status reason;
  if (!BuiltWithCuda(&reason)) GTEST_SKIP() << reason;
  for (const AgreementCase& c : Cases()) EXPECT_TRUE(SetupsAgree(c.spec, PerExample(c.input_shapes))) << c.name;
}

// Attribute defaults and validation messages are the CPU layers' (the
// statuses must be equal, message included).
TEST(CudaCpuSetupTest, InvalidConfigurationsFailAlike) {
  absl::Status reason;
  if (!BuiltWithCuda(&reason)) GTEST_SKIP() << reason;
  const std::vector<std::pair<LayerSpec, std::vector<Shape>>> invalid = {
      {LayerSpec{"dense"}, {{4}}},
      {LayerSpec{"dense"}.Int("units", 3), {{4}, {4}}},
      {LayerSpec{"dense"}.Int("units", 3), {{0}}},
      {LayerSpec{"add"}, {{3}}},
      {LayerSpec{"add"}, {{3}, {4}}},
      {LayerSpec{"concat"}, {}},
      {LayerSpec{"concat"}, {{2, 3}, {2, 4}}},
      {LayerSpec{"concat"}, {{2, 3}, {2, 3, 1}}},
      {LayerSpec{"dropout"}.Float("rate", 1.0), {{4}}},
      {LayerSpec{"dropout"}, {{4}, {4}}},
      {LayerSpec{"flatten"}, {{4}, {4}}},
      {LayerSpec{"relu"}, {{4}, {4}}},
      {LayerSpec{"conv2d"}.Int("kernel", 3), {{1, 4, 4}}},
      {LayerSpec{"conv2d"}.Int("filters", 2).Int("kernel", 3), {{1, 2, 2}}},
      {LayerSpec{"conv2d"}.Int("filters", 3).Int("kernel", 1).Int("groups", 3), {{4, 2, 2}}},
      {LayerSpec{"conv2d"}.Int("filters", 2).Int("kernel", 1).Int("bias", 2), {{1, 2, 2}}},
      {LayerSpec{"batch_norm"}, {{2, 3}}},
      {LayerSpec{"batch_norm"}.Float("epsilon", 0.0), {{3}}},
      {LayerSpec{"max_pool"}, {{1, 4, 4}}},
      {Pool("max_pool", 2, 2, 0), {{3, 4}}},
      {Pool("avg_pool", 3, 1, 0), {{1, 2, 2}}},
      {LayerSpec{"global_avg_pool"}, {{5}}},
      {LayerSpec{"lrn"}, {{5}}},
      {LayerSpec{"lrn"}.Int("size", 0), {{3, 2, 2}}},
  };
  for (const auto& [spec, shapes] : invalid) EXPECT_TRUE(SetupsAgree(spec, shapes));
}

// ---- Numerical agreement: needs a GPU ----

// A case's operands, uniform in [-1, 1] from `seed`: its inputs, the layer's
// parameters and the gradient of its output.
struct Operands {
  std::vector<Tensor> inputs, params;
  Tensor grad_output;
};

Operands RandomOperands(const AgreementCase& c, const LayerPair& pair, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Operands o;
  for (const Shape& s : c.input_shapes) o.inputs.push_back(Uniform(rng, s, -1, 1));
  for (const Parameter& p : pair.cpu->parameters()) o.params.push_back(Uniform(rng, p.value.shape(), -1, 1));
  o.grad_output = Uniform(rng, pair.output, -1, 1);
  return o;
}

class LayerAgreementTest : public BothDevices<::testing::TestWithParam<AgreementCase>> {};

TEST_P(LayerAgreementTest, ForwardAndBackwardMatchTheCpu) {
  const AgreementCase& c = GetParam();
  ASSERT_TRUE(SetupsAgree(c.spec, PerExample(c.input_shapes)));
  LayerPair pair;
  ASSERT_TRUE(MakeLayerPair(c, &pair));
  const auto [inputs, params, grad_output] = RandomOperands(c, pair, 1);
  const LayerResults want = RunLayer(cpu(), *pair.cpu, inputs, params, grad_output);
  const LayerResults got = RunLayer(cuda(), *pair.cuda, inputs, params, grad_output);
  EXPECT_TRUE(Agree("output", want.output, got.output, c.tolerance));
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_TRUE(Agree(absl::StrCat("gradient of input ", i), want.grad_inputs[i], got.grad_inputs[i], c.tolerance));
  }
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(Agree(absl::StrCat("gradient of ", pair.cpu->parameters()[i].name), want.param_grads[i],
                      got.param_grads[i], c.tolerance));
  }
}

INSTANTIATE_TEST_SUITE_P(AllCpuLayerTypes, LayerAgreementTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<AgreementCase>& info) { return info.param.name; });

// ---- Mixed precision: conv2d and dense compute in 16 bits on the GPU ----

// x rounded to the nearest bf16 (ties to even), as a float.
float RoundToBf16(float x) {
  uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof(bits));
  bits += 0x7fff + ((bits >> 16) & 1);
  bits &= 0xffff0000u;
  std::memcpy(&x, &bits, sizeof(bits));
  return x;
}

// x rounded to the nearest fp16 (ties to even), as a float; |x| <= 65504.
float RoundToFp16(float x) {
  if (std::fabs(x) < 0x1p-14f) return std::nearbyint(x * 0x1p24f) * 0x1p-24f;  // fp16 subnormals: steps of 2^-24
  uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof(bits));
  bits += 0xfff + ((bits >> 13) & 1);  // 10 of float's 23 mantissa bits stay
  bits &= ~0x1fffu;
  std::memcpy(&x, &bits, sizeof(bits));
  return x;
}

float RoundTo(Precision precision, float x) { return precision == Precision::kBf16 ? RoundToBf16(x) : RoundToFp16(x); }

Tensor Rounded(Precision precision, const Tensor& t) {
  Tensor out(t.shape());
  for (int64_t i = 0; i < t.num_elements(); ++i) out.data()[i] = RoundTo(precision, t.data()[i]);
  return out;
}

// The CPU in fp32 on operands already rounded to 16 bits is the reference.
// The GPU differs by more than its float32 summation order: cuDNN writes
// the convolutions' results in 16 bits before they are widened (and the
// bias added), and some of its algorithms (Winograd, FFT) keep transformed
// operands in 16 bits. So the bound is relative to the tensor's largest
// magnitude: 2^-6 in bf16 (8 significant bits), 2^-9 in fp16 (11).
Tolerance MixedTolerance(Precision precision, const Tensor& want) {
  float largest = 0;
  for (int64_t i = 0; i < want.num_elements(); ++i) largest = std::max(largest, std::fabs(want.data()[i]));
  return Tolerance{0, (precision == Precision::kBf16 ? 0x1p-6 : 0x1p-9) * largest};
}

struct MixedCase {
  AgreementCase layer;
  Precision precision;
};

void PrintTo(const MixedCase& c, std::ostream* os) { *os << c.layer.name << PrecisionName(c.precision); }

// The cases `keep` accepts, each in bf16 and in fp16.
std::vector<MixedCase> InBothHalfTypes(const std::function<bool(const AgreementCase&)>& keep) {
  std::vector<MixedCase> cases;
  for (const AgreementCase& c : Cases()) {
    if (!keep(c)) continue;
    for (Precision p : {Precision::kBf16, Precision::kFp16}) cases.push_back({c, p});
  }
  return cases;
}

std::vector<MixedCase> MixedCases() {
  return InBothHalfTypes([](const AgreementCase& c) { return c.spec.type == "conv2d" || c.spec.type == "dense"; });
}

std::string MixedCaseName(const ::testing::TestParamInfo<MixedCase>& info) {
  return info.param.layer.name + PrecisionName(info.param.precision);
}

// The operands the CPU reference computes on: the inputs, the output's
// gradient and the first parameter (a product's weights) rounded to the
// 16-bit type; the other parameters (a bias, added in float32) as they are.
Operands RoundedForTheCpu(Precision precision, const Operands& o) {
  Operands rounded;
  for (const Tensor& t : o.inputs) rounded.inputs.push_back(Rounded(precision, t));
  for (size_t i = 0; i < o.params.size(); ++i)
    rounded.params.push_back(i == 0 ? Rounded(precision, o.params[i]) : o.params[i]);
  rounded.grad_output = Rounded(precision, o.grad_output);
  return rounded;
}

class MixedPrecisionAgreementTest : public BothDevices<::testing::TestWithParam<MixedCase>> {};

TEST_P(MixedPrecisionAgreementTest, MatchesTheCpuOnRoundedOperands) {
  const AgreementCase& c = GetParam().layer;
  const Precision precision = GetParam().precision;
  ASSERT_TRUE(cuda().SetPrecision(precision).ok()) << cuda().SetPrecision(precision);
  LayerPair pair;
  ASSERT_TRUE(MakeLayerPair(c, &pair));

  const Operands operands = RandomOperands(c, pair, 4);
  const auto& [inputs, params, grad_output] = operands;
  const Operands rounded = RoundedForTheCpu(precision, operands);
  const LayerResults want = RunLayer(cpu(), *pair.cpu, rounded.inputs, rounded.params, rounded.grad_output);
  const LayerResults got = RunLayer(cuda(), *pair.cuda, inputs, params, grad_output);
  EXPECT_TRUE(Agree("output", want.output, got.output, MixedTolerance(precision, want.output)));
  EXPECT_TRUE(Agree("gradient of the input", want.grad_inputs[0], got.grad_inputs[0],
                    MixedTolerance(precision, want.grad_inputs[0])));
  EXPECT_TRUE(Agree("gradient of the weights", want.param_grads[0], got.param_grads[0],
                    MixedTolerance(precision, want.param_grads[0])));
  if (params.size() > 1) {
    // The bias's gradient sums the float32 gradient: the CPU's on the
    // unrounded one.
    const LayerResults fp32 = RunLayer(cpu(), *pair.cpu, inputs, params, grad_output);
    EXPECT_TRUE(Agree("gradient of the bias", fp32.param_grads[1], got.param_grads[1], kFloat32));
  }
}

INSTANTIATE_TEST_SUITE_P(ConvAndDense, MixedPrecisionAgreementTest, ::testing::ValuesIn(MixedCases()), MixedCaseName);

class CudaCpuAgreementTest : public BothDevices<::testing::Test> {};

// 1 + 2^-10 (bf16) or 1 + 2^-12 (fp16) is a float32 that the 16-bit type
// rounds to 1: times a weight of 1 it gives exactly 1 when the product's
// operands really are rounded, 1 + 2^-k in float32.
TEST_F(CudaCpuAgreementTest, MixedPrecisionRoundsTheProductsOperands) {
  for (Precision precision : {Precision::kBf16, Precision::kFp16}) {
    for (const LayerSpec& spec : {LayerSpec{"dense"}.Int("units", 1), Conv(1, {1, 1}, {1, 1}, {0, 0}, 1, 0)}) {
      SCOPED_TRACE(absl::StrCat(spec.type, " in ", PrecisionName(precision)));
      auto ctx = CreateDeviceContext(Device{DeviceKind::kCuda, 0});
      ASSERT_TRUE(ctx.ok() && (*ctx)->SetPrecision(precision).ok());
      auto layer = CreateLayer(spec, DeviceKind::kCuda);
      ASSERT_TRUE(layer.ok());
      const Shape in = spec.type == "dense" ? Shape{1, 1} : Shape{1, 1, 1, 1};
      ASSERT_TRUE((*layer)->Setup(PerExample({in})).ok());
      const float x = precision == Precision::kBf16 ? 1.0f + 0x1p-10f : 1.0f + 0x1p-12f;
      ASSERT_NE(RoundTo(precision, x), x);
      Tensor input(in), weight((*layer)->parameters()[0].value.shape()), grad(in);
      input.data()[0] = x;
      weight.data()[0] = 1.0f;
      grad.data()[0] = x;
      std::vector<Tensor> params = {weight};
      if ((*layer)->parameters().size() > 1) params.push_back(Tensor((*layer)->parameters()[1].value.shape()));
      const LayerResults got = RunLayer(**ctx, **layer, {input}, params, grad);
      EXPECT_EQ(got.output.data()[0], 1.0f);
      EXPECT_EQ(got.param_grads[0].data()[0], 1.0f);  // x times the gradient, both rounded
    }
  }
}

// ---- TF32: float32 products on tensor cores (fp32_math tf32) ----

// TF32 keeps 10 of float32's 23 mantissa bits of each operand (2^-11
// relative when rounded, 2^-10 when truncated) and accumulates in float32;
// Winograd and FFT algorithms transform operands in TF32 too. Against the
// CPU in fp32 on the same operands, the bound is relative to the tensor's
// largest magnitude: 2^-7, between fp16's 2^-9 (operands rounded alike on
// both sides) and bf16's 2^-6.
Tolerance Tf32Tolerance(const Tensor& want) {
  float largest = 0;
  for (int64_t i = 0; i < want.num_elements(); ++i) largest = std::max(largest, std::fabs(want.data()[i]));
  return Tolerance{0, 0x1p-7 * largest};
}

std::vector<AgreementCase> ConvAndDenseCases() {
  std::vector<AgreementCase> cases;
  for (const AgreementCase& c : Cases()) {
    if (c.spec.type == "conv2d" || c.spec.type == "dense") cases.push_back(c);
  }
  return cases;
}

class Tf32AgreementTest : public BothDevices<::testing::TestWithParam<AgreementCase>> {};

TEST_P(Tf32AgreementTest, MatchesTheCpuWithinTf32Rounding) {
  const AgreementCase& c = GetParam();
  cuda().SetFp32Math(Fp32Math::kTf32);
  LayerPair pair;
  ASSERT_TRUE(MakeLayerPair(c, &pair));
  const auto [inputs, params, grad_output] = RandomOperands(c, pair, 5);
  const LayerResults want = RunLayer(cpu(), *pair.cpu, inputs, params, grad_output);
  const LayerResults got = RunLayer(cuda(), *pair.cuda, inputs, params, grad_output);
  EXPECT_TRUE(Agree("output", want.output, got.output, Tf32Tolerance(want.output)));
  EXPECT_TRUE(
      Agree("gradient of the input", want.grad_inputs[0], got.grad_inputs[0], Tf32Tolerance(want.grad_inputs[0])));
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(Agree(absl::StrCat("gradient of ", pair.cpu->parameters()[i].name), want.param_grads[i],
                      got.param_grads[i], Tf32Tolerance(want.param_grads[i])));
  }
}

INSTANTIATE_TEST_SUITE_P(ConvAndDense, Tf32AgreementTest, ::testing::ValuesIn(ConvAndDenseCases()),
                         [](const ::testing::TestParamInfo<AgreementCase>& info) { return info.param.name; });

// Every operand 1 + 2^-11 (which TF32's 10 mantissa bits cannot hold: a
// tie, rounded to even or truncated, it is 1) and every weight 1: a sum of
// k products is exactly k (1 + 2^-11) in strict float32 (k < 2^12: 23 bits
// suffice) and k in TF32; half the gap, k 2^-12, tells them apart. The layers
// are large enough for cuDNN and cuBLAS to choose tensor cores (ResNet's
// 64-channel 3x3 convolution; a 1024-wide dense layer). The fp32_math the
// context asked for is what the GPU computed.
TEST_F(CudaCpuAgreementTest, Tf32RoundsTheProductsOperands) {
  if (!cuda().HasTf32()) GTEST_SKIP() << "this GPU has no TF32 (compute capability below 8.0)";
  struct Product {
    LayerSpec spec;
    Shape input;     // batched
    int64_t center;  // an output element with every term of the sum: k of them
    float k;
  };
  const std::vector<Product> products = {
      {Conv(64, {3, 3}, {1, 1}, {1, 1}, 1, 0), {8, 64, 28, 28}, 14 * 28 + 14, 64 * 9},
      {LayerSpec{"dense"}.Int("units", 256), {256, 1024}, 0, 1024},
  };
  constexpr float kX = 1.0f + 0x1p-11f;
  for (const Product& p : products) {
    for (Fp32Math math : {Fp32Math::kStrict, Fp32Math::kTf32}) {
      SCOPED_TRACE(absl::StrCat(p.spec.type, " in ", Fp32MathName(math)));
      auto ctx = CreateDeviceContext(Device{DeviceKind::kCuda, 0});
      ASSERT_TRUE(ctx.ok()) << ctx.status();
      (*ctx)->SetFp32Math(math);
      ASSERT_EQ((*ctx)->fp32_math(), math);
      auto layer = CreateLayer(p.spec, DeviceKind::kCuda);
      ASSERT_TRUE(layer.ok()) << layer.status();
      const absl::StatusOr<Shape> output = (*layer)->Setup(PerExample({p.input}));
      ASSERT_TRUE(output.ok()) << output.status();
      Tensor input(p.input);
      for (float& v : input.span()) v = kX;
      std::vector<Tensor> params;
      for (const Parameter& param : (*layer)->parameters()) params.push_back(Tensor(param.value.shape()));
      for (float& v : params[0].span()) v = 1.0f;
      Shape grad_shape = {p.input[0]};
      grad_shape.insert(grad_shape.end(), output->begin(), output->end());
      Tensor grad(grad_shape);
      for (float& v : grad.span()) v = 1.0f;
      const LayerResults got = RunLayer(**ctx, **layer, {input}, params, grad);
      const float want = math == Fp32Math::kStrict ? p.k * kX : p.k;
      EXPECT_NEAR(got.output.data()[p.center], want, p.k * 0x1p-12f);
    }
  }
}

TEST_F(CudaCpuAgreementTest, SoftmaxCrossEntropy) {
  auto cpu_loss = CreateSoftmaxCrossEntropy(DeviceKind::kCpu);
  auto cuda_loss = CreateSoftmaxCrossEntropy(DeviceKind::kCuda);
  ASSERT_TRUE(cpu_loss.ok()) << cpu_loss.status();
  ASSERT_TRUE(cuda_loss.ok()) << cuda_loss.status();
  std::mt19937_64 rng(2);
  for (const auto& [batch, classes] : std::vector<std::pair<int64_t, int64_t>>{{5, 7}, {1, 2}, {64, 1000}}) {
    SCOPED_TRACE(absl::StrCat("batch ", batch, ", classes ", classes));
    const Tensor logits = Uniform(rng, {batch, classes}, -3, 3);
    std::vector<int32_t> labels(batch);
    for (int32_t& l : labels) l = static_cast<int32_t>(rng() % classes);

    Tensor cpu_grad = Garbage({batch, classes});
    const float cpu_value = (*cpu_loss)->ForwardBackward(cpu(), logits, labels.data(), &cpu_grad);
    cpu().Synchronize();
    const Tensor device_logits = ToDevice(cuda(), logits);
    Tensor cuda_grad = ToDevice(cuda(), Garbage({batch, classes}));
    const float cuda_value = (*cuda_loss)->ForwardBackward(cuda(), device_logits, labels.data(), &cuda_grad);
    const float cuda_value_only = (*cuda_loss)->ForwardBackward(cuda(), device_logits, labels.data(), nullptr);
    // Queued, more work queued behind it (as a training step queues its
    // backward before reading the loss), then taken.
    (*cuda_loss)->Queue(cuda(), device_logits, labels.data(), nullptr);
    const Tensor behind = cuda().Allocate({64, 1024, 1024});  // 256 MiB zero-filled on the stream
    const float cuda_value_taken = (*cuda_loss)->TakeLoss();

    EXPECT_TRUE(std::isfinite(cpu_value) && cpu_value > 0) << cpu_value;
    const double allowed = kFloat32.abs + kFloat32.rel * std::fabs(cpu_value);
    EXPECT_NEAR(cuda_value, cpu_value, allowed);
    EXPECT_NEAR(cuda_value_only, cpu_value, allowed);
    EXPECT_NEAR(cuda_value_taken, cpu_value, allowed);
    EXPECT_TRUE(Agree("gradient of logits", cpu_grad, ToHost(cuda(), cuda_grad), kFloat32));
  }
}

// One training step of zoo model `name` on each device from the same seed,
// images and labels: same initial variables, evaluation, loss and gradients.
void ExpectTrainStepsAgree(DeviceContext& cpu, DeviceContext& cuda, const std::string& name, const Shape& input_shape,
                           int64_t batch, Tolerance tolerance) {
  ModelConfig config;
  config.set_name(name);
  for (int64_t d : input_shape) config.add_input_shape(static_cast<int>(d));
  config.set_num_classes(10);
  auto cpu_model = CreateModel(config, &cpu);
  auto cuda_model = CreateModel(config, &cuda);
  ASSERT_TRUE(cpu_model.ok()) << cpu_model.status();
  ASSERT_TRUE(cuda_model.ok()) << cuda_model.status();
  (*cpu_model)->InitializeVariables(5);
  (*cuda_model)->InitializeVariables(5);
  std::vector<Variable>& cpu_vars = (*cpu_model)->variables();
  std::vector<Variable>& cuda_vars = (*cuda_model)->variables();
  ASSERT_EQ(cpu_vars.size(), cuda_vars.size());
  for (size_t i = 0; i < cpu_vars.size(); ++i) {
    ASSERT_EQ(cpu_vars[i].name, cuda_vars[i].name);
    EXPECT_FALSE(cuda_vars[i].value.on_host()) << cuda_vars[i].name;
    EXPECT_TRUE(Agree(cpu_vars[i].name, ToHost(cpu, cpu_vars[i].value), ToHost(cuda, cuda_vars[i].value), kExact));
  }

  Shape images_shape = {batch};
  images_shape.insert(images_shape.end(), input_shape.begin(), input_shape.end());
  std::mt19937_64 rng(3);
  const Tensor images = Uniform(rng, images_shape, -1, 1);
  std::vector<int32_t> labels(batch);
  for (int32_t& l : labels) l = static_cast<int32_t>(rng() % 10);

  const EvalResult cpu_eval = (*cpu_model)->Evaluate(images, labels.data());
  const EvalResult cuda_eval = (*cuda_model)->Evaluate(images, labels.data());
  EXPECT_EQ(cuda_eval.examples, batch);
  EXPECT_EQ(cuda_eval.correct, cpu_eval.correct);
  EXPECT_NEAR(cuda_eval.mean_loss, cpu_eval.mean_loss, kFloat32.abs + kFloat32.rel * std::fabs(cpu_eval.mean_loss));

  const float cpu_loss = (*cpu_model)->TrainStep(images, labels.data(), nullptr);
  const float cuda_loss = (*cuda_model)->TrainStep(images, labels.data(), nullptr);
  EXPECT_TRUE(std::isfinite(cpu_loss) && cpu_loss > 0) << cpu_loss;
  EXPECT_NEAR(cuda_loss, cpu_loss, kFloat32.abs + kFloat32.rel * std::fabs(cpu_loss));
  for (size_t i = 0; i < cpu_vars.size(); ++i) {
    EXPECT_TRUE(Agree(absl::StrCat("gradient of ", cpu_vars[i].name), ToHost(cpu, cpu_vars[i].grad),
                      ToHost(cuda, cuda_vars[i].grad), tolerance));
  }
}

TEST_F(CudaCpuAgreementTest, MlpTrainStep) { ExpectTrainStepsAgree(cpu(), cuda(), "mlp", {1, 8, 8}, 8, kFloat32); }

// The conv layers' relative slack (kConvolution); the gradients of a mean
// loss are small (~1e-2), so the absolute floor stays kFloat32's.
TEST_F(CudaCpuAgreementTest, LenetTrainStep) {
  ExpectTrainStepsAgree(cpu(), cuda(), "lenet", {1, 12, 12}, 4, Tolerance{kConvolution.rel, kFloat32.abs});
}

#ifdef PSTRAIN_WITH_CUDA
// ---- 16-bit channels-last activations (PSTRAIN_CUDA_ACTIVATIONS=half) ----

// Layers that keep 16-bit channels-last activations as they are; every other
// one converts them and gives plain float32 outputs.
bool KeepsHalfActivations(const LayerSpec& spec) {
  static const auto* native =
      new std::set<std::string>{"relu", "add", "batch_norm", "max_pool", "avg_pool", "global_avg_pool"};
  return native->contains(spec.type) || (spec.type == "conv2d" && spec.GetInt("bias", 1) == 0);
}

class HalfActivationsAgreementTest : public BothDevices<::testing::TestWithParam<MixedCase>> {};

// Every layer type, given its inputs and output gradient as 16-bit
// channels-last activations (those shaped [N, C, H, W]), matches the CPU on the rounded operands within
// the mixed-precision tolerance, and lays out its output as it should.
TEST_P(HalfActivationsAgreementTest, MatchesTheCpuOnRoundedOperands) {
  const AgreementCase& c = GetParam().layer;
  const Precision precision = GetParam().precision;
  cuda::CudaContext& gpu = cuda::AsCuda(cuda());
  ASSERT_TRUE(gpu.SetPrecision(precision).ok());
  gpu.SetHalfActivations(true);
  LayerPair pair;
  ASSERT_TRUE(MakeLayerPair(c, &pair));
  const Operands operands = RandomOperands(c, pair, 6);
  const auto& [inputs, params, grad_output] = operands;
  const Operands rounded = RoundedForTheCpu(precision, operands);
  const LayerResults want = RunLayer(cpu(), *pair.cpu, rounded.inputs, rounded.params, rounded.grad_output);
  const LayerResults got = RunLayer(gpu, *pair.cuda, inputs, params, grad_output,
                                    [&](const Shape& shape) { return gpu.ActivationLayout(shape); });
  // Only [N, C, H, W] activations are laid out (CudaContext::ActivationLayout).
  EXPECT_EQ(got.output_layout != nullptr, KeepsHalfActivations(c.spec) && c.input_shapes[0].size() == 4)
      << "output laid out as " << (got.output_layout ? got.output_layout->ToString() : "plain");
  EXPECT_TRUE(Agree("output", want.output, got.output, MixedTolerance(precision, want.output)));
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_TRUE(Agree(absl::StrCat("gradient of input ", i), want.grad_inputs[i], got.grad_inputs[i],
                      MixedTolerance(precision, want.grad_inputs[i])));
  }
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(Agree(absl::StrCat("gradient of ", pair.cpu->parameters()[i].name), want.param_grads[i],
                      got.param_grads[i], MixedTolerance(precision, want.param_grads[i])));
  }
}

INSTANTIATE_TEST_SUITE_P(AllCpuLayerTypes, HalfActivationsAgreementTest,
                         ::testing::ValuesIn(InBothHalfTypes([](const AgreementCase&) { return true; })),
                         MixedCaseName);

// Plain float32 -> 16-bit channels-last -> plain float32 on the GPU: each
// element rounded once and back at its own index, for both types.
TEST_F(CudaCpuAgreementTest, HalfActivationsConvertBothWays) {
  cuda::CudaContext& gpu = cuda::AsCuda(cuda());
  std::mt19937_64 rng(8);
  const Tensor host = Uniform(rng, {2, 3, 4, 5}, -4, 4);
  for (Precision precision : {Precision::kBf16, Precision::kFp16}) {
    ASSERT_TRUE(gpu.SetPrecision(precision).ok());
    gpu.SetHalfActivations(true);
    const TensorLayoutPtr layout = gpu.ActivationLayout(host.shape());
    ASSERT_NE(layout, nullptr);
    EXPECT_EQ(layout->num_bytes(), static_cast<size_t>(host.num_elements()) * 2);
    const Tensor half = ToDevice(gpu, host, layout);
    EXPECT_TRUE(Agree(PrecisionName(precision), Rounded(precision, host), ToHost(gpu, half), kExact));
    Tensor sum = ToDevice(gpu, host, layout);
    gpu.Accumulate(sum, half);
    Tensor twice(host.shape());
    for (int64_t i = 0; i < host.num_elements(); ++i)
      twice.data()[i] = RoundTo(precision, 2 * RoundTo(precision, host.data()[i]));
    EXPECT_TRUE(Agree("sum", twice, ToHost(gpu, sum), kExact));
  }
  ASSERT_TRUE(gpu.SetPrecision(Precision::kFp32).ok());
  EXPECT_EQ(gpu.ActivationLayout(host.shape()), nullptr) << "float32 training keeps plain activations";
}

// One ResNet-50 training step in bf16 with 16-bit channels-last activations
// against the same step with float32 activations: the loss and the
// gradients agree within bf16's rounding, and the step's activation and
// gradient arena holds at most 0.55 of the bytes.
TEST_F(CudaCpuAgreementTest, HalfActivationsResnetStep) {
  auto other = CreateDeviceContext(Device{DeviceKind::kCuda, 0});
  ASSERT_TRUE(other.ok()) << other.status();
  cuda::CudaContext& half = cuda::AsCuda(cuda());
  cuda::CudaContext& plain = cuda::AsCuda(**other);
  ASSERT_TRUE(half.SetPrecision(Precision::kBf16).ok() && plain.SetPrecision(Precision::kBf16).ok());
  half.SetHalfActivations(true);
  plain.SetHalfActivations(false);
  ModelConfig config;
  config.set_name("resnet50");
  for (int d : {3, 64, 64}) config.add_input_shape(d);
  config.set_num_classes(10);
  auto half_model = CreateModel(config, &half);
  auto plain_model = CreateModel(config, &plain);
  ASSERT_TRUE(half_model.ok() && plain_model.ok());
  (*half_model)->InitializeVariables(5);
  (*plain_model)->InitializeVariables(5);
  constexpr int64_t kBatch = 8;
  std::mt19937_64 rng(3);
  const Tensor images = Uniform(rng, {kBatch, 3, 64, 64}, -1, 1);
  std::vector<int32_t> labels(kBatch);
  for (int32_t& l : labels) l = static_cast<int32_t>(rng() % 10);
  const float half_loss = (*half_model)->TrainStep(images, labels.data(), nullptr);
  const float plain_loss = (*plain_model)->TrainStep(images, labels.data(), nullptr);
  EXPECT_TRUE(std::isfinite(half_loss)) << half_loss;
  EXPECT_NEAR(half_loss, plain_loss, 0x1p-5 * std::fabs(plain_loss));
  std::vector<Variable>& hv = (*half_model)->variables();
  std::vector<Variable>& pv = (*plain_model)->variables();
  for (size_t i : {size_t{0}, hv.size() - 2}) {  // conv1's weights, fc's weights
    const Tensor want = ToHost(plain, pv[i].grad);
    float largest = 0;
    for (float v : want.span()) largest = std::max(largest, std::fabs(v));
    EXPECT_TRUE(Agree(absl::StrCat("gradient of ", pv[i].name), want, ToHost(half, hv[i].grad),
                      Tolerance{0, 0x1p-3 * largest}));
  }
  const StepMemory half_memory = (*half_model)->LastStepMemory(true);
  const StepMemory plain_memory = (*plain_model)->LastStepMemory(true);
  EXPECT_GT(plain_memory.arena_bytes, 0);
  EXPECT_LE(half_memory.arena_bytes, 0.55 * plain_memory.arena_bytes)
      << half_memory.arena_bytes << " bytes with 16-bit activations, " << plain_memory.arena_bytes << " without";
}
#endif  // PSTRAIN_WITH_CUDA

}  // namespace
}  // namespace pstrain::testing
