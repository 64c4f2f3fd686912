#include "tools/launch/launch_plan.h"

#include <ctime>
#include <filesystem>
#include <iostream>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/config/byte_scale.h"
#include "common/config/cluster.h"
#include "common/config/config_loader.h"
#include "common/config/time_dilation.h"
#include "common/status_macros.h"
#include "tools/launch/role_commands.h"

namespace pstrain::launch {
namespace {

namespace fs = std::filesystem;

// The config as every role reads it; its host lists must be valid although
// the roles get other addresses: each role checks them too.
absl::StatusOr<ExperimentConfig> ReadConfig(const std::string& config) {
  absl::StatusOr<ExperimentConfig> experiment = ReadExperimentConfig(config);
  if (!experiment.ok()) return absl::InvalidArgumentError(experiment.status().message());
  if (absl::Status status = ValidateHosts(experiment->cluster(), config); !status.ok()) {
    return absl::InvalidArgumentError(status.message());
  }
  return experiment;
}

// `bin_dir`, or the directory of this executable.
absl::StatusOr<std::string> RoleBinaryDir(const std::string& bin_dir) {
  if (!bin_dir.empty()) return bin_dir;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot find my own executable (/proc/self/exe): ", ec.message()));
  return self.parent_path().string();
}

// runs/<config stem>-<YYYYmmdd-HHMMSS>.
std::string DefaultRunDir(const std::string& config) {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
  return absl::StrCat("runs/", fs::path(config).stem().string(), "-", stamp);
}

absl::Status CreateRunDir(const std::string& run_dir) {
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  if (ec || !fs::is_directory(run_dir)) {
    return absl::InternalError(
        absl::StrCat("cannot create run directory ", run_dir, ": ", ec ? ec.message() : "not a directory"));
  }
  return absl::OkStatus();
}

// Workers that must be the ranks of one mpirun (collective mpi) run as one
// role: mpirun with a rank per worker, in place of the worker roles.
absl::Status RunWorkersUnderMpirun(const RoleCommands& commands, LaunchPlan& plan) {
  if (plan.addresses.emulated != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(plan.config,
                     ": emulation: workers that run as the ranks of one mpirun (collective mpi) "
                     "cannot be placed on emulated hosts yet; use collective gloo; nothing was started"));
  }
  const int num_workers = plan.experiment.cluster().worker_hosts_size();
  absl::StatusOr<RoleSpec> mpirun = commands.MpirunWorkers(num_workers);
  if (!mpirun.ok()) return absl::InternalError(absl::StrCat(mpirun.status().message(), "; nothing was started"));
  plan.roles.resize(plan.experiment.cluster().ps_hosts_size());  // the PS roles stay as they are
  plan.roles.push_back(*std::move(mpirun));
  plan.workers_under_mpirun = true;
  std::cout << "launch: the " << num_workers << " workers run as the ranks of one mpirun (collective mpi)" << std::endl;
  return absl::OkStatus();
}

// The supervision policy (process_group.h) the flags ask for.
ClusterOptions Supervision(const LaunchArgs& args, const LaunchPlan& plan) {
  ClusterOptions options;
  options.log_dir = plan.run_dir;
  options.grace = absl::Seconds(args.grace_s);
  // Time dilation slows every exchange, the last ones before a PS exits too.
  options.grace *= TimeDilation(plan.experiment);
  options.timeout = absl::Seconds(args.timeout_s);
  options.max_restarts = args.max_restarts;
  options.workers_may_leave = plan.experiment.elastic().on_worker_lost() == ElasticConfig::continue_;
  return options;
}

}  // namespace

int ExitCodeOf(const absl::Status& status) { return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1; }

absl::Status ValidateLaunchArgs(const LaunchArgs& args) {
  if (args.timeout_s < 0 || args.grace_s < 0)
    return absl::InvalidArgumentError("--timeout_s and --grace_s must be >= 0");
  if (args.check_timeout_s <= 0) return absl::InvalidArgumentError("--check_timeout_s must be > 0");
  if (args.max_restarts < 0) return absl::InvalidArgumentError("--max_restarts must be >= 0");
  return absl::OkStatus();
}

absl::StatusOr<LaunchPlan> PrepareLaunch(const LaunchArgs& args) {
  LaunchPlan plan;
  plan.config = args.config;
  PSTRAIN_ASSIGN_OR_RETURN(plan.experiment, ReadConfig(args.config));
  if (absl::Status s = CheckByteScale(plan.experiment, args.byte_scale); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(args.config, ": ", s.message()));
  }
  plan.byte_scale = args.byte_scale;
  PSTRAIN_ASSIGN_OR_RETURN(const std::string bin_dir, RoleBinaryDir(args.bin_dir));
  plan.run_dir = args.run_dir.empty() ? DefaultRunDir(args.config) : args.run_dir;
  PSTRAIN_ASSIGN_OR_RETURN(plan.addresses, AssignAddresses(plan.experiment, args.config, plan.byte_scale));

  std::vector<std::string> role_args = args.role_args;
  if (plan.byte_scale != 1) role_args.insert(role_args.begin(), absl::StrCat("--byte_scale=", plan.byte_scale));
  const TimeoutConfig& timeouts = plan.experiment.timeouts();
  plan.recovery_by_default = args.max_restarts > 0 && plan.experiment.cluster().ps_hosts_size() > 0 &&
                             !plan.experiment.checkpoint().dir().empty() && !timeouts.has_ps_recover_seconds();
  if (plan.recovery_by_default) {
    plan.experiment.mutable_timeouts()->set_ps_recover_seconds(kDefaultPsRecoverSeconds);
    role_args.insert(role_args.begin(), absl::StrCat("--ps_recover_seconds=", kDefaultPsRecoverSeconds));
  }
  const RoleCommands commands{args.config, bin_dir, plan.run_dir, plan.addresses.ps_hosts, plan.addresses.worker_hosts,
                              role_args};
  const int num_ps = plan.experiment.cluster().ps_hosts_size();
  const int num_workers = plan.experiment.cluster().worker_hosts_size();
  ShareCoresAmongRoles(num_workers);
  plan.roles = commands.Roles(num_ps, num_workers, plan.addresses.emulated.get());
  PSTRAIN_ASSIGN_OR_RETURN(const RoleChecks checks,
                           CheckRoles(commands.Checks(num_ps, num_workers), absl::Seconds(args.check_timeout_s)));
  plan.accepted_by = checks.accepted_by;
  if (checks.workers_need_mpirun) PSTRAIN_RETURN_IF_ERROR(RunWorkersUnderMpirun(commands, plan));
  if (args.check_only) return plan;
  PSTRAIN_RETURN_IF_ERROR(CreateRunDir(plan.run_dir));
  plan.options = Supervision(args, plan);
  return plan;
}

}  // namespace pstrain::launch
