#include "common/config/tf_config.h"

#include <climits>
#include <cmath>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace pstrain {
namespace {

using HostList = google::protobuf::RepeatedPtrField<std::string>;

absl::Status TfError(absl::string_view what) { return absl::InvalidArgumentError(absl::StrCat("TF_CONFIG: ", what)); }

absl::Status ReadHostList(const google::protobuf::Value& value, absl::string_view job, HostList* out) {
  if (value.kind_case() != google::protobuf::Value::kListValue) {
    return TfError(absl::StrCat("cluster.", job, ": expected a list of \"host:port\" strings"));
  }
  for (const google::protobuf::Value& v : value.list_value().values()) {
    if (v.kind_case() != google::protobuf::Value::kStringValue) {
      return TfError(absl::StrCat("cluster.", job, ": expected a list of \"host:port\" strings"));
    }
    out->Add(std::string(v.string_value()));
  }
  return absl::OkStatus();
}

using Fields = std::map<std::string, const google::protobuf::Value*>;

// An object's fields by name: iterated in a fixed order, so that the first
// error reported is stable.
Fields SortedFields(const google::protobuf::Struct& object) {
  Fields sorted;
  for (const auto& [key, value] : object.fields()) sorted[key] = &value;
  return sorted;
}

// The chief's (or master's) list: exactly one host.
absl::Status ReadChiefList(const google::protobuf::Value& value, absl::string_view job, HostList* out) {
  PSTRAIN_RETURN_IF_ERROR(ReadHostList(value, job, out));
  if (out->size() != 1) {
    return TfError(absl::StrCat("cluster.", job, ": expected exactly one host, got ", out->size()));
  }
  return absl::OkStatus();
}

// "cluster": {"ps": [...], "worker": [...], "chief": [...]} into tf->cluster,
// the chief prepended to the workers ("master" is an older name of "chief").
absl::Status ReadCluster(const google::protobuf::Value& value, TfConfig* tf) {
  if (value.kind_case() != google::protobuf::Value::kStructValue) {
    return TfError("cluster: expected an object mapping job names to host lists");
  }
  tf->has_cluster = true;
  HostList workers, chief;
  for (const auto& [job, list] : SortedFields(value.struct_value())) {
    if (job == "ps") {
      PSTRAIN_RETURN_IF_ERROR(ReadHostList(*list, job, tf->cluster.mutable_ps_hosts()));
    } else if (job == "worker") {
      PSTRAIN_RETURN_IF_ERROR(ReadHostList(*list, job, &workers));
    } else if (job == "chief" || job == "master") {
      if (tf->has_chief) return TfError("cluster: give either \"chief\" or \"master\", not both");
      tf->has_chief = true;
      PSTRAIN_RETURN_IF_ERROR(ReadChiefList(*list, job, &chief));
    } else {
      return TfError(absl::StrCat("cluster: job '", job, "' is not supported; expected ps, worker or chief"));
    }
  }
  for (const std::string& h : chief) tf->cluster.add_worker_hosts(h);
  for (const std::string& h : workers) tf->cluster.add_worker_hosts(h);
  return absl::OkStatus();
}

// "task.index": a non-negative integer that fits an int.
absl::StatusOr<int> ReadTaskIndex(const google::protobuf::Value& value) {
  const double d = value.number_value();
  if (value.kind_case() != google::protobuf::Value::kNumberValue || d < 0 || d > INT_MAX || std::floor(d) != d) {
    return TfError("task.index: expected a non-negative integer");
  }
  return static_cast<int>(d);
}

// "task": {"type": "worker", "index": 1} into tf ("trial" is accepted and
// ignored; the index defaults to 0).
absl::Status ReadTask(const google::protobuf::Value& value, TfConfig* tf) {
  if (value.kind_case() != google::protobuf::Value::kStructValue) {
    return TfError("task: expected an object like {\"type\": \"worker\", \"index\": 0}");
  }
  tf->has_task = true;
  const auto& fields = value.struct_value().fields();
  for (const auto& [name, v] : fields) {
    if (name != "type" && name != "index" && name != "trial") {
      return TfError(absl::StrCat("task: unknown key '", name, "'; expected type and index"));
    }
  }
  auto type = fields.find("type");
  if (type == fields.end() || type->second.kind_case() != google::protobuf::Value::kStringValue) {
    return TfError("task.type: expected a string (ps, worker or chief)");
  }
  tf->task_type = type->second.string_value();
  auto index = fields.find("index");
  if (index != fields.end()) {
    PSTRAIN_ASSIGN_OR_RETURN(tf->task_index, ReadTaskIndex(index->second));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TfConfig> ParseTfConfig(absl::string_view json) {
  google::protobuf::Struct root;
  const auto parsed = google::protobuf::util::JsonStringToMessage(std::string(json), &root);
  if (!parsed.ok()) {
    return TfError(
        absl::StrCat("malformed JSON, expected an object like {\"cluster\": {...}, "
                     "\"task\": {\"type\": \"worker\", \"index\": 0}} (",
                     std::string(parsed.message()), ")"));
  }
  TfConfig tf;
  for (const auto& [key, value] : SortedFields(root)) {
    if (key == "cluster") {
      PSTRAIN_RETURN_IF_ERROR(ReadCluster(*value, &tf));
    } else if (key == "task") {
      PSTRAIN_RETURN_IF_ERROR(ReadTask(*value, &tf));
    } else if (key != "environment" && key != "rpc_layer") {
      return TfError(absl::StrCat("unknown key '", key, "'; expected cluster, task, environment or rpc_layer"));
    }
  }
  return tf;
}

absl::StatusOr<Role> TfTaskRole(const TfConfig& tf) {
  if (tf.task_type == "ps") return Role{RoleKind::kPs, tf.task_index};
  if (tf.task_type == "worker") {
    // With a chief list worker i is worker i + 1, which must still be an int.
    if (tf.has_chief && tf.task_index == INT_MAX) {
      return TfError(absl::StrCat("task.index ", tf.task_index, " is out of range"));
    }
    return Role{RoleKind::kWorker, tf.task_index + (tf.has_chief ? 1 : 0)};
  }
  if (tf.task_type == "chief" || tf.task_type == "master") {
    if (tf.task_index != 0) {
      return TfError(absl::StrCat("task.index: the chief has index 0, got ", tf.task_index));
    }
    if (tf.has_cluster && !tf.has_chief) {
      return TfError(absl::StrCat("task.type is '", tf.task_type, "' but cluster has no chief list"));
    }
    return Role{RoleKind::kWorker, 0};
  }
  return TfError(absl::StrCat("task.type '", tf.task_type, "' is not supported; expected ps, worker or chief"));
}

}  // namespace pstrain
