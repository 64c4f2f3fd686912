// The extension test: a throwaway strategy, layer (with a model that uses
// it), transport and device, each added the way a real one is -- registered
// from this one file, with nothing else edited -- and each checked to be
//   listed     in its registry and wherever the product lists the names
//              (config validation's "expected one of ...", a registry's
//              "unknown ...; known: ..."),
//   validated  a config naming it passes ValidateExperimentConfig, and the
//              rules the part declares with its registration are enforced
//              (the strategy's StrategyEntry, the layer's attributes, the
//              transport's capabilities),
//   usable     the strategy trains a model containing the layer on the
//              device through RunWorker over the transport; the transport
//              carries a call.
// It is the worked example of docs/ARCHITECTURE.md, "Adding things": if a
// part cannot be added from one file, this test cannot be written.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/config/config_loader.h"
#include "common/transport/inproc/inproc_transport.h"
#include "common/transport/transport.h"
#include "device/device_registry.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/layers/layer.h"
#include "models/model.h"
#include "tests/models/gradient_checker.h"
#include "worker/run/trainer.h"
#include "worker/strategy.h"

namespace pstrain {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

// ---------------------------------------------------------------- the layer

// extension_scale: y = gain * x + shift, elementwise over one input [K] per
// example (place it after flatten or dense, whose outputs are plain).
// Parameter "gain" [K] (ones); float attribute "shift" (default 0).
class ExtensionScale final : public Layer {
 public:
  explicit ExtensionScale(const LayerSpec& spec) : shift_(static_cast<float>(spec.GetFloat("shift", 0))) {}

  absl::StatusOr<Shape> Setup(const std::vector<Shape>& input_shapes) override {
    if (input_shapes.size() != 1 || input_shapes[0].size() != 1 || input_shapes[0][0] <= 0) {
      return absl::InvalidArgumentError("extension_scale takes one input [features]");
    }
    const int64_t k = input_shapes[0][0];
    parameters_.push_back(Parameter{.name = "gain",
                                    .value = Tensor(Shape{k}),
                                    .grad = Tensor(Shape{k}),
                                    .init = Initializer::kOnes,
                                    .fan_in = k,
                                    .fan_out = k});
    return input_shapes[0];
  }

  // Backward reads the input (for the gain's gradient), not the output.
  BackwardReads ReadsInBackward() const override { return {.inputs = true, .output = false}; }

  void Forward(DeviceContext& ctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) override {
    CHECK(inputs[0].is_plain() && inputs[0].on_host()) << "extension_scale: plain host input expected";
    const float* x = inputs[0].data();
    const float* gain = parameters_[0].value.data();
    float* y = output.data();
    const int64_t n = inputs[0].dim(0), k = inputs[0].dim(1);
    for (int64_t i = 0; i < n * k; ++i) y[i] = gain[i % k] * x[i] + shift_;
  }

  void Backward(DeviceContext& ctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override {
    const float* x = inputs[0].data();
    const float* dy = grad_output.data();
    const float* gain = parameters_[0].value.data();
    float* dgain = parameters_[0].grad.data();
    const int64_t n = inputs[0].dim(0), k = inputs[0].dim(1);
    for (int64_t j = 0; j < k; ++j) dgain[j] = 0;
    for (int64_t i = 0; i < n * k; ++i) dgain[i % k] += x[i] * dy[i];
    if (grad_inputs[0].empty()) return;
    float* dx = grad_inputs[0].data();
    for (int64_t i = 0; i < n * k; ++i) dx[i] = gain[i % k] * dy[i];
  }

 private:
  const float shift_;
};

PSTRAIN_REGISTER_LAYER("extension_scale", DeviceKind::kCpu, ExtensionScale, {.ints = {}, .floats = {"shift"}});

// extension_model: flatten -> scale (extension_scale) -> hidden (dense,
// model.hidden_units[0] or 8) -> relu -> logits (dense).
absl::StatusOr<std::unique_ptr<Model>> BuildExtensionModel(const ModelConfig& config, DeviceContext* ctx) {
  const int hidden = config.hidden_units_size() > 0 ? config.hidden_units(0) : 8;
  ModelBuilder b(config.name(), Shape(config.input_shape().begin(), config.input_shape().end()), config.num_classes(),
                 ctx);
  b.Then("flatten", LayerSpec{"flatten"});
  b.Then("scale", LayerSpec{"extension_scale"}.Float("shift", 0.1));
  b.Then("hidden", LayerSpec{"dense"}.Int("units", hidden));
  b.Then("relu", LayerSpec{"relu"});
  return b.Finish(b.Then("logits", LayerSpec{"dense"}.Int("units", config.num_classes())));
}

const bool kModelRegistered = RegisterModel("extension_model", BuildExtensionModel);

// ------------------------------------------------------------- the strategy

// extension_sgd: one worker, CPU replicas, each applying plain SGD
// (w -= learning_rate * grad) to its own variables after every step.
class ExtensionSgd final : public Strategy {
 public:
  explicit ExtensionSgd(const StrategyContext& context)
      : context_(context), learning_rate_(context.config->optimizer().learning_rate()) {}

  absl::StatusOr<int64_t> Start() override {
    context_.replicas->BroadcastValues(0);
    return 0;
  }
  absl::Status BeforeStep(int64_t) override { return absl::OkStatus(); }
  absl::Status AfterStep(int64_t) override {
    context_.replicas->ForEach([&](int r) {
      for (Variable& v : context_.replicas->variables(r)) {
        float* w = v.value.data();
        const float* g = v.grad.data();
        for (int64_t i = 0; i < v.value.num_elements(); ++i) w[i] -= learning_rate_ * g[i];
      }
    });
    return absl::OkStatus();
  }
  absl::StatusOr<ClusterReport> Finish(const WorkerReport& mine) override {
    ClusterReport report;
    report.workers.push_back(mine);
    return report;
  }
  std::string Describe() const override { return absl::StrCat("extension_sgd (lr ", learning_rate_, ")"); }

 private:
  StrategyContext context_;
  const float learning_rate_;
};

StrategyNeeds ExtensionSgdNeeds(const ExperimentConfig&) {
  StrategyNeeds needs;
  needs.max_workers = 1;
  needs.devices = {"cpu", "extension_device"};
  return needs;
}

// Its own rule: it applies plain SGD itself, so the config must say so.
absl::Status ExtensionSgdCheck(const ExperimentConfig& config, const ConfigChecker& ck) {
  if (config.optimizer().name() == "sgd") return absl::OkStatus();
  return ck.Fail("optimizer.name", "sgd for variable_update extension_sgd (it applies plain SGD itself)",
                 absl::StrCat("'", config.optimizer().name(), "'"));
}

const bool kStrategyRegistered = StrategyRegistry().Register(
    "extension_sgd", {
                         .summary = "plain SGD on each replica of one worker (the extension test's)",
                         .all_reduce_specs = {},
                         .local_parameter_device_gpu = false,
                         .reads_collective = false,
                         .compressions = {},
                         .needs = ExtensionSgdNeeds,
                         .check = ExtensionSgdCheck,
                         .create = [](const StrategyContext& context) -> absl::StatusOr<std::unique_ptr<Strategy>> {
                           return std::make_unique<ExtensionSgd>(context);
                         },
                     });

// ------------------------------------------------------------ the transport

// extension_pipe: an InprocTransport under another name (every role of the
// process shares one object). Hands frames over without copying; carries no
// TLS or token.
class ExtensionPipe final : public Transport {
 public:
  absl::StatusOr<std::unique_ptr<Channel>> Connect(const std::string& address) override {
    return inner_.Connect(address);
  }
  absl::StatusOr<std::unique_ptr<Server>> Serve(const std::string& address, Handler* handler) override {
    return inner_.Serve(address, handler);
  }

 private:
  InprocTransport inner_;
};

const bool kTransportRegistered = RegisterTransport(
    "extension_pipe", [](const TransportOptions&) { return std::make_unique<ExtensionPipe>(); },
    TransportCapabilities{.security = false, .same_host_zero_copy = true, .rdma = false});

// --------------------------------------------------------------- the device

// extension_device: the host's cores under a name of its own (its replicas
// compute on the cpu kind), which a test can unplug: its `present` says why,
// as the gpu's says there is no GPU.
std::atomic<bool> extension_device_plugged{true};

const bool kDeviceRegistered = DeviceRegistry().Register(
    "extension_device", {.summary = "the host's cores, under the extension test's name",
                         .kind = DeviceKind::kCpu,
                         .holds_variables = true,
                         .create = nullptr,  // its replicas use the cpu kind's contexts, as emulated's do
                         .stands_for = "",
                         .present = []() -> absl::Status {
                           if (extension_device_plugged.load()) return absl::OkStatus();
                           return absl::UnavailableError("the extension device is unplugged");
                         },
                         .count = [] { return 1; },
                         .supports = nullptr,
                         .mirror_copies = nullptr});

// ------------------------------------------------------------------- tests

constexpr char kFile[] = "extension.yaml";

// A valid experiment of real parts only: one worker training mlp with the
// independent strategy over grpc on synthetic data, a few steps, evaluated.
// Each part's tests put their throwaway part into it, so a part that fails
// to register fails its own tests, not the others'.
ExperimentConfig RealConfig() {
  ExperimentConfig c;
  c.set_name("extension");
  c.mutable_cluster()->add_worker_hosts("localhost:1");
  c.set_variable_update("independent");
  c.set_transport("grpc");
  c.set_device("cpu");
  ModelConfig* model = c.mutable_model();
  model->set_name("mlp");
  for (int d : {1, 6, 6}) model->add_input_shape(d);
  model->set_num_classes(3);
  model->add_hidden_units(8);
  c.mutable_data()->set_source("synthetic");
  c.mutable_data()->set_synthetic_examples(48);
  c.mutable_optimizer()->set_name("sgd");
  c.mutable_optimizer()->set_learning_rate(0.1f);
  TrainConfig* train = c.mutable_train();
  train->set_steps(4);
  train->set_warmup_steps(0);
  train->set_batch_size_per_device(8);
  train->set_display_every(2);
  train->set_eval_batch_size(24);
  return c;
}

ExperimentConfig WithStrategy(ExperimentConfig c) {
  c.set_variable_update("extension_sgd");
  return c;
}
ExperimentConfig WithModel(ExperimentConfig c) {
  c.mutable_model()->set_name("extension_model");
  return c;
}
ExperimentConfig WithTransport(ExperimentConfig c) {
  c.set_transport("extension_pipe");
  return c;
}
ExperimentConfig WithDevice(ExperimentConfig c) {
  c.set_device("extension_device");
  return c;
}
// Every throwaway part at once.
ExperimentConfig ExtensionConfig() { return WithDevice(WithTransport(WithModel(WithStrategy(RealConfig())))); }

// Config validation's message ("" when the config is valid), as a
// std::string so that gtest prints it as text.
std::string Problem(const ExperimentConfig& config) {
  return std::string(ValidateExperimentConfig(config, kFile).message());
}
std::string Message(const absl::Status& status) { return std::string(status.message()); }

// Each part alone, and all three together, make a valid config.
TEST(ExtensionTest, ConfigsNamingThePartsAreValid) {
  EXPECT_EQ(Problem(RealConfig()), "");
  EXPECT_EQ(Problem(WithStrategy(RealConfig())), "");
  EXPECT_EQ(Problem(WithModel(RealConfig())), "");
  EXPECT_EQ(Problem(WithTransport(RealConfig())), "");
  EXPECT_EQ(Problem(WithDevice(RealConfig())), "");
  EXPECT_EQ(Problem(ExtensionConfig()), "");
}

// --- the strategy

TEST(ExtensionStrategyTest, IsListed) {
  EXPECT_THAT(StrategyRegistry().Names(), Contains("extension_sgd"));
  ExperimentConfig typo = RealConfig();
  typo.set_variable_update("extension_sdg");
  EXPECT_THAT(Problem(typo), HasSubstr("field 'variable_update': expected one of "));
  EXPECT_THAT(Problem(typo), HasSubstr("extension_sgd"));
}

// Its StrategyEntry is enforced by the one generic check: a field it does
// not read, its needs, its own rule.
TEST(ExtensionStrategyTest, ItsEntryIsEnforced) {
  ExperimentConfig spec = WithStrategy(RealConfig());
  spec.set_all_reduce_spec("pscpu");
  EXPECT_EQ(Problem(spec),
            "extension.yaml: field 'all_reduce_spec': expected empty for variable_update extension_sgd (plain SGD on "
            "each replica of one worker (the extension test's)), got 'pscpu'");

  ExperimentConfig compressed = WithStrategy(RealConfig());
  compressed.set_compression("fp16");
  EXPECT_THAT(Problem(compressed), HasSubstr("field 'compression': expected none for variable_update extension_sgd"));

  ExperimentConfig two_workers = WithStrategy(RealConfig());
  two_workers.mutable_cluster()->add_worker_hosts("localhost:2");
  EXPECT_THAT(Problem(two_workers),
              HasSubstr("field 'cluster.worker_hosts': expected one worker for variable_update extension_sgd"));

  ExperimentConfig momentum = WithStrategy(RealConfig());
  momentum.mutable_optimizer()->set_name("momentum");
  EXPECT_EQ(Problem(momentum),
            "extension.yaml: field 'optimizer.name': expected sgd for variable_update extension_sgd (it applies plain "
            "SGD itself), got 'momentum'");
}

// Trains through RunWorker, as pstrain-worker does: the transport created
// by name, the model (with the layer) from the zoo, the strategy from the
// registry. The final parameters moved, every variable of them.
TEST(ExtensionStrategyTest, TrainsAModelWithTheLayerThroughRunWorker) {
  const ExperimentConfig config = ExtensionConfig();
  ASSERT_EQ(Problem(config), "");
  absl::StatusOr<std::unique_ptr<Transport>> transport = CreateTransport(config.transport(), TransportOptions{});
  ASSERT_TRUE(transport.ok()) << transport.status();

  std::vector<std::vector<float>> final_parameters;
  WorkerRunOptions options;
  options.final_parameters = &final_parameters;
  absl::StatusOr<RunResult> result = RunWorker(config, 0, transport->get(), options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->variable_update(), "extension_sgd");
  EXPECT_EQ(result->transport(), "extension_pipe");
  EXPECT_EQ(result->model(), "extension_model");
  EXPECT_EQ(result->device(), "extension_device");
  EXPECT_EQ(result->steps(), 4);
  EXPECT_TRUE(std::isfinite(result->final_loss())) << result->final_loss();
  EXPECT_TRUE(result->has_test_accuracy());

  // The chief's initial values: the same model initialised from init_seed.
  absl::StatusOr<std::unique_ptr<DeviceContext>> ctx = CreateDeviceContext(Device::Cpu());
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  absl::StatusOr<std::unique_ptr<Model>> model = CreateModel(config.model(), ctx->get());
  ASSERT_TRUE(model.ok()) << model.status();
  (*model)->InitializeVariables(config.train().init_seed());
  const std::vector<Variable>& initial = (*model)->variables();
  ASSERT_EQ(final_parameters.size(), initial.size());
  bool has_gain = false;
  for (size_t v = 0; v < initial.size(); ++v) {
    const Tensor& value = initial[v].value;
    ASSERT_EQ(final_parameters[v].size(), static_cast<size_t>(value.num_elements())) << initial[v].name;
    double moved = 0;
    for (int64_t i = 0; i < value.num_elements(); ++i) {
      ASSERT_TRUE(std::isfinite(final_parameters[v][i])) << initial[v].name << "[" << i << "]";
      moved = std::max(moved, std::abs(double(final_parameters[v][i]) - value.data()[i]));
    }
    EXPECT_GT(moved, 0) << initial[v].name << " did not move";
    has_gain |= initial[v].name == "scale/gain";
  }
  EXPECT_TRUE(has_gain) << "extension_model has no scale/gain variable";
}

// --- the device

TEST(ExtensionDeviceTest, IsListedAndCheckedAsItsEntrySays) {
  EXPECT_THAT(DeviceRegistry().Names(), Contains("extension_device"));
  ExperimentConfig typo = WithStrategy(RealConfig());
  typo.set_device("extension_devcie");
  EXPECT_THAT(Problem(typo), HasSubstr("field 'device': expected one of "));
  EXPECT_THAT(Problem(typo), HasSubstr("extension_device"));
  // Its kind decides where replicas compute; its `present` is what a worker checks at start-up.
  absl::StatusOr<DeviceKind> kind = DeviceKindOf("extension_device");
  ASSERT_TRUE(kind.ok()) << kind.status();
  EXPECT_EQ(*kind, DeviceKind::kCpu);
  EXPECT_TRUE(CheckDevicePresent("extension_device").ok());
  extension_device_plugged = false;
  EXPECT_EQ(Message(CheckDevicePresent("extension_device")),
            "device extension_device: the extension device is unplugged");
  extension_device_plugged = true;
}

// --- the layer

TEST(ExtensionLayerTest, IsListed) {
  EXPECT_THAT(RegisteredLayerTypes(DeviceKind::kCpu), Contains("extension_scale"));
  absl::StatusOr<LayerAttributes> attributes = AttributesOf("extension_scale", DeviceKind::kCpu);
  ASSERT_TRUE(attributes.ok()) << attributes.status();
  EXPECT_TRUE(attributes->ints.empty());
  EXPECT_EQ(attributes->floats, std::vector<std::string>{"shift"});
  // An unknown type's message lists it among the known ones.
  absl::StatusOr<std::unique_ptr<Layer>> unknown = CreateLayer(LayerSpec{"extension_scael"}, DeviceKind::kCpu);
  ASSERT_EQ(unknown.status().code(), absl::StatusCode::kNotFound) << unknown.status();
  EXPECT_THAT(Message(unknown.status()), HasSubstr("extension_scale"));

  // The model that uses it is listed where model names are.
  ExperimentConfig typo = RealConfig();
  typo.mutable_model()->set_name("extension_modle");
  EXPECT_THAT(Problem(typo), HasSubstr("field 'model.name': expected one of "));
  EXPECT_THAT(Problem(typo), HasSubstr("extension_model"));
}

// The attributes declared with the registration are the ones accepted.
TEST(ExtensionLayerTest, ItsAttributesAreEnforced) {
  absl::StatusOr<std::unique_ptr<Layer>> typo =
      CreateLayer(LayerSpec{"extension_scale"}.Float("shfit", 1), DeviceKind::kCpu);
  ASSERT_EQ(typo.status().code(), absl::StatusCode::kInvalidArgument) << typo.status();
  EXPECT_EQ(Message(typo.status()), "extension_scale: unknown float attribute \"shfit\"; extension_scale reads shift");
  absl::StatusOr<std::unique_ptr<Layer>> as_int =
      CreateLayer(LayerSpec{"extension_scale"}.Int("shift", 1), DeviceKind::kCpu);
  ASSERT_FALSE(as_int.ok());
  EXPECT_THAT(Message(as_int.status()), HasSubstr("\"shift\" is a float"));
  EXPECT_TRUE(CreateLayer(LayerSpec{"extension_scale"}.Float("shift", 1), DeviceKind::kCpu).ok());
}

// Checked as every layer is: its Backward against finite differences.
TEST(ExtensionLayerTest, GradientsMatchFiniteDifferences) {
  absl::StatusOr<std::unique_ptr<DeviceContext>> ctx = CreateDeviceContext(Device::Cpu());
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  EXPECT_TRUE(testing::LayerGradientsMatch(LayerSpec{"extension_scale"}.Float("shift", 0.5), **ctx, {{3, 5}}));
}

// --- the transport

TEST(ExtensionTransportTest, IsListedWithItsCapabilities) {
  EXPECT_THAT(RegisteredTransports(), Contains("extension_pipe"));
  ExperimentConfig typo = RealConfig();
  typo.set_transport("extension_piep");
  EXPECT_THAT(Problem(typo), HasSubstr("field 'transport': expected one of "));
  EXPECT_THAT(Problem(typo), HasSubstr("extension_pipe"));

  const TransportCapabilities capabilities = CapabilitiesOf("extension_pipe");
  EXPECT_FALSE(capabilities.security);
  EXPECT_TRUE(capabilities.same_host_zero_copy);
  EXPECT_FALSE(capabilities.rdma);
}

// It does not declare `security`: a security section is refused naming it,
// in the config and when the transport is created; the same section is
// fine over a transport that declares it (grpc).
TEST(ExtensionTransportTest, SecurityIsRefusedAsItsCapabilitiesSay) {
  const std::string token_file = absl::StrCat(::testing::TempDir(), "/extension_test_token");
  std::ofstream(token_file) << "0123456789abcdef0123456789abcdef\n";
  ExperimentConfig secured = WithTransport(RealConfig());
  ASSERT_EQ(Problem(secured), "") << "refused before a security section is added";
  secured.mutable_security()->set_token_file(token_file);
  EXPECT_THAT(Problem(secured),
              HasSubstr("field 'security.token_file': transport 'extension_pipe' cannot carry TLS or a token"));
  EXPECT_THAT(Problem(secured), Not(HasSubstr("use transport extension_pipe")));

  secured.set_transport("grpc");
  EXPECT_EQ(Problem(secured), "");

  TransportOptions options;
  options.security.token = "0123456789abcdef0123456789abcdef";
  absl::StatusOr<std::unique_ptr<Transport>> refused = CreateTransport("extension_pipe", options);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  EXPECT_THAT(Message(refused.status()), HasSubstr("transport 'extension_pipe' cannot carry TLS or a token"));
}

// Answers "pong:<header>" with the request's payload.
class PongHandler : public Handler {
 public:
  void Handle(std::string_view method, IncomingFrame request, Responder respond) override {
    auto payload = std::make_shared<std::string>(request.remaining(), '\0');
    absl::Status read = request.Read(payload->data(), payload->size());
    if (!read.ok()) return respond(read, {});
    OutgoingFrame response;
    response.header = absl::StrCat("pong:", std::string(method), ":", request.header());
    response.chunks.push_back(ConstChunk{payload->data(), payload->size(), payload});
    respond(absl::OkStatus(), std::move(response));
  }
};

// A real call: Serve with a Handler, Connect, Channel::CallSync.
TEST(ExtensionTransportTest, CarriesACall) {
  absl::StatusOr<std::unique_ptr<Transport>> transport = CreateTransport("extension_pipe", TransportOptions{});
  ASSERT_TRUE(transport.ok()) << transport.status();
  PongHandler handler;
  absl::StatusOr<std::unique_ptr<Server>> server = (*transport)->Serve("pipe:1", &handler);
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::unique_ptr<Channel>> channel = (*transport)->Connect("pipe:1");
  ASSERT_TRUE(channel.ok()) << channel.status();

  auto body = std::make_shared<std::string>("twelve bytes");
  OutgoingFrame request;
  request.header = "ping";
  request.chunks.push_back(ConstChunk{body->data(), body->size(), body});
  CallOptions call;
  call.deadline = absl::Now() + absl::Seconds(30);
  IncomingFrame response;
  const absl::Status status = (*channel)->CallSync("Echo", std::move(request), call, &response);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(response.header(), "pong:Echo:ping");
  std::string payload(response.remaining(), '\0');
  ASSERT_TRUE(response.Read(payload.data(), payload.size()).ok());
  EXPECT_EQ(payload, "twelve bytes");
  (*server)->Shutdown(absl::Seconds(1));
}

}  // namespace
}  // namespace pstrain
