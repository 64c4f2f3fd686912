// TF_CONFIG (Kubeflow TFJob's JSON) read into the cluster and the task it
// names, before ResolveRole (cluster.h) merges it with the config file and
// the flags. Internal to common/config; cluster.h states the rules.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/config/cluster.h"
#include "proto/config.pb.h"

namespace pstrain {

// What TF_CONFIG said, before it is merged.
struct TfConfig {
  bool has_cluster = false;
  ClusterConfig cluster;  // chief already prepended to the workers
  bool has_chief = false;
  bool has_task = false;
  std::string task_type;
  int task_index = 0;
};

// Parses TF_CONFIG's JSON text. Errors are InvalidArgument, "TF_CONFIG: ...";
// keys are read in sorted order, so the first error reported is stable.
absl::StatusOr<TfConfig> ParseTfConfig(absl::string_view json);

// The role TF_CONFIG's task names, with the chief as worker 0.
absl::StatusOr<Role> TfTaskRole(const TfConfig& tf);

}  // namespace pstrain
