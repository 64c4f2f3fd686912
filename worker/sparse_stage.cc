#include "worker/sparse_stage.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "worker/bag_pooling.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<SparseStage>> SparseStage::Create(const ExperimentConfig& config, int worker_index,
                                                                 Transport* transport, ReplicaSet* replicas,
                                                                 int64_t dense) {
  int64_t width = 0;
  for (const EmbeddingTableConfig& t : config.model().tables()) width += t.dim();
  width += dense;
  for (int r = 0; r < replicas->size(); ++r) {
    if (replicas->context(r).device().kind != DeviceKind::kCpu) {
      return absl::InvalidArgumentError(absl::StrCat("model.tables: sparse models train on CPU replicas; replica ", r,
                                                     " is on ", replicas->context(r).device().ToString()));
    }
  }
  if (NumElements(replicas->model(0).input_shape()) != width) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model '", config.model().name(), "' takes ", ShapeToString(replicas->model(0).input_shape()),
        " per example; a sparse model takes the ", dense, " dense features and every table's row (", width, ")"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<EmbeddingClient> client,
                           EmbeddingClient::Create(config, worker_index, transport));
  for (int r = 0; r < replicas->size(); ++r) PSTRAIN_RETURN_IF_ERROR(replicas->model(r).KeepInputGradient());
  return std::unique_ptr<SparseStage>(new SparseStage(config, std::move(client), replicas, dense));
}

SparseStage::SparseStage(const ExperimentConfig& config, std::unique_ptr<EmbeddingClient> client, ReplicaSet* replicas,
                         int64_t dense_features)
    : config_(config), client_(std::move(client)), replicas_(replicas), dense_features_(dense_features) {
  input_width_ = dense_features_;
  for (const EmbeddingTableConfig& t : config_.model().tables()) {
    row_offset_.push_back(input_width_);
    mean_.push_back(t.pooling() == EmbeddingTableConfig::mean);
    input_width_ += t.dim();
  }
  sync_ = config_.consistency() == "sync";
}

absl::Status SparseStage::PullRows(const Dataset& data, const std::vector<int64_t>& examples, int64_t min_version,
                                   std::vector<TableBatch>* batches) {
  const int tables = client_->num_tables();
  if (data.sparse_features < tables) {
    return absl::InvalidArgumentError(
        absl::StrCat("the data has ", data.sparse_features, " categorical features; model.tables lists ", tables));
  }
  batches->resize(tables);
  const absl::Duration timeout = absl::Seconds(config_.timeouts().sync_step_seconds());
  const int bag = data.bag_size;
  for (int t = 0; t < tables; ++t) {
    TableBatch& b = (*batches)[t];
    b.bag = bag;
    std::vector<uint64_t> ids;
    b.key_of.assign(examples.size() * bag, -1);
    std::vector<int64_t> present;  // the bag slots that hold an id
    for (size_t i = 0; i < examples.size(); ++i) {
      const uint64_t* slots = data.sparse_ids.data() + (examples[i] * data.sparse_features + t) * bag;
      for (int j = 0; j < bag; ++j) {
        if (slots[j] == Dataset::kMissingId) continue;
        ids.push_back(slots[j]);
        present.push_back(static_cast<int64_t>(i) * bag + j);
      }
    }
    b.keys = client_->Deduplicate(t, ids);
    for (size_t k = 0; k < present.size(); ++k) b.key_of[present[k]] = b.keys.index[k];
    b.rows.resize(b.keys.keys.size() * client_->table(t).dim());
  }
  std::vector<EmbeddingClient::TablePull> pulls;
  for (int t = 0; t < tables; ++t) pulls.push_back({t, &(*batches)[t].keys.keys, (*batches)[t].rows.data()});
  return client_->PullTables(pulls, min_version, timeout);
}

absl::Status SparseStage::Pull(int64_t step, const Dataset& data, const std::vector<std::vector<int64_t>>& examples) {
  std::vector<int64_t> all;
  replica_first_.clear();
  replica_count_.clear();
  for (const std::vector<int64_t>& e : examples) {
    replica_first_.push_back(static_cast<int64_t>(all.size()));
    replica_count_.push_back(static_cast<int64_t>(e.size()));
    all.insert(all.end(), e.begin(), e.end());
  }
  // Sync: the rows after the step's predecessors (every worker's pushes of
  // steps 0 .. step - 1); async: as they are.
  return PullRows(data, all, sync_ ? step : 0, &step_);
}

void SparseStage::ComposeRange(const std::vector<TableBatch>& batches, int64_t first, int64_t count,
                               const Tensor& dense, Tensor* input) const {
  const Shape shape = {count, 1, 1, input_width_};
  if (input->shape() != shape) *input = Tensor(shape);
  CHECK_EQ(dense.num_elements(), count * dense_features_) << "dense features of the batch";
  float* out = input->data();
  const float* in = dense.data();
  for (int64_t i = 0; i < count; ++i) {
    float* row = out + i * input_width_;
    std::memcpy(row, in + i * dense_features_, dense_features_ * sizeof(float));
    for (size_t t = 0; t < batches.size(); ++t) {
      const TableBatch& b = batches[t];
      const int dim = client_->table(static_cast<int>(t)).dim();
      PoolBag(b.key_of.data() + (first + i) * b.bag, b.bag, mean_[t], b.rows.data(), dim, row + row_offset_[t]);
    }
  }
}

void SparseStage::Compose(int r, const Tensor& dense, Tensor* input) const {
  ComposeRange(step_, replica_first_[r], replica_count_[r], dense, input);
}

absl::Status SparseStage::Push(int64_t step) {
  const float loss_scale = replicas_->loss_scale() > 0 ? replicas_->loss_scale() : 1.0f;
  const float factor = 1.0f / (loss_scale * static_cast<float>(replicas_->size()));
  std::vector<std::vector<float>> grads(client_->num_tables());
  std::vector<EmbeddingClient::TablePush> pushes;
  for (int t = 0; t < client_->num_tables(); ++t) {
    const TableBatch& b = step_[t];
    const int dim = client_->table(t).dim();
    grads[t].assign(b.rows.size(), 0.0f);
    for (int r = 0; r < replicas_->size(); ++r) {
      const Tensor& g = replicas_->model(r).InputGradient();
      CHECK_EQ(g.num_elements(), replica_count_[r] * input_width_) << "replica " << r << "'s input gradient";
      for (int64_t i = 0; i < replica_count_[r]; ++i) {
        AddBagGradient(b.key_of.data() + (replica_first_[r] + i) * b.bag, b.bag, mean_[t],
                       g.data() + i * input_width_ + row_offset_[t], factor, dim, grads[t].data());
      }
    }
    pushes.push_back({t, &b.keys.keys, grads[t].data()});
  }
  return client_->PushTables(step, pushes);
}

absl::Status SparseStage::ComposeBatch(const Dataset& data, int64_t first, int64_t count, const Tensor& dense,
                                       Tensor* input) {
  std::vector<int64_t> examples(count);
  for (int64_t i = 0; i < count; ++i) examples[i] = first + i;
  PSTRAIN_RETURN_IF_ERROR(PullRows(data, examples, /*min_version=*/0, &eval_));
  ComposeRange(eval_, 0, count, dense, input);
  return absl::OkStatus();
}

}  // namespace pstrain
