#include "common/transport/transport.h"

#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"

namespace pstrain {
namespace {

struct TransportRegistry {
  std::mutex mu;
  std::map<std::string, TransportFactory> factories;
};

TransportRegistry& Registry() {
  static auto* registry = new TransportRegistry;
  return *registry;
}

}  // namespace

absl::Status Channel::CallSync(std::string_view method, OutgoingFrame request, const CallOptions& options,
                               IncomingFrame* response) {
  absl::Notification done;
  absl::Status result;
  Call(method, std::move(request), options, [&](absl::Status status, IncomingFrame frame) {
    result = std::move(status);
    if (response != nullptr) *response = std::move(frame);
    done.Notify();
  });
  done.WaitForNotification();
  return result;
}

bool RegisterTransport(const std::string& name, TransportFactory factory) {
  std::lock_guard<std::mutex> lock(Registry().mu);
  Registry().factories[name] = std::move(factory);
  return true;
}

std::vector<std::string> RegisteredTransports() {
  std::lock_guard<std::mutex> lock(Registry().mu);
  std::vector<std::string> names;
  for (const auto& [name, factory] : Registry().factories) names.push_back(name);
  return names;
}

absl::StatusOr<std::unique_ptr<Transport>> CreateTransport(const std::string& name,
                                                           const TransportOptions& options) {
  TransportFactory factory;
  {
    std::lock_guard<std::mutex> lock(Registry().mu);
    auto it = Registry().factories.find(name);
    if (it != Registry().factories.end()) factory = it->second;
  }
  if (!factory) {
    return absl::NotFoundError(absl::StrCat("unknown transport '", name, "'; known: ",
                                            absl::StrJoin(RegisteredTransports(), ", ")));
  }
  return factory(options);
}

}  // namespace pstrain
