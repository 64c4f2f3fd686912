// The engine's UCP contexts and workers (workers.h).
#include "common/transport/ucx/workers.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/transport/ucx/process_settings.h"
#include "common/transport/ucx/ucx_transport.h"
#include "glog/logging.h"

namespace pstrain::ucx {

UcpWorkers::UcpWorkers(ActiveMessages* messages, ucp_am_recv_callback_t on_am)
    : messages_(messages), on_am_(on_am), network_tls_(TransportsWithoutSharedMemory(std::getenv("UCX_TLS"))) {}

absl::Status UcpWorkers::StartLocal() {
  absl::Status made = Create(local_, ContextSettings());
  if (!made.ok()) DestroyOne(local_);
  return made;
}

ucp_worker_h UcpWorkers::For(const SocketAddress& peer, const std::string& address) {
  if (network_tls_.empty() || InThisNetworkNamespace(peer)) return local_.worker;
  if (network_ == nullptr && !network_tried_) {
    network_tried_ = true;
    auto w = std::make_unique<UcpWorker>();
    if (absl::Status made = Create(*w, {network_tls_, NetworkRendezvousScheme()}); !made.ok()) {
      DestroyOne(*w);
      LOG(WARNING) << "ucx: cannot start UCX without shared memory (UCX_TLS=" << network_tls_ << ") for peers outside "
                   << "this network namespace, such as " << address << ": " << made.message()
                   << "; they share the local worker";
    } else {
      network_ = std::move(w);
      VLOG(1) << "ucx: peers outside this network namespace (first " << address
              << ") are reached without shared memory (UCX_TLS=" << network_tls_ << ")";
    }
  }
  return network_ != nullptr ? network_->worker : local_.worker;
}

bool UcpWorkers::Progress() {
  bool busy = ucp_worker_progress(local_.worker) != 0;
  if (network_ != nullptr) busy = (ucp_worker_progress(network_->worker) != 0) || busy;
  return busy;
}

std::vector<const UcpWorker*> UcpWorkers::all() const {
  std::vector<const UcpWorker*> workers = {&local_};
  if (network_ != nullptr) workers.push_back(network_.get());
  return workers;
}

void UcpWorkers::Destroy() {
  if (network_ != nullptr) DestroyOne(*network_);
  network_.reset();
  DestroyOne(local_);
}

absl::Status UcpWorkers::Create(UcpWorker& w, const ContextSettings& settings) {
  w.messages = messages_;
  if (absl::Status context = CreateContext(w, settings); !context.ok()) return context;
  ucp_worker_params_t worker_params{};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;  // only the progress thread uses it
  ucs_status_t status = ucp_worker_create(w.context, &worker_params, &w.worker);
  if (status != UCS_OK) {
    w.worker = nullptr;
    return absl::UnavailableError(absl::StrCat("ucx: ucp_worker_create: ", UcsText(status),
                                               " (UCX's log above names the setting it refused; check the "
                                               "environment's UCX_* variables)"));
  }
  ucp_worker_attr_t attr{};
  attr.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
  status = ucp_worker_query(w.worker, &attr);
  if (status == UCS_OK && attr.max_am_header < sizeof(ucx_wire::AmHeader)) {
    return absl::UnavailableError(absl::StrCat("ucx: the transports allow AM headers of ", attr.max_am_header,
                                               " bytes, pstrain needs ", sizeof(ucx_wire::AmHeader)));
  }
  status = ucp_worker_get_efd(w.worker, &w.event_fd);
  if (status != UCS_OK) return absl::UnavailableError(absl::StrCat("ucx: ucp_worker_get_efd: ", UcsText(status)));
  return SetAmHandler(w);
}

absl::Status UcpWorkers::CreateContext(UcpWorker& w, const ContextSettings& settings) {
  // Every UCX_* variable of the environment (UCX_TLS, UCX_NET_DEVICES, ...),
  // then this context's own settings.
  ucp_config_t* config = nullptr;
  ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);
  if (status != UCS_OK) return absl::UnavailableError(absl::StrCat("ucx: ucp_config_read: ", UcsText(status)));
  for (const auto& [name, value] : {std::pair{"TLS", settings.tls}, std::pair{"RNDV_SCHEME", settings.rndv_scheme}}) {
    if (value.empty()) continue;
    status = ucp_config_modify(config, name, value.c_str());
    if (status != UCS_OK) {
      ucp_config_release(config);
      return absl::UnavailableError(absl::StrCat("ucx: UCX_", name, "=", value, ": ", UcsText(status)));
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  params.name = "pstrain";
  status = ucp_init(&params, config, &w.context);
  ucp_config_release(config);
  if (status != UCS_OK) {
    w.context = nullptr;
    return absl::UnavailableError(absl::StrCat("ucx: cannot initialise UCX (ucp_init): ", UcsText(status),
                                               " (check UCX_TLS and UCX_NET_DEVICES)"));
  }
  return absl::OkStatus();
}

absl::Status UcpWorkers::SetAmHandler(UcpWorker& w) {
  ucp_am_handler_param_t handler{};
  handler.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                       UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  handler.id = ucx_wire::kAmId;
  handler.cb = on_am_;
  handler.arg = &w;
  handler.flags = UCP_AM_FLAG_WHOLE_MSG;
  const ucs_status_t status = ucp_worker_set_am_recv_handler(w.worker, &handler);
  if (status != UCS_OK) {
    return absl::UnavailableError(absl::StrCat("ucx: ucp_worker_set_am_recv_handler: ", UcsText(status)));
  }
  return absl::OkStatus();
}

void UcpWorkers::DestroyOne(UcpWorker& w) {
  if (w.worker != nullptr) ucp_worker_destroy(w.worker);
  w.worker = nullptr;
  w.event_fd = -1;
  if (w.context != nullptr) ucp_cleanup(w.context);
  w.context = nullptr;
}

}  // namespace pstrain::ucx
