// A strategy without parameter servers, with the run's embedding tables on
// PS shards beside it (StrategyEntry::tables_beside; docs/EMBEDDINGS.md,
// "Dense MLPs on all-reduce beside tables on the PS"): the dense strategy
// does everything it does alone; the tables' session (TableSession) starts
// before it, hears of each finished step, and finishes after it. The
// worker's sparse stage moves the rows (worker/sparse_stage.h), with the
// session's generation. Registered as a strategy wrapper (worker/strategy.h),
// so CreateStrategy knows nothing of tables.
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/strategy.h"
#include "worker/table_session.h"

namespace pstrain {
namespace {

// The dense strategy's work, with the tables' session around it; the
// tables' shards are the run's ShardSession (their generation for the sparse
// stage; a failed step is not recovered: the run ends with it).
class TablesBeside : public Strategy, public ShardSession {
 public:
  TablesBeside(std::unique_ptr<Strategy> dense, std::unique_ptr<TableSession> tables, const StrategyContext& context)
      : dense_(std::move(dense)), tables_(std::move(tables)), context_(context) {}

  absl::StatusOr<int64_t> Start() override {
    PSTRAIN_RETURN_IF_ERROR(tables_->Start(context_.total_steps));
    return dense_->Start();
  }
  absl::Status BeforeStep(int64_t step) override { return dense_->BeforeStep(step); }
  absl::Status AfterStep(int64_t step) override {
    PSTRAIN_RETURN_IF_ERROR(dense_->AfterStep(step));
    tables_->set_step(step + 1);
    return absl::OkStatus();
  }
  // Every worker's report through the dense strategy, then the shards' end.
  absl::StatusOr<ClusterReport> Finish(const WorkerReport& mine) override {
    PSTRAIN_ASSIGN_OR_RETURN(ClusterReport report, dense_->Finish(mine));
    PSTRAIN_RETURN_IF_ERROR(tables_->Finish(mine, context_.before_chief_done, &report));
    return report;
  }
  std::string Describe() const override {
    return absl::StrCat(dense_->Describe(), "; embedding tables on ", tables_->num_shards(), " PS (",
                        context_.config->consistency(), ")");
  }
  GradientReadyHook HookFor(int replica) override { return dense_->HookFor(replica); }
  StrategyTraffic traffic() const override { return dense_->traffic(); }
  ShardSession* shards() override { return this; }

  // ShardSession.
  int64_t generation() const override { return tables_->generation(); }
  absl::StatusOr<int64_t> Recover(const absl::Status& failure) override { return failure; }
  std::vector<Recovery> recoveries() const override { return {}; }
  absl::StatusOr<ChunkResponse> ExchangeChunks(const std::vector<CompletedChunk>&) override {
    return absl::FailedPreconditionError("data.sharding dynamic needs a parameter-server strategy");
  }
  absl::Status PauseSteps() override { return ExchangeChunks({}).status(); }
  absl::StatusOr<int64_t> ResumeSteps(int64_t) override { return ExchangeChunks({}).status(); }
  bool watches_stragglers() const override { return false; }
  std::vector<Straggler> stragglers() const override { return {}; }

 private:
  std::unique_ptr<Strategy> dense_;
  std::unique_ptr<TableSession> tables_;
  const StrategyContext context_;
};

// A model with tables under a strategy without parameter servers of its own
// (StrategyEntry::tables_beside; the config check refuses the others).
const bool kWrapperRegistered = RegisterStrategyWrapper(
    "tables_beside",
    [](const StrategyContext& context, const StrategyEntry& entry,
       std::unique_ptr<Strategy> dense) -> absl::StatusOr<std::unique_ptr<Strategy>> {
      const ExperimentConfig& config = *context.config;
      if (config.model().tables_size() == 0 || entry.needs(config).parameter_servers) return dense;
      PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<TableSession> tables,
                               TableSession::Create(config, context.worker_index, context.transport));
      return std::unique_ptr<Strategy>(std::make_unique<TablesBeside>(std::move(dense), std::move(tables), context));
    });

}  // namespace

}  // namespace pstrain
