#include "worker/collective/cluster_store.h"

#include "absl/strings/str_cat.h"
#include "common/host_port.h"
#include "common/status_macros.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<ClusterStore>> ClusterStore::Open(const ExperimentConfig& config, int worker_index,
                                                                 Transport* transport,
                                                                 const std::string& listen_address) {
  std::unique_ptr<ClusterStore> cluster_store(new ClusterStore);
  const std::string& chief = config.cluster().worker_hosts(0);
  if (worker_index == 0) {
    std::string listen = listen_address;
    if (listen.empty()) {
      PSTRAIN_ASSIGN_OR_RETURN(const HostPort entry, ParseHostPort(chief));
      listen = ListenAddress(config.cluster().listen_address(), entry);
    }
    PSTRAIN_ASSIGN_OR_RETURN(cluster_store->server_, transport->Serve(listen, &cluster_store->service_));
    cluster_store->store_ = cluster_store->service_.local_store();
  } else {
    PSTRAIN_ASSIGN_OR_RETURN(cluster_store->remote_, TransportKeyValueStore::Connect(transport, chief));
    cluster_store->store_ = cluster_store->remote_.get();
  }
  return cluster_store;
}

ClusterStore::~ClusterStore() {
  if (server_ == nullptr) return;
  service_.CancelPending(absl::CancelledError("chief finished"));
  server_->Shutdown(absl::Seconds(1));
}

}  // namespace pstrain
