// ClusterStore: the key-value store the workers of one job rendezvous
// through (Gloo ring addresses, the NCCL unique id). The chief serves it on
// its own worker port (KvStoreService over the Transport) and uses it
// in-process; every other worker reaches it over the Transport.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/transport/transport.h"
#include "proto/config.pb.h"
#include "worker/collective/kv_store.h"

namespace pstrain {

class ClusterStore {
 public:
  // `listen_address`: where the chief serves; empty means
  // cluster.listen_address (host_port.h ListenAddress) and the port of
  // cluster.worker_hosts(0). Errors: the chief cannot bind it.
  static absl::StatusOr<std::unique_ptr<ClusterStore>> Open(const ExperimentConfig& config, int worker_index,
                                                            Transport* transport, const std::string& listen_address);
  // Chief: answers parked waits with CANCELLED, then stops serving (1 s grace).
  ~ClusterStore();

  KeyValueStore* store() { return store_; }

 private:
  ClusterStore() = default;
  KvStoreService service_;                          // chief
  std::unique_ptr<Server> server_;                  // chief
  std::unique_ptr<TransportKeyValueStore> remote_;  // others
  KeyValueStore* store_ = nullptr;
};

}  // namespace pstrain
