// PsShard's embedding tables: created by the first Init (when the run's
// length is known), then every sparse pull and push goes to them
// (ps/embedding/sparse_tables.h holds the rules).
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/shard/shard.h"

namespace pstrain {

SparseTablesOptions SparseOptionsOf(const PsShardOptions& options, int64_t total_steps) {
  SparseTablesOptions o;
  o.shard_index = options.shard_index;
  o.num_shards = options.num_shards;
  o.num_workers = options.num_workers;
  o.sync = options.consistency == "sync";
  o.tables = options.tables;
  o.default_optimizer = options.optimizer;
  o.seed = options.seed;
  o.total_steps = total_steps;
  o.default_timeout = absl::Seconds(options.timeouts.rpc_seconds());
  return o;
}

absl::StatusOr<SparseTables*> PsShard::Tables(const char* what) const {
  absl::MutexLock lock(&mu_);
  if (sparse_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("shard ", options_.shard_index, ": ", what, " before the chief's Init"));
  }
  return sparse_.get();
}

void PsShard::SparsePull(const SparsePullRequest& request, IncomingFrame& payload, Responder respond) {
  absl::Status valid = ValidateWorker(request.worker(), "sparse pull");
  if (valid.ok()) valid = store_.CheckGeneration(request.generation());
  absl::StatusOr<SparseTables*> tables = valid.ok() ? Tables("sparse pull") : valid;
  if (!tables.ok()) {
    respond(tables.status(), {});
    return;
  }
  bytes_in_ += payload.payload_bytes();
  (*tables)->Pull(request, payload, [this, respond = std::move(respond)](absl::Status s, OutgoingFrame frame) {
    bytes_out_ += frame.payload_bytes();
    respond(std::move(s), std::move(frame));
  });
}

absl::StatusOr<SparsePushResponse> PsShard::SparsePush(const SparsePushRequest& request, IncomingFrame& payload) {
  PSTRAIN_RETURN_IF_ERROR(ValidateWorker(request.worker(), "sparse push"));
  PSTRAIN_RETURN_IF_ERROR(store_.CheckGeneration(request.generation()));
  PSTRAIN_ASSIGN_OR_RETURN(SparseTables * tables, Tables("sparse push"));
  bytes_in_ += payload.payload_bytes();
  return tables->Push(request, payload);
}

}  // namespace pstrain
