#include "worker/strategy.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "optim/loss_scaler.h"

namespace pstrain {
namespace {

bool Contains(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

// The one check of a config against its strategy: the entry's declared
// fields, its own rules, then what its needs ask of the cluster.
// Checkpoints hold the PS shards' state: a strategy without PS shards
// refuses the fields that ask for them, naming the strategies that have them.
absl::Status CheckNoCheckpoints(const ExperimentConfig& c, const ConfigChecker& ck) {
  std::vector<std::string> with_shards;
  for (const std::string& other : StrategyRegistry().Names()) {
    absl::StatusOr<StrategyEntry> entry = StrategyRegistry().Find(other);
    if (entry.ok() && entry->needs(c).parameter_servers) with_shards.push_back(other);
  }
  const std::string& name = c.variable_update();
  if (!c.checkpoint().dir().empty()) {
    return ck.Fail("checkpoint.dir",
                   absl::StrCat("empty with variable_update ", name,
                                " (checkpoints hold the PS shards' state: ", absl::StrJoin(with_shards, " and "), ")"),
                   absl::StrCat("'", c.checkpoint().dir(), "'"));
  }
  if (!c.checkpoint().restore().empty()) {
    return ck.Fail("checkpoint.restore", absl::StrCat("empty with variable_update ", name),
                   absl::StrCat("'", c.checkpoint().restore(), "'"));
  }
  return absl::OkStatus();
}

// Membership that changes and the data ledger need parameter servers: an
// all-reduce group does not re-form yet, and the ledger lives on shard 0.
absl::Status CheckNoElastic(const ExperimentConfig& c, const ConfigChecker& ck) {
  const std::string why = absl::StrCat(" for variable_update ", c.variable_update(),
                                       " (membership changes and the data ledger need parameter servers, "
                                       "or variable_update allreduce over collective gloo, whose group re-forms)");
  if (c.data().sharding() != DataConfig::static_) {
    return ck.Fail("data.sharding", absl::StrCat("static", why),
                   absl::StrCat("'", DataConfig::Sharding_Name(c.data().sharding()), "'"));
  }
  if (c.elastic().min_workers() != 0 && c.elastic().min_workers() != c.cluster().worker_hosts_size()) {
    return ck.Fail("elastic.min_workers", absl::StrCat("unset", why), absl::StrCat(c.elastic().min_workers()));
  }
  if (c.elastic().on_worker_lost() != ElasticConfig::stop) {
    return ck.Fail("elastic.on_worker_lost", absl::StrCat("stop", why),
                   absl::StrCat("'", ElasticConfig::OnWorkerLost_Name(c.elastic().on_worker_lost()), "'"));
  }
  return absl::OkStatus();
}

// Loss scaling: valid fields (LossScaler's own rules), and gradients the
// worker unscales on the host (ReplicaSet::SetLossScale) or the strategy on
// the devices.
absl::Status CheckLossScaling(const ExperimentConfig& c, const StrategyNeeds& needs, const ConfigChecker& ck) {
  PSTRAIN_RETURN_IF_ERROR(CheckLossScalingConfig(c.loss_scaling(), ck));
  if (!ScalesLoss(c.loss_scaling()) || c.device() != "gpu" || (needs.host_mirrors && needs.download_gradients) ||
      (!needs.host_mirrors && needs.unscales_on_device)) {
    return absl::OkStatus();
  }
  return ck.Fail(
      "loss_scaling.mode",
      absl::StrCat("none for variable_update ", c.variable_update(),
                   c.all_reduce_spec().empty() ? "" : absl::StrCat(" with all_reduce_spec ", c.all_reduce_spec()),
                   " and local_parameter_device ", c.local_parameter_device(),
                   " (loss scaling unscales the gradients on the host, or on the GPUs in the NCCL strategies; "
                   "this one keeps them on the GPUs, where it does not unscale them)"),
      absl::StrCat("'", LossScalingConfig::Mode_Name(c.loss_scaling().mode()), "'"));
}

// The strategies that run a model with embedding tables under `c`: those
// with parameter servers and those that run tables beside them.
std::vector<std::string> TableStrategies(const ExperimentConfig& c) {
  std::vector<std::string> names;
  for (const std::string& name : StrategyRegistry().Names()) {
    const absl::StatusOr<StrategyEntry> e = StrategyRegistry().Find(name);
    if (e.ok() && (e->tables_beside || e->needs(c).parameter_servers)) names.push_back(name);
  }
  return names;
}

// model.tables under a strategy without parameter servers: one whose entry
// runs tables beside it, with shards listed for them, sync or async (its
// workers run in lock step: ssp's bound always holds).
absl::Status CheckTablesBeside(const ExperimentConfig& c, const StrategyEntry& entry, const ConfigChecker& ck) {
  if (c.model().tables_size() == 0) return absl::OkStatus();
  const std::string& name = c.variable_update();
  if (!entry.tables_beside) {
    return ck.Fail("model.tables",
                   absl::StrCat("none for variable_update ", name, " (embedding tables live on parameter servers; ",
                                absl::StrJoin(TableStrategies(c), ", "), " run them)"),
                   absl::StrCat(c.model().tables_size(), " tables"));
  }
  if (c.consistency() == "ssp") {
    return ck.Fail("consistency",
                   absl::StrCat("sync or async for the embedding tables beside variable_update ", name,
                                " (its workers run in lock step)"),
                   "'ssp'");
  }
  if (c.cluster().ps_hosts().empty()) {
    return ck.Fail("cluster.ps_hosts",
                   absl::StrCat("at least one host:port for model.tables (the embedding tables live on parameter ",
                                "servers beside variable_update ", name, ")"),
                   "none");
  }
  return absl::OkStatus();
}

absl::StatusOr<StrategyNeeds> CheckAgainstStrategy(const ExperimentConfig& c, const ConfigChecker& ck) {
  PSTRAIN_RETURN_IF_ERROR(ck.OneOf("variable_update", c.variable_update(), StrategyRegistry().Names()));
  PSTRAIN_ASSIGN_OR_RETURN(const StrategyEntry entry, StrategyRegistry().Find(c.variable_update()));
  const std::string& name = c.variable_update();
  if (entry.all_reduce_specs.empty() && !c.all_reduce_spec().empty()) {
    return ck.Fail("all_reduce_spec", absl::StrCat("empty for variable_update ", name, " (", entry.summary, ")"),
                   absl::StrCat("'", c.all_reduce_spec(), "'"));
  }
  if (!entry.all_reduce_specs.empty() && !Contains(entry.all_reduce_specs, c.all_reduce_spec())) {
    std::vector<std::string> shown;
    for (const std::string& s : entry.all_reduce_specs) shown.push_back(s.empty() ? "'' (default)" : s);
    return ck.Fail("all_reduce_spec",
                   absl::StrCat("one of ", absl::StrJoin(shown, ", "), " for variable_update ", name),
                   absl::StrCat("'", c.all_reduce_spec(), "'"));
  }
  if (!entry.local_parameter_device_gpu && c.local_parameter_device() != "cpu") {
    return ck.Fail("local_parameter_device",
                   absl::StrCat("cpu for variable_update ", name, " (", entry.summary,
                                "; gpu places each variable's gradient sum on the least-loaded GPU of a worker "
                                "whose variables live on parameter servers)"),
                   absl::StrCat("'", c.local_parameter_device(), "'"));
  }
  if (!entry.reads_collective) {
    for (const char* field : {"collective", "hierarchical_allreduce", "workers_per_host"}) {
      const auto* f = ExperimentConfig::descriptor()->FindFieldByName(field);
      if (c.GetReflection()->HasField(c, f)) {
        return ck.Fail(field,
                       absl::StrCat("unset for variable_update ", name, " (it applies to the strategies that ",
                                    "all-reduce between workers)"),
                       "a value");
      }
    }
  }
  if (c.compression() != "none" && !Contains(entry.compressions, c.compression())) {
    return ck.Fail(
        "compression",
        entry.compressions.empty()
            ? absl::StrCat("none for variable_update ", name, " (nothing travels between workers)")
            : absl::StrCat("one of none, ", absl::StrJoin(entry.compressions, ", "), " for variable_update ", name),
        absl::StrCat("'", c.compression(), "'"));
  }
  if (entry.check) PSTRAIN_RETURN_IF_ERROR(entry.check(c, ck));
  const StrategyNeeds needs = entry.needs(c);
  if (needs.parameter_servers && c.cluster().ps_hosts().empty()) {
    return ck.Fail("cluster.ps_hosts", absl::StrCat("at least one host:port when variable_update is ", name), "none");
  }
  if (!needs.parameter_servers) PSTRAIN_RETURN_IF_ERROR(CheckTablesBeside(c, entry, ck));
  if (!needs.parameter_servers) {
    PSTRAIN_RETURN_IF_ERROR(CheckNoCheckpoints(c, ck));
    if (!needs.elastic_group) PSTRAIN_RETURN_IF_ERROR(CheckNoElastic(c, ck));
  }
  const int workers = c.cluster().worker_hosts_size();
  if (needs.max_workers > 0 && workers > needs.max_workers) {
    return ck.Fail(
        "cluster.worker_hosts",
        absl::StrCat(needs.max_workers == 1 ? "one worker" : absl::StrCat("at most ", needs.max_workers, " workers"),
                     " for variable_update ", name, " (", entry.summary, ")"),
        absl::StrCat(workers, " workers"));
  }
  if (!needs.devices.empty() && !Contains(needs.devices, c.device())) {
    return ck.Fail(
        "device",
        absl::StrCat("one of ", absl::StrJoin(needs.devices, ", "), " for variable_update ", name,
                     c.all_reduce_spec().empty() ? "" : absl::StrCat(" with all_reduce_spec ", c.all_reduce_spec())),
        absl::StrCat("'", c.device(), "'"));
  }
  PSTRAIN_RETURN_IF_ERROR(CheckLossScaling(c, needs, ck));
  return needs;
}

const bool kConfigCheck = ConfigCheckRegistry().Register(
    "variable_update",
    [](const ExperimentConfig& config, const ConfigChecker& ck) { return CheckAgainstStrategy(config, ck).status(); });

}  // namespace

Registry<StrategyEntry>& StrategyRegistry() {
  static auto* registry = new Registry<StrategyEntry>("variable_update");
  return *registry;
}

absl::StatusOr<StrategyNeeds> NeedsOf(const ExperimentConfig& config, absl::string_view source) {
  return CheckAgainstStrategy(config, ConfigChecker(source));
}

std::map<std::string, StrategyWrapper>& StrategyWrappers() {
  static auto* wrappers = new std::map<std::string, StrategyWrapper>;
  return *wrappers;
}

bool RegisterStrategyWrapper(const std::string& name, StrategyWrapper wrap) {
  return StrategyWrappers().emplace(name, std::move(wrap)).second;
}

absl::StatusOr<std::unique_ptr<Strategy>> CreateStrategy(const StrategyContext& context) {
  PSTRAIN_RETURN_IF_ERROR(NeedsOf(*context.config).status());
  PSTRAIN_ASSIGN_OR_RETURN(const StrategyEntry entry, StrategyRegistry().Find(context.config->variable_update()));
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Strategy> strategy, entry.create(context));
  for (const auto& [name, wrap] : StrategyWrappers()) {
    PSTRAIN_ASSIGN_OR_RETURN(strategy, wrap(context, entry, std::move(strategy)));
  }
  return strategy;
}

}  // namespace pstrain
