#include "worker/run/input_pipeline.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

// train.steps, or train.epochs passes over the training set at the global
// batch (every device of every worker) per step.
int64_t TotalSteps(const ExperimentConfig& config, int64_t train_examples) {
  if (config.train().steps() > 0) return config.train().steps();
  const int64_t global_batch = static_cast<int64_t>(config.train().batch_size_per_device()) *
                               config.cluster().worker_hosts_size() * config.devices_per_worker();
  const int64_t per_epoch = std::max<int64_t>(1, train_examples / global_batch);
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(config.train().epochs() * per_epoch)));
}

}  // namespace

InputPipeline::InputPipeline(const ExperimentConfig& config, Datasets data)
    : config_(config),
      devices_(config.devices_per_worker()),
      dynamic_(config.data().sharding() == DataConfig::dynamic),
      data_(std::move(data)),
      total_steps_(TotalSteps(config, data_.train.num_examples)) {}

absl::StatusOr<std::unique_ptr<InputPipeline>> InputPipeline::Create(const ExperimentConfig& config, int worker_index,
                                                                     bool with_test) {
  PSTRAIN_ASSIGN_OR_RETURN(Datasets data, LoadDatasets(config, with_test));
  std::unique_ptr<InputPipeline> pipeline(new InputPipeline(config, std::move(data)));
  PSTRAIN_RETURN_IF_ERROR(pipeline->CreateBatchers(worker_index));
  if (pipeline->dynamic_) pipeline->PlanLedger();
  return pipeline;
}

absl::Status InputPipeline::CreateBatchers(int worker_index) {
  const int num_workers = config_.cluster().worker_hosts_size();
  const int batch = config_.train().batch_size_per_device();
  // Replica r of worker w is "device" w * devices + r of the whole job.
  for (int r = 0; r < devices_; ++r) {
    PSTRAIN_ASSIGN_OR_RETURN(ShardedBatcher batcher,
                             ShardedBatcher::Create(&data_.train, worker_index * devices_ + r, num_workers * devices_,
                                                    batch, config_.data().shuffle_seed(), config_.data().shuffle()));
    batchers_.push_back(std::move(batcher));
  }
  if (data_.train.encoded() || data_.test.encoded()) {
    decode_pool_ = std::make_unique<DecodePool>(DecodeThreads(config_.data().decode_threads()));
  }
  // Dynamic sharding decodes each batch when the ledger names it.
  if (data_.train.encoded() && !dynamic_) {
    for (int r = 0; r < devices_; ++r) {
      prefetchers_.push_back(
          std::make_unique<BatchPrefetcher>(&batchers_[r], decode_pool_.get(), config_.data().prefetch_batches()));
    }
  }
  Shape image_shape = {batch};
  image_shape.insert(image_shape.end(), data_.train.example_shape.begin(), data_.train.example_shape.end());
  for (int r = 0; r < devices_; ++r) images_.emplace_back(image_shape);
  labels_.resize(devices_);
  return absl::OkStatus();
}

// Epochs of whole worker batches, cut into chunks of chunk_batches. With
// train.epochs the run trains exactly that many of them (every example of
// each, the last epoch included; a fractional value ends part-way through
// the last, at a whole worker batch), and total_steps becomes the global
// steps that takes (the schedule's length; an upper bound per worker). With
// train.steps, the examples of that many global batches.
void InputPipeline::PlanLedger() {
  const int64_t worker_batch = int64_t{config_.train().batch_size_per_device()} * devices_;
  const int64_t global_batch = worker_batch * config_.cluster().worker_hosts_size();
  const int64_t per_epoch = data_.train.num_examples / worker_batch * worker_batch;
  ledger_spec_.set_examples_per_epoch(per_epoch);
  ledger_spec_.set_chunk_examples(worker_batch * config_.data().chunk_batches());
  int64_t total = total_steps_ * global_batch;
  if (config_.train().steps() <= 0) {
    total = std::max(worker_batch, static_cast<int64_t>(config_.train().epochs() * static_cast<double>(per_epoch)) /
                                       worker_batch * worker_batch);
    total_steps_ = (total + global_batch - 1) / global_batch;
  }
  ledger_spec_.set_epochs((total + per_epoch - 1) / per_epoch);
  ledger_spec_.set_total_examples(total);
}

void InputPipeline::ConnectLedger(ChunkFeed::Exchange exchange, std::function<absl::Status()> pause,
                                  std::function<absl::StatusOr<int64_t>(int64_t step)> resume,
                                  absl::Duration wait_limit) {
  ChunkFeed::Options options;
  options.batch_examples = int64_t{config_.train().batch_size_per_device()} * devices_;
  options.wait_limit = wait_limit;
  options.pause = std::move(pause);
  options.resume = std::move(resume);
  feed_ = std::make_unique<ChunkFeed>(std::move(exchange), options);
}

absl::StatusOr<std::optional<int64_t>> InputPipeline::Next(int64_t step) {
  if (feed_ == nullptr) return step < total_steps_ ? std::optional<int64_t>(step) : std::nullopt;
  absl::StatusOr<std::optional<ChunkFeed::Batch>> batch = feed_->Next(step);
  if (!batch.ok()) {
    return absl::Status(batch.status().code(), absl::StrCat("data ledger: ", batch.status().message()));
  }
  if (!batch->has_value()) return std::nullopt;
  batch_ = **batch;
  return batch_.step;
}

absl::Status InputPipeline::Fill(int replica, int64_t step) {
  if (feed_ != nullptr) {
    // The ledger's positions; replica r takes its slice of the worker's batch.
    const int64_t first = batch_.first + int64_t{replica} * config_.train().batch_size_per_device();
    return batchers_[replica].FillPositions(batch_.epoch, first, &images_[replica], &labels_[replica],
                                            decode_pool_.get());
  }
  return prefetchers_.empty() ? batchers_[replica].Fill(step, &images_[replica], &labels_[replica])
                              : prefetchers_[replica]->Next(step, &images_[replica], &labels_[replica]);
}

std::vector<int64_t> InputPipeline::ExampleIndices(int replica, int64_t step) const {
  if (feed_ == nullptr) return batchers_[replica].ExampleIndices(step);
  // The ledger's positions, as Fill reads them.
  const int64_t batch = config_.train().batch_size_per_device();
  return batchers_[replica].EpochPositions(batch_.epoch, batch_.first + replica * batch, batch);
}

void InputPipeline::Forget() {
  if (feed_ != nullptr) feed_->Forget();
}

}  // namespace pstrain
