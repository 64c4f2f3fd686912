// Shared numerical test infrastructure for layers: checks a layer's analytic
// Backward() against central finite differences, and the loss's gradient
// against finite differences of its value. Every layer test on every device
// uses these, through the typed DeviceTest fixture:
//
//   template <typename D> class DenseTest : public DeviceTest<D> {};
//   TYPED_TEST_SUITE(DenseTest, AllDevices, DeviceNames);
//   TYPED_TEST(DenseTest, Gradients) {
//     EXPECT_TRUE(LayerGradientsMatch(LayerSpec{"dense"}.Int("units", 3), this->ctx(), {{4, 5}}));
//   }
//
// For a layer with output `out`, the scalar checked is L = sum(out * R) with
// R a fixed random tensor, so one backward pass (grad_output = R) checks the
// full Jacobian-vector product. Inputs and parameters are drawn uniformly
// from [-1, 1]; forward runs in training mode. The backward's outputs are
// pre-filled with garbage, so a layer that accumulates instead of overwriting
// fails.
//
// Devices: values are drawn, perturbed and compared in plain host tensors.
// What the layer sees is allocated with ctx.Allocate() and filled with
// ctx.Convert() before each Forward() (on a CPU context a plain input is the
// host tensor itself); its parameters are moved to ctx's device as a model
// moves them (value and grad replaced by ctx.Allocate()d tensors), and its
// results come back through ctx.Convert() into host tensors.
//
// Layouts: inputs are drawn plain and, where options.input_layouts says so,
// converted (ctx.Convert) into a device layout before each Forward(); the
// output is allocated in the layer's OutputLayout() and converted back to
// plain to evaluate L; grad_output and grad_inputs follow the Layer contract
// (laid out as the output and the inputs).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "models/layers/layer.h"

namespace pstrain::testing {

struct GradientCheckOptions {
  // Central-difference step h: d ~= (L(x + h) - L(x - h)) / 2h.
  double step = 1e-2;
  // Largest accepted |analytic - numeric| / max(|analytic|, |numeric|, abs_floor).
  double tolerance = 1e-2;
  // Denominator floor, so float noise on near-zero gradients is not blown up.
  double abs_floor = 1e-2;
  // Inputs are redrawn until |x| >= this: keeps them away from kinks such
  // as relu's at 0 (set it above `step` for such layers).
  double input_min_abs = 0;
  uint64_t seed = 1;
  // Per input: the layout it is fed to the layer in (null or missing: plain).
  std::vector<TensorLayoutPtr> input_layouts;
  // When its type is set: offered to the layer's Fuse() after Setup() (the
  // check fails if refused), so the fused function is what is checked.
  LayerSpec fuse_next;
};

struct GradientCheckReport {
  double max_relative_error = 0;
  // Where the worst error is, e.g. "param weights[7]: analytic 0.31 numeric 0.29".
  std::string worst;
  int64_t elements_checked = 0;
  // The layout the layer chose for its output: "plain" or the layout's ToString().
  std::string output_layout;
  std::string ToString() const;
};

// Checks every input and every parameter of the layer built from `spec` on
// ctx's device; `input_shapes` include the batch dimension. Errors: the layer
// cannot be created or rejects the shapes.
absl::StatusOr<GradientCheckReport> CheckLayerGradients(const LayerSpec& spec, DeviceContext& ctx,
                                                        const std::vector<Shape>& input_shapes,
                                                        const GradientCheckOptions& options = {});

// Checks the softmax cross-entropy's d(loss)/d(logits) on random logits
// [batch, classes] (uniform in [-3, 3]) and random labels.
absl::StatusOr<GradientCheckReport> CheckLossGradients(DeviceContext& ctx, int64_t batch, int64_t classes,
                                                       const GradientCheckOptions& options = {});

// gtest wrappers: success when the check runs and stays within tolerance;
// the message carries the report either way.
::testing::AssertionResult LayerGradientsMatch(const LayerSpec& spec, DeviceContext& ctx,
                                               const std::vector<Shape>& input_shapes,
                                               const GradientCheckOptions& options = {});
::testing::AssertionResult LossGradientsMatch(DeviceContext& ctx, int64_t batch, int64_t classes,
                                              const GradientCheckOptions& options = {});

// ---- Typed tests over device kinds ----

template <DeviceKind K>
struct DeviceTag {
  static constexpr DeviceKind kKind = K;
};
using CpuDevice = DeviceTag<DeviceKind::kCpu>;
using CudaDevice = DeviceTag<DeviceKind::kCuda>;
using AllDevices = ::testing::Types<CpuDevice, CudaDevice>;

// Names typed-test instantiations "cpu" and "cuda".
struct DeviceNames {
  template <typename D>
  static std::string GetName(int) {
    return D::kKind == DeviceKind::kCpu ? "cpu" : "cuda";
  }
};

// Creates a context for device D (ordinal 0) before each test. The CUDA
// instantiation skips when no CUDA device is usable (or the build has no
// CUDA); the CPU one fails if its context cannot be made.
template <typename D>
class DeviceTest : public ::testing::Test {
 protected:
  static constexpr DeviceKind kKind = D::kKind;

  void SetUp() override {
    auto ctx = CreateDeviceContext(Device{kKind, 0});
    if (!ctx.ok()) {
      if (kKind == DeviceKind::kCuda) GTEST_SKIP() << "no CUDA device / built without CUDA: " << ctx.status();
      FAIL() << ctx.status();
    }
    ctx_ = std::move(*ctx);
  }

  DeviceContext& ctx() { return *ctx_; }

 private:
  std::unique_ptr<DeviceContext> ctx_;
};

}  // namespace pstrain::testing
