#include "ps/optimizer.h"

#include <cmath>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pstrain {
namespace {

std::mutex& RegistryMutex() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::map<std::string, OptimizerFactory>& Registry() {
  static auto* registry = new std::map<std::string, OptimizerFactory>;
  return *registry;
}

}  // namespace

bool RegisterOptimizer(const std::string& name, OptimizerFactory factory) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  Registry()[name] = std::move(factory);
  return true;
}

absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const OptimizerConfig& config) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  auto it = Registry().find(config.name());
  if (it == Registry().end()) {
    std::vector<std::string> names;
    for (const auto& [name, f] : Registry()) names.push_back(name);
    return absl::NotFoundError(
        absl::StrCat("unknown optimizer '", config.name(), "'; known: ", absl::StrJoin(names, ", ")));
  }
  return it->second(config);
}

float LearningRateAt(const OptimizerConfig& config, int64_t applied_updates, int64_t total_steps) {
  const float base = config.learning_rate();
  if (config.lr_schedule() == "step" && config.lr_decay_steps() > 0) {
    return base * std::pow(config.lr_decay_factor(), static_cast<float>(applied_updates / config.lr_decay_steps()));
  }
  if (config.lr_schedule() == "cosine" && total_steps > 0) {
    double progress = std::min<double>(1.0, static_cast<double>(applied_updates) / total_steps);
    return static_cast<float>(base * 0.5 * (1.0 + std::cos(M_PI * progress)));
  }
  return base;
}

}  // namespace pstrain
