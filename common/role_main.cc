#include "common/role_main.h"

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "common/allocator_tuning.h"
#include "common/config/config_loader.h"
#include "gflags/gflags.h"
#include "glog/logging.h"

DEFINE_string(config, "", "experiment config (YAML or protobuf text format)");
DEFINE_int32(index, -1, "this process's index among its job's hosts");
DEFINE_string(job_name, "", "TensorFlow-style job name: ps or worker");
DEFINE_int32(task_index, -1, "TensorFlow-style task index (same as --index)");
DEFINE_string(ps_hosts, "", "comma-separated host:port of every PS shard (overrides the config)");
DEFINE_string(worker_hosts, "", "comma-separated host:port of every worker (overrides the config)");
DEFINE_string(run_dir, "",
              "directory for result.json and other outputs (created if missing); default "
              "runs/<experiment>-<YYYYmmdd-HHMMSS>");
DEFINE_bool(check_config, false, "validate the config as this role would, print 'config ok', exit; start nothing");

namespace pstrain {

std::string DefaultRunDir(const std::string& experiment) {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
  return absl::StrCat("runs/", experiment, "-", stamp);
}

RoleSetup InitRole(int* argc, char*** argv, RoleKind binary_role) {
  TuneAllocatorForBulkTraffic();
  gflags::SetUsageMessage("--config=FILE --index=N [--ps_hosts=... --worker_hosts=... --run_dir=DIR] [--check_config]");
  gflags::ParseCommandLineFlags(argc, argv, true);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging((*argv)[0]);

  auto fail = [](const std::string& message) {
    std::cerr << "error: " << message << std::endl;
    std::exit(kExitBadConfig);
  };
  if (FLAGS_config.empty()) fail("--config=FILE is required");
  // Parse, then apply flags and TF_CONFIG, then validate the final picture.
  absl::StatusOr<ExperimentConfig> config = ReadExperimentConfig(FLAGS_config);
  if (!config.ok()) fail(std::string(config.status().message()));

  ClusterFlags flags;
  flags.job_name = FLAGS_job_name;
  flags.task_index = FLAGS_task_index;
  flags.index = FLAGS_index;
  flags.ps_hosts = FLAGS_ps_hosts;
  flags.worker_hosts = FLAGS_worker_hosts;
  RoleSetup setup;
  setup.config = *std::move(config);
  // mpirun gives workers their index (a PS never runs under mpirun).
  absl::StatusOr<MpiRank> mpi = MpiRank{};
  if (binary_role == RoleKind::kWorker) {
    mpi = MpiRankFromEnvironment(std::getenv("OMPI_COMM_WORLD_RANK"), std::getenv("OMPI_COMM_WORLD_SIZE"));
    if (!mpi.ok()) fail(FLAGS_config + ": " + std::string(mpi.status().message()));
  }
  absl::StatusOr<Role> role = ResolveRole(binary_role, flags, std::getenv("TF_CONFIG"), &setup.config, *mpi);
  if (!role.ok()) {
    std::string message(role.status().message());
    if (message.find(FLAGS_config) == std::string::npos) message = FLAGS_config + ": " + message;
    fail(message);
  }
  setup.role = *role;
  // A PS links no data sources, so it does not insist on the data files.
  if (absl::Status s = ValidateExperimentConfig(setup.config, FLAGS_config); !s.ok()) {
    fail(std::string(s.message()));
  }
  if (FLAGS_check_config) {
    setup.check_only = true;
    std::cout << "config ok: " << FLAGS_config << " (" << RoleToString(setup.role) << ")" << std::endl;
    return setup;
  }
  setup.run_dir = FLAGS_run_dir;
  if (setup.run_dir.empty()) {
    setup.run_dir = DefaultRunDir(setup.config.name());
  } else {
    std::error_code ec;
    std::filesystem::create_directories(setup.run_dir, ec);
    if (ec) fail("cannot create --run_dir " + setup.run_dir + ": " + ec.message());
  }
  return setup;
}

}  // namespace pstrain
