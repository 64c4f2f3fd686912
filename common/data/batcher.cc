#include "common/data/batcher.h"

#include <cstring>
#include <numeric>
#include <random>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/data/portable_random.h"
#include "glog/logging.h"

namespace pstrain {

struct ShardedBatcher::EpochCache {
  absl::Mutex mu;
  int64_t epoch ABSL_GUARDED_BY(mu) = -1;
  std::vector<int64_t> perm ABSL_GUARDED_BY(mu);
};

absl::StatusOr<ShardedBatcher> ShardedBatcher::Create(const Dataset* data, int worker_index, int num_workers,
                                                      int batch_per_worker, uint64_t seed, bool shuffle) {
  if (data == nullptr) return absl::InvalidArgumentError("ShardedBatcher: null dataset");
  if (absl::Status s = ValidateDataset(*data); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("ShardedBatcher: invalid dataset: ", s.message()));
  }
  if (num_workers < 1)
    return absl::InvalidArgumentError(absl::StrCat("ShardedBatcher: num_workers ", num_workers, " < 1"));
  if (worker_index < 0 || worker_index >= num_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("ShardedBatcher: worker_index ", worker_index, " outside [0, ", num_workers, ")"));
  }
  if (batch_per_worker < 1) {
    return absl::InvalidArgumentError(absl::StrCat("ShardedBatcher: batch_per_worker ", batch_per_worker, " < 1"));
  }
  const int64_t global = int64_t{num_workers} * batch_per_worker;
  if (data->num_examples < global) {
    return absl::InvalidArgumentError(absl::StrCat("ShardedBatcher: dataset has ", data->num_examples,
                                                   " examples, fewer than one global batch of ", global, " (",
                                                   num_workers, " workers x ", batch_per_worker, ")"));
  }
  return ShardedBatcher(data, worker_index, num_workers, batch_per_worker, seed, shuffle);
}

ShardedBatcher::ShardedBatcher(const Dataset* data, int worker_index, int num_workers, int batch_per_worker,
                               uint64_t seed, bool shuffle)
    : data_(data),
      worker_index_(worker_index),
      num_workers_(num_workers),
      batch_per_worker_(batch_per_worker),
      seed_(seed),
      shuffle_(shuffle),
      steps_per_epoch_(data->num_examples / (int64_t{num_workers} * batch_per_worker)),
      cache_(std::make_unique<EpochCache>()) {}

ShardedBatcher::ShardedBatcher(ShardedBatcher&&) noexcept = default;
ShardedBatcher& ShardedBatcher::operator=(ShardedBatcher&&) noexcept = default;
ShardedBatcher::~ShardedBatcher() = default;

std::vector<int64_t> ShardedBatcher::ExampleIndices(int64_t step) const {
  CHECK_GE(step, 0);
  const int64_t epoch = step / steps_per_epoch_;
  const int64_t first = (step % steps_per_epoch_) * global_batch() + int64_t{worker_index_} * batch_per_worker_;
  return EpochPositions(epoch, first, batch_per_worker_);
}

std::vector<int64_t> ShardedBatcher::EpochPositions(int64_t epoch, int64_t first, int64_t count) const {
  CHECK_GE(epoch, 0);
  CHECK(first >= 0 && count >= 0 && first + count <= data_->num_examples);
  std::vector<int64_t> out(count);
  if (!shuffle_) {
    std::iota(out.begin(), out.end(), first);
    return out;
  }
  absl::MutexLock lock(&cache_->mu);
  if (cache_->epoch != epoch) {
    cache_->perm.resize(data_->num_examples);
    std::iota(cache_->perm.begin(), cache_->perm.end(), int64_t{0});
    std::mt19937_64 gen(DeriveSeed(seed_, static_cast<uint64_t>(epoch)));
    PortableShuffle(cache_->perm, gen);
    cache_->epoch = epoch;
  }
  std::copy_n(cache_->perm.begin() + first, count, out.begin());
  return out;
}

absl::Status ShardedBatcher::FillPositions(int64_t epoch, int64_t first, Tensor* images, std::vector<int32_t>* labels,
                                           DecodePool* pool) const {
  if (first < 0 || first + batch_per_worker_ > data_->num_examples) {
    return absl::OutOfRangeError(absl::StrCat("positions [", first, ", ", first + batch_per_worker_,
                                              ") outside the epoch's ", data_->num_examples, " examples"));
  }
  return Gather(EpochPositions(epoch, first, batch_per_worker_), epoch, /*train=*/true, images, labels, pool);
}

absl::Status ShardedBatcher::Fill(int64_t step, Tensor* images, std::vector<int32_t>* labels, DecodePool* pool) const {
  return Gather(ExampleIndices(step), step / steps_per_epoch_, /*train=*/true, images, labels, pool);
}

absl::Status ShardedBatcher::FillRange(int64_t first_example, int64_t count, Tensor* images,
                                       std::vector<int32_t>* labels, DecodePool* pool) const {
  CHECK_GE(first_example, 0);
  CHECK_GE(count, 0);
  CHECK_LE(first_example + count, data_->num_examples) << "FillRange past the end of the dataset";
  std::vector<int64_t> indices(count);
  std::iota(indices.begin(), indices.end(), first_example);
  return Gather(indices, /*epoch=*/0, /*train=*/false, images, labels, pool);
}

absl::Status ShardedBatcher::Gather(const std::vector<int64_t>& indices, int64_t epoch, bool train, Tensor* images,
                                    std::vector<int32_t>* labels, DecodePool* pool) const {
  const int64_t n = static_cast<int64_t>(indices.size());
  Shape shape = {n};
  shape.insert(shape.end(), data_->example_shape.begin(), data_->example_shape.end());
  if (images->empty() || images->shape() != shape || images->device().kind != DeviceKind::kCpu) {
    *images = Tensor(shape);
  }
  const int64_t example = ExampleSize(*data_);
  labels->resize(n);
  float* out = images->data();
  if (data_->encoded()) {
    if (pool == nullptr) return absl::FailedPreconditionError("ShardedBatcher: an encoded dataset needs a DecodePool");
    std::vector<uint64_t> seeds(n);
    for (int64_t i = 0; i < n; ++i) seeds[i] = DecodeSeed(seed_, epoch, indices[i]);
    return pool->Decode(*data_, indices, seeds, train, out, labels->data());
  }
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(out + i * example, data_->images.data() + indices[i] * example, example * sizeof(float));
    (*labels)[i] = data_->labels[indices[i]];
  }
  return absl::OkStatus();
}

}  // namespace pstrain
