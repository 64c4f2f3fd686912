#include "common/transport/ucx/ucx_transport.h"

#include <netdb.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <ucm/api/ucm.h>
#include <ucp/api/ucp.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/config.h"
#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/concurrency/callback_pool.h"
#include "common/concurrency/thread_role.h"
#include "common/host_port.h"
#include "common/transport/ucx/message_parts.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

using ucx_wire::AmHeader;
using ucx_wire::Kind;

using Task = absl::AnyInvocable<void()>;

class Engine;

// Reconnection backoff for wait_for_ready calls (doubling from the first).
constexpr absl::Duration kFirstBackoff = absl::Milliseconds(20);
constexpr absl::Duration kMaxBackoff = absl::Seconds(1);
// The longest the progress thread sleeps without looking at UCX.
constexpr absl::Duration kMaxSleep = absl::Seconds(1);
// Calls of ucp_worker_progress (each followed by the work it deferred) in
// one pass of the progress loop. UCX may report work on every call for a
// long while (a peer that died with sends in flight, for one); between
// passes the loop runs posted tasks and expires deadlines, so they never
// wait behind it.
constexpr int kProgressCallsPerPass = 64;
// A warning when every pass has used all its calls for this long while UCX
// completed fewer than one message, send or error of ours per pass: UCX
// busy with itself (a peer that died, retries), not with our traffic.
constexpr absl::Duration kBusyWarning = absl::Seconds(2);

// PSTRAIN_UCX_SPIN_US: microseconds the progress thread keeps polling after
// the last message or task before it sleeps on the event fd (default 200; 0:
// sleep at once, the least CPU on an idle link).
absl::Duration SpinFromEnvironment() {
  const char* value = std::getenv("PSTRAIN_UCX_SPIN_US");
  int64_t us = 200;
  if (value != nullptr && !absl::SimpleAtoi(value, &us)) {
    LOG(WARNING) << "ucx: ignoring PSTRAIN_UCX_SPIN_US='" << value << "' (not a number of microseconds)";
    us = 200;
  }
  return absl::Microseconds(std::max<int64_t>(us, 0));
}
// How long teardown waits for UCX to finish closing endpoints.
constexpr absl::Duration kCloseWait = absl::Seconds(2);

std::string UcsText(ucs_status_t status) { return ucs_status_string(status); }

// ---------------------------------------------------------------- addresses

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

// "host:port" (port 0 allowed where `allow_port_zero`: a listener picks one).
absl::StatusOr<HostPort> ParseAddress(const std::string& address, bool allow_port_zero) {
  if (allow_port_zero && absl::EndsWith(address, ":0")) {
    // ParseHostPort accepts 1..65535 only; parse the rest with a stand-in port.
    absl::StatusOr<HostPort> parsed = ParseHostPort(absl::StrCat(address.substr(0, address.size() - 2), ":1"));
    if (parsed.ok()) parsed->port = 0;
    return parsed;
  }
  return ParseHostPort(address);
}

// Resolves with getaddrinfo, preferring IPv4 (a server listening on 0.0.0.0
// is then reachable through "localhost", which may also resolve to ::1).
absl::StatusOr<SocketAddress> Resolve(const HostPort& hp, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* results = nullptr;
  const std::string port = std::to_string(hp.port);
  const int rc = getaddrinfo(hp.host.c_str(), port.c_str(), &hints, &results);
  if (rc != 0) {
    return absl::UnavailableError(absl::StrCat("ucx: cannot resolve '", hp.host, "': ", gai_strerror(rc)));
  }
  const addrinfo* chosen = results;
  for (const addrinfo* ai = results; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family == AF_INET) {
      chosen = ai;
      break;
    }
  }
  SocketAddress out;
  std::memcpy(&out.storage, chosen->ai_addr, chosen->ai_addrlen);
  out.length = chosen->ai_addrlen;
  freeaddrinfo(results);
  return out;
}

int PortOf(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(address).sin_port);
  if (address.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(address).sin6_port);
  return 0;
}

// ---------------------------------------------------------------- process settings

// UCX's memory hooks (libucm, on by default) patch mmap underneath the
// sanitizers' own interceptors, and the first UCX thread created after
// ucp_init then recurses until its stack overflows. libucs reads UCX_MEM_*
// once, when it is loaded -- before any code of ours runs, so setting them
// from here (setenv, ucm_set_global_opts) is too late. In sanitizer builds
// the transport therefore refuses to start UCX unless the process was started
// with the hooks off (the ucx tests get the variables from ctest:
// tests/transport/CMakeLists.txt).
absl::Status CheckMemoryHooksForSanitizers() {
#if defined(ABSL_HAVE_ADDRESS_SANITIZER) || defined(ABSL_HAVE_THREAD_SANITIZER)
  if (ucm_global_opts.mmap_hook_mode != UCM_MMAP_HOOK_NONE && ucm_global_opts.enable_events) {
    return absl::FailedPreconditionError(
        "ucx: UCX's memory hooks crash under AddressSanitizer and ThreadSanitizer: start this sanitizer build "
        "with UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_MALLOC_HOOKS=no in the environment");
  }
#endif
  return absl::OkStatus();
}

// The defaults pstrain wants for settings UCX reads from the environment,
// put there (never over the user's) by the first transport created in the
// process, before UCX reads them (ucp_config_modify does not reach the
// transports' and connection managers' own settings):
//   UCX_MM_ERROR_HANDLING=y  shared memory between processes of one host
//                            even though our endpoints ask for peer error
//                            handling (UCX 1.13 leaves it out otherwise);
//   UCX_TCP_CM_REUSEADDR=y   a listener may bind a port whose earlier
//                            connections linger in TIME_WAIT (a server
//                            restarted on its fixed port), as gRPC's may;
//   UCX_RNDV_SCHEME=get_zcopy  a large part is pulled by the receiver (RDMA
//                            read where a lane can; UCX's active-message
//                            pipeline where none can, as on shared memory
//                            with peer error handling). "auto" picks a
//                            fragment pipeline there that measured 2x
//                            slower (pstrain-bench ps, docs/BENCHMARKS.md).
void SetProcessDefaults() {
  static const bool done = [] {
    setenv("UCX_MM_ERROR_HANDLING", "y", /*overwrite=*/0);
    setenv("UCX_RNDV_SCHEME", "get_zcopy", /*overwrite=*/0);
    setenv("UCX_TCP_CM_REUSEADDR", "y", /*overwrite=*/0);
    return true;
  }();
  (void)done;
}

// ---------------------------------------------------------------- calls

// Calls `done` exactly once: through Run, or -- if the call is dropped
// without an answer (its task discarded at shutdown) -- with UNAVAILABLE.
class Completion {
 public:
  explicit Completion(ResponseCallback done) : done_(std::move(done)) {}
  Completion(Completion&& other) noexcept : done_(std::exchange(other.done_, nullptr)) {}
  Completion& operator=(Completion&&) = delete;
  ~Completion() {
    if (done_) done_(absl::UnavailableError("ucx: the transport shut down before the call completed"), {});
  }
  void Run(absl::Status status, IncomingFrame frame) {
    ResponseCallback done = std::exchange(done_, nullptr);
    done(std::move(status), std::move(frame));
  }

 private:
  ResponseCallback done_;
};

// ---------------------------------------------------------------- state

// One Server, shared by the UcxServer object, the engine and responders
// (which may outlive both). Counts what Shutdown waits for.
struct ServerState {
  ServerState(Handler* h, std::string a) : handler(h), address(std::move(a)) {}

  Handler* const handler;
  const std::string address;  // as given to Serve()
  absl::Mutex mu;
  absl::CondVar changed;
  // False once Shutdown began: new requests are answered UNAVAILABLE.
  bool accepting ABSL_GUARDED_BY(mu) = true;
  // True once Shutdown's grace ended: the handler is not called again.
  bool closed ABSL_GUARDED_BY(mu) = false;
  int unanswered ABSL_GUARDED_BY(mu) = 0;  // requests accepted whose responder has not run
  int in_handle ABSL_GUARDED_BY(mu) = 0;   // threads inside handler->Handle
};

// One call a client made, from Call() until it completes.
struct PendingCall {
  explicit PendingCall(ResponseCallback done) : completion(std::move(done)) {}
  uint64_t conn_id = 0;
  std::string method;
  OutgoingFrame request;  // until it is handed to UCX
  absl::Time started;
  absl::Time deadline;
  bool wait_for_ready = false;
  Completion completion;
};

// The client side of one Channel: its endpoint, and the calls on it.
struct ClientConn {
  enum class State { kIdle, kConnecting, kReady };
  std::string address;
  SocketAddress peer;
  ucp_ep_h ep = nullptr;
  State state = State::kIdle;
  std::set<uint64_t> waiting;  // calls to send once connected, in call order
  std::set<uint64_t> sent;     // calls sent on `ep`, awaiting their answers
  // After a failed attempt with wait_for_ready calls waiting: when to retry.
  absl::Time retry_at = absl::InfiniteFuture();
  absl::Duration backoff = kFirstBackoff;
  std::string last_error;  // why the last attempt failed
};

struct ServerRecord {
  Engine* engine = nullptr;  // the listener's callback argument points here
  uint64_t id = 0;
  std::shared_ptr<ServerState> state;
  ucp_listener_h listener = nullptr;
  std::set<uint64_t> conns;
};

struct ServerConn {
  uint64_t server_id = 0;
  ucp_ep_h ep = nullptr;
};

// Whose endpoint a ucp_ep_h is.
struct EpOwner {
  bool client = false;
  uint64_t conn_id = 0;
};

// One message being sent, shared by its parts (message_parts.h): owns the
// bytes UCX reads until every part's send completed.
struct OutgoingMessage {
  std::string text;
  std::string wire_header;
  std::vector<ConstChunk> chunks;  // owners released when the last part is done
};

// One active message (a part of a message) being sent; owns everything UCX
// reads until the send completes (the header and I/O vector too: UCX 1.13
// reads them until then).
struct SendOp {
  Engine* engine = nullptr;
  AmHeader header;
  std::shared_ptr<const OutgoingMessage> message;
  std::vector<ucp_dt_iov_t> iov;
};

// One message being received (by rendezvous, or copied from an eager one).
struct RecvOp {
  Engine* engine = nullptr;
  AmHeader header;
  ucp_ep_h reply_ep = nullptr;
  uint64_t server_conn_id = 0;  // requests: the connection it came on
  std::shared_ptr<char> data;   // header.text_bytes of text, then (part of) the wire frame
  size_t length = 0;
};

// A whole message: its parts' data in order (one part unless the sender
// split it); part 0 starts with `text_bytes` of text, the rest is the wire
// frame. The header is part 0's.
struct ReceivedMessage {
  AmHeader header;
  ucp_ep_h reply_ep = nullptr;
  uint64_t server_conn_id = 0;
  std::vector<ucx_parts::ReceivedPart> parts;

  std::string text() const { return std::string(parts[0].data.get(), header.text_bytes); }
};

std::shared_ptr<char> Allocate(size_t n) {
  return std::shared_ptr<char>(n == 0 ? nullptr : new char[n], std::default_delete<char[]>());
}

// ---------------------------------------------------------------- engine

// The UCX context and worker of one transport, and the progress thread that
// alone drives them. Everything that touches UCX runs on that thread; the
// public functions marked "any thread" queue work for it.
class Engine : public std::enable_shared_from_this<Engine> {
 public:
  explicit Engine(const TransportOptions& options)
      : max_message_bytes_(options.max_message_bytes),
        callbacks_(std::clamp<int>(static_cast<int>(std::thread::hardware_concurrency()), 4, 16)) {}
  ~Engine() { Stop(); }

  // Starts the progress thread and waits for UCX to come up. Once.
  void Start() {
    thread_ = std::thread([this] { Run(); });
    started_.WaitForNotification();
  }

  // Stops the progress thread, which fails every pending call, closes every
  // endpoint and listener and destroys the worker and context; then runs the
  // queued callbacks. Idempotent; never from a callback or the progress thread.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      stop_requested_ = true;
      if (accepting_tasks_) ucp_worker_signal(worker_);
    }
    if (thread_.joinable()) thread_.join();
    callbacks_.Stop();
  }

  // Why UCX could not be started; OK if it runs. Any thread, after Start.
  const absl::Status& init_status() const { return init_status_; }
  int64_t max_message_bytes() const { return max_message_bytes_; }
  uint64_t NewId() { return next_id_.fetch_add(1) + 1; }

  // Queues `task` for the progress thread and wakes it. Once the engine
  // stopped (or never started) returns false and leaves `task` untouched.
  // Any thread.
  bool Post(Task&& task) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (!accepting_tasks_) return false;
    tasks_.push_back(std::move(task));
    // Under mu_: the progress thread destroys the worker only after it stopped accepting tasks.
    ucp_worker_signal(worker_);
    return true;
  }

  // Runs `task` on a callback thread (on this one once stopped). Any thread.
  void RunCallback(Task task) { callbacks_.Run(std::move(task)); }

  // ---- tasks (progress thread) ----

  void StartCall(uint64_t call_id, std::unique_ptr<PendingCall> call, const std::string& address,
                 const SocketAddress& peer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void CloseClientConn(uint64_t conn_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
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

  // ---- the progress thread ----
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status InitUcx() ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void DestroyUcx() ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
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
  // Sleeps on the worker's event fd until UCX or Post() wakes it, or `wake_at`.
  void WaitForEvents(absl::Time wake_at) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Time NextWake(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void ShutdownAll() ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);

  // ---- sending and receiving ----
  void SendAm(ucp_ep_h ep, AmHeader header, std::string text, OutgoingFrame frame)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  // Sends one part (an active message) of a message SendAm split.
  void SendPart(ucp_ep_h ep, std::unique_ptr<SendOp> op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void SendFinished(std::unique_ptr<SendOp> op, ucs_status_t status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  ucs_status_t ReceiveAm(const void* header, size_t header_length, void* data, size_t length,
                         const ucp_am_recv_param_t* param) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  ucs_status_t ReceiveData(const AmHeader& header, ucp_ep_h reply_ep, void* data, size_t length, bool rndv)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  // Why a message whose AM header is `h` (and data `length` bytes) cannot be
  // taken; empty if it can.
  std::string Malformed(const AmHeader& h, size_t length) const;
  void Received(std::unique_ptr<RecvOp> op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  // A message could not be taken (too large, or PartAssembler::Announce's
  // refusal): a request is answered with it, an answer completes its call
  // with it (INTERNAL where the answer was malformed).
  void RefuseMessage(const AmHeader& h, ucp_ep_h reply_ep, const absl::Status& refusal)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void CloseEndpoint(ucp_ep_h ep, bool force) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  // Forgets an endpoint being closed: its owner, and the parts of messages
  // that came on it.
  void DropEndpoint(ucp_ep_h ep) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_) {
    eps_.erase(ep);
    assembler_.ForgetEndpoint(ep);
  }
  void EndpointFailed(ucp_ep_h ep, ucs_status_t status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);

  // ---- client ----
  void Connect(uint64_t conn_id, ClientConn& conn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void ConnectFailed(ClientConn& conn, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void Connected(ucp_ep_h ep) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void SendRequest(ClientConn& conn, uint64_t call_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void DeliverResponse(ReceivedMessage message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  // Completes the call (if still pending) on a callback thread.
  void Complete(uint64_t call_id, absl::Status status, IncomingFrame frame = {})
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void ExpireCalls(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void RetryConnections(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void ClientEndpointFailed(uint64_t conn_id, ucs_status_t status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);

  // ---- server ----
  void Accept(uint64_t server_id, ucp_conn_request_h request) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void DeliverRequest(ReceivedMessage message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void RejectRequest(ucp_ep_h ep, uint64_t call_id, absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  Responder MakeResponder(std::shared_ptr<ServerState> state, uint64_t conn_id, uint64_t call_id);
  void ServerEndpointFailed(uint64_t conn_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);

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
  // Set by the progress thread while accepting_tasks_ is false; read by
  // Post()/Stop() under mu_ only while it is true.
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
  ucp_context_h context_ ABSL_GUARDED_BY(progress_) = nullptr;
  int event_fd_ ABSL_GUARDED_BY(progress_) = -1;
  std::vector<Task> deferred_ ABSL_GUARDED_BY(progress_);
  // How long the progress thread keeps polling after activity before it
  // sleeps (SpinFromEnvironment).
  const absl::Duration spin_ = SpinFromEnvironment();
  int outstanding_ ABSL_GUARDED_BY(progress_) = 0;                        // UCX requests not completed yet
  std::unordered_map<ucp_ep_h, EpOwner> eps_ ABSL_GUARDED_BY(progress_);  // open endpoints
  ucx_parts::PartAssembler assembler_ ABSL_GUARDED_BY(progress_){max_message_bytes_};
  std::map<uint64_t, std::unique_ptr<PendingCall>> calls_ ABSL_GUARDED_BY(progress_);
  std::multimap<absl::Time, uint64_t> deadlines_ ABSL_GUARDED_BY(progress_);  // may name completed calls
  std::map<uint64_t, ClientConn> client_conns_ ABSL_GUARDED_BY(progress_);
  std::map<uint64_t, ServerRecord> servers_ ABSL_GUARDED_BY(progress_);
  std::map<uint64_t, ServerConn> server_conns_ ABSL_GUARDED_BY(progress_);
};

// ---------------------------------------------------------------- loop

void Engine::Run() {
  progress_.Enter();
  init_status_ = InitUcx();
  if (init_status_.ok()) {
    absl::MutexLock lock(&mu_);
    accepting_tasks_ = true;
  }
  started_.Notify();
  if (!init_status_.ok()) {
    progress_.Leave();
    return;
  }
  absl::Time last_active = absl::InfinitePast();
  // Since when every pass was full, and how many passes and deferred tasks
  // that made (kBusyWarning).
  absl::Time full_since = absl::InfiniteFuture();
  int64_t full_passes = 0, full_deferred = 0;
  for (;;) {
    bool ran = false;
    const bool stop = RunTasks(&ran);
    const Pass pass = Progress();
    const absl::Time now = absl::Now();
    if (ran || pass.active) last_active = now;
    if (!pass.full) {
      full_since = absl::InfiniteFuture();
      full_passes = full_deferred = 0;
    } else {
      if (full_since == absl::InfiniteFuture()) full_since = now;
      ++full_passes;
      full_deferred += pass.deferred;
      if (now - full_since > kBusyWarning && full_deferred < full_passes) {
        LOG_EVERY_T(WARNING, 30) << "ucx: UCX has reported work on every progress call for "
                                 << absl::FormatDuration(now - full_since) << " while completing " << full_deferred
                                 << " messages, sends or errors of ours in " << full_passes * kProgressCallsPerPass
                                 << " calls (a peer that died?); queued work and deadlines are served meanwhile";
      }
    }
    ExpireCalls(now);
    RetryConnections(now);
    if (stop) break;
    // Traffic comes in bursts (a step's pushes, then its pulls): right after
    // activity, keep polling for spin_ instead of paying a sleep and a
    // wake-up (arm, poll, read: several system calls) per message.
    if (now - last_active < spin_) {
      sched_yield();
      continue;
    }
    WaitForEvents(NextWake(now));
  }
  ShutdownAll();
  DestroyUcx();
  progress_.Leave();
}

absl::Status Engine::InitUcx() {
  if (absl::Status hooks = CheckMemoryHooksForSanitizers(); !hooks.ok()) return hooks;
  SetProcessDefaults();
  // Every UCX_* variable of the environment (UCX_TLS, UCX_NET_DEVICES, ...).
  ucp_config_t* config = nullptr;
  ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);
  if (status != UCS_OK) return absl::UnavailableError(absl::StrCat("ucx: ucp_config_read: ", UcsText(status)));
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  params.name = "pstrain";
  status = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (status != UCS_OK) {
    context_ = nullptr;
    return absl::UnavailableError(absl::StrCat("ucx: cannot initialise UCX (ucp_init): ", UcsText(status),
                                               " (check UCX_TLS and UCX_NET_DEVICES)"));
  }
  ucp_worker_params_t worker_params{};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;  // only the progress thread uses it
  ucp_worker_h worker = nullptr;
  status = ucp_worker_create(context_, &worker_params, &worker);
  if (status != UCS_OK) {
    DestroyUcx();
    return absl::UnavailableError(absl::StrCat("ucx: ucp_worker_create: ", UcsText(status)));
  }
  worker_ = worker;
  ucp_worker_attr_t attr{};
  attr.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
  status = ucp_worker_query(worker_, &attr);
  if (status == UCS_OK && attr.max_am_header < sizeof(AmHeader)) {
    DestroyUcx();
    return absl::UnavailableError(absl::StrCat("ucx: the transports allow AM headers of ", attr.max_am_header,
                                               " bytes, pstrain needs ", sizeof(AmHeader)));
  }
  status = ucp_worker_get_efd(worker_, &event_fd_);
  if (status != UCS_OK) {
    DestroyUcx();
    return absl::UnavailableError(absl::StrCat("ucx: ucp_worker_get_efd: ", UcsText(status)));
  }
  ucp_am_handler_param_t handler{};
  handler.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                       UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  handler.id = ucx_wire::kAmId;
  handler.cb = &Engine::OnAm;
  handler.arg = this;
  handler.flags = UCP_AM_FLAG_WHOLE_MSG;
  status = ucp_worker_set_am_recv_handler(worker_, &handler);
  if (status != UCS_OK) {
    DestroyUcx();
    return absl::UnavailableError(absl::StrCat("ucx: ucp_worker_set_am_recv_handler: ", UcsText(status)));
  }
  return absl::OkStatus();
}

void Engine::DestroyUcx() {
  {
    absl::MutexLock lock(&mu_);
    accepting_tasks_ = false;
  }
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  worker_ = nullptr;
  if (context_ != nullptr) ucp_cleanup(context_);
  context_ = nullptr;
}

bool Engine::RunTasks(bool* ran) {
  std::vector<Task> tasks;
  bool stop;
  {
    absl::MutexLock lock(&mu_);
    tasks.swap(tasks_);
    stop = stop_requested_;
    // Tasks posted after this point are refused: the last batch runs now.
    if (stop) accepting_tasks_ = false;
  }
  *ran = !tasks.empty();
  for (Task& task : tasks) task();
  return stop;
}

Engine::Pass Engine::Progress() {
  Pass pass;
  for (int call = 0; call < kProgressCallsPerPass; ++call) {
    const bool busy = ucp_worker_progress(worker_) != 0;
    std::vector<Task> deferred;
    deferred.swap(deferred_);
    pass.deferred += static_cast<int>(deferred.size());
    for (Task& task : deferred) task();
    if (!busy && deferred.empty() && deferred_.empty()) return pass;
    pass.active = true;
    pass.full = busy && call == kProgressCallsPerPass - 1;
  }
  return pass;
}

absl::Time Engine::NextWake(absl::Time now) const {
  absl::Time wake = now + kMaxSleep;
  if (!deadlines_.empty()) wake = std::min(wake, deadlines_.begin()->first);
  for (const auto& [id, conn] : client_conns_) wake = std::min(wake, conn.retry_at);
  return wake;
}

void Engine::WaitForEvents(absl::Time wake_at) {
  if (!deferred_.empty()) return;
  const ucs_status_t armed = ucp_worker_arm(worker_);
  if (armed == UCS_ERR_BUSY) return;  // events arrived meanwhile: progress again
  absl::Duration wait = std::max(wake_at - absl::Now(), absl::ZeroDuration());
  if (armed != UCS_OK) {
    LOG_EVERY_N(ERROR, 1000) << "ucx: ucp_worker_arm: " << UcsText(armed) << "; polling";
    wait = std::min(wait, absl::Milliseconds(1));
  }
  {
    absl::MutexLock lock(&mu_);
    if (!tasks_.empty() || stop_requested_) return;
  }
  // A task posted from here on signals the armed worker, so poll wakes up.
  pollfd fd{event_fd_, POLLIN, 0};
  const int timeout_ms = static_cast<int>(absl::ToInt64Milliseconds(absl::Ceil(wait, absl::Milliseconds(1))));
  if (poll(&fd, 1, timeout_ms) < 0 && errno != EINTR) PLOG(ERROR) << "ucx: poll on the worker's event fd";
}

void Engine::ShutdownAll() {
  for (auto& [id, conn] : client_conns_) {
    if (conn.ep != nullptr) {
      DropEndpoint(conn.ep);
      CloseEndpoint(conn.ep, /*force=*/true);
      conn.ep = nullptr;
    }
  }
  while (!calls_.empty()) Complete(calls_.begin()->first, absl::UnavailableError("ucx: the transport shut down"));
  client_conns_.clear();
  for (auto& [id, server] : servers_) {
    if (server.listener != nullptr) ucp_listener_destroy(server.listener);
    server.listener = nullptr;
  }
  for (auto& [id, conn] : server_conns_) {
    DropEndpoint(conn.ep);
    CloseEndpoint(conn.ep, /*force=*/true);
  }
  server_conns_.clear();
  servers_.clear();
  // Let UCX finish: close requests, and sends and receives they cancel.
  const absl::Time give_up = absl::Now() + kCloseWait;
  Progress();
  while (outstanding_ > 0 && absl::Now() < give_up) {
    Progress();
    if (outstanding_ > 0) absl::SleepFor(absl::Milliseconds(1));
  }
  if (outstanding_ > 0) {
    LOG(WARNING) << "ucx: " << outstanding_ << " UCX operations still pending at shutdown after "
                 << absl::FormatDuration(kCloseWait) << "; destroying the worker anyway";
  }
}

// ---------------------------------------------------------------- callbacks

ucs_status_t Engine::OnAm(void* arg, const void* header, size_t header_length, void* data, size_t length,
                          const ucp_am_recv_param_t* param) {
  auto* engine = static_cast<Engine*>(arg);
  engine->progress_.AssertHeld();
  return engine->ReceiveAm(header, header_length, data, length, param);
}

void Engine::OnSendDone(void* request, ucs_status_t status, void* user_data) {
  std::unique_ptr<SendOp> op(static_cast<SendOp*>(user_data));
  Engine* engine = op->engine;
  engine->progress_.AssertHeld();
  ucp_request_free(request);
  --engine->outstanding_;
  engine->Defer([engine, op = std::move(op), status]() mutable {
    engine->progress_.AssertHeld();
    engine->SendFinished(std::move(op), status);
  });
}

void Engine::OnRecvDone(void* request, ucs_status_t status, size_t length, void* user_data) {
  std::unique_ptr<RecvOp> op(static_cast<RecvOp*>(user_data));
  Engine* engine = op->engine;
  engine->progress_.AssertHeld();
  ucp_request_free(request);
  --engine->outstanding_;
  if (status != UCS_OK) {
    // The sender's endpoint failed or was closed; its error handling covers the call.
    VLOG(1) << "ucx: receiving a message failed: " << UcsText(status);
    return;
  }
  engine->Defer([engine, op = std::move(op)]() mutable {
    engine->progress_.AssertHeld();
    engine->Received(std::move(op));
  });
}

void Engine::OnCloseDone(void* request, ucs_status_t status, void* user_data) {
  auto* engine = static_cast<Engine*>(user_data);
  engine->progress_.AssertHeld();
  ucp_request_free(request);
  --engine->outstanding_;
}

void Engine::OnEpError(void* arg, ucp_ep_h ep, ucs_status_t status) {
  auto* engine = static_cast<Engine*>(arg);
  engine->progress_.AssertHeld();
  engine->Defer([engine, ep, status] {
    engine->progress_.AssertHeld();
    engine->EndpointFailed(ep, status);
  });
}

void Engine::OnConnRequest(ucp_conn_request_h request, void* arg) {
  auto* server = static_cast<ServerRecord*>(arg);
  Engine* engine = server->engine;
  engine->progress_.AssertHeld();
  // Runs right after this ucp_worker_progress call, before any task could
  // destroy the listener.
  engine->Defer([engine, server_id = server->id, request] {
    engine->progress_.AssertHeld();
    engine->Accept(server_id, request);
  });
}

// ---------------------------------------------------------------- send/receive

void Engine::SendAm(ucp_ep_h ep, AmHeader header, std::string text, OutgoingFrame frame) {
  auto message = std::make_shared<OutgoingMessage>();
  header.text_bytes = static_cast<uint32_t>(text.size());
  message->text = std::move(text);
  const bool has_frame = header.kind == static_cast<uint16_t>(Kind::kRequest) ||
                         (header.kind == static_cast<uint16_t>(Kind::kResponse) && header.status_code == 0);
  if (has_frame) message->wire_header = EncodeWireHeader(frame.header);
  message->chunks = std::move(frame.chunks);
  std::vector<ucp_dt_iov_t> pieces;
  auto add = [&pieces](const void* data, size_t size) {
    if (size > 0) pieces.push_back(ucp_dt_iov_t{const_cast<void*>(data), size});
  };
  add(message->text.data(), message->text.size());
  add(message->wire_header.data(), message->wire_header.size());
  for (const ConstChunk& chunk : message->chunks) add(chunk.data, chunk.size);
  std::vector<size_t> sizes;
  for (const ucp_dt_iov_t& piece : pieces) sizes.push_back(piece.length);
  const std::vector<ucx_parts::PartSpan> spans = ucx_parts::SplitIntoParts(sizes);
  header.parts = static_cast<uint32_t>(spans.size());
  for (size_t p = 0; p < spans.size(); ++p) {
    auto op = std::make_unique<SendOp>();
    op->engine = this;
    op->header = header;
    op->header.part = static_cast<uint32_t>(p);
    if (p > 0) op->header.text_bytes = 0;  // the text starts part 0
    op->message = message;
    op->iov.assign(pieces.begin() + spans[p].first, pieces.begin() + spans[p].first + spans[p].count);
    SendPart(ep, std::move(op));
  }
}

void Engine::SendPart(ucp_ep_h ep, std::unique_ptr<SendOp> op) {
  ucp_request_param_t param{};
  param.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_FLAGS;
  param.cb.send = &Engine::OnSendDone;
  param.user_data = op.get();
  param.flags = UCP_AM_SEND_FLAG_REPLY;  // the receiver learns its endpoint to us
  const void* data = nullptr;
  size_t count = 0;
  if (op->iov.size() == 1) {
    // One contiguous buffer: UCX can move it zero-copy by rendezvous.
    param.datatype = ucp_dt_make_contig(1);
    data = op->iov[0].buffer;
    count = op->iov[0].length;
  } else {
    // An I/O vector of the pieces; no data at all (hello) is an empty contiguous buffer.
    param.datatype = op->iov.empty() ? ucp_dt_make_contig(1) : static_cast<ucp_datatype_t>(UCP_DATATYPE_IOV);
    data = op->iov.empty() ? nullptr : op->iov.data();
    count = op->iov.size();
  }
  void* request = ucp_am_send_nbx(ep, ucx_wire::kAmId, &op->header, sizeof(AmHeader), data, count, &param);
  if (request == nullptr) {
    SendFinished(std::move(op), UCS_OK);
  } else if (UCS_PTR_IS_ERR(request)) {
    SendFinished(std::move(op), UCS_PTR_STATUS(request));
  } else {
    op.release();  // owned by UCX until OnSendDone
    ++outstanding_;
  }
}

void Engine::SendFinished(std::unique_ptr<SendOp> op, ucs_status_t status) {
  // A failed send fails its call; the endpoint's error callback usually
  // follows with the same news for the other calls on it.
  if (status != UCS_OK && op->header.kind == static_cast<uint16_t>(Kind::kRequest)) {
    auto it = calls_.find(op->header.call_id);
    if (it != calls_.end()) {
      auto conn = client_conns_.find(it->second->conn_id);
      const std::string address = conn == client_conns_.end() ? std::string("?") : conn->second.address;
      Complete(op->header.call_id, absl::UnavailableError(absl::StrCat("ucx: sending ", op->message->text, " to ",
                                                                       address, " failed: ", UcsText(status))));
    }
  } else if (status != UCS_OK) {
    VLOG(1) << "ucx: sending a message of kind " << op->header.kind << " failed: " << UcsText(status);
  }
  // `op` (and with it the chunk owners) is released here.
}

std::string Engine::Malformed(const AmHeader& h, size_t length) const {
  if (h.version != ucx_wire::kVersion)
    return absl::StrCat("protocol version ", h.version, ", expected ", ucx_wire::kVersion);
  if (h.kind < static_cast<uint16_t>(Kind::kHello) || h.kind > static_cast<uint16_t>(Kind::kResponse)) {
    return absl::StrCat("unknown message kind ", h.kind);
  }
  if (h.text_bytes > length) return absl::StrCat("text of ", h.text_bytes, " bytes in ", length, " bytes of data");
  if (h.parts == 0 || h.part >= h.parts) return absl::StrCat("part ", h.part, " of a message of ", h.parts, " parts");
  if (h.part > 0 && h.text_bytes > 0) return absl::StrCat("text in part ", h.part, " (only part 0 has text)");
  if (h.kind == static_cast<uint16_t>(Kind::kRequest) && (h.call_id == 0 || (h.part == 0 && h.text_bytes == 0))) {
    return "request without a method or call id";
  }
  return "";
}

ucs_status_t Engine::ReceiveAm(const void* header, size_t header_length, void* data, size_t length,
                               const ucp_am_recv_param_t* param) {
  const bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
  ucp_ep_h reply_ep = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) != 0 ? param->reply_ep : nullptr;
  AmHeader h;
  if (header_length != sizeof(AmHeader) || header == nullptr) {
    LOG_EVERY_N(WARNING, 100) << "ucx: dropped a message with an AM header of " << header_length << " bytes (expected "
                              << sizeof(AmHeader) << ")";
    return UCS_OK;  // a rendezvous descriptor is dropped with it
  }
  std::memcpy(&h, header, sizeof(h));
  if (h.magic != ucx_wire::kMagic) {
    LOG_EVERY_N(WARNING, 100) << "ucx: dropped a message that is not pstrain's (magic 0x" << std::hex << h.magic << ")";
    return UCS_OK;
  }
  if (reply_ep == nullptr) {
    LOG_EVERY_N(WARNING, 100) << "ucx: dropped a message sent without a reply endpoint";
    return UCS_OK;
  }
  if (std::string why = Malformed(h, length); !why.empty()) {
    LOG_EVERY_N(WARNING, 100) << "ucx: malformed message: " << why;
    if (h.kind == static_cast<uint16_t>(Kind::kRequest) && h.call_id != 0) {
      Defer([this, reply_ep, call_id = h.call_id, why] {
        progress_.AssertHeld();
        RejectRequest(reply_ep, call_id, absl::InvalidArgumentError(absl::StrCat("ucx: malformed request: ", why)));
      });
    }
    return UCS_OK;
  }
  switch (static_cast<Kind>(h.kind)) {
    case Kind::kHello:
      Defer([this, reply_ep] {
        progress_.AssertHeld();
        if (eps_.count(reply_ep) == 0) return;  // closed meanwhile
        AmHeader ack;
        ack.kind = static_cast<uint16_t>(Kind::kHelloAck);
        SendAm(reply_ep, ack, "", {});
      });
      return UCS_OK;
    case Kind::kHelloAck:
      Defer([this, reply_ep] {
        progress_.AssertHeld();
        Connected(reply_ep);
      });
      return UCS_OK;
    case Kind::kRequest:
    case Kind::kResponse:
      return ReceiveData(h, reply_ep, data, length, rndv);
  }
  return UCS_OK;
}

ucs_status_t Engine::ReceiveData(const AmHeader& h, ucp_ep_h reply_ep, void* data, size_t length, bool rndv) {
  const bool request = h.kind == static_cast<uint16_t>(Kind::kRequest);
  const ucx_parts::MessageKey key{reply_ep, h.kind, h.call_id};
  if (!request && calls_.count(h.call_id) == 0) {
    if (h.parts > 1) assembler_.Forget(key);  // parts that arrived before it completed
    return UCS_OK;                            // late answer: its call completed
  }
  uint64_t server_conn_id = 0;
  if (request) {
    auto owner = eps_.find(reply_ep);
    if (owner == eps_.end() || owner->second.client) {
      LOG_EVERY_N(WARNING, 100) << "ucx: dropped a request that came on no open server connection";
      return UCS_OK;
    }
    server_conn_id = owner->second.conn_id;
  }
  if (h.parts > 1) {
    bool quiet = false;
    if (absl::Status refusal = assembler_.Announce(key, h.part, h.parts, length, &quiet); !refusal.ok()) {
      if (!quiet) {
        Defer([this, h, reply_ep, refusal] {
          progress_.AssertHeld();
          RefuseMessage(h, reply_ep, refusal);
        });
      }
      return UCS_OK;  // a rendezvous descriptor is dropped with it
    }
  } else if (static_cast<int64_t>(length) > max_message_bytes_) {
    absl::Status too_big = absl::ResourceExhaustedError(absl::StrCat(
        "ucx: received a message of ", length, " bytes, larger than max_message_bytes ", max_message_bytes_));
    Defer([this, h, reply_ep, too_big] {
      progress_.AssertHeld();
      RefuseMessage(h, reply_ep, too_big);
    });
    return UCS_OK;
  }
  auto op = std::make_unique<RecvOp>();
  op->engine = this;
  op->header = h;
  op->reply_ep = reply_ep;
  op->server_conn_id = server_conn_id;
  op->length = length;
  op->data = Allocate(length);
  if (!rndv) {
    // Eager: the bytes are UCX's until we return; keep a copy.
    if (length > 0) std::memcpy(op->data.get(), data, length);
    Defer([this, op = std::move(op)]() mutable {
      progress_.AssertHeld();
      Received(std::move(op));
    });
    return UCS_OK;
  }
  // Rendezvous: pull the data into our buffer.
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.recv_am = &Engine::OnRecvDone;
  param.user_data = op.get();
  void* buffer = op->data.get();
  void* request_handle = ucp_am_recv_data_nbx(worker_, data, buffer, length, &param);
  if (request_handle == nullptr) {
    Defer([this, op = std::move(op)]() mutable {
      progress_.AssertHeld();
      Received(std::move(op));
    });
  } else if (UCS_PTR_IS_ERR(request_handle)) {
    const std::string why = absl::StrCat("ucx: receiving a message failed: ", UcsText(UCS_PTR_STATUS(request_handle)));
    LOG(WARNING) << why;
    if (!request) {
      Defer([this, call_id = h.call_id, why] {
        progress_.AssertHeld();
        Complete(call_id, absl::UnavailableError(why));
      });
    }
  } else {
    op.release();  // owned by UCX until OnRecvDone
    ++outstanding_;
  }
  return UCS_INPROGRESS;  // UCX owns the descriptor now
}

void Engine::Received(std::unique_ptr<RecvOp> op) {
  ReceivedMessage message;
  message.header = op->header;
  message.reply_ep = op->reply_ep;
  message.server_conn_id = op->server_conn_id;
  ucx_parts::ReceivedPart part{std::move(op->data), op->length, op->header.text_bytes};
  if (op->header.parts > 1) {
    const ucx_parts::MessageKey key{op->reply_ep, op->header.kind, op->header.call_id};
    message.parts = assembler_.Complete(key, op->header.part, std::move(part));
    if (message.parts.empty()) return;                        // more to come, or refused meanwhile
    message.header.text_bytes = message.parts[0].text_bytes;  // the text starts part 0
  } else {
    message.parts.push_back(std::move(part));
  }
  if (message.header.kind == static_cast<uint16_t>(Kind::kRequest)) {
    DeliverRequest(std::move(message));
  } else {
    DeliverResponse(std::move(message));
  }
}

void Engine::RefuseMessage(const AmHeader& h, ucp_ep_h reply_ep, const absl::Status& refusal) {
  const bool request = h.kind == static_cast<uint16_t>(Kind::kRequest);
  absl::Status status = refusal;
  if (refusal.code() == absl::StatusCode::kInvalidArgument) {
    LOG_EVERY_N(WARNING, 100) << "ucx: malformed message: " << refusal.message();
    status = request ? absl::InvalidArgumentError(absl::StrCat("ucx: malformed request: ", refusal.message()))
                     : absl::InternalError(absl::StrCat("ucx: malformed answer: ", refusal.message()));
  }
  if (request) {
    RejectRequest(reply_ep, h.call_id, status);
  } else {
    Complete(h.call_id, status);
  }
}

// The wire frame that follows the text in `message`'s parts.
absl::StatusOr<IncomingFrame> FrameOf(const ReceivedMessage& message) {
  std::vector<IncomingFrame::Piece> pieces;
  for (size_t p = 0; p < message.parts.size(); ++p) {
    const ucx_parts::ReceivedPart& part = message.parts[p];
    const size_t skip = p == 0 ? message.header.text_bytes : 0;
    if (part.length > skip) pieces.push_back({part.data.get() + skip, part.length - skip});
  }
  auto keepalive = std::make_shared<std::vector<ucx_parts::ReceivedPart>>(message.parts);
  return IncomingFrame::FromWire(std::move(pieces), std::move(keepalive));
}

void Engine::CloseEndpoint(ucp_ep_h ep, bool force) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;  // 0: flush what is in flight first
  param.cb.send = &Engine::OnCloseDone;
  param.user_data = this;
  void* request = ucp_ep_close_nbx(ep, &param);
  if (request == nullptr) return;
  if (UCS_PTR_IS_ERR(request)) {
    VLOG(1) << "ucx: closing an endpoint: " << UcsText(UCS_PTR_STATUS(request));
    return;
  }
  ++outstanding_;
}

void Engine::EndpointFailed(ucp_ep_h ep, ucs_status_t status) {
  auto it = eps_.find(ep);
  if (it == eps_.end()) return;  // closed by us meanwhile
  const EpOwner owner = it->second;
  DropEndpoint(ep);
  CloseEndpoint(ep, /*force=*/true);
  if (owner.client) {
    ClientEndpointFailed(owner.conn_id, status);
  } else {
    ServerEndpointFailed(owner.conn_id);
  }
}

// ---------------------------------------------------------------- client

void Engine::StartCall(uint64_t call_id, std::unique_ptr<PendingCall> call, const std::string& address,
                       const SocketAddress& peer) {
  if (call->deadline <= absl::Now()) {
    const std::string message = absl::StrCat("ucx: ", call->method, " to ", address, " not started: its deadline ",
                                             absl::FormatTime(call->deadline), " had passed");
    RunCallback([completion = std::move(call->completion), message]() mutable {
      completion.Run(absl::DeadlineExceededError(message), {});
    });
    return;
  }
  auto [conn_it, created] = client_conns_.try_emplace(call->conn_id);
  ClientConn& conn = conn_it->second;
  if (created) {
    conn.address = address;
    conn.peer = peer;
  }
  const bool wait_for_ready = call->wait_for_ready;
  if (call->deadline != absl::InfiniteFuture()) deadlines_.emplace(call->deadline, call_id);
  calls_.emplace(call_id, std::move(call));
  switch (conn.state) {
    case ClientConn::State::kReady:
      SendRequest(conn, call_id);
      return;
    case ClientConn::State::kConnecting:
      conn.waiting.insert(call_id);
      return;
    case ClientConn::State::kIdle:
      if (conn.retry_at != absl::InfiniteFuture()) {
        // Backing off after a failed attempt: only wait_for_ready calls wait.
        if (!wait_for_ready) {
          Complete(call_id, absl::UnavailableError(conn.last_error));
          return;
        }
        conn.waiting.insert(call_id);
        return;
      }
      conn.waiting.insert(call_id);
      Connect(conn_it->first, conn);
      return;
  }
}

void Engine::Connect(uint64_t conn_id, ClientConn& conn) {
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  params.sockaddr.addr = conn.peer.get();
  params.sockaddr.addrlen = conn.peer.length;
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &Engine::OnEpError;
  params.err_handler.arg = this;
  ucp_ep_h ep = nullptr;
  const ucs_status_t status = ucp_ep_create(worker_, &params, &ep);
  if (status != UCS_OK) {
    ConnectFailed(conn, absl::StrCat("ucx: cannot reach ", conn.address, ": ", UcsText(status)));
    return;
  }
  conn.ep = ep;
  conn.state = ClientConn::State::kConnecting;
  eps_[ep] = EpOwner{/*client=*/true, conn_id};
  AmHeader hello;
  hello.kind = static_cast<uint16_t>(Kind::kHello);
  SendAm(ep, hello, "", {});
}

void Engine::ConnectFailed(ClientConn& conn, const std::string& why) {
  conn.ep = nullptr;
  conn.state = ClientConn::State::kIdle;
  conn.last_error = why;
  const std::vector<uint64_t> waiting(conn.waiting.begin(), conn.waiting.end());
  for (uint64_t id : waiting) {
    auto it = calls_.find(id);
    if (it != calls_.end() && !it->second->wait_for_ready) Complete(id, absl::UnavailableError(why));
  }
  if (conn.waiting.empty()) {
    conn.retry_at = absl::InfiniteFuture();  // the next call tries again at once
    conn.backoff = kFirstBackoff;
    return;
  }
  conn.retry_at = absl::Now() + conn.backoff;
  conn.backoff = std::min(conn.backoff * 2, kMaxBackoff);
}

void Engine::Connected(ucp_ep_h ep) {
  auto owner = eps_.find(ep);
  if (owner == eps_.end() || !owner->second.client) return;
  ClientConn& conn = client_conns_.at(owner->second.conn_id);
  if (conn.state != ClientConn::State::kConnecting) return;
  conn.state = ClientConn::State::kReady;
  conn.backoff = kFirstBackoff;
  conn.last_error.clear();
  const std::set<uint64_t> waiting = std::move(conn.waiting);
  conn.waiting.clear();
  for (uint64_t id : waiting) SendRequest(conn, id);
}

void Engine::SendRequest(ClientConn& conn, uint64_t call_id) {
  auto it = calls_.find(call_id);
  if (it == calls_.end()) return;  // completed meanwhile
  PendingCall& call = *it->second;
  conn.sent.insert(call_id);
  AmHeader header;
  header.kind = static_cast<uint16_t>(Kind::kRequest);
  header.call_id = call_id;
  SendAm(conn.ep, header, call.method, std::move(call.request));
}

void Engine::DeliverResponse(ReceivedMessage message) {
  const uint64_t call_id = message.header.call_id;
  auto it = calls_.find(call_id);
  if (it == calls_.end()) return;  // completed meanwhile (deadline)
  const ClientConn& conn = client_conns_.at(it->second->conn_id);
  if (conn.ep != message.reply_ep) {
    LOG_EVERY_N(WARNING, 100) << "ucx: dropped an answer to call " << call_id << " that came from another endpoint";
    return;
  }
  const int code = message.header.status_code;
  if (code != 0) {
    const bool known = code > 0 && code <= static_cast<int>(absl::StatusCode::kUnauthenticated);
    Complete(call_id,
             absl::Status(known ? static_cast<absl::StatusCode>(code) : absl::StatusCode::kUnknown, message.text()));
    return;
  }
  absl::StatusOr<IncomingFrame> frame = FrameOf(message);
  if (!frame.ok()) {
    Complete(call_id, absl::InternalError(
                          absl::StrCat("ucx: malformed answer from ", conn.address, ": ", frame.status().message())));
    return;
  }
  Complete(call_id, absl::OkStatus(), *std::move(frame));
}

void Engine::Complete(uint64_t call_id, absl::Status status, IncomingFrame frame) {
  auto node = calls_.extract(call_id);
  if (node.empty()) return;
  std::unique_ptr<PendingCall> call = std::move(node.mapped());
  if (auto conn = client_conns_.find(call->conn_id); conn != client_conns_.end()) {
    conn->second.waiting.erase(call_id);
    conn->second.sent.erase(call_id);
  }
  RunCallback([completion = std::move(call->completion), status = std::move(status),
               frame = std::move(frame)]() mutable { completion.Run(std::move(status), std::move(frame)); });
  // An unsent request (and its chunk owners) is released here.
}

void Engine::ExpireCalls(absl::Time now) {
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    const uint64_t call_id = deadlines_.begin()->second;
    deadlines_.erase(deadlines_.begin());
    auto it = calls_.find(call_id);
    if (it == calls_.end()) continue;
    const PendingCall& call = *it->second;
    const ClientConn& conn = client_conns_.at(call.conn_id);
    std::string message = absl::StrCat("ucx: ", call.method, " to ", conn.address, " exceeded its deadline ",
                                       absl::FormatTime(call.deadline), " (",
                                       absl::FormatDuration(call.deadline - call.started), " after it started)");
    if (conn.state != ClientConn::State::kReady) {
      absl::StrAppend(&message, "; not connected",
                      conn.last_error.empty() ? "" : absl::StrCat(" (last attempt: ", conn.last_error, ")"));
    }
    Complete(call_id, absl::DeadlineExceededError(message));
  }
}

void Engine::RetryConnections(absl::Time now) {
  for (auto& [id, conn] : client_conns_) {
    if (conn.state != ClientConn::State::kIdle || conn.retry_at > now) continue;
    conn.retry_at = absl::InfiniteFuture();
    if (!conn.waiting.empty()) Connect(id, conn);
  }
}

void Engine::ClientEndpointFailed(uint64_t conn_id, ucs_status_t status) {
  auto it = client_conns_.find(conn_id);
  if (it == client_conns_.end()) return;
  ClientConn& conn = it->second;
  if (conn.state == ClientConn::State::kConnecting) {
    ConnectFailed(conn, absl::StrCat("ucx: cannot reach ", conn.address, ": ", UcsText(status)));
    return;
  }
  const std::string why = absl::StrCat("ucx: connection to ", conn.address, " lost: ", UcsText(status));
  conn.ep = nullptr;
  conn.state = ClientConn::State::kIdle;  // the next call reconnects
  const std::vector<uint64_t> sent(conn.sent.begin(), conn.sent.end());
  for (uint64_t id : sent) Complete(id, absl::UnavailableError(why));
}

void Engine::CloseClientConn(uint64_t conn_id) {
  auto it = client_conns_.find(conn_id);
  if (it == client_conns_.end()) return;
  ClientConn& conn = it->second;
  std::vector<uint64_t> calls(conn.waiting.begin(), conn.waiting.end());
  calls.insert(calls.end(), conn.sent.begin(), conn.sent.end());
  for (uint64_t id : calls) {
    Complete(id, absl::CancelledError(absl::StrCat("ucx: the channel to ", conn.address, " was destroyed")));
  }
  if (conn.ep != nullptr) {
    DropEndpoint(conn.ep);
    CloseEndpoint(conn.ep, /*force=*/false);
  }
  client_conns_.erase(it);
}

// ---------------------------------------------------------------- server

absl::StatusOr<int> Engine::Listen(uint64_t server_id, std::shared_ptr<ServerState> state,
                                   const SocketAddress& address) {
  ServerRecord& server = servers_[server_id];
  server.engine = this;
  server.id = server_id;
  server.state = std::move(state);
  ucp_listener_params_t params{};
  params.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  params.sockaddr.addr = address.get();
  params.sockaddr.addrlen = address.length;
  params.conn_handler.cb = &Engine::OnConnRequest;
  params.conn_handler.arg = &server;  // std::map: stable until RemoveServer, after the listener is gone
  ucs_status_t status = ucp_listener_create(worker_, &params, &server.listener);
  if (status != UCS_OK) {
    const std::string address_text = server.state->address;
    servers_.erase(server_id);
    return absl::UnavailableError(absl::StrCat("ucx: cannot listen on ", address_text, ": ", UcsText(status)));
  }
  ucp_listener_attr_t attr{};
  attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  status = ucp_listener_query(server.listener, &attr);
  if (status != UCS_OK) {
    ucp_listener_destroy(server.listener);
    servers_.erase(server_id);
    return absl::UnavailableError(absl::StrCat("ucx: ucp_listener_query: ", UcsText(status)));
  }
  return PortOf(attr.sockaddr);
}

void Engine::Accept(uint64_t server_id, ucp_conn_request_h request) {
  auto it = servers_.find(server_id);
  if (it == servers_.end() || it->second.listener == nullptr) {
    LOG(WARNING) << "ucx: a connection request arrived for a server that is gone";
    return;
  }
  ServerRecord& server = it->second;
  bool accepting;
  {
    absl::MutexLock lock(&server.state->mu);
    accepting = server.state->accepting;
  }
  if (!accepting) {
    ucp_listener_reject(server.listener, request);
    return;
  }
  ucp_ep_params_t params{};
  params.field_mask =
      UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  params.conn_request = request;
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &Engine::OnEpError;
  params.err_handler.arg = this;
  ucp_ep_h ep = nullptr;
  const ucs_status_t status = ucp_ep_create(worker_, &params, &ep);
  if (status != UCS_OK) {
    LOG(WARNING) << "ucx: cannot accept a connection on " << server.state->address << ": " << UcsText(status);
    return;
  }
  const uint64_t conn_id = NewId();
  server_conns_[conn_id] = ServerConn{server_id, ep};
  server.conns.insert(conn_id);
  eps_[ep] = EpOwner{/*client=*/false, conn_id};
}

void Engine::RejectRequest(ucp_ep_h ep, uint64_t call_id, absl::Status status) {
  if (eps_.count(ep) == 0) return;  // closed meanwhile
  AmHeader header;
  header.kind = static_cast<uint16_t>(Kind::kResponse);
  header.call_id = call_id;
  header.status_code = static_cast<int32_t>(status.code());
  SendAm(ep, header, std::string(status.message()), {});
}

void Engine::DeliverRequest(ReceivedMessage message) {
  const uint64_t conn_id = message.server_conn_id;
  auto conn = server_conns_.find(conn_id);
  if (conn == server_conns_.end()) return;  // the client went away meanwhile
  std::shared_ptr<ServerState> state = servers_.at(conn->second.server_id).state;
  const uint64_t call_id = message.header.call_id;
  std::string method = message.text();
  absl::StatusOr<IncomingFrame> frame = FrameOf(message);
  if (!frame.ok()) {
    RejectRequest(message.reply_ep, call_id,
                  absl::InvalidArgumentError(absl::StrCat("ucx: malformed request for ", method, " on ", state->address,
                                                          ": ", frame.status().message())));
    return;
  }
  bool accepting;
  {
    absl::MutexLock lock(&state->mu);
    accepting = state->accepting;
    if (accepting) ++state->unanswered;
  }
  if (!accepting) {
    RejectRequest(message.reply_ep, call_id,
                  absl::UnavailableError(absl::StrCat("ucx: the server at ", state->address, " is shutting down")));
    return;
  }
  Responder respond = MakeResponder(state, conn_id, call_id);
  RunCallback([state, method = std::move(method), frame = *std::move(frame), respond = std::move(respond)]() mutable {
    {
      absl::MutexLock lock(&state->mu);
      if (state->closed) return;  // Shutdown gave up on it; dropping `respond` answers
      ++state->in_handle;
    }
    state->handler->Handle(method, std::move(frame), std::move(respond));
    absl::MutexLock lock(&state->mu);
    --state->in_handle;
    state->changed.SignalAll();
  });
}

// What a Responder shares between its copies. Answers exactly once: the
// first call wins; if every copy is dropped unanswered, the destructor
// answers INTERNAL so the client is not left waiting for its deadline.
struct ResponderState {
  std::weak_ptr<Engine> engine;
  std::shared_ptr<ServerState> server;
  uint64_t conn_id = 0;
  uint64_t call_id = 0;
  std::atomic<bool> answered{false};

  void Answer(absl::Status status, OutgoingFrame response) {
    if (answered.exchange(true)) {
      LOG(DFATAL) << "ucx: a request on " << server->address << " was answered twice";
      return;
    }
    // Queue the answer before counting it answered, so that Shutdown, which
    // closes the connections once nothing is unanswered, queues its close
    // after this send.
    if (std::shared_ptr<Engine> e = engine.lock()) {
      e->Post([e = e.get(), conn_id = conn_id, call_id = call_id, status = std::move(status),
               response = std::move(response)]() mutable {
        e->progress().AssertHeld();
        e->SendResponse(conn_id, call_id, std::move(status), std::move(response));
      });
    }
    absl::MutexLock lock(&server->mu);
    --server->unanswered;
    server->changed.SignalAll();
  }

  ~ResponderState() {
    if (!answered.load()) Answer(absl::InternalError("ucx: the server dropped the request without answering"), {});
  }
};

Responder Engine::MakeResponder(std::shared_ptr<ServerState> state, uint64_t conn_id, uint64_t call_id) {
  auto shared = std::make_shared<ResponderState>();
  shared->engine = weak_from_this();
  shared->server = std::move(state);
  shared->conn_id = conn_id;
  shared->call_id = call_id;
  return
      [shared](absl::Status status, OutgoingFrame response) { shared->Answer(std::move(status), std::move(response)); };
}

void Engine::SendResponse(uint64_t conn_id, uint64_t call_id, absl::Status status, OutgoingFrame frame) {
  auto it = server_conns_.find(conn_id);
  if (it == server_conns_.end()) return;  // the client went away: drop the answer
  if (status.ok()) {
    const size_t bytes = EncodeWireHeader(frame.header).size() + frame.payload_bytes();
    if (static_cast<int64_t>(bytes) > max_message_bytes_) {
      status = absl::ResourceExhaustedError(
          absl::StrCat("ucx: answer of ", bytes, " bytes exceeds max_message_bytes ", max_message_bytes_));
    }
  }
  AmHeader header;
  header.kind = static_cast<uint16_t>(Kind::kResponse);
  header.call_id = call_id;
  header.status_code = static_cast<int32_t>(status.code());
  if (!status.ok()) frame = OutgoingFrame();  // an error carries no frame (as with gRPC)
  SendAm(it->second.ep, header, std::string(status.message()), std::move(frame));
}

void Engine::ServerEndpointFailed(uint64_t conn_id) {
  auto it = server_conns_.find(conn_id);
  if (it == server_conns_.end()) return;
  if (auto server = servers_.find(it->second.server_id); server != servers_.end()) {
    server->second.conns.erase(conn_id);
  }
  server_conns_.erase(it);
}

void Engine::StopListening(uint64_t server_id) {
  auto it = servers_.find(server_id);
  if (it == servers_.end() || it->second.listener == nullptr) return;
  ucp_listener_destroy(it->second.listener);
  it->second.listener = nullptr;
}

void Engine::CloseServerConns(uint64_t server_id) {
  auto it = servers_.find(server_id);
  if (it == servers_.end()) return;
  for (uint64_t conn_id : it->second.conns) {
    auto conn = server_conns_.find(conn_id);
    if (conn == server_conns_.end()) continue;
    DropEndpoint(conn->second.ep);
    CloseEndpoint(conn->second.ep, /*force=*/false);  // answers already queued go out first
    server_conns_.erase(conn);
  }
  it->second.conns.clear();
}

void Engine::RemoveServer(uint64_t server_id) {
  StopListening(server_id);
  CloseServerConns(server_id);
  servers_.erase(server_id);
}

// ---------------------------------------------------------------- API objects

// Runs `fn` (which starts with engine.progress().AssertHeld()) on the
// progress thread and waits for it. False if the engine is stopped. A task
// once posted always runs, even when Stop() follows, so `fn` may refer to
// the caller's locals.
template <typename Fn>
bool RunOnProgressThread(Engine& engine, Fn fn) {
  absl::Notification done;
  Task task = [&fn, &done] {
    fn();
    done.Notify();
  };
  if (!engine.Post(std::move(task))) return false;
  done.WaitForNotification();
  return true;
}

class UcxChannel : public Channel {
 public:
  UcxChannel(std::shared_ptr<Engine> engine, std::string address, HostPort host_port)
      : engine_(std::move(engine)),
        address_(std::move(address)),
        host_port_(std::move(host_port)),
        conn_id_(engine_->NewId()) {}

  ~UcxChannel() override {
    Engine* engine = engine_.get();
    engine_->Post([engine, conn_id = conn_id_] {
      engine->progress().AssertHeld();
      engine->CloseClientConn(conn_id);
    });
  }

  void Call(std::string_view method, OutgoingFrame request, const CallOptions& options,
            ResponseCallback done) override {
    auto call = std::make_unique<PendingCall>(std::move(done));
    call->conn_id = conn_id_;
    call->method = std::string(method);
    call->started = absl::Now();
    call->deadline = options.deadline;
    call->wait_for_ready = options.wait_for_ready;
    const size_t bytes = method.size() + EncodeWireHeader(request.header).size() + request.payload_bytes();
    if (static_cast<int64_t>(bytes) > engine_->max_message_bytes()) {
      absl::Status too_big =
          absl::ResourceExhaustedError(absl::StrCat("ucx: request ", call->method, " of ", bytes,
                                                    " bytes exceeds max_message_bytes ", engine_->max_message_bytes()));
      Fail(std::move(call), std::move(too_big));
      return;
    }
    call->request = std::move(request);
    absl::StatusOr<SocketAddress> peer = Peer();
    if (!peer.ok()) {
      Fail(std::move(call), peer.status());
      return;
    }
    Engine* engine = engine_.get();
    const uint64_t call_id = engine_->NewId();
    Task task = [engine, call_id, call = std::move(call), address = address_, peer = *peer]() mutable {
      engine->progress().AssertHeld();
      engine->StartCall(call_id, std::move(call), address, peer);
    };
    if (!engine_->Post(std::move(task))) {
      // The transport is gone: `task` is destroyed on return, and with it the
      // call, which completes (UNAVAILABLE) on this thread.
    }
  }

 private:
  void Fail(std::unique_ptr<PendingCall> call, absl::Status status) {
    engine_->RunCallback([completion = std::move(call->completion), status = std::move(status)]() mutable {
      completion.Run(std::move(status), {});
    });
  }

  // The server's socket address, resolved on the first call that needs it.
  absl::StatusOr<SocketAddress> Peer() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (peer_.has_value()) return *peer_;
    }
    absl::StatusOr<SocketAddress> resolved = Resolve(host_port_, /*passive=*/false);
    if (!resolved.ok()) {
      return absl::UnavailableError(absl::StrCat("ucx: cannot reach ", address_, ": ", resolved.status().message()));
    }
    absl::MutexLock lock(&mu_);
    peer_ = *resolved;
    return *resolved;
  }

  const std::shared_ptr<Engine> engine_;
  const std::string address_;
  const HostPort host_port_;
  const uint64_t conn_id_;
  absl::Mutex mu_;
  std::optional<SocketAddress> peer_ ABSL_GUARDED_BY(mu_);
};

class UcxServer : public Server {
 public:
  UcxServer(std::shared_ptr<Engine> engine, uint64_t id, std::shared_ptr<ServerState> state, int port)
      : engine_(std::move(engine)), id_(id), state_(std::move(state)), port_(port) {}

  ~UcxServer() override {
    Shutdown(absl::ZeroDuration());
    Engine* engine = engine_.get();
    engine_->Post([engine, id = id_] {
      engine->progress().AssertHeld();
      engine->RemoveServer(id);
    });
  }

  int port() const override { return port_; }

  // Stops accepting (listener closed; requests on open connections are
  // answered UNAVAILABLE), waits up to `grace` for every accepted request to
  // be answered and for handlers to return, then closes the connections
  // (answers already queued are flushed first). Not from inside Handle().
  void Shutdown(absl::Duration grace) override ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (shut_down_) return;
      shut_down_ = true;
    }
    const absl::Time deadline = absl::Now() + grace;
    Engine* engine = engine_.get();
    RunOnProgressThread(*engine_, [engine, id = id_] {
      engine->progress().AssertHeld();
      engine->StopListening(id);
    });
    {
      absl::MutexLock lock(&state_->mu);
      state_->accepting = false;
      while (state_->unanswered > 0) {
        if (state_->changed.WaitWithDeadline(&state_->mu, deadline)) break;
      }
      // From here the handler is not called again; wait for calls in it to
      // return (they must not block for long).
      state_->closed = true;
      const absl::Time handlers_deadline = std::max(deadline, absl::Now()) + absl::Seconds(10);
      while (state_->in_handle > 0) {
        if (state_->changed.WaitWithDeadline(&state_->mu, handlers_deadline)) {
          LOG(ERROR) << "ucx: Shutdown of " << state_->address << ": a handler is still running after 10 s";
          break;
        }
      }
    }
    RunOnProgressThread(*engine_, [engine, id = id_] {
      engine->progress().AssertHeld();
      engine->CloseServerConns(id);
    });
  }

 private:
  const std::shared_ptr<Engine> engine_;
  const uint64_t id_;
  const std::shared_ptr<ServerState> state_;
  const int port_;
  absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

class UcxTransport : public Transport {
 public:
  explicit UcxTransport(const TransportOptions& options) : engine_(std::make_shared<Engine>(options)) {
    engine_->Start();
    if (!engine_->init_status().ok()) LOG(WARNING) << engine_->init_status();
  }
  ~UcxTransport() override { engine_->Stop(); }

  absl::StatusOr<std::unique_ptr<Channel>> Connect(const std::string& address) override {
    if (!engine_->init_status().ok()) return engine_->init_status();
    absl::StatusOr<HostPort> parsed = ParseAddress(address, /*allow_port_zero=*/false);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("ucx: bad address '", address, "': ", parsed.status().message()));
    }
    return std::unique_ptr<Channel>(new UcxChannel(engine_, address, *std::move(parsed)));
  }

  absl::StatusOr<std::unique_ptr<Server>> Serve(const std::string& address, Handler* handler) override {
    if (!engine_->init_status().ok()) return engine_->init_status();
    absl::StatusOr<HostPort> parsed = ParseAddress(address, /*allow_port_zero=*/true);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ucx: bad listen address '", address, "': ", parsed.status().message()));
    }
    absl::StatusOr<SocketAddress> resolved = Resolve(*parsed, /*passive=*/true);
    if (!resolved.ok()) return resolved.status();
    auto state = std::make_shared<ServerState>(handler, address);
    const uint64_t id = engine_->NewId();
    absl::StatusOr<int> port = absl::UnavailableError("ucx: the transport shut down");
    Engine* engine = engine_.get();
    RunOnProgressThread(*engine_, [engine, id, state, &resolved, &port] {
      engine->progress().AssertHeld();
      port = engine->Listen(id, state, *resolved);
    });
    if (!port.ok()) return port.status();
    return std::unique_ptr<Server>(new UcxServer(engine_, id, std::move(state), *port));
  }

 private:
  std::shared_ptr<Engine> engine_;
};

const bool kRegistered =
    RegisterTransport("ucx", [](const TransportOptions& options) { return CreateUcxTransport(options); });

}  // namespace

std::unique_ptr<Transport> CreateUcxTransport(const TransportOptions& options) {
  return std::make_unique<UcxTransport>(options);
}

}  // namespace pstrain
