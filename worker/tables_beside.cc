#include "worker/tables_beside.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

class TablesBeside : public Strategy {
 public:
  TablesBeside(std::unique_ptr<Strategy> dense, std::unique_ptr<TableSession> tables, const StrategyContext& context)
      : dense_(std::move(dense)), tables_(std::move(tables)), context_(context) {}

  absl::Status Start() override {
    PSTRAIN_RETURN_IF_ERROR(tables_->Start(context_.total_steps));
    return dense_->Start();
  }
  int64_t start_step() const override { return dense_->start_step(); }
  absl::Status BeforeStep(int64_t step) override { return dense_->BeforeStep(step); }
  absl::Status AfterStep(int64_t step) override {
    PSTRAIN_RETURN_IF_ERROR(dense_->AfterStep(step));
    tables_->set_step(step + 1);
    return absl::OkStatus();
  }
  int64_t shard_generation() const override { return tables_->generation(); }
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
  int64_t dropped_gradients() const override { return dense_->dropped_gradients(); }
  absl::Duration wait_time() const override { return dense_->wait_time(); }
  void FillTraffic(WorkerReport* report) const override { dense_->FillTraffic(report); }

 private:
  std::unique_ptr<Strategy> dense_;
  std::unique_ptr<TableSession> tables_;
  const StrategyContext context_;
};

}  // namespace

std::unique_ptr<Strategy> WithTablesBeside(std::unique_ptr<Strategy> dense, std::unique_ptr<TableSession> tables,
                                           const StrategyContext& context) {
  return std::make_unique<TablesBeside>(std::move(dense), std::move(tables), context);
}

}  // namespace pstrain
