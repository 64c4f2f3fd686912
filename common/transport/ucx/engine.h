// The engine of one UcxTransport: the progress thread that alone drives UCX,
// the task queue through which other threads reach it, and the endpoints
// that are open. It owns one object per concept, each in its own file and
// each touched on the progress thread only:
//   workers.h           the UCP contexts and workers (local, network)
//   active_messages.h   sending and receiving messages (the wire side)
//   client.h            calls and the client's connections (ClientCalls)
//   server.h            listeners, accepted connections, responders (Servers)
// Internal to the ucx transport: UcxTransport, UcxChannel and UcxServer
// (ucx_transport.cc) are its public face.
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
#include <memory>
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
#include "common/transport/ucx/workers.h"

namespace pstrain::ucx {

using Task = absl::AnyInvocable<void()>;

// Whose endpoint a ucp_ep_h is.
struct EpOwner {
  bool client = false;
  uint64_t conn_id = 0;
};

class Engine : public std::enable_shared_from_this<Engine> {
 public:
  explicit Engine(const TransportOptions& options);
  ~Engine() { Stop(); }

  // Starts the progress thread and waits for UCX to come up. Once.
  void Start();

  // Stops the progress thread, which fails every pending call, closes every
  // endpoint and listener and destroys the workers; then runs the queued
  // callbacks. Idempotent; never from a callback or the progress thread.
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

  // The progress thread's role; tasks posted with Post() start with
  // progress().AssertHeld().
  const ThreadRole& progress() const ABSL_LOCK_RETURNED(progress_) { return progress_; }

  // ---- the progress thread only ----

  // The parts (see the top of this file).
  ClientCalls& clients() ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_) { return clients_; }
  Servers& servers() ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_) { return servers_; }
  ActiveMessages& messages() ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_) { return messages_; }
  UcpWorkers& workers() ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_) { return workers_; }

  // Runs `task` right after the current ucp_worker_progress call (UCX
  // callbacks record what happened and defer the work: nothing re-enters
  // our state from inside UCX).
  void Defer(Task task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_) { deferred_.push_back(std::move(task)); }
  // A UCX request (send, receive, close) was handed to UCX, or completed:
  // teardown waits for those outstanding.
  void RequestStarted() ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_) { ++outstanding_; }
  void RequestDone() ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_) { --outstanding_; }

  // Endpoints. Every open endpoint has an owner: a client connection or a
  // server connection, told when it fails (OnEpError, whose argument is
  // the engine).
  void AddEndpoint(ucp_ep_h ep, EpOwner owner) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_) { eps_[ep] = owner; }
  // The owner of an open endpoint; null once it is closed.
  const EpOwner* OwnerOf(ucp_ep_h ep) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  // Forgets `ep` (its owner, the parts of messages that came on it) and
  // closes it: flushing what is in flight first, or at once (`force`).
  void CloseEndpoint(ucp_ep_h ep, bool force) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  static void OnEpError(void* arg, ucp_ep_h ep, ucs_status_t status);

 private:
  static void OnCloseDone(void* request, ucs_status_t status, void* user_data);
  void EndpointFailed(ucp_ep_h ep, ucs_status_t status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);

  // ---- the progress loop ----
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  // Progress passes, queued tasks, deadlines and sleeps until Stop().
  void ProgressUntilStopped() ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_) ABSL_LOCKS_EXCLUDED(mu_);
  // The local worker, and the process's UCX settings; on failure nothing
  // of UCX is left.
  absl::Status InitUcx() ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  // Destroys the workers; no task is accepted any more.
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
  // Sleeps on the workers' event fds until UCX or Post() wakes it, or `wake_at`.
  void WaitForEvents(absl::Time wake_at) ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_) ABSL_LOCKS_EXCLUDED(mu_);
  // Teardown: every call failed, every endpoint and listener closed, UCX
  // given up to kCloseWait to finish what that started.
  void ShutdownAll() ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);
  void WaitForOutstanding() ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_);

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
  // tasks it runs, and the parts' functions start with AssertHeld(), which
  // also checks the thread at run time.
  ThreadRole progress_{"the ucx progress thread"};
  std::vector<Task> deferred_ ABSL_GUARDED_BY(progress_);
  // How long the progress thread keeps polling after activity before it
  // sleeps (SpinFromEnvironment).
  const absl::Duration spin_ = SpinFromEnvironment();
  int outstanding_ ABSL_GUARDED_BY(progress_) = 0;                        // UCX requests not completed yet
  std::unordered_map<ucp_ep_h, EpOwner> eps_ ABSL_GUARDED_BY(progress_);  // open endpoints
  ActiveMessages messages_ ABSL_GUARDED_BY(progress_){*this, max_message_bytes_};
  UcpWorkers workers_ ABSL_GUARDED_BY(progress_){&messages_, &ActiveMessages::OnAm};
  ClientCalls clients_ ABSL_GUARDED_BY(progress_){*this};
  Servers servers_ ABSL_GUARDED_BY(progress_){*this};
};

}  // namespace pstrain::ucx
