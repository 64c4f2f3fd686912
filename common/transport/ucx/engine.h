// The engine of one UcxTransport: its UCP context and worker, the progress
// thread that alone drives them, and everything that thread owns -- the open
// endpoints, the client's connections and calls, the servers and their
// connections. Internal to the ucx transport: UcxTransport, UcxChannel and
// UcxServer (ucx_transport.cc) are its public face.
//
// One class; its functions are defined by concept:
//   engine.cc           start-up (context, worker), the progress loop, task
//                       posting, endpoints, teardown
//   active_messages.cc  sending and receiving active messages (the wire side;
//                       active_messages.h)
//   client.cc           calls and the client's connection state machine
//                       (client.h)
//   server.cc           listeners, accepted connections, responders
//                       (server.h)
//
// Workers. Up to two UCP contexts, each with one worker, both driven by the
// progress thread:
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
// Why: UCX 1.13 deems shared memory reachable between any two processes of
// one kernel and IPC namespace, but its shared-memory transports wake a
// sleeping receiver through an abstract AF_UNIX socket, and those exist per
// network namespace: across namespaces every wake-up is lost (sendto:
// ECONNREFUSED) and each message waits for the receiver's next timed
// wake-up (kMaxSleep), 18 images/sec instead of tens of thousands. UCX
// selects lanes from what both ends offer, so a client that offers no
// shared memory gets none, on either side, even from a server's local
// worker. Both workers' endpoints use peer error handling.
//
// Threads. Everything that touches UCX runs on the progress thread; the
// public functions marked "any thread" queue work for it. When idle the
// progress thread sleeps on the workers' event file descriptors
// (ucp_worker_arm, then poll) until UCX has an event, work is queued, or the
// next call deadline or reconnection attempt is due (at most 1 s, so UCX's
// own housekeeping -- keepalive -- still runs). While awake it calls
// ucp_worker_progress in passes of at most 64 calls and runs queued work and
// expires deadlines between passes, so a UCX that reports work on every call
// (as around a peer that died) holds nothing up; it logs a warning when that
// lasts 2 s with almost none of our messages completing. After a message or
// a queued task it keeps polling for PSTRAIN_UCX_SPIN_US before it sleeps.
// Handlers and completion callbacks run on the engine's callback threads
// (RunCallback), never on the progress thread and never with a lock held.
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/concurrency/callback_pool.h"
#include "common/concurrency/thread_role.h"
#include "common/transport/transport.h"
#include "common/transport/ucx/active_messages.h"
#include "common/transport/ucx/address.h"
#include "common/transport/ucx/client.h"
#include "common/transport/ucx/message_parts.h"
#include "common/transport/ucx/process_settings.h"
#include "common/transport/ucx/server.h"
#include "common/transport/ucx/ucx_transport.h"

namespace pstrain::ucx {

using Task = absl::AnyInvocable<void()>;

inline std::string UcsText(ucs_status_t status) { return ucs_status_string(status); }

// One UCP context and its worker (the engine's local or network worker),
// with the event descriptor the progress thread sleeps on.
struct UcpWorker {
  Engine* engine = nullptr;  // the AM handler's argument points here
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  int event_fd = -1;
};

// Whose endpoint a ucp_ep_h is.
struct EpOwner {
  bool client = false;
  uint64_t conn_id = 0;
};

// The UCX context and worker of one transport, and the progress thread that
// alone drives them. Everything that touches UCX runs on that thread; the
// public functions marked "any thread" queue work for it.
class Engine : public std::enable_shared_from_this<Engine> {
 public:
  explicit Engine(const TransportOptions& options);
  ~Engine() { Stop(); }

  // Starts the progress thread and waits for UCX to come up. Once.
  void Start();

  // Stops the progress thread, which fails every pending call, closes every
  // endpoint and listener and destroys the worker and context; then runs the
  // queued callbacks. Idempotent; never from a callback or the progress thread.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // Why UCX could not be started; OK if it runs. Any thread, after Start.
  const absl::Status& init_status() const { return init_status_; }
  int64_t max_message_bytes() const { return max_message_bytes_; }
  uint64_t NewId() { return next_id_.fetch_add(1) + 1; }

  // Queues `task` for the progress thread and wakes it. Once the engine
  // stopped (or never started) returns false and leaves `task` untouched.
  // Any thread.
  bool Post(Task&& task) ABSL_LOCKS_EXCLUDED(mu_);

  // Runs `task` on a callback thread (on this one once stopped). Any thread.
  void RunCallback(Task task) { callbacks_.Run(std::move(task)); }

  // ---- tasks (progress thread) ----

  // client.cc
  void StartCall(uint64_t call_id, std::unique_ptr<PendingCall> call, const std::string& address,
                 const SocketAddress& peer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void CloseClientConn(uint64_t conn_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  // server.cc
  absl::StatusOr<int> Listen(uint64_t server_id, std::shared_ptr<ServerState> state, const SocketAddress& address)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void StopListening(uint64_t server_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void CloseServerConns(uint64_t server_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void RemoveServer(uint64_t server_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void SendResponse(uint64_t conn_id, uint64_t call_id, absl::Status status, OutgoingFrame frame)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);

  // The progress thread's role; tasks posted with Post() start with
  // progress().AssertHeld().
  const ThreadRole& progress() const ABSL_LOCK_RETURNED(progress_) { return progress_; }

 private:
  // ---- UCX callbacks: record what happened and defer the work (no UCX calls
  // re-entering our state from inside UCX) ----
  static ucs_status_t OnAm(void* arg, const void* header, size_t header_length, void* data, size_t length,
                           const ucp_am_recv_param_t* param);
  static void OnSendDone(void* request, ucs_status_t status, void* user_data);
  static void OnRecvDone(void* request, ucs_status_t status, size_t length, void* user_data);
  static void OnCloseDone(void* request, ucs_status_t status, void* user_data);
  static void OnEpError(void* arg, ucp_ep_h ep, ucs_status_t status);
  static void OnConnRequest(ucp_conn_request_h request, void* arg);

  // ---- the progress thread (engine.cc) ----
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  // Progress passes, queued tasks, deadlines and sleeps until Stop().
  void ProgressUntilStopped() ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_) ABSL_LOCKS_EXCLUDED(mu_);
  // The local worker; on failure nothing of UCX is left.
  absl::Status InitUcx() ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  // Settings of a context that replace the environment's (UCX_TLS,
  // UCX_RNDV_SCHEME); empty ones leave it.
  struct ContextSettings {
    std::string tls;
    std::string rndv_scheme;
  };
  // A context, its worker, the worker's event fd and our AM handler; on
  // failure the caller destroys what was made (DestroyWorker).
  absl::Status CreateWorker(UcpWorker& w, const ContextSettings& settings) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  absl::Status CreateContext(UcpWorker& w, const ContextSettings& settings) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  absl::Status SetAmHandler(UcpWorker& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  static void DestroyWorker(UcpWorker& w);
  // Destroys both workers; no task is accepted any more.
  void DestroyUcx() ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  // The worker a client endpoint to `peer` (`address`) is made on: the
  // local one for a peer in this network namespace, else the network worker,
  // made on first use (the local one where no network worker is needed, or
  // it cannot be made).
  ucp_worker_h WorkerFor(const SocketAddress& peer, const std::string& address)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  // The workers there are (the local one, then the network one once made).
  std::vector<UcpWorker*> Workers() ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  // Runs the queued tasks; true once Stop() was requested. *ran: whether
  // there were any.
  bool RunTasks(bool* ran) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_) ABSL_LOCKS_EXCLUDED(mu_);
  // What one Progress pass did.
  struct Pass {
    bool active = false;  // anything happened
    bool full = false;    // all kProgressCallsPerPass calls were made, UCX still reporting work
    int deferred = 0;     // tasks our UCX callbacks deferred (messages, sends, errors), all run
  };
  // ucp_worker_progress, each call followed by the work its callbacks
  // deferred, until UCX is idle or kProgressCallsPerPass calls were made.
  Pass Progress() ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void Defer(Task task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_) { deferred_.push_back(std::move(task)); }
  // Sleeps on the workers' event fds until UCX or Post() wakes it, or `wake_at`.
  void WaitForEvents(absl::Time wake_at) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Time NextWake(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  // Teardown: every call failed, every endpoint and listener closed, UCX
  // given up to kCloseWait to finish what that started.
  void ShutdownAll() ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void WaitForOutstanding() ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);

  // ---- endpoints (engine.cc) ----
  void CloseEndpoint(ucp_ep_h ep, bool force) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  // Forgets an endpoint being closed: its owner, and the parts of messages
  // that came on it.
  void DropEndpoint(ucp_ep_h ep) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_) {
    eps_.erase(ep);
    assembler_.ForgetEndpoint(ep);
  }
  void EndpointFailed(ucp_ep_h ep, ucs_status_t status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);

  // ---- sending and receiving (active_messages.cc) ----
  void SendAm(ucp_ep_h ep, ucx_wire::AmHeader header, std::string text, OutgoingFrame frame)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  // Sends one part (an active message) of a message SendAm split.
  void SendPart(ucp_ep_h ep, std::unique_ptr<SendOp> op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void SendFinished(std::unique_ptr<SendOp> op, ucs_status_t status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  // A message that arrived on `worker`.
  ucs_status_t ReceiveAm(ucp_worker_h worker, const void* header, size_t header_length, void* data, size_t length,
                         const ucp_am_recv_param_t* param) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  ucs_status_t ReceiveData(ucp_worker_h worker, const ucx_wire::AmHeader& header, ucp_ep_h reply_ep, void* data,
                           size_t length, bool rndv) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  // Whether the data of a request or response whose AM header is `h` is to
  // be received: not a late answer, a request on an open server connection
  // (*server_conn_id), a size and part the limits allow. Otherwise the
  // message is dropped (refused where it is answered).
  bool Admit(const ucx_wire::AmHeader& h, ucp_ep_h reply_ep, size_t length, uint64_t* server_conn_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  // Pulls the data of a message that came by rendezvous (`data`: UCX's
  // descriptor, of op's worker) into op's buffer.
  ucs_status_t ReceiveRendezvous(std::unique_ptr<RecvOp> op, void* data) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void DeferReceived(std::unique_ptr<RecvOp> op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void Received(std::unique_ptr<RecvOp> op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  // A message could not be taken (too large, or PartAssembler::Announce's
  // refusal): a request is answered with it, an answer completes its call
  // with it (INTERNAL where the answer was malformed).
  void RefuseMessage(const ucx_wire::AmHeader& h, ucp_ep_h reply_ep, const absl::Status& refusal)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);

  // ---- client (client.cc) ----
  // Sends the call now, queues it until the connection is up, or fails it.
  void SendOrQueue(uint64_t conn_id, ClientConn& conn, uint64_t call_id, bool wait_for_ready)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void Connect(uint64_t conn_id, ClientConn& conn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void ConnectFailed(ClientConn& conn, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void Connected(ucp_ep_h ep) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void SendRequest(ClientConn& conn, uint64_t call_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  // Sending the request of `call_id` (method `method`) failed.
  void RequestSendFailed(uint64_t call_id, const std::string& method, ucs_status_t status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void DeliverResponse(ReceivedMessage message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  // Completes the call (if still pending) on a callback thread.
  void Complete(uint64_t call_id, absl::Status status, IncomingFrame frame = {})
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void ExpireCalls(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void RetryConnections(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void ClientEndpointFailed(uint64_t conn_id, ucs_status_t status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  // Teardown: closes every client endpoint and fails every call.
  void CloseAllClientConns() ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);

  // ---- server (server.cc) ----
  void Accept(uint64_t server_id, ucp_conn_request_h request) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  // Answers a client's hello on `ep`: the connection is up.
  void AcknowledgeHello(ucp_ep_h ep) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void DeliverRequest(ReceivedMessage message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void RejectRequest(ucp_ep_h ep, uint64_t call_id, absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  Responder MakeResponder(std::shared_ptr<ServerState> state, uint64_t conn_id, uint64_t call_id);
  void ServerEndpointFailed(uint64_t conn_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  // Teardown: destroys every listener and closes every server endpoint.
  void CloseAllServers() ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);

  const int64_t max_message_bytes_;
  std::atomic<uint64_t> next_id_{0};
  CallbackPool callbacks_;
  std::thread thread_;
  absl::Notification started_;
  absl::Status init_status_;  // written by the progress thread before started_ is notified

  // Cross-thread: the task queue. Lock order: mu_ is innermost (nothing is
  // acquired while it is held).
  absl::Mutex mu_;
  std::vector<Task> tasks_ ABSL_GUARDED_BY(mu_);
  bool accepting_tasks_ ABSL_GUARDED_BY(mu_) = false;  // from UCX start-up to teardown
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;
  // The local worker, which Post()/Stop() signal (the progress thread sleeps
  // on every worker's event fd, so that wakes it). Set by the progress
  // thread while accepting_tasks_ is false; read by Post()/Stop() under mu_
  // only while it is true.
  ucp_worker_h worker_ = nullptr;

  // The progress thread's own state. The thread as a capability
  // (common/concurrency/thread_role.h): state only that thread touches is
  // ABSL_GUARDED_BY(progress_) and functions that run only there are
  // ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_), so a path from another thread
  // to them does not compile. The thread holds the role for its whole life
  // (Run); UCX callbacks, which UCX invokes on it from ucp_worker_progress,
  // and tasks it runs start with AssertHeld(), which also checks the thread
  // at run time.
  ThreadRole progress_{"the ucx progress thread"};
  // The workers (see the top of this file). The AM handlers' arguments
  // point to them: network_ is made once and kept until DestroyUcx.
  UcpWorker local_ ABSL_GUARDED_BY(progress_);
  std::unique_ptr<UcpWorker> network_ ABSL_GUARDED_BY(progress_);
  // UCX_TLS of the network worker (TransportsWithoutSharedMemory); empty:
  // none is needed. Whether making it was tried.
  const std::string network_tls_;
  bool network_tried_ ABSL_GUARDED_BY(progress_) = false;
  std::vector<Task> deferred_ ABSL_GUARDED_BY(progress_);
  // How long the progress thread keeps polling after activity before it
  // sleeps (SpinFromEnvironment).
  const absl::Duration spin_ = SpinFromEnvironment();
  int outstanding_ ABSL_GUARDED_BY(progress_) = 0;                        // UCX requests not completed yet
  std::unordered_map<ucp_ep_h, EpOwner> eps_ ABSL_GUARDED_BY(progress_);  // open endpoints
  ucx_parts::PartAssembler assembler_ ABSL_GUARDED_BY(progress_){max_message_bytes_};
  // The client's calls and connections (client.h).
  std::map<uint64_t, std::unique_ptr<PendingCall>> calls_ ABSL_GUARDED_BY(progress_);
  std::multimap<absl::Time, uint64_t> deadlines_ ABSL_GUARDED_BY(progress_);  // may name completed calls
  std::map<uint64_t, ClientConn> client_conns_ ABSL_GUARDED_BY(progress_);
  // The servers and the connections they accepted (server.h).
  std::map<uint64_t, ServerRecord> servers_ ABSL_GUARDED_BY(progress_);
  std::map<uint64_t, ServerConn> server_conns_ ABSL_GUARDED_BY(progress_);
};

}  // namespace pstrain::ucx
