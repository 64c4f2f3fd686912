// ValidateExperimentConfig (declared in config_loader.h): the semantic checks
// of a parsed ExperimentConfig, in the order of proto/config.proto, with the
// file-system checks last.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "common/config/cluster.h"
#include "common/config/config_loader.h"
#include "common/config/config_values.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

namespace values = config_values;

template <typename T>
std::string Num(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return absl::StrCat(static_cast<double>(v));
  } else {
    return absl::StrCat(v);
  }
}

template <typename T>
bool Finite(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isfinite(v);
  } else {
    return true;
  }
}

// ", "-joined list of std::string or std::string_view elements.
template <typename Container>
std::string Join(const Container& items) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += ", ";
    out.append(item.data(), item.size());
  }
  return out;
}

// Builds "<file>: field '<path>': expected <what>, got <found>" errors.
class Checker {
 public:
  explicit Checker(std::string_view filename) : file_(filename) {}

  absl::Status Fail(absl::string_view path, absl::string_view expected,
                    absl::string_view got) const {
    return absl::InvalidArgumentError(
        absl::StrCat(file_, ": field '", path, "': expected ", expected, ", got ", got));
  }

  template <typename T>
  absl::Status Positive(absl::string_view path, T v) const {
    if (Finite(v) && v > 0) return absl::OkStatus();
    return Fail(path, "a number > 0", Num(v));
  }

  template <typename T>
  absl::Status NonNegative(absl::string_view path, T v) const {
    if (Finite(v) && v >= 0) return absl::OkStatus();
    return Fail(path, "a number >= 0", Num(v));
  }

  // lo <= v (lo < v when !lo_closed) and v <= hi (v < hi when !hi_closed).
  template <typename T>
  absl::Status InRange(absl::string_view path, T v, T lo, bool lo_closed, T hi,
                       bool hi_closed) const {
    const bool ok = Finite(v) && (lo_closed ? v >= lo : v > lo) && (hi_closed ? v <= hi : v < hi);
    if (ok) return absl::OkStatus();
    return Fail(path,
                absl::StrCat("a number in ", lo_closed ? "[" : "(", Num(lo), ", ", Num(hi),
                             hi_closed ? "]" : ")"),
                Num(v));
  }

  template <typename Container>
  absl::Status OneOf(absl::string_view path, std::string_view value,
                     const Container& allowed) const {
    if (std::find(std::begin(allowed), std::end(allowed), value) != std::end(allowed)) {
      return absl::OkStatus();
    }
    return Fail(path, absl::StrCat("one of ", Join(allowed)),
                absl::StrCat("'", std::string(value), "'"));
  }

 private:
  std::string file_;
};

absl::Status CheckModel(const Checker& ck, const ModelConfig& m,
                        const std::vector<std::string>& known_models) {
  if (!known_models.empty()) PSTRAIN_RETURN_IF_ERROR(ck.OneOf("model.name", m.name(), known_models));
  for (int i = 0; i < m.hidden_units_size(); ++i) {
    if (m.hidden_units(i) <= 0) {
      return ck.Fail(absl::StrCat("model.hidden_units[", i, "]"), "a number of units > 0",
                     Num(m.hidden_units(i)));
    }
  }
  if (m.input_shape_size() != 0) {
    if (m.input_shape_size() != 3) {
      return ck.Fail("model.input_shape", "3 dimensions [channels, height, width]",
                     absl::StrCat(m.input_shape_size(), " ([", absl::StrJoin(m.input_shape(), ", "),
                                  "])"));
    }
    for (int i = 0; i < 3; ++i) {
      if (m.input_shape(i) <= 0) {
        return ck.Fail(absl::StrCat("model.input_shape[", i, "]"), "a dimension > 0",
                       Num(m.input_shape(i)));
      }
    }
  }
  if (m.has_num_classes() && m.num_classes() <= 1) {
    return ck.Fail("model.num_classes", "a number of classes > 1", Num(m.num_classes()));
  }
  return absl::OkStatus();
}

absl::Status CheckData(const Checker& ck, const DataConfig& d) {
  PSTRAIN_RETURN_IF_ERROR(ck.OneOf("data.source", d.source(), values::kDataSources));
  return ck.Positive("data.synthetic_examples", d.synthetic_examples());
}

// The I/O part of the data checks.
absl::Status CheckDataFiles(const Checker& ck, const DataConfig& d) {
  if (d.source() != "fashion_mnist") return absl::OkStatus();
  const std::string expected = absl::StrCat("a directory holding the fashion_mnist files ",
                                            Join(values::kFashionMnistFiles));
  if (d.path().empty()) return ck.Fail("data.path", expected, "''");
  for (std::string_view file : values::kFashionMnistFiles) {
    const std::filesystem::path p = std::filesystem::path(d.path()) / std::string(file);
    std::error_code ec;
    const bool regular = std::filesystem::is_regular_file(p, ec);
    if (!regular || !std::ifstream(p, std::ios::binary)) {
      return ck.Fail("data.path", expected,
                     absl::StrCat("'", d.path(), "' where ", std::string(file),
                                  regular ? " is unreadable" : " is missing"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckOptimizer(const Checker& ck, const OptimizerConfig& o) {
  PSTRAIN_RETURN_IF_ERROR(ck.OneOf("optimizer.name", o.name(), values::kOptimizers));
  PSTRAIN_RETURN_IF_ERROR(ck.Positive("optimizer.learning_rate", o.learning_rate()));
  PSTRAIN_RETURN_IF_ERROR(ck.InRange("optimizer.momentum", o.momentum(), 0.0f, true, 1.0f, false));
  PSTRAIN_RETURN_IF_ERROR(ck.NonNegative("optimizer.weight_decay", o.weight_decay()));
  PSTRAIN_RETURN_IF_ERROR(ck.OneOf("optimizer.lr_schedule", o.lr_schedule(), values::kLrSchedules));
  if (o.lr_schedule() == "step") {
    if (o.lr_decay_steps() <= 0) {
      return ck.Fail("optimizer.lr_decay_steps", "a number > 0 when lr_schedule is step",
                     Num(o.lr_decay_steps()));
    }
    PSTRAIN_RETURN_IF_ERROR(
        ck.InRange("optimizer.lr_decay_factor", o.lr_decay_factor(), 0.0f, false, 1.0f, true));
  }
  return absl::OkStatus();
}

absl::Status CheckTrain(const Checker& ck, const TrainConfig& t) {
  PSTRAIN_RETURN_IF_ERROR(ck.Positive("train.batch_size_per_device", t.batch_size_per_device()));
  PSTRAIN_RETURN_IF_ERROR(ck.NonNegative("train.steps", t.steps()));
  if (t.steps() == 0 && !(std::isfinite(t.epochs()) && t.epochs() > 0)) {
    return ck.Fail("train.epochs", "a number > 0 when train.steps is 0", Num(t.epochs()));
  }
  PSTRAIN_RETURN_IF_ERROR(ck.NonNegative("train.warmup_steps", t.warmup_steps()));
  PSTRAIN_RETURN_IF_ERROR(ck.Positive("train.display_every", t.display_every()));
  return ck.Positive("train.eval_batch_size", t.eval_batch_size());
}

absl::Status CheckTimeouts(const Checker& ck, const TimeoutConfig& t) {
  PSTRAIN_RETURN_IF_ERROR(ck.Positive("timeouts.rpc_seconds", t.rpc_seconds()));
  PSTRAIN_RETURN_IF_ERROR(ck.Positive("timeouts.sync_step_seconds", t.sync_step_seconds()));
  PSTRAIN_RETURN_IF_ERROR(ck.Positive("timeouts.heartbeat_seconds", t.heartbeat_seconds()));
  PSTRAIN_RETURN_IF_ERROR(ck.Positive("timeouts.worker_lost_seconds", t.worker_lost_seconds()));
  PSTRAIN_RETURN_IF_ERROR(ck.Positive("timeouts.startup_seconds", t.startup_seconds()));
  if (!(t.worker_lost_seconds() > t.heartbeat_seconds())) {
    return ck.Fail("timeouts.worker_lost_seconds",
                   absl::StrCat("a number > timeouts.heartbeat_seconds (", Num(t.heartbeat_seconds()),
                                ")"),
                   Num(t.worker_lost_seconds()));
  }
  return absl::OkStatus();
}

absl::Status CheckStrategy(const Checker& ck, const ExperimentConfig& c) {
  PSTRAIN_RETURN_IF_ERROR(ck.OneOf("variable_update", c.variable_update(), values::kVariableUpdates));
  PSTRAIN_RETURN_IF_ERROR(ck.OneOf("consistency", c.consistency(), values::kConsistencies));
  PSTRAIN_RETURN_IF_ERROR(ck.NonNegative("staleness", c.staleness()));
  const int workers = c.cluster().worker_hosts_size();
  if (c.replicas_to_aggregate() < 0 || c.replicas_to_aggregate() > workers) {
    return ck.Fail("replicas_to_aggregate",
                   absl::StrCat("a number in [0, ", workers,
                                "] (0 means every worker; the cluster has ", workers, " workers)"),
                   Num(c.replicas_to_aggregate()));
  }
  PSTRAIN_RETURN_IF_ERROR(ck.OneOf("transport", c.transport(), values::kTransports));
  PSTRAIN_RETURN_IF_ERROR(ck.OneOf("placement", c.placement(), values::kPlacements));
  PSTRAIN_RETURN_IF_ERROR(ck.Positive("partition_bytes", c.partition_bytes()));
  PSTRAIN_RETURN_IF_ERROR(ck.NonNegative("fusion_threshold_bytes", c.fusion_threshold_bytes()));
  PSTRAIN_RETURN_IF_ERROR(ck.OneOf("device", c.device(), values::kDevices));
  if (c.devices_per_worker() < 1 || c.devices_per_worker() > values::kMaxDevicesPerWorker) {
    return ck.Fail("devices_per_worker", absl::StrCat("a number in [1, ", values::kMaxDevicesPerWorker, "]"),
                   Num(c.devices_per_worker()));
  }
  PSTRAIN_RETURN_IF_ERROR(ck.OneOf("local_parameter_device", c.local_parameter_device(),
                                   values::kLocalParameterDevices));
  PSTRAIN_RETURN_IF_ERROR(ck.OneOf("all_reduce_spec", c.all_reduce_spec(), values::kAllReduceSpecs));
  // GPU-only choices on a CPU device: refuse with the reason.
  if (c.device() == "cpu" && c.all_reduce_spec() == "nccl") {
    return ck.Fail("all_reduce_spec",
                   "pscpu or none with device cpu (nccl all-reduces GPU buffers; this experiment runs on CPUs)",
                   "'nccl'");
  }
  if (c.device() == "cpu" && c.local_parameter_device() == "gpu") {
    return ck.Fail("local_parameter_device",
                   "cpu with device cpu (gpu places variables on GPUs; this experiment runs on CPUs)", "'gpu'");
  }
  if (c.local_parameter_device() == "gpu" && c.variable_update() != "parameter_server") {
    return ck.Fail("local_parameter_device",
                   absl::StrCat("cpu for variable_update ", c.variable_update(),
                                " (gpu places each variable's gradient sum on the least-loaded GPU of a "
                                "parameter_server worker; replicated with nccl and allreduce keep variables on the "
                                "GPUs by themselves)"),
                   "'gpu'");
  }
  if (c.all_reduce_spec() == "nccl" && c.variable_update() != "replicated") {
    return ck.Fail("all_reduce_spec",
                   absl::StrCat("pscpu or none for variable_update ", c.variable_update(),
                                " (nccl is built for replicated; allreduce uses NCCL on GPUs by itself)"),
                   "'nccl'");
  }
  const bool single_worker_only = c.variable_update() == "replicated" || c.variable_update() == "independent";
  if (single_worker_only && c.cluster().worker_hosts_size() > 1) {
    return ck.Fail("cluster.worker_hosts",
                   absl::StrCat("one worker for variable_update ", c.variable_update(),
                                " (it synchronises the devices of one worker; across workers use "
                                "distributed_replicated or allreduce)"),
                   absl::StrCat(c.cluster().worker_hosts_size(), " workers"));
  }
  if (!c.all_reduce_spec().empty() && c.variable_update() != "replicated" &&
      c.variable_update() != "distributed_replicated") {
    return ck.Fail("all_reduce_spec",
                   absl::StrCat("empty for variable_update ", c.variable_update(),
                                " (it applies to replicated and distributed_replicated)"),
                   absl::StrCat("'", c.all_reduce_spec(), "'"));
  }
  return ck.InRange<long long>("max_message_bytes", c.max_message_bytes(),
                               values::kMinMessageBytes, true, values::kMaxMessageBytes, true);
}

}  // namespace

absl::Status ValidateExperimentConfig(const ExperimentConfig& config, std::string_view filename,
                                      const std::vector<std::string>& known_models) {
  const Checker ck(filename);
  PSTRAIN_RETURN_IF_ERROR(ValidateCluster(config, filename));
  PSTRAIN_RETURN_IF_ERROR(CheckModel(ck, config.model(), known_models));
  PSTRAIN_RETURN_IF_ERROR(CheckData(ck, config.data()));
  PSTRAIN_RETURN_IF_ERROR(CheckOptimizer(ck, config.optimizer()));
  PSTRAIN_RETURN_IF_ERROR(CheckTrain(ck, config.train()));
  PSTRAIN_RETURN_IF_ERROR(CheckTimeouts(ck, config.timeouts()));
  PSTRAIN_RETURN_IF_ERROR(CheckStrategy(ck, config));
  return CheckDataFiles(ck, config.data());
}

}  // namespace pstrain
