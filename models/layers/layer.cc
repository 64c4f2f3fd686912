#include "models/layers/layer.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "glog/logging.h"
#include "models/layers/cpu/cpu_context.h"
#include "models/layers/cpu/softmax_cross_entropy.h"
#ifdef PSTRAIN_WITH_CUDA
#include "models/layers/cuda/cuda_context.h"
#include "models/layers/cuda/softmax_cross_entropy.h"
#endif

namespace pstrain {
namespace {

const char* KindName(DeviceKind kind) { return kind == DeviceKind::kCpu ? "cpu" : "cuda"; }

// Factories by (device kind, type). Filled during static initialisation.
struct LayerRegistry {
  absl::Mutex mu;
  std::map<std::pair<DeviceKind, std::string>, LayerFactory> factories ABSL_GUARDED_BY(mu);
};

LayerRegistry& Registry() {
  static LayerRegistry* registry = new LayerRegistry;  // never destroyed
  return *registry;
}

}  // namespace

int64_t LayerSpec::GetInt(const std::string& key, int64_t fallback) const {
  auto it = ints.find(key);
  return it == ints.end() || it->second.empty() ? fallback : it->second.front();
}

std::vector<int64_t> LayerSpec::GetInts(const std::string& key, std::vector<int64_t> fallback) const {
  auto it = ints.find(key);
  return it == ints.end() ? fallback : it->second;
}

double LayerSpec::GetFloat(const std::string& key, double fallback) const {
  auto it = floats.find(key);
  return it == floats.end() ? fallback : it->second;
}

bool RegisterLayer(const std::string& type, DeviceKind kind, LayerFactory factory) {
  LayerRegistry& r = Registry();
  absl::MutexLock lock(&r.mu);
  bool inserted = r.factories.emplace(std::make_pair(kind, type), std::move(factory)).second;
  CHECK(inserted) << "layer type \"" << type << "\" registered twice for " << KindName(kind);
  return true;
}

std::vector<std::string> RegisteredLayerTypes(DeviceKind kind) {
  LayerRegistry& r = Registry();
  absl::MutexLock lock(&r.mu);
  std::vector<std::string> types;
  for (const auto& [key, factory] : r.factories) {
    if (key.first == kind) types.push_back(key.second);
  }
  return types;  // sorted: the map orders by (kind, type)
}

absl::StatusOr<std::unique_ptr<Layer>> CreateLayer(const LayerSpec& spec, DeviceKind kind) {
  LayerFactory factory;
  {
    LayerRegistry& r = Registry();
    absl::MutexLock lock(&r.mu);
    auto it = r.factories.find({kind, spec.type});
    if (it != r.factories.end()) factory = it->second;
  }
  if (!factory) {
    return absl::NotFoundError(absl::StrCat("unknown layer type \"", spec.type, "\" for ", KindName(kind),
                                            "; known: ", absl::StrJoin(RegisteredLayerTypes(kind), ", ")));
  }
  return factory(spec);
}

absl::StatusOr<std::unique_ptr<LossLayer>> CreateSoftmaxCrossEntropy(DeviceKind kind) {
  if (kind == DeviceKind::kCpu) return cpu::NewSoftmaxCrossEntropy();
#ifdef PSTRAIN_WITH_CUDA
  return cuda::NewSoftmaxCrossEntropy();
#else
  return absl::UnimplementedError("softmax cross-entropy on cuda: built without CUDA");
#endif
}

int CountDevices(DeviceKind kind) {
  if (kind == DeviceKind::kCpu) return 1;
#ifdef PSTRAIN_WITH_CUDA
  return cuda::DeviceCount();
#else
  return 0;
#endif
}

absl::StatusOr<std::unique_ptr<DeviceContext>> CreateDeviceContext(Device device) {
  if (device.kind == DeviceKind::kCuda) {
#ifdef PSTRAIN_WITH_CUDA
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaContext> ctx, cuda::CudaContext::Create(device.ordinal));
    return std::unique_ptr<DeviceContext>(std::move(ctx));
#else
    return absl::UnimplementedError(absl::StrCat("device ", device.ToString(), ": built without CUDA"));
#endif
  }
  if (device.ordinal != 0) {
    return absl::InvalidArgumentError(absl::StrCat("CPU device ordinal must be 0, got ", device.ordinal));
  }
  try {
    return std::unique_ptr<DeviceContext>(new cpu::CpuContext());
  } catch (const dnnl::error& e) {
    return absl::InternalError(absl::StrCat("oneDNN CPU engine: ", e.what()));
  }
}

}  // namespace pstrain
