// Layer: one differentiable operation, device-agnostic.
//
// A Layer is created from a LayerSpec by the registry for a device kind; the
// model zoo only ever speaks LayerSpecs, so a CUDA implementation slots in
// beside the oneDNN one without touching models. Contracts:
//   * Setup() is called once with per-example input shapes (no batch dim); it
//     validates them (InvalidArgument naming the layer type and the shapes),
//     creates the parameters (zero-filled; the model initialises them) and
//     returns the per-example output shape.
//   * Forward()/Backward() take batched tensors [N, ...]; implementations cache
//     their primitives per input shape and layout, so alternating batch sizes
//     (train vs eval) costs one creation each.
//   * Layouts. Activations may carry a device-specific TensorLayout (e.g. a
//     oneDNN blocked format); a layer accepts inputs in any layout (converting
//     internally where its primitive needs another) and chooses its output's:
//     OutputLayout(inputs) says which, for inputs with those shapes and
//     layouts (their data is not read). Gradients have the layout of the
//     tensor they are the gradient of: grad_output is laid out as the output,
//     grad_inputs[i] as inputs[i]. Parameter values and grads are always plain
//     row-major (they are exchanged with parameter servers); a layer keeps any
//     blocked copies of its weights to itself. The model's input and its
//     logits are plain; flatten and dense produce plain outputs.
//   * The caller allocates `output` ([N] + Setup's shape, in OutputLayout())
//     and every grad_inputs[i] (inputs[i]'s shape and layout); layers write
//     into them and never re-point them. An empty() grad_inputs[i] is not
//     wanted (e.g. the images) and is left alone, which saves the work.
//   * Backward() overwrites grad_inputs[i] (the model sums fan-out) and
//     overwrites every parameter's grad. It follows a Forward() on the same
//     inputs (a layer may keep state from it, e.g. a dropout mask).
//   * Optional, for the model's benefit: Fuse() (take over the parameterless
//     layer that follows) and PassesGradientThrough() (the model moves such
//     a layer's gradients itself, sharing buffers where it can).
//   * A layer is used by one thread at a time.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "device/device_context.h"

namespace pstrain {

// How a parameter's initial values are drawn (by the model, from a seed).
enum class Initializer {
  kZeros,
  kOnes,
  kGlorotUniform,  // U(-a, a), a = sqrt(6 / (fan_in + fan_out))
  kHeNormal,       // N(0, sqrt(2 / fan_in))
};

// A trainable parameter of a layer. `name` is local ("weights", "bias"); the
// model prefixes the layer name.
struct Parameter {
  std::string name;
  Tensor value;
  Tensor grad;
  Initializer init = Initializer::kZeros;
  int64_t fan_in = 1;
  int64_t fan_out = 1;
};

// What to build: a registered type name and its attributes.
struct LayerSpec {
  LayerSpec() = default;
  // LayerSpec{"dense"}.Int("units", 10) reads well and, unlike aggregate
  // initialisation, does not trip -Wmissing-field-initializers.
  explicit LayerSpec(std::string layer_type) : type(std::move(layer_type)) {}

  std::string type;
  std::map<std::string, std::vector<int64_t>> ints;
  std::map<std::string, double> floats;

  LayerSpec& Int(const std::string& key, int64_t v) {
    ints[key] = {v};
    return *this;
  }
  LayerSpec& Ints(const std::string& key, std::vector<int64_t> v) {
    ints[key] = std::move(v);
    return *this;
  }
  LayerSpec& Float(const std::string& key, double v) {
    floats[key] = v;
    return *this;
  }
  // Attribute readers; `fallback` when absent.
  int64_t GetInt(const std::string& key, int64_t fallback) const;
  std::vector<int64_t> GetInts(const std::string& key, std::vector<int64_t> fallback) const;
  double GetFloat(const std::string& key, double fallback) const;
};

class Layer {
 public:
  virtual ~Layer() = default;

  virtual absl::StatusOr<Shape> Setup(const std::vector<Shape>& input_shapes) = 0;
  virtual void Forward(DeviceContext& ctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) = 0;
  virtual void Backward(DeviceContext& ctx, absl::Span<const Tensor> inputs, const Tensor& output,
                        const Tensor& grad_output, absl::Span<Tensor> grad_inputs) = 0;

  // The layout of Forward()'s output for batched inputs shaped and laid out
  // like `inputs` (only their shapes and layouts are read); null is plain.
  // Called before Forward() (by the model whenever the inputs change); may
  // create and cache the primitives for those inputs. Default: plain.
  virtual TensorLayoutPtr OutputLayout(DeviceContext& ctx, absl::Span<const Tensor> inputs) { return nullptr; }

  // Forward FLOPs for one example at Setup()'s shapes, a multiply-add
  // counting as 2: convolutions, dense layers and dot_interaction's dot
  // products (the multiply-add work) count; elementwise, normalisation,
  // pooling and data-movement layers count 0, so totals match the FLOP
  // counts published for the zoo's models. A training step is
  // conventionally 3x forward. Valid after Setup().
  virtual int64_t ForwardFlopsPerExample() const { return 0; }

  // Fusion, optional. After Setup(), the model offers a layer the spec of
  // the parameterless layer that alone reads its output (e.g. the relu after
  // a batch_norm). Accepting (true) means this layer computes next(this(x))
  // from then on: its output is next's output, and its grad_output is
  // d(loss)/d(next's output); the model then runs `next` as a no-op that
  // shares this layer's output. Saves a pass over memory each way.
  virtual bool Fuse(const LayerSpec& next) { return false; }

  // True when Backward() copies grad_output unchanged into every grad_input
  // (add): the model may skip Backward() and share or sum gradient buffers
  // itself. Backward() must still work. Such a layer has no parameters.
  virtual bool PassesGradientThrough() const { return false; }

  // What Backward() reads besides grad_output: its inputs' data, its
  // output's data. The model's memory plan reuses an activation's bytes once
  // neither forward nor any backward still reads it, so a layer must not
  // read what it says it does not (shapes and layouts stay readable: the
  // tensors passed are still shaped and laid out as in Forward()). Default:
  // both, which is always safe.
  struct BackwardReads {
    bool inputs = true;
    bool output = true;
  };
  virtual BackwardReads ReadsInBackward() const { return {}; }

  std::vector<Parameter>& parameters() { return parameters_; }

 protected:
  std::vector<Parameter> parameters_;
};

// The loss at the end of a model: softmax cross-entropy over integer labels.
class LossLayer {
 public:
  virtual ~LossLayer() = default;
  // Queues, like any layer's work on `ctx`, the mean loss over the batch
  // and, when grad_logits is non-null, grad_scale * d(mean loss)/d(logits)
  // into it (grad_scale: 1, or the loss scale of mixed-precision training,
  // optim/loss_scaler.h). `labels` (host memory) may be reused once it
  // returns. Each Queue is followed by one TakeLoss before the next.
  virtual void Queue(DeviceContext& ctx, const Tensor& logits, const int32_t* labels, Tensor* grad_logits,
                     float grad_scale = 1.0f) = 0;
  // The mean loss of the last Queue: waits for the work that computes it
  // only, not for what was queued after it (a training step queues its
  // backward first, so a GPU never idles while the host reads the loss).
  virtual float TakeLoss() = 0;
  // Queue, then TakeLoss.
  float ForwardBackward(DeviceContext& ctx, const Tensor& logits, const int32_t* labels, Tensor* grad_logits,
                        float grad_scale = 1.0f) {
    Queue(ctx, logits, labels, grad_logits, grad_scale);
    return TakeLoss();
  }
};

using LayerFactory = std::function<std::unique_ptr<Layer>(const LayerSpec&)>;

// The attributes a layer type reads: integer ones (LayerSpec::Int/Ints) and
// float ones (LayerSpec::Float). Declared with the layer's registration, so a
// new layer is its own files (cpu, cuda) and a test.
struct LayerAttributes {
  std::vector<std::string> ints;
  std::vector<std::string> floats;
  bool operator==(const LayerAttributes&) const = default;
};

// Registers `factory` for (type, device kind), reading `attributes`. Returns
// true, for static init. CHECK-fails when the type is registered on another
// device kind with other attributes: a spec means the same on every device.
bool RegisterLayer(const std::string& type, DeviceKind kind, LayerFactory factory, LayerAttributes attributes);
// Records that `type` has no implementation on `kind`, and why (e.g. a layer
// of the sparse models, which train on CPU workers, on cuda): CreateLayer
// there is then FailedPrecondition giving `reason` rather than an unknown
// type, and RegisteredLayerTypes(kind) leaves it out. Returns true.
bool RegisterUnavailableLayer(const std::string& type, DeviceKind kind, std::string reason);
// Creates a layer; an unknown type is NotFound listing the known ones, one
// unavailable on `kind` FailedPrecondition with the reason, an attribute the
// type does not read InvalidArgument (CheckLayerAttributes).
absl::StatusOr<std::unique_ptr<Layer>> CreateLayer(const LayerSpec& spec, DeviceKind kind);
std::vector<std::string> RegisteredLayerTypes(DeviceKind kind);
// What `type` reads on `kind`; NotFound for a type not registered there.
absl::StatusOr<LayerAttributes> AttributesOf(const std::string& type, DeviceKind kind);
// The loss of every model, registered per device kind where it is
// implemented (models/layers/cpu/ and cuda/softmax_cross_entropy.cc).
using LossFactory = std::function<std::unique_ptr<LossLayer>()>;
bool RegisterSoftmaxCrossEntropy(DeviceKind kind, LossFactory factory);
// Unimplemented naming the device kind when none is registered for it (a
// build without CUDA).
absl::StatusOr<std::unique_ptr<LossLayer>> CreateSoftmaxCrossEntropy(DeviceKind kind);

// PSTRAIN_REGISTER_LAYER("conv2d", DeviceKind::kCpu, Conv2d, {.ints = {"filters", ...}, .floats = {}});
// The last argument is the LayerAttributes the type reads ({} for none).
#define PSTRAIN_REGISTER_LAYER(type, kind, cls, ...)                                                                 \
  static const bool PSTRAIN_CONCAT(pstrain_layer_registered_, __LINE__) = ::pstrain::RegisterLayer(                  \
      type, kind, [](const ::pstrain::LayerSpec& spec) { return std::unique_ptr<::pstrain::Layer>(new cls(spec)); }, \
      ::pstrain::LayerAttributes __VA_ARGS__)

}  // namespace pstrain
