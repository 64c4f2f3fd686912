#include "common/transport/transport.h"

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/config/config_checks.h"
#include "common/status_macros.h"

namespace pstrain {

Registry<TransportEntry>& TransportRegistry() {
  static auto* registry = new Registry<TransportEntry>("transport");
  return *registry;
}

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

bool RegisterTransport(const std::string& name, TransportFactory factory, TransportCapabilities capabilities) {
  return TransportRegistry().Register(name, {std::move(factory), capabilities});
}

TransportCapabilities CapabilitiesOf(const std::string& name) {
  absl::StatusOr<TransportEntry> entry = TransportRegistry().Find(name);
  return entry.ok() ? entry->capabilities : TransportCapabilities{};
}

std::vector<std::string> RegisteredTransports() { return TransportRegistry().Names(); }

absl::StatusOr<std::unique_ptr<Transport>> CreateTransport(const std::string& name, const TransportOptions& options) {
  PSTRAIN_ASSIGN_OR_RETURN(TransportEntry entry, TransportRegistry().Find(name));
  if (options.security.enabled() && !entry.capabilities.security) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transport '", name, "' cannot carry TLS or a token (docs/SECURITY.md): ", SecurityTransportsHint()));
  }
  return entry.create(options);
}

namespace {

#ifndef PSTRAIN_WITH_UCX
// "ucx" (common/transport/ucx/) registers itself when built with UCX
// (cmake/ucx.cmake); otherwise a config naming it is refused with the reason.
const bool kUcxUnavailable = TransportRegistry().RegisterUnavailable(
    "ucx", "this pstrain was built without UCX: install libucx-dev and configure with -DPSTRAIN_WITH_UCX=ON");
#endif

// transport: a registered one ("inproc" is for tests and never registered);
// one this build lacks (ucx without UCX) is refused with the reason.
const bool kConfigCheck =
    ConfigCheckRegistry().Register("transport", [](const ExperimentConfig& config, const ConfigChecker& ck) {
      return ck.Registered("transport", config.transport(), TransportRegistry());
    });

}  // namespace
}  // namespace pstrain
