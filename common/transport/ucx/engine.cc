// The engine: UCX start-up and teardown, the progress loop, the task queue,
// endpoints (engine.h).
#include "common/transport/ucx/engine.h"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "glog/logging.h"

namespace pstrain::ucx {
namespace {

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
// How long teardown waits for UCX to finish closing endpoints.
constexpr absl::Duration kCloseWait = absl::Seconds(2);

// Watches the progress passes for UCX busy with itself (kBusyWarning): since
// when every pass was full, and how many passes and deferred tasks that made.
class BusyWatch {
 public:
  void Observe(bool full, int deferred, absl::Time now) {
    if (!full) {
      full_since_ = absl::InfiniteFuture();
      full_passes_ = full_deferred_ = 0;
      return;
    }
    if (full_since_ == absl::InfiniteFuture()) full_since_ = now;
    ++full_passes_;
    full_deferred_ += deferred;
    if (now - full_since_ > kBusyWarning && full_deferred_ < full_passes_) {
      LOG_EVERY_T(WARNING, 30) << "ucx: UCX has reported work on every progress call for "
                               << absl::FormatDuration(now - full_since_) << " while completing " << full_deferred_
                               << " messages, sends or errors of ours in " << full_passes_ * kProgressCallsPerPass
                               << " calls (a peer that died?); queued work and deadlines are served meanwhile";
    }
  }

 private:
  absl::Time full_since_ = absl::InfiniteFuture();
  int64_t full_passes_ = 0;
  int64_t full_deferred_ = 0;
};

}  // namespace

// ---------------------------------------------------------------- any thread

Engine::Engine(const TransportOptions& options)
    : max_message_bytes_(options.max_message_bytes),
      callbacks_(std::clamp<int>(static_cast<int>(std::thread::hardware_concurrency()), 4, 16)) {}

void Engine::Start() {
  thread_ = std::thread([this] { Run(); });
  started_.WaitForNotification();
}

void Engine::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_requested_ = true;
    if (accepting_tasks_) ucp_worker_signal(worker_);
  }
  if (thread_.joinable()) thread_.join();
  callbacks_.Stop();
}

bool Engine::Post(Task&& task) {
  absl::MutexLock lock(&mu_);
  if (!accepting_tasks_) return false;
  tasks_.push_back(std::move(task));
  // Under mu_: the progress thread destroys the worker only after it stopped accepting tasks.
  ucp_worker_signal(worker_);
  return true;
}

// ---------------------------------------------------------------- the progress thread

void Engine::Run() {
  progress_.Enter();
  init_status_ = InitUcx();
  if (init_status_.ok()) {
    absl::MutexLock lock(&mu_);
    accepting_tasks_ = true;
  }
  started_.Notify();
  if (init_status_.ok()) {
    ProgressUntilStopped();
    ShutdownAll();
    DestroyUcx();
  }
  progress_.Leave();
}

void Engine::ProgressUntilStopped() {
  absl::Time last_active = absl::InfinitePast();
  BusyWatch busy;
  for (;;) {
    bool ran = false;
    const bool stop = RunTasks(&ran);
    const Pass pass = Progress();
    const absl::Time now = absl::Now();
    if (ran || pass.active) last_active = now;
    busy.Observe(pass.full, pass.deferred, now);
    clients_.ExpireCalls(now);
    clients_.RetryConnections(now);
    if (stop) return;
    // Traffic comes in bursts (a step's pushes, then its pulls): right after
    // activity, keep polling for spin_ instead of paying a sleep and a
    // wake-up (arm, poll, read: several system calls) per message.
    if (now - last_active < spin_) {
      sched_yield();
      continue;
    }
    WaitForEvents(clients_.NextWake(now + kMaxSleep));
  }
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
    const bool busy = workers_.Progress();
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

void Engine::WaitForEvents(absl::Time wake_at) {
  if (!deferred_.empty()) return;
  absl::Duration wait = std::max(wake_at - absl::Now(), absl::ZeroDuration());
  std::vector<pollfd> fds;
  for (const UcpWorker* w : workers_.all()) {
    const ucs_status_t armed = ucp_worker_arm(w->worker);
    if (armed == UCS_ERR_BUSY) return;  // events arrived meanwhile: progress again
    if (armed != UCS_OK) {
      LOG_EVERY_N(ERROR, 1000) << "ucx: ucp_worker_arm: " << UcsText(armed) << "; polling";
      wait = std::min(wait, absl::Milliseconds(1));
    }
    fds.push_back(pollfd{w->event_fd, POLLIN, 0});
  }
  {
    absl::MutexLock lock(&mu_);
    if (!tasks_.empty() || stop_requested_) return;
  }
  // A task posted from here on signals the armed local worker, so poll wakes up.
  const int timeout_ms = static_cast<int>(absl::ToInt64Milliseconds(absl::Ceil(wait, absl::Milliseconds(1))));
  if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) {
    PLOG(ERROR) << "ucx: poll on the workers' event fds";
  }
}

// ---------------------------------------------------------------- start-up and teardown

absl::Status Engine::InitUcx() {
  if (absl::Status hooks = CheckMemoryHooksForSanitizers(); !hooks.ok()) return hooks;
  SetProcessDefaults();
  if (absl::Status made = workers_.StartLocal(); !made.ok()) return made;
  worker_ = workers_.local();
  return absl::OkStatus();
}

void Engine::DestroyUcx() {
  {
    absl::MutexLock lock(&mu_);
    accepting_tasks_ = false;
  }
  worker_ = nullptr;
  workers_.Destroy();
}

void Engine::ShutdownAll() {
  clients_.CloseAll();
  servers_.CloseAll();
  WaitForOutstanding();
}

void Engine::WaitForOutstanding() {
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

// ---------------------------------------------------------------- endpoints

const EpOwner* Engine::OwnerOf(ucp_ep_h ep) const {
  auto it = eps_.find(ep);
  return it == eps_.end() ? nullptr : &it->second;
}

void Engine::CloseEndpoint(ucp_ep_h ep, bool force) {
  eps_.erase(ep);
  messages_.ForgetEndpoint(ep);
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

void Engine::EndpointFailed(ucp_ep_h ep, ucs_status_t status) {
  const EpOwner* found = OwnerOf(ep);
  if (found == nullptr) return;  // closed by us meanwhile
  const EpOwner owner = *found;
  CloseEndpoint(ep, /*force=*/true);
  if (owner.client) {
    clients_.EndpointFailed(owner.conn_id, status);
  } else {
    servers_.EndpointFailed(owner.conn_id);
  }
}

}  // namespace pstrain::ucx
