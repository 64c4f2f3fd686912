// Runs pstrain-launch on a config written to a scratch directory and reads
// back what it left: the integration tests of emulated hosts and devices.
#pragma once

#include <sys/wait.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/metrics/result_json.h"
#include "tests/util/process_test_util.h"

namespace pstrain::test {

struct Launched {
  int exit_code = -1;  // -1: killed, or not run
  std::string output;  // the launcher's stdout and stderr
  absl::StatusOr<RunResult> result = absl::UnknownError("not run");
};

// Writes `yaml` to <dir>/<name>.yaml and runs pstrain-launch on it (run
// directory <dir>/<name>, its own deadline 240 s), prefixed by `prefix`
// (e.g. another user, another PATH) and followed by `launch_flags`; waits at
// most 5 minutes.
inline Launched LaunchConfig(const std::string& dir, const std::string& name, const std::string& yaml,
                             std::vector<std::string> prefix = {}, const std::vector<std::string>& launch_flags = {}) {
  const std::string config = dir + "/" + name + ".yaml";
  const std::string run_dir = dir + "/" + name;
  WriteFile(config, yaml);
  prefix.insert(prefix.end(), {BinDir() + "/pstrain-launch", config, "--run_dir", run_dir, "--timeout_s", "240"});
  prefix.insert(prefix.end(), launch_flags.begin(), launch_flags.end());
  Subprocess launch = Spawn(prefix, dir);
  std::optional<int> status = WaitForExit(launch.pid, std::chrono::minutes(5));
  Launched out;
  out.output = launch.out() + launch.err();
  if (status && WIFEXITED(*status)) out.exit_code = WEXITSTATUS(*status);
  out.result = ReadResultJson(run_dir + "/result.json");
  return out;
}

}  // namespace pstrain::test
