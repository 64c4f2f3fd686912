// The UCP contexts and workers of one engine (engine.h). Made, driven and
// destroyed on the engine's progress thread only.
//
// Up to two UCP contexts, each with one worker:
//   the local worker (made at start): every transport UCX_TLS allows, shared
//     memory included. Listeners live on it, so do the connections they
//     accept, and channels to peers in this network namespace
//     (InThisNetworkNamespace: loopback, or an address of one of its
//     interfaces) -- processes of this host, which shared memory reaches.
//   the network worker (made at the first connection to any other peer):
//     the same transports without shared memory
//     (TransportsWithoutSharedMemory), rendezvous by put_zcopy
//     (NetworkRendezvousScheme). Channels to peers outside this network
//     namespace -- other hosts, or other namespaces of this host
//     (containers, pods, emulated hosts) -- connect from it.
// Why two: docs/TRANSPORTS.md ("ucx between network namespaces"). In short,
// UCX 1.13's shared memory loses every wake-up across network namespaces,
// and UCX selects lanes from what both ends offer, so a client that offers
// no shared memory gets none, on either side.
#pragma once

#include <ucp/api/ucp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/transport/ucx/address.h"

namespace pstrain::ucx {

class ActiveMessages;

inline std::string UcsText(ucs_status_t status) { return ucs_status_string(status); }

// One UCP context and its worker, with the event descriptor the progress
// thread sleeps on. Its address is the argument of its AM handler.
struct UcpWorker {
  ActiveMessages* messages = nullptr;  // where the AM handler delivers
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  int event_fd = -1;
};

class UcpWorkers {
 public:
  // Every worker's AM handler is `on_am` (features AM and WAKEUP), called
  // with its UcpWorker, whose `messages` is `messages`.
  UcpWorkers(ActiveMessages* messages, ucp_am_recv_callback_t on_am);
  ~UcpWorkers() { Destroy(); }
  UcpWorkers(const UcpWorkers&) = delete;
  UcpWorkers& operator=(const UcpWorkers&) = delete;

  // Makes the local worker; on failure nothing of UCX is left.
  absl::Status StartLocal();
  // The local worker (null before StartLocal and after Destroy).
  ucp_worker_h local() const { return local_.worker; }
  // The worker a client endpoint to `peer` (`address`, for messages) is
  // made on: the local one for a peer in this network namespace, else the
  // network worker, made on first use (the local one where no network
  // worker is needed, or it cannot be made: logged once).
  ucp_worker_h For(const SocketAddress& peer, const std::string& address);
  // ucp_worker_progress on every worker; whether any reported work.
  bool Progress();
  // The workers there are: the local one, then the network one once made.
  std::vector<const UcpWorker*> all() const;
  // Destroys both workers and their contexts. Idempotent.
  void Destroy();

 private:
  // Settings of a context that replace the environment's (UCX_TLS,
  // UCX_RNDV_SCHEME); empty ones leave it.
  struct ContextSettings {
    std::string tls;
    std::string rndv_scheme;
  };
  // A context, its worker, the worker's event fd and the AM handler; on
  // failure the caller destroys what was made (DestroyOne).
  absl::Status Create(UcpWorker& w, const ContextSettings& settings);
  static absl::Status CreateContext(UcpWorker& w, const ContextSettings& settings);
  absl::Status SetAmHandler(UcpWorker& w);
  static void DestroyOne(UcpWorker& w);

  ActiveMessages* const messages_;
  const ucp_am_recv_callback_t on_am_;
  UcpWorker local_;
  // Made once and kept until Destroy: its AM handler's argument points to it.
  std::unique_ptr<UcpWorker> network_;
  // UCX_TLS of the network worker (TransportsWithoutSharedMemory); empty:
  // none is needed. Whether making it was tried.
  const std::string network_tls_;
  bool network_tried_ = false;
};

}  // namespace pstrain::ucx
