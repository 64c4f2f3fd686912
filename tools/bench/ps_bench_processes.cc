#include "tools/bench/ps_bench_processes.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "tools/bench/ps_bench_control.h"
#include "tools/bench/ps_bench_role.h"
#include "tools/bench/ps_bench_worker.h"
#include "tools/launch/emulated_hosts.h"
#include "tools/launch/host_cpus.h"
#include "tools/launch/process_group.h"

namespace pstrain::bench {
namespace {

// SIGTERM -> SIGKILL, and how long shards may outlive the workers.
constexpr absl::Duration kGrace = absl::Seconds(5);
// How long the roles get to end by themselves once the bench is done with
// them, or once one of them failed (the supervisor then stops the others
// and names it), before the bench stops them.
constexpr absl::Duration kPatience = absl::Seconds(15);

absl::StatusOr<std::string> RoleBinary(const PsBenchOptions& options) {
  if (!options.role_binary.empty()) return options.role_binary;
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return absl::InternalError("cannot find this executable (/proc/self/exe)");
  return std::string(self, n);
}

// The role processes under a ClusterProcesses, whose Wait() runs on a
// thread of its own (Start runs on the caller's, which the children's
// parent-death signal is tied to).
class Supervisor {
 public:
  ~Supervisor() {
    if (thread_.joinable()) Finish(/*stop_now=*/true);
    for (int fd : {interrupt_[0], interrupt_[1], done_[0], done_[1]}) {
      if (fd >= 0) close(fd);
    }
  }

  // Starts the roles; a signal number read from `interrupt_fd` (when >= 0)
  // stops them as that signal stops pstrain-launch.
  absl::Status Start(const std::vector<launch::RoleSpec>& roles, int interrupt_fd) {
    if (pipe2(interrupt_, O_CLOEXEC | O_NONBLOCK) != 0 || pipe2(done_, O_CLOEXEC) != 0) {
      return absl::InternalError("pipe for the role supervisor");
    }
    launch::ClusterOptions options;
    options.out_fd = STDERR_FILENO;  // stdout carries only the report
    options.grace = kGrace;
    options.interrupt_fd = interrupt_[0];
    processes_ = std::make_unique<launch::ClusterProcesses>(options);
    PSTRAIN_RETURN_IF_ERROR(processes_->Start(roles));
    pids_ = processes_->pids();
    thread_ = std::thread([this] {
      outcome_ = processes_->Wait();
      const char done = 1;
      (void)!write(done_[1], &done, 1);
    });
    if (interrupt_fd >= 0) forwarder_ = std::thread([this, interrupt_fd] { Forward(interrupt_fd); });
    return absl::OkStatus();
  }

  const std::vector<pid_t>& pids() const { return pids_; }
  // Readable once every role has ended.
  int done_fd() const { return done_[0]; }
  // Whether the bench had to stop the roles (Finish(true), or its patience
  // ran out).
  bool stopped() const { return stopped_; }

  // Waits for every role to end: stops them at once when `stop_now`, else
  // after kPatience.
  launch::ClusterOutcome Finish(bool stop_now) {
    if (!thread_.joinable()) return outcome_;
    pollfd done = {done_[0], POLLIN, 0};
    if (!stop_now && poll(&done, 1, static_cast<int>(absl::ToInt64Milliseconds(kPatience))) <= 0) stop_now = true;
    if (stop_now) {
      stopped_ = true;
      const char sig = SIGTERM;
      (void)!write(interrupt_[1], &sig, 1);
    }
    thread_.join();
    if (forwarder_.joinable()) forwarder_.join();
    return outcome_;
  }

 private:
  // Copies signal numbers from `fd` to the supervisor until every role has
  // ended.
  void Forward(int fd) {
    while (true) {
      pollfd fds[2] = {{fd, POLLIN, 0}, {done_[0], POLLIN, 0}};
      if (poll(fds, 2, -1) < 0 && errno != EINTR) return;
      if (fds[1].revents != 0) return;
      if (fds[0].revents == 0) continue;
      unsigned char signals[16];
      const ssize_t n = read(fd, signals, sizeof(signals));
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return;
      if (n > 0) (void)!write(interrupt_[1], signals, n);
    }
  }

  int interrupt_[2] = {-1, -1};
  int done_[2] = {-1, -1};
  std::unique_ptr<launch::ClusterProcesses> processes_;
  std::vector<pid_t> pids_;
  std::thread thread_;
  std::thread forwarder_;
  launch::ClusterOutcome outcome_;
  bool stopped_ = false;
};

// The bench's end of the control channels: setup, meetings, results. Roles
// are numbered shards first, then workers.
class Coordinator {
 public:
  Coordinator(const PsBenchOptions& options, PsBenchSetup& setup, ControlListener& listener, Supervisor& supervisor)
      : options_(options),
        setup_(setup),
        listener_(listener),
        supervisor_(supervisor),
        channels_(options.servers + options.workers) {}

  absl::StatusOr<PsBenchRun> Run() {
    PSTRAIN_RETURN_IF_ERROR(AcceptRoles());
    PSTRAIN_RETURN_IF_ERROR(SendSetups());
    PsBenchRun run;
    PSTRAIN_RETURN_IF_ERROR(Meetings(run));
    PSTRAIN_RETURN_IF_ERROR(CollectResults(run));
    return run;
  }

  // What the role that `reason` starts with ("worker0 exited with code 1")
  // said when it failed; "" when it said nothing.
  std::string SaidBy(const std::string& reason) const {
    for (const auto& [name, message] : said_) {
      if (absl::StartsWith(reason, name + " ")) return message;
    }
    return "";
  }

  // Reads what the roles sent and the bench did not get to (once they have
  // ended): a role that failed while the bench waited for another still
  // gets its say.
  void DrainFailures() {
    for (size_t role = 0; role < channels_.size(); ++role) {
      ControlChannel* channel = channels_[role].get();
      for (absl::StatusOr<RoleMessage> m; channel != nullptr && (m = channel->Receive(absl::Now())).ok();) {
        if (m->has_failure()) said_[Name(role)] = m->failure().message();
      }
    }
  }

  // The role's name as the supervisor knows it: "ps0", "worker1".
  std::string Name(int role) const {
    return role < options_.servers ? absl::StrCat("ps", role) : absl::StrCat("worker", role - options_.servers);
  }

 private:
  // Every role connects and says who it is.
  absl::Status AcceptRoles() {
    const absl::Time deadline = absl::Now() + absl::Seconds(kPsBenchStartupSeconds);
    for (size_t connected = 0; connected < channels_.size(); ++connected) {
      absl::StatusOr<std::unique_ptr<ControlChannel>> channel = listener_.Accept(deadline, supervisor_.done_fd());
      absl::StatusOr<RoleMessage> hello =
          channel.ok() ? (*channel)->Receive(deadline, supervisor_.done_fd()) : channel.status();
      if (!hello.ok()) {
        return absl::Status(hello.status().code(), absl::StrCat("only ", connected, " of ", channels_.size(),
                                                                " roles said hello: ", hello.status().message()));
      }
      const RoleHello& h = hello->hello();
      const int count = h.role() == "server" ? options_.servers : options_.workers;
      const int role = h.role() == "server" ? h.index() : options_.servers + h.index();
      if ((h.role() != "server" && h.role() != "worker") || h.index() < 0 || h.index() >= count ||
          channels_[role] != nullptr) {
        return absl::InternalError(absl::StrCat("control: an unexpected hello ", h.ShortDebugString()));
      }
      channels_[role] = *std::move(channel);
    }
    return absl::OkStatus();
  }

  absl::Status SendSetups() {
    const RoleSetup setup = MakeRoleSetup(options_, setup_);
    for (size_t role = 0; role < channels_.size(); ++role) {
      RoleMessage message;
      *message.mutable_setup() = setup;
      message.mutable_setup()->set_kill_self(Name(role) == options_.kill_role);
      PSTRAIN_RETURN_IF_ERROR(Send(role, message));
    }
    return absl::OkStatus();
  }

  // Each meeting: every worker arrives; the roles' usage; everyone goes on.
  absl::Status Meetings(PsBenchRun& run) {
    std::vector<UsageSnapshot> snapshots;
    RoleMessage meet;
    meet.mutable_meet();
    for (int k = 0; k < kWorkerMeetings; ++k) {
      const double limit = k == 0 ? kPsBenchStartupSeconds : kPsBenchRpcSeconds;
      const absl::Time deadline = absl::Now() + absl::Seconds(limit);
      for (int w = 0; w < options_.workers; ++w) {
        PSTRAIN_RETURN_IF_ERROR(
            Receive(options_.servers + w, deadline, RoleMessage::kMeet, absl::StrCat("meeting ", k + 1)).status());
      }
      snapshots.push_back(TakeUsage(supervisor_.pids()));
      if (k == 0) setup_.reservations.clear();  // every shard and sink is up
      for (int w = 0; w < options_.workers; ++w) PSTRAIN_RETURN_IF_ERROR(Send(options_.servers + w, meet));
    }
    for (int p = 0; p < kNumPhases; ++p) {
      run.phases[p].has_usage = true;
      run.phases[p].usage[0] = snapshots[TimedStartMeeting(p)];
      run.phases[p].usage[1] = snapshots[TimedEndMeeting(p)];
    }
    return absl::OkStatus();
  }

  // Every worker's measurements, then (once the workers said Done) every
  // shard's final stats.
  absl::Status CollectResults(PsBenchRun& run) {
    absl::Time deadline = absl::Now() + absl::Seconds(kPsBenchRpcSeconds);
    for (int w = 0; w < options_.workers; ++w) {
      PSTRAIN_ASSIGN_OR_RETURN(RoleMessage m,
                               Receive(options_.servers + w, deadline, RoleMessage::kWorkerResult, "its results"));
      run.workers.push_back(TallyOf(m.worker_result()));
      if (w == 0 && m.worker_result().phase_loads_size() == 2 * kNumPhases) {
        for (int p = 0; p < kNumPhases; ++p) {
          run.phases[p].load[0] = m.worker_result().phase_loads(2 * p);
          run.phases[p].load[1] = m.worker_result().phase_loads(2 * p + 1);
        }
      }
    }
    deadline = absl::Now() + absl::Seconds(kPsBenchStartupSeconds);
    for (int s = 0; s < options_.servers; ++s) {
      PSTRAIN_ASSIGN_OR_RETURN(RoleMessage m, Receive(s, deadline, RoleMessage::kServerResult, "its final stats"));
      run.final_stats.push_back(m.server_result().final_stats());
    }
    return absl::OkStatus();
  }

  absl::Status Send(int role, const RoleMessage& message) {
    absl::Status s = channels_[role]->Send(message);
    if (!s.ok()) return absl::UnavailableError(absl::StrCat(Name(role), ": ", s.message()));
    return s;
  }

  // The role's next message, which must be `expected` (`what`, for errors).
  // A role that reports a failure, closes its channel or ends: errors the
  // supervisor will name it for (FailedPrecondition, Unavailable,
  // Cancelled); being late: DeadlineExceeded.
  absl::StatusOr<RoleMessage> Receive(int role, absl::Time deadline, RoleMessage::BodyCase expected,
                                      const std::string& what) {
    absl::StatusOr<RoleMessage> m = channels_[role]->Receive(deadline, supervisor_.done_fd());
    if (absl::IsDeadlineExceeded(m.status())) {
      return absl::DeadlineExceededError(absl::StrCat(Name(role), " did not send ", what, " in time"));
    }
    if (!m.ok()) return absl::Status(m.status().code(), absl::StrCat(Name(role), ": ", m.status().message()));
    if (m->has_failure()) {
      said_[Name(role)] = m->failure().message();
      return absl::FailedPreconditionError(m->failure().message());
    }
    if (m->body_case() != expected) {
      return absl::InternalError(absl::StrCat(Name(role), ": sent ", m->ShortDebugString(), " instead of ", what));
    }
    return m;
  }

  const PsBenchOptions& options_;
  PsBenchSetup& setup_;
  ControlListener& listener_;
  Supervisor& supervisor_;
  std::vector<std::unique_ptr<ControlChannel>> channels_;
  std::map<std::string, std::string> said_;  // role name -> its failure
};

// The emulated hosts of a run (none without options.emulated_hosts), and
// where each role is.
struct Hosts {
  std::unique_ptr<launch::EmulatedHosts> hosts;
  HostPlacement placement;
  std::vector<std::string> shard_addresses;  // each shard's host's; empty: loopback
};

absl::StatusOr<Hosts> MakeHosts(const PsBenchOptions& options) {
  Hosts made;
  if (options.emulated_hosts == 0) return made;
  made.placement = PlaceOnHosts(options);
  std::vector<std::vector<std::string>> names(options.emulated_hosts);
  for (int h = 0; h < options.emulated_hosts; ++h) names[h] = {absl::StrCat("host", h)};
  // Subnets 10.248.0.0 to 10.255.255.0 (pstrain-launch uses 10.216-247).
  const int subnet = (248 + getpid() % 8) * 256 + (getpid() / 8) % 256;
  PSTRAIN_ASSIGN_OR_RETURN(made.hosts, launch::EmulatedHosts::Create(names, subnet));
  PSTRAIN_ASSIGN_OR_RETURN(const std::vector<std::vector<int>> cpus, HostCpus(options));
  for (int h = 0; h < options.emulated_hosts; ++h) {
    if (!cpus[h].empty()) PSTRAIN_RETURN_IF_ERROR(made.hosts->RunOnCpus(h, cpus[h]));
  }
  for (int h = 0; h < options.emulated_hosts && options.link_gbps > 0; ++h) {
    PSTRAIN_RETURN_IF_ERROR(made.hosts->LimitLink(h, options.link_gbps));
  }
  for (int host : made.placement.shard_host) made.shard_addresses.push_back(made.hosts->address(host));
  return made;
}

std::vector<launch::RoleSpec> RoleSpecs(const PsBenchOptions& options, const std::string& binary,
                                        const std::string& control_path, const Hosts& hosts) {
  std::vector<launch::RoleSpec> specs;
  auto add = [&](bool is_ps, int index) {
    std::vector<std::string> argv;
    if (hosts.hosts != nullptr) {
      argv = hosts.hosts->RunOn(is_ps ? hosts.placement.shard_host[index] : hosts.placement.worker_host[index]);
    }
    argv.insert(argv.end(), {binary, "ps-role", absl::StrCat("--role=", is_ps ? "server" : "worker"),
                             absl::StrCat("--index=", index), absl::StrCat("--control=", control_path)});
    launch::RoleSpec spec;
    spec.name = absl::StrCat(is_ps ? "ps" : "worker", index);
    spec.is_ps = is_ps;
    spec.binary = argv[0];
    spec.args.assign(argv.begin() + 1, argv.end());
    specs.push_back(std::move(spec));
  };
  for (int s = 0; s < options.servers; ++s) add(true, s);
  for (int w = 0; w < options.workers; ++w) add(false, w);
  return specs;
}

// The run, or the error that explains best why there is none: a role's
// failure as the supervisor names it ("worker0 exited with code 1: <what it
// said>"), else the bench's own.
absl::StatusOr<PsBenchRun> Conclude(absl::StatusOr<PsBenchRun> run, Coordinator& coordinator, Supervisor& supervisor) {
  const absl::Status& s = run.status();
  const bool role_caused = run.ok() || absl::IsFailedPrecondition(s) || absl::IsUnavailable(s) || absl::IsCancelled(s);
  const launch::ClusterOutcome outcome = supervisor.Finish(/*stop_now=*/!role_caused);
  if (outcome.exit_code != 0 && !supervisor.stopped()) {
    coordinator.DrainFailures();
    const std::string said = coordinator.SaidBy(outcome.reason);
    return absl::InternalError(absl::StrCat(outcome.reason, said.empty() ? "" : ": ", said));
  }
  if (run.ok() && outcome.exit_code != 0) return absl::InternalError(outcome.reason);
  return run;
}

}  // namespace

HostPlacement PlaceOnHosts(const PsBenchOptions& options) {
  HostPlacement p;
  const int n = options.emulated_hosts;
  const double share = static_cast<double>(options.servers) / (options.servers + options.workers);
  p.shard_hosts = std::clamp(static_cast<int>(std::lround(n * share)), 1, n - 1);
  for (int s = 0; s < options.servers; ++s) p.shard_host.push_back(s % p.shard_hosts);
  for (int w = 0; w < options.workers; ++w) p.worker_host.push_back(p.shard_hosts + w % (n - p.shard_hosts));
  return p;
}

absl::StatusOr<std::vector<std::vector<int>>> HostCpus(const PsBenchOptions& options) {
  const std::vector<std::vector<int>> shared(options.emulated_hosts);
  if (options.host_cpus == "shared") return shared;
  if (options.host_cpus != "own" && options.host_cpus != "auto") {
    return absl::InvalidArgumentError(
        absl::StrCat("--host_cpus must be auto, own or shared, got \"", options.host_cpus, "\""));
  }
  absl::StatusOr<std::vector<std::vector<int>>> own =
      launch::SplitCpus(options.emulated_hosts, launch::CpusOfThisProcess());
  if (own.ok()) return own;
  if (options.host_cpus == "auto") return shared;
  return absl::InvalidArgumentError(absl::StrCat("--host_cpus own: ", own.status().message()));
}

std::string DescribeEmulatedHosts(const PsBenchOptions& options) {
  const HostPlacement p = PlaceOnHosts(options);
  auto hosts = [](int first, int last) {
    return first == last ? absl::StrCat("host ", first) : absl::StrCat("hosts ", first, "-", last);
  };
  std::string cpus = "CPUs shared";
  absl::StatusOr<std::vector<std::vector<int>>> split = HostCpus(options);
  if (split.ok() && !split->empty() && !split->front().empty()) {
    cpus = absl::StrCat(
        "CPUs of their own (",
        absl::StrJoin(*split, ", ", [](std::string* out, const auto& c) { out->append(launch::CpuListString(c)); }),
        ")");
  }
  return absl::StrCat("emulated hosts: ", options.emulated_hosts, " (shards on ", hosts(0, p.shard_hosts - 1),
                      ", workers on ", hosts(p.shard_hosts, options.emulated_hosts - 1), "), links ",
                      options.link_gbps > 0 ? absl::StrCat(options.link_gbps, " Gbit/s each way") : "uncapped", ", ",
                      cpus);
}

absl::StatusOr<PsBenchRun> RunClusterInProcesses(const PsBenchOptions& options) {
  PSTRAIN_ASSIGN_OR_RETURN(const std::string binary, RoleBinary(options));
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ControlListener> listener, ControlListener::Create());
  PSTRAIN_ASSIGN_OR_RETURN(const Hosts hosts, MakeHosts(options));  // removed after every role has ended
  PSTRAIN_ASSIGN_OR_RETURN(PsBenchSetup setup, SetUpCluster(options, hosts.shard_addresses));
  Supervisor supervisor;
  PSTRAIN_RETURN_IF_ERROR(supervisor.Start(RoleSpecs(options, binary, listener->path(), hosts), options.interrupt_fd));
  Coordinator coordinator(options, setup, *listener, supervisor);
  return Conclude(coordinator.Run(), coordinator, supervisor);
}

}  // namespace pstrain::bench
