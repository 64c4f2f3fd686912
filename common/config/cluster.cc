#include "common/config/cluster.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/config/tf_config.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

using HostList = google::protobuf::RepeatedPtrField<std::string>;

absl::string_view KindName(RoleKind kind) { return kind == RoleKind::kPs ? "ps" : "worker"; }

// "field 'cluster.worker_hosts[1]'".
std::string HostField(absl::string_view list, int i) { return absl::StrCat("field 'cluster.", list, "[", i, "]'"); }

// Format checks of one list; `list` is "ps_hosts" or "worker_hosts".
absl::Status ValidateHostList(const HostList& hosts, absl::string_view list, absl::string_view source) {
  for (int i = 0; i < hosts.size(); ++i) {
    absl::StatusOr<HostPort> hp = ParseHostPort(hosts[i]);
    if (!hp.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": ", HostField(list, i), ": expected host:port with a port in 1..65535 (IPv6 as [addr]:port), got '",
          hosts[i], "' (", hp.status().message(), ")"));
    }
  }
  return absl::OkStatus();
}

std::string DescribeList(const HostList& hosts) {
  return absl::StrCat(hosts.size(), hosts.size() == 1 ? " entry" : " entries", " [", absl::StrJoin(hosts, ", "), "]");
}

// ---------------------------------------------------------------- flags

absl::StatusOr<RoleKind> JobKind(absl::string_view job, absl::string_view source) {
  if (job == "ps") return RoleKind::kPs;
  if (job == "worker") return RoleKind::kWorker;
  return absl::InvalidArgumentError(absl::StrCat(source, ": expected ps or worker, got '", job, "'"));
}

absl::Status CheckJob(RoleKind binary_role, RoleKind named, absl::string_view source) {
  if (named == binary_role) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(source, " names the ", KindName(named),
                                                 " job, but this binary runs the ", KindName(binary_role), " job"));
}

void SplitHosts(absl::string_view csv, HostList* out) {
  out->Clear();
  for (absl::string_view h : absl::StrSplit(csv, ',')) {
    out->Add(std::string(absl::StripAsciiWhitespace(h)));
  }
}

// The role a launcher's rank gives (see ResolveRole); `source` says how.
absl::StatusOr<Role> RoleFromRanks(RoleKind binary_role, const std::vector<LaunchRank>& launched,
                                   const ClusterConfig& cluster, std::string* source) {
  const int num_ps = cluster.ps_hosts_size(), num_workers = cluster.worker_hosts_size();
  const LaunchRank* chosen = nullptr;
  for (const LaunchRank& l : launched) {
    const bool whole_cluster = num_ps > 0 && l.size == num_ps + num_workers;
    const bool workers_only = binary_role == RoleKind::kWorker && l.size == num_workers;
    if (!whole_cluster && !workers_only) continue;  // another launch (the srun around mpirun)
    if (chosen == nullptr) {
      chosen = &l;
    } else if (chosen->rank != l.rank || chosen->size != l.size) {
      return absl::InvalidArgumentError(
          absl::StrCat("contradictory launchers: ", chosen->source, " but ", l.source, "; unset one, or pass --index"));
    }
  }
  if (chosen == nullptr) {
    std::vector<std::string> sources;
    for (const LaunchRank& l : launched) sources.push_back(l.source);
    return absl::InvalidArgumentError(absl::StrCat(
        absl::StrJoin(sources, "; "), ": no launcher's size fits the cluster of ", num_ps, " PS and ", num_workers,
        " workers: start ", num_workers, " ranks (the workers)",
        num_ps > 0 ? absl::StrCat(" or ", num_ps + num_workers, " (the first ", num_ps, " serve as PS)") : "",
        ", or pass --index"));
  }
  Role role{RoleKind::kWorker, chosen->rank};
  std::string rule;
  if (num_ps > 0 && chosen->size == num_ps + num_workers) {
    if (chosen->rank < num_ps) role = Role{RoleKind::kPs, chosen->rank};
    if (chosen->rank >= num_ps) role.index = chosen->rank - num_ps;
    rule = absl::StrCat("ranks 0-", num_ps - 1, " serve as PS, ", num_ps, "-", num_ps + num_workers - 1, " as workers");
  } else {
    rule = "one rank per worker";
  }
  *source = absl::StrCat(chosen->source, ": ", KindName(role.kind), " ", role.index, " (", rule, ")");
  return role;
}

// ---------------------------------------------------------------- host lists

// Where each host list came from, for messages: "config file", "TF_CONFIG",
// "--ps_hosts", "the launcher (...)".
struct HostSources {
  std::string ps = "config file";
  std::string worker = "config file";

  // "cluster from TF_CONFIG", or "cluster (ps_hosts from ..., worker_hosts
  // from ...)" when they differ: the source ValidateHosts names.
  std::string Describe() const {
    if (ps == worker) return absl::StrCat("cluster from ", ps);
    return absl::StrCat("cluster (ps_hosts from ", ps, ", worker_hosts from ", worker, ")");
  }
};

// 1. TF_CONFIG (null or blank: unset) over the config file: its cluster,
// when given, replaces both lists. Returns what TF_CONFIG said, for the role.
absl::StatusOr<std::optional<TfConfig>> ApplyTfConfig(const char* json, ClusterConfig* cluster, HostSources* sources) {
  std::optional<TfConfig> tf;
  if (json == nullptr || absl::StripAsciiWhitespace(json).empty()) return tf;
  PSTRAIN_ASSIGN_OR_RETURN(tf, ParseTfConfig(json));
  if (tf->has_cluster) {
    PSTRAIN_RETURN_IF_ERROR(ValidateHostList(tf->cluster.ps_hosts(), "ps_hosts", "TF_CONFIG"));
    PSTRAIN_RETURN_IF_ERROR(ValidateHostList(tf->cluster.worker_hosts(), "worker_hosts", "TF_CONFIG"));
    *cluster = tf->cluster;
    sources->ps = sources->worker = "TF_CONFIG";
  }
  return tf;
}

// 2. --ps_hosts and --worker_hosts, each replacing its list.
absl::Status ApplyHostFlags(const ClusterFlags& flags, ClusterConfig* cluster, HostSources* sources) {
  if (!flags.ps_hosts.empty()) {
    SplitHosts(flags.ps_hosts, cluster->mutable_ps_hosts());
    PSTRAIN_RETURN_IF_ERROR(ValidateHostList(cluster->ps_hosts(), "ps_hosts", "--ps_hosts"));
    sources->ps = "--ps_hosts";
  }
  if (!flags.worker_hosts.empty()) {
    SplitHosts(flags.worker_hosts, cluster->mutable_worker_hosts());
    PSTRAIN_RETURN_IF_ERROR(ValidateHostList(cluster->worker_hosts(), "worker_hosts", "--worker_hosts"));
    sources->worker = "--worker_hosts";
  }
  return absl::OkStatus();
}

// cluster.num_ps and cluster.port, which host lists from a launcher are made of.
absl::Status CheckLauncherFields(const ClusterConfig& cluster) {
  if (cluster.num_ps() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("field 'cluster.num_ps': expected a number >= 0, got ", cluster.num_ps()));
  }
  if (cluster.port() < 1 || cluster.port() > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("field 'cluster.port': expected a port in 1..65535, got ", cluster.port()));
  }
  return absl::OkStatus();
}

// 3. Both lists from `launcher`'s ranks (launched_hosts): the first
// cluster.num_ps serve as PS, the rest as workers.
absl::Status TakeLaunchedHosts(const LaunchRank& launcher, const LaunchedHostsFn& launched_hosts,
                               ClusterConfig* cluster, HostSources* sources) {
  PSTRAIN_ASSIGN_OR_RETURN(const std::vector<std::string> hosts, launched_hosts(launcher, *cluster));
  if (cluster->num_ps() >= static_cast<int>(hosts.size())) {
    return absl::InvalidArgumentError(absl::StrCat("field 'cluster.num_ps': ", cluster->num_ps(),
                                                   " PS shards leave no worker among the ", hosts.size(), " ranks of ",
                                                   launcher.source));
  }
  for (size_t r = 0; r < hosts.size(); ++r) {
    *(static_cast<int>(r) < cluster->num_ps() ? cluster->add_ps_hosts() : cluster->add_worker_hosts()) = hosts[r];
  }
  sources->ps = sources->worker = absl::StrCat("the launcher (", launcher.source, ")");
  return absl::OkStatus();
}

// cluster.num_ps, given, must agree with ps_hosts listed elsewhere (with no
// lists at all ValidateHosts says what is missing).
absl::Status CheckNumPsAgrees(const ClusterConfig& cluster, const std::string& ps_source) {
  if (cluster.num_ps() <= 0 || cluster.num_ps() == cluster.ps_hosts_size() || cluster.worker_hosts().empty()) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("field 'cluster.num_ps': ", cluster.num_ps(),
                                                 ", but the ps_hosts from ", ps_source, " list ",
                                                 cluster.ps_hosts_size(),
                                                 " (num_ps is for host lists from the "
                                                 "launcher; leave it out or make it agree)"));
}

// ---------------------------------------------------------------- the role

// --index, --task_index and --job_name: well-formed, agreeing with each
// other and with the binary's job.
absl::Status CheckRoleFlags(RoleKind binary_role, const ClusterFlags& flags) {
  if (flags.index < -1) {
    return absl::InvalidArgumentError(absl::StrCat("--index: expected a non-negative integer, got ", flags.index));
  }
  if (flags.task_index < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--task_index: expected a non-negative integer, got ", flags.task_index));
  }
  if (flags.index >= 0 && flags.task_index >= 0 && flags.index != flags.task_index) {
    return absl::InvalidArgumentError(
        absl::StrCat("--index=", flags.index, " and --task_index=", flags.task_index, " disagree"));
  }
  if (!flags.job_name.empty()) {
    const std::string src = absl::StrCat("--job_name=", flags.job_name);
    PSTRAIN_ASSIGN_OR_RETURN(const RoleKind named, JobKind(flags.job_name, src));
    PSTRAIN_RETURN_IF_ERROR(CheckJob(binary_role, named, src));
  }
  return absl::OkStatus();
}

const HostList& HostsOf(RoleKind kind, const ClusterConfig& cluster) {
  return kind == RoleKind::kPs ? cluster.ps_hosts() : cluster.worker_hosts();
}

std::string ListName(RoleKind kind) { return kind == RoleKind::kPs ? "cluster.ps_hosts" : "cluster.worker_hosts"; }

// The role TF_CONFIG's task names, which must be the binary's job.
absl::StatusOr<Role> RoleFromTfTask(RoleKind binary_role, const TfConfig& tf, std::string* source) {
  PSTRAIN_ASSIGN_OR_RETURN(const Role role, TfTaskRole(tf));
  const std::string task = absl::StrCat("TF_CONFIG task {type: ", tf.task_type, ", index: ", tf.task_index, "}");
  PSTRAIN_RETURN_IF_ERROR(CheckJob(binary_role, role.kind, task));
  *source = tf.has_chief && tf.task_type == "worker"
                ? absl::StrCat(task, " (worker ", role.index, " counting the chief)")
                : task;
  return role;
}

// The role from the first source that gives one: the index flags,
// TF_CONFIG's task, a launcher's rank, or index 0 of a one-entry list (see
// ResolveRole). `source` says which, for messages and start-up's "role:".
absl::StatusOr<Role> ChooseRole(RoleKind binary_role, const ClusterFlags& flags, const std::optional<TfConfig>& tf,
                                const std::vector<LaunchRank>& launched, const ClusterConfig& cluster,
                                std::string* source) {
  if (flags.index >= 0 || flags.task_index >= 0) {
    const int index = flags.index >= 0 ? flags.index : flags.task_index;
    *source = flags.index >= 0 ? absl::StrCat("--index=", index) : absl::StrCat("--task_index=", index);
    return Role{binary_role, index};
  }
  if (tf.has_value() && tf->has_task) return RoleFromTfTask(binary_role, *tf, source);
  if (!launched.empty()) return RoleFromRanks(binary_role, launched, cluster, source);
  const HostList& hosts = HostsOf(binary_role, cluster);
  if (hosts.size() == 1) {
    *source = "the default index 0";
    return Role{binary_role, 0};
  }
  return absl::InvalidArgumentError(absl::StrCat("no task index given for this ", KindName(binary_role),
                                                 ": pass --index (or --task_index), set TF_CONFIG or start it with "
                                                 "mpirun or srun; ",
                                                 ListName(binary_role), " has ", DescribeList(hosts)));
}

// A role of the binary's job must index its host list (a role of the other
// job is that binary's to check).
absl::Status CheckIndexInRange(RoleKind binary_role, const Role& role, const std::string& source,
                               const ClusterConfig& cluster) {
  const HostList& hosts = HostsOf(binary_role, cluster);
  if (role.kind != binary_role || role.index < hosts.size()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(source, " is out of range: ", ListName(binary_role), " has ", DescribeList(hosts)));
}

}  // namespace

std::string RoleToString(const Role& role) { return absl::StrCat(KindName(role.kind), " ", role.index); }

absl::Status ValidateHosts(const ClusterConfig& cluster, std::string_view source_in) {
  const absl::string_view source(source_in.data(), source_in.size());
  if (cluster.worker_hosts().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": field 'cluster.worker_hosts': expected at least one host:port, got none",
                     cluster.num_ps() > 0 ? " (cluster.num_ps alone takes the hosts from srun or mpirun, which did not "
                                            "start this process; list the hosts)"
                                          : ""));
  }
  PSTRAIN_RETURN_IF_ERROR(ValidateHostList(cluster.ps_hosts(), "ps_hosts", source));
  PSTRAIN_RETURN_IF_ERROR(ValidateHostList(cluster.worker_hosts(), "worker_hosts", source));
  std::map<std::string, std::string> first_use;  // host:port -> "cluster.ps_hosts[0]"
  for (const auto* list : {&cluster.ps_hosts(), &cluster.worker_hosts()}) {
    const absl::string_view name = list == &cluster.ps_hosts() ? "ps_hosts" : "worker_hosts";
    for (int i = 0; i < list->size(); ++i) {
      const std::string here = absl::StrCat("cluster.", name, "[", i, "]");
      auto [it, inserted] = first_use.emplace((*list)[i], here);
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat(source, ": field '", here,
                                                       "': expected a host:port no other task uses, got '", (*list)[i],
                                                       "' (already used by ", it->second, ")"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<LaunchRank>> LaunchRanksFromEnvironment(
    const std::function<const char*(const char*)>& getenv) {
  struct Variables {
    Launcher launcher;
    const char* rank;
    const char* size;
    const char* name;
  };
  std::vector<LaunchRank> found;
  for (const Variables& l : {Variables{Launcher::kMpirun, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "mpirun"},
                             Variables{Launcher::kSrun, "SLURM_PROCID", "SLURM_NTASKS", "srun"},
                             Variables{Launcher::kRankEnv, "RANK", "WORLD_SIZE", "PyTorchJob style"}}) {
    const char* rank = getenv(l.rank);
    const char* size = getenv(l.size);
    if (rank == nullptr && size == nullptr) continue;
    LaunchRank r;
    r.launcher = l.launcher;
    r.source = absl::StrCat(l.rank, "=", rank == nullptr ? "" : rank, ", ", l.size, "=", size == nullptr ? "" : size,
                            " (", l.name, ")");
    if (rank == nullptr || size == nullptr || !absl::SimpleAtoi(rank, &r.rank) || !absl::SimpleAtoi(size, &r.size) ||
        r.size < 1 || r.rank < 0 || r.rank >= r.size) {
      return absl::InvalidArgumentError(absl::StrCat(r.source, ": expected both, a rank in [0, size)"));
    }
    found.push_back(std::move(r));
  }
  return found;
}

absl::StatusOr<Role> ResolveRole(RoleKind binary_role, const ClusterFlags& flags, const char* tf_config_json,
                                 ExperimentConfig* config, const std::vector<LaunchRank>& launched, std::string* how,
                                 const LaunchedHostsFn& launched_hosts) {
  ClusterConfig* cluster = config->mutable_cluster();
  HostSources sources;
  // 1. TF_CONFIG over the config file.
  PSTRAIN_ASSIGN_OR_RETURN(const std::optional<TfConfig> tf, ApplyTfConfig(tf_config_json, cluster, &sources));
  // 2. Flags over both.
  PSTRAIN_RETURN_IF_ERROR(ApplyHostFlags(flags, cluster, &sources));
  // 3. Host lists from the launcher where nothing listed any.
  PSTRAIN_RETURN_IF_ERROR(CheckLauncherFields(*cluster));
  if (cluster->ps_hosts().empty() && cluster->worker_hosts().empty() && !launched.empty() && launched_hosts) {
    PSTRAIN_RETURN_IF_ERROR(TakeLaunchedHosts(launched[0], launched_hosts, cluster, &sources));
  } else {
    PSTRAIN_RETURN_IF_ERROR(CheckNumPsAgrees(*cluster, sources.ps));
  }
  PSTRAIN_RETURN_IF_ERROR(ValidateHosts(*cluster, sources.Describe()));
  // 4. The role.
  PSTRAIN_RETURN_IF_ERROR(CheckRoleFlags(binary_role, flags));
  std::string role_source;
  PSTRAIN_ASSIGN_OR_RETURN(const Role role, ChooseRole(binary_role, flags, tf, launched, *cluster, &role_source));
  PSTRAIN_RETURN_IF_ERROR(CheckIndexInRange(binary_role, role, role_source, *cluster));
  if (how != nullptr) *how = role_source;
  return role;
}

}  // namespace pstrain
