// ValidateExperimentConfig (declared in config_loader.h): the checks of the
// fields common itself owns, in the order of proto/config.proto, then the
// checks registered by the modules that own the rest (config_checks.h).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/compression/compression.h"
#include "common/config/cluster.h"
#include "common/config/config_checks.h"
#include "common/config/config_loader.h"
#include "common/host_port.h"
#include "common/placement.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

// Bounds of max_message_bytes: at least 1 MiB, at most gRPC's limit.
constexpr int64_t kMinMessageBytes = 1LL << 20;
constexpr int64_t kMaxMessageBytes = 2147483647LL;
// Devices per worker process supported so far.
constexpr int kMaxDevicesPerWorker = 16;

using Num = ConfigChecker;

absl::Status CheckModelShape(const ConfigChecker& ck, const ModelConfig& m) {
  for (int i = 0; i < m.hidden_units_size(); ++i) {
    if (m.hidden_units(i) <= 0) {
      return ck.Fail(absl::StrCat("model.hidden_units[", i, "]"), "a number of units > 0", Num::Num(m.hidden_units(i)));
    }
  }
  for (const auto& [field, units] : {std::pair{"bottom_units", &m.bottom_units()}, {"top_units", &m.top_units()}}) {
    for (int i = 0; i < units->size(); ++i) {
      if ((*units)[i] <= 0) {
        return ck.Fail(absl::StrCat("model.", field, "[", i, "]"), "a number of units > 0", Num::Num((*units)[i]));
      }
    }
  }
  if (m.input_shape_size() != 0) {
    if (m.input_shape_size() != 3) {
      return ck.Fail("model.input_shape", "3 dimensions [channels, height, width]",
                     absl::StrCat(m.input_shape_size(), " ([", absl::StrJoin(m.input_shape(), ", "), "])"));
    }
    for (int i = 0; i < 3; ++i) {
      if (m.input_shape(i) <= 0) {
        return ck.Fail(absl::StrCat("model.input_shape[", i, "]"), "a dimension > 0", Num::Num(m.input_shape(i)));
      }
    }
  }
  if (m.has_num_classes() && m.num_classes() <= 1) {
    return ck.Fail("model.num_classes", "a number of classes > 1", Num::Num(m.num_classes()));
  }
  return absl::OkStatus();
}

// model.tables (proto/config.proto EmbeddingTableConfig); each table's own
// optimizer is checked with the experiment's (optim/optimizer.cc).
absl::Status CheckEmbeddingTable(const ConfigChecker& ck, const std::string& path, const EmbeddingTableConfig& t) {
  const bool word = !t.name().empty() && std::all_of(t.name().begin(), t.name().end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
  if (!word) return ck.Fail(path + ".name", "letters, digits and underscores", absl::StrCat("'", t.name(), "'"));
  PSTRAIN_RETURN_IF_ERROR(ck.InRange(path + ".dim", t.dim(), 1, true, 4096, true));
  PSTRAIN_RETURN_IF_ERROR(ck.NonNegative(path + ".cardinality", t.cardinality()));
  PSTRAIN_RETURN_IF_ERROR(ck.NonNegative(path + ".init_scale", t.init_scale()));
  PSTRAIN_RETURN_IF_ERROR(ck.NonNegative(path + ".max_rows", t.max_rows()));
  if (t.max_rows() > 0 && t.cardinality() > 0) {
    return ck.Fail(path + ".max_rows", "0 for a fixed-size table (cardinality > 0)", Num::Num(t.max_rows()));
  }
  return absl::OkStatus();
}

absl::Status CheckEmbeddingTables(const ConfigChecker& ck, const ModelConfig& m) {
  std::set<std::string> names;
  for (int i = 0; i < m.tables_size(); ++i) {
    const std::string path = absl::StrCat("model.tables[", i, "]");
    PSTRAIN_RETURN_IF_ERROR(CheckEmbeddingTable(ck, path, m.tables(i)));
    if (!names.insert(m.tables(i).name()).second) {
      return ck.Fail(path + ".name", "a name no other table has", absl::StrCat("'", m.tables(i).name(), "'"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckTrain(const ConfigChecker& ck, const TrainConfig& t) {
  PSTRAIN_RETURN_IF_ERROR(ck.Positive("train.batch_size_per_device", t.batch_size_per_device()));
  PSTRAIN_RETURN_IF_ERROR(ck.NonNegative("train.steps", t.steps()));
  if (t.steps() == 0 && !(std::isfinite(t.epochs()) && t.epochs() > 0)) {
    return ck.Fail("train.epochs", "a number > 0 when train.steps is 0", Num::Num(t.epochs()));
  }
  PSTRAIN_RETURN_IF_ERROR(ck.NonNegative("train.warmup_steps", t.warmup_steps()));
  PSTRAIN_RETURN_IF_ERROR(ck.Positive("train.display_every", t.display_every()));
  PSTRAIN_RETURN_IF_ERROR(ck.NonNegative("train.eval_every_steps", t.eval_every_steps()));
  PSTRAIN_RETURN_IF_ERROR(ck.NonNegative("train.learning_check_steps", t.learning_check_steps()));
  return ck.Positive("train.eval_batch_size", t.eval_batch_size());
}

absl::Status CheckTimeouts(const ConfigChecker& ck, const TimeoutConfig& t) {
  PSTRAIN_RETURN_IF_ERROR(ck.Positive("timeouts.rpc_seconds", t.rpc_seconds()));
  PSTRAIN_RETURN_IF_ERROR(ck.Positive("timeouts.sync_step_seconds", t.sync_step_seconds()));
  PSTRAIN_RETURN_IF_ERROR(ck.Positive("timeouts.heartbeat_seconds", t.heartbeat_seconds()));
  PSTRAIN_RETURN_IF_ERROR(ck.Positive("timeouts.worker_lost_seconds", t.worker_lost_seconds()));
  PSTRAIN_RETURN_IF_ERROR(ck.Positive("timeouts.startup_seconds", t.startup_seconds()));
  PSTRAIN_RETURN_IF_ERROR(ck.NonNegative("timeouts.ps_recover_seconds", t.ps_recover_seconds()));
  if (!(t.worker_lost_seconds() > t.heartbeat_seconds())) {
    return ck.Fail("timeouts.worker_lost_seconds",
                   absl::StrCat("a number > timeouts.heartbeat_seconds (", Num::Num(t.heartbeat_seconds()), ")"),
                   Num::Num(t.worker_lost_seconds()));
  }
  return absl::OkStatus();
}

// The fields every strategy shares: how many gradients a sync step takes,
// where variables go, the devices.
absl::Status CheckPlacementAndDevices(const ConfigChecker& ck, const ExperimentConfig& c) {
  const int workers = c.cluster().worker_hosts_size();
  if (c.replicas_to_aggregate() < 0 || c.replicas_to_aggregate() > workers) {
    return ck.Fail(
        "replicas_to_aggregate",
        absl::StrCat("a number in [0, ", workers, "] (0 means every worker; the cluster has ", workers, " workers)"),
        Num::Num(c.replicas_to_aggregate()));
  }
  PSTRAIN_RETURN_IF_ERROR(ck.OneOf("placement", c.placement(), PlacementPolicies()));
  PSTRAIN_RETURN_IF_ERROR(ck.NonNegative("partition_bytes", c.partition_bytes()));
  PSTRAIN_RETURN_IF_ERROR(ck.NonNegative("fusion_threshold_bytes", c.fusion_threshold_bytes()));
  PSTRAIN_RETURN_IF_ERROR(ck.Registered("compression", c.compression(), CompressionRegistry()));
  PSTRAIN_RETURN_IF_ERROR(ck.InRange<double>("topk_ratio", c.topk_ratio(), 0, false, 1, true));
  // device and local_parameter_device: the device layer's check
  // (device/device_registry.h).
  if (c.devices_per_worker() < 1 || c.devices_per_worker() > kMaxDevicesPerWorker) {
    return ck.Fail("devices_per_worker", absl::StrCat("a number in [1, ", kMaxDevicesPerWorker, "]"),
                   Num::Num(c.devices_per_worker()));
  }
  return ck.InRange<long long>("max_message_bytes", c.max_message_bytes(), kMinMessageBytes, true, kMaxMessageBytes,
                               true);
}

// The checkpoint fields on their own; which strategies can write
// checkpoints (those with PS shards) is the strategy check's
// (worker/strategy.cc).
absl::Status CheckCheckpoint(const ConfigChecker& ck, const ExperimentConfig& c) {
  const CheckpointConfig& k = c.checkpoint();
  PSTRAIN_RETURN_IF_ERROR(ck.NonNegative("checkpoint.every_steps", k.every_steps()));
  PSTRAIN_RETURN_IF_ERROR(ck.NonNegative("checkpoint.every_seconds", k.every_seconds()));
  PSTRAIN_RETURN_IF_ERROR(ck.Positive("checkpoint.keep", k.keep()));
  PSTRAIN_RETURN_IF_ERROR(ck.Positive("checkpoint.table_full_every", k.table_full_every()));
  if (k.dir().empty() && (k.every_steps() > 0 || k.every_seconds() > 0)) {
    return ck.Fail("checkpoint.dir", "a directory (checkpoint.every_steps/every_seconds ask for checkpoints)", "''");
  }
  return absl::OkStatus();
}

absl::Status CheckTimeline(const ConfigChecker& ck, const TimelineConfig& t) {
  PSTRAIN_RETURN_IF_ERROR(ck.NonNegative("timeline.start_step", t.start_step()));
  PSTRAIN_RETURN_IF_ERROR(ck.NonNegative("timeline.end_step", t.end_step()));
  if (t.end_step() != 0 && t.end_step() <= t.start_step()) {
    return ck.Fail("timeline.end_step",
                   absl::StrCat("0 (to the end) or a step > timeline.start_step (", Num::Num(t.start_step()), ")"),
                   Num::Num(t.end_step()));
  }
  return absl::OkStatus();
}

// Membership and data sharding (docs/ELASTIC.md); which strategies support
// them is the strategy check's (worker/strategy.cc).
absl::Status CheckElastic(const ConfigChecker& ck, const ExperimentConfig& c) {
  PSTRAIN_RETURN_IF_ERROR(ck.Positive("data.chunk_batches", c.data().chunk_batches()));
  const int workers = c.cluster().worker_hosts_size();
  PSTRAIN_RETURN_IF_ERROR(
      ck.InRange<long long>("elastic.min_workers", c.elastic().min_workers(), 0, true, workers, true));
  const int min_workers = c.elastic().min_workers();
  if (min_workers > 0 && min_workers < workers && c.data().sharding() != DataConfig::dynamic) {
    return ck.Fail("data.sharding",
                   absl::StrCat("dynamic when elastic.min_workers (", min_workers, ") is below the ", workers,
                                " listed workers (with static sharding an absent worker's examples are never "
                                "trained, and a joining one's slice is fixed)"),
                   absl::StrCat("'", DataConfig::Sharding_Name(c.data().sharding()), "'"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateExperimentConfig(const ExperimentConfig& config, std::string_view filename) {
  const ConfigChecker ck(absl::string_view(filename.data(), filename.size()));
  PSTRAIN_RETURN_IF_ERROR(ValidateHosts(config.cluster(), filename));
  if (absl::Status s = CheckListenSetting(config.cluster().listen_address()); !s.ok()) {
    return ck.Fail("cluster.listen_address", "\"\", \"cluster\" or a host of this machine", s.message());
  }
  PSTRAIN_RETURN_IF_ERROR(CheckModelShape(ck, config.model()));
  PSTRAIN_RETURN_IF_ERROR(CheckEmbeddingTables(ck, config.model()));
  PSTRAIN_RETURN_IF_ERROR(CheckTrain(ck, config.train()));
  PSTRAIN_RETURN_IF_ERROR(CheckTimeouts(ck, config.timeouts()));
  PSTRAIN_RETURN_IF_ERROR(CheckPlacementAndDevices(ck, config));
  PSTRAIN_RETURN_IF_ERROR(CheckCheckpoint(ck, config));
  PSTRAIN_RETURN_IF_ERROR(ck.Positive("summaries.every_steps", config.summaries().every_steps()));
  PSTRAIN_RETURN_IF_ERROR(CheckTimeline(ck, config.timeline()));
  PSTRAIN_RETURN_IF_ERROR(CheckElastic(ck, config));
  PSTRAIN_RETURN_IF_ERROR(ck.InRange<long long>("metrics_port", config.metrics_port(), 0, true, 65535, true));
  for (const std::string& name : ConfigCheckRegistry().Names()) {
    PSTRAIN_ASSIGN_OR_RETURN(ConfigCheck check, ConfigCheckRegistry().Find(name));
    PSTRAIN_RETURN_IF_ERROR(check(config, ck));
  }
  return absl::OkStatus();
}

}  // namespace pstrain
