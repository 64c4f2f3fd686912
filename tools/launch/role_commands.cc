#include "tools/launch/role_commands.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "tools/launch/mpirun.h"

namespace pstrain::launch {
namespace {

constexpr char kPsBinary[] = "pstrain-ps";
constexpr char kWorkerBinary[] = "pstrain-worker";

// `role` run as `prefix... role.binary role.args...`.
void RunThrough(std::vector<std::string> prefix, RoleSpec& role) {
  prefix.push_back(role.binary);
  prefix.insert(prefix.end(), role.args.begin(), role.args.end());
  role.binary = prefix[0];
  role.args.assign(prefix.begin() + 1, prefix.end());
}

}  // namespace

std::vector<std::string> RoleCommands::Args(int index, bool check) const {
  std::vector<std::string> args = {absl::StrCat("--config=", config), absl::StrCat("--index=", index),
                                   absl::StrCat("--ps_hosts=", ps_hosts), absl::StrCat("--worker_hosts=", worker_hosts),
                                   absl::StrCat("--run_dir=", run_dir)};
  if (check) args.push_back(kCheckConfigFlag);
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  return args;
}

std::string RoleCommands::Binary(const std::string& binary) const {
  return (std::filesystem::path(bin_dir) / binary).string();
}

std::vector<RoleSpec> RoleCommands::Roles(int num_ps, int num_workers, const EmulatedCluster* emulated) const {
  std::vector<RoleSpec> roles;
  auto add = [&](const char* kind, const char* binary, int index, bool is_ps) {
    RoleSpec role;
    role.name = absl::StrCat(kind, index);
    role.is_ps = is_ps;
    role.binary = Binary(binary);
    role.args = Args(index, /*check=*/false);
    if (emulated != nullptr) RunThrough(is_ps ? emulated->RunPs(index) : emulated->RunWorker(index), role);
    roles.push_back(std::move(role));
  };
  for (int i = 0; i < num_ps; ++i) add("ps", kPsBinary, i, true);
  for (int i = 0; i < num_workers; ++i) add("worker", kWorkerBinary, i, false);
  return roles;
}

std::vector<RoleToCheck> RoleCommands::Checks(int num_ps, int num_workers) const {
  std::vector<RoleToCheck> checks;
  if (num_ps > 0) checks.push_back({"ps", Binary(kPsBinary), Args(0, /*check=*/true)});
  if (num_workers > 0) checks.push_back({"worker", Binary(kWorkerBinary), Args(0, /*check=*/true)});
  return checks;
}

absl::StatusOr<RoleSpec> RoleCommands::MpirunWorkers(int num_workers) const {
  std::vector<std::string> args = Args(0, /*check=*/false);
  args.erase(args.begin() + 1);  // --index: each rank takes its own from mpirun
  return MpirunRole(num_workers, Binary(kWorkerBinary), std::move(args));
}

void ShareCoresAmongRoles(int num_workers) {
  if (std::getenv("OMP_NUM_THREADS") == nullptr) {
    const long cores = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
    const long share = std::max(1L, cores / std::max(1, num_workers));
    setenv("OMP_NUM_THREADS", std::to_string(share).c_str(), 1);
  }
  if (std::getenv("OMP_WAIT_POLICY") == nullptr) setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
}

}  // namespace pstrain::launch
