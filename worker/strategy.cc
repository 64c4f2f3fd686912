#include "worker/strategy.h"

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
std::map<std::string, StrategyFactory>& Registry() {
  static auto* registry = new std::map<std::string, StrategyFactory>;
  return *registry;
}

}  // namespace

bool RegisterStrategy(const std::string& name, StrategyFactory factory) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  Registry()[name] = std::move(factory);
  return true;
}

absl::StatusOr<std::unique_ptr<Strategy>> CreateStrategy(const std::string& name, const StrategyContext& context) {
  StrategyFactory factory;
  {
    std::lock_guard<std::mutex> lock(RegistryMutex());
    auto it = Registry().find(name);
    if (it == Registry().end()) {
      std::vector<std::string> names;
      for (const auto& [n, f] : Registry()) names.push_back(n);
      return absl::NotFoundError(
          absl::StrCat("unknown variable_update '", name, "'; known: ", absl::StrJoin(names, ", ")));
    }
    factory = it->second;
  }
  return factory(context);
}

}  // namespace pstrain
