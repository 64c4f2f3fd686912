// Fuzz target: TF_CONFIG and the launchers' environments
// (common/config/cluster.h, common/config/launcher_hosts.h).
//
// Feeds: input byte 0 picks what the rest goes to:
//   0: ExpandSlurmHostList (Slurm's compressed node list)
//   1: ExpandSlurmTasksPerNode ("2(x3),1")
//   2: ParseHostfile (an Open MPI hostfile's text)
//   3..: a role starting up: byte 1 picks the binary (ps or worker),
//      cluster.port and cluster.num_ps; then a record of environment lines
//      ("NAME=value", the fake environment of tests/config/environment.h)
//      and a record of hostfile text, written to a scratch file that
//      OMPI_MCA_orte_default_hostfile names (whatever the environment says:
//      files stay in the scratch directory). LaunchRanksFromEnvironment,
//      LaunchedHostPorts for each launcher found, then ResolveRole with
//      TF_CONFIG from that environment, as role_main does.
// Asserts: errors are INVALID_ARGUMENT with a message; expanded hosts are
// non-empty and free of brackets and commas; task counts are >= 1; a
// hostfile's hosts are distinct; ranks lie in [0, size); LaunchedHostPorts
// gives `size` entries, each a valid host:port; a resolved role's index
// lies within its job's host list, which passes ValidateHosts.
// Seeds: tests/fuzz/corpus/launcher_env/ (TF_CONFIG, srun, mpirun and
// PyTorchJob environments, node lists, tasks per node and hostfiles from
// the tests and docs/CONFIG.md; crash-* regression inputs).
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/config/cluster.h"
#include "common/config/launcher_hosts.h"
#include "common/host_port.h"
#include "tests/fuzz/fuzz_util.h"

using namespace pstrain;        // NOLINT
using namespace pstrain::fuzz;  // NOLINT

namespace {

void CheckError(const absl::Status& status, absl::string_view what) {
  if (status.ok()) return;
  FUZZ_CHECK(absl::IsInvalidArgument(status), what, ": ", status.ToString(), " is not INVALID_ARGUMENT");
  CheckErrorExplains(status, what);
}

void CheckHosts(const std::vector<std::string>& hosts) {
  for (const std::string& h : hosts) {
    FUZZ_CHECK(!h.empty(), "empty host expanded");
    FUZZ_CHECK(h.find_first_of("[],") == std::string::npos, "host '", h, "' keeps list syntax");
  }
}

// The fake environment: "NAME=value" lines.
std::function<const char*(const char*)> Environment(absl::string_view lines, const std::string& hostfile) {
  auto held = std::make_shared<std::map<std::string, std::string>>();
  for (absl::string_view line : absl::StrSplit(lines, '\n')) {
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos) continue;
    (*held)[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
  }
  if (held->count("OMPI_MCA_orte_default_hostfile")) (*held)["OMPI_MCA_orte_default_hostfile"] = hostfile;
  return [held](const char* name) -> const char* {
    auto it = held->find(name);
    return it == held->end() ? nullptr : it->second.c_str();
  };
}

void RoleStartUp(Reader& in) {
  const uint8_t role_byte = in.U8();
  const RoleKind kind = role_byte % 2 == 0 ? RoleKind::kWorker : RoleKind::kPs;
  const absl::string_view env_text = in.Record();
  const absl::string_view hostfile_text = in.Record();
  const std::string hostfile = ScratchDir() + "/hostfile";
  std::ofstream(hostfile, std::ios::binary | std::ios::trunc) << hostfile_text;
  auto getenv = Environment(env_text, hostfile);

  ExperimentConfig config;
  ClusterConfig* cluster = config.mutable_cluster();
  cluster->set_port(2222 + (role_byte >> 1) * 997);
  cluster->set_num_ps((role_byte >> 5) % 3);

  absl::StatusOr<std::vector<LaunchRank>> ranks = LaunchRanksFromEnvironment(getenv);
  if (!ranks.ok()) {
    CheckError(ranks.status(), "LaunchRanksFromEnvironment");
    return;
  }
  for (const LaunchRank& r : *ranks) {
    FUZZ_CHECK(r.rank >= 0 && r.rank < r.size, r.source, ": rank ", r.rank, " of ", r.size);
    absl::StatusOr<std::vector<std::string>> hosts = LaunchedHostPorts(r, *cluster, getenv);
    if (!hosts.ok()) {
      CheckError(hosts.status(), "LaunchedHostPorts");
      continue;
    }
    FUZZ_CHECK(hosts->size() == static_cast<size_t>(r.size), r.source, ": ", hosts->size(), " host:ports for ", r.size,
               " ranks");
    for (const std::string& hp : *hosts) {
      FUZZ_CHECK(ParseHostPort(hp).ok(), "LaunchedHostPorts gave '", hp, "': ", ParseHostPort(hp).status().ToString());
    }
  }
  std::string how;
  absl::StatusOr<Role> role =
      ResolveRole(kind, ClusterFlags(), getenv("TF_CONFIG"), &config, *ranks, &how,
                  [&getenv](const LaunchRank& r, const ClusterConfig& c) { return LaunchedHostPorts(r, c, getenv); });
  if (!role.ok()) {
    CheckError(role.status(), "ResolveRole");
    return;
  }
  const int hosts = role->kind == RoleKind::kPs ? cluster->ps_hosts_size() : cluster->worker_hosts_size();
  FUZZ_CHECK(role->index >= 0 && role->index < hosts, RoleToString(*role), " of ", hosts, " hosts (", how, ")");
  const absl::Status valid = ValidateHosts(*cluster, "resolved");
  FUZZ_CHECK(valid.ok(), "ResolveRole accepted hosts ValidateHosts refuses: ", valid.ToString());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader in(data, size);
  const uint8_t mode = in.U8();
  if (mode % 4 == 0) {
    absl::StatusOr<std::vector<std::string>> hosts = ExpandSlurmHostList(in.Rest());
    if (hosts.ok()) CheckHosts(*hosts);
    CheckError(hosts.status(), "ExpandSlurmHostList");
  } else if (mode % 4 == 1) {
    absl::StatusOr<std::vector<int>> counts = ExpandSlurmTasksPerNode(in.Rest());
    CheckError(counts.status(), "ExpandSlurmTasksPerNode");
    if (counts.ok()) {
      for (int c : *counts) FUZZ_CHECK(c >= 1, "tasks per node count ", c);
    }
  } else if (mode % 4 == 2) {
    absl::StatusOr<std::vector<HostSlots>> hosts = ParseHostfile(in.Rest(), "hostfile");
    CheckError(hosts.status(), "ParseHostfile");
    if (hosts.ok()) {
      std::set<std::string> seen;
      for (const HostSlots& h : *hosts) {
        FUZZ_CHECK(!h.host.empty() && seen.insert(h.host).second, "hostfile host '", h.host, "' empty or repeated");
        FUZZ_CHECK(h.slots >= 0, h.host, " has ", h.slots, " slots");
      }
    }
  } else {
    RoleStartUp(in);
  }
  return 0;
}
