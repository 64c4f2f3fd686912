#include "worker/fused_allreduce.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/compression/compression.h"
#include "common/status_macros.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<FusedAllReducer>> FusedAllReducer::Create(Collective* collective,
                                                                         std::vector<std::vector<Tensor>> gradients,
                                                                         int64_t fusion_threshold_bytes,
                                                                         int num_workers, WireDType wire_dtype) {
  if (collective == nullptr) return absl::InvalidArgumentError("fused all-reduce: no collective");
  if (gradients.empty()) return absl::InvalidArgumentError("fused all-reduce: no replicas");
  if (num_workers < 1) return absl::InvalidArgumentError(absl::StrCat("fused all-reduce: ", num_workers, " workers"));
  if (WireDTypeSize(wire_dtype) == 0) {
    return absl::InvalidArgumentError(absl::StrCat("fused all-reduce: unknown wire type ", wire_dtype));
  }
  std::vector<int64_t> elements;
  for (const Tensor& g : gradients[0]) {
    if (!g.on_host() || !g.is_plain()) {
      return absl::InvalidArgumentError("fused all-reduce: gradients must be plain host tensors");
    }
    elements.push_back(g.num_elements());
  }
  for (const auto& replica : gradients) {
    if (replica.size() != elements.size()) {
      return absl::InvalidArgumentError("fused all-reduce: replicas disagree on the variables");
    }
  }
  FusionPlan plan = FusionPlan::Make(elements, fusion_threshold_bytes);
  return std::unique_ptr<FusedAllReducer>(
      new FusedAllReducer(collective, std::move(gradients), std::move(plan), num_workers, wire_dtype));
}

FusedAllReducer::FusedAllReducer(Collective* collective, std::vector<std::vector<Tensor>> gradients, FusionPlan plan,
                                 int num_workers, WireDType wire_dtype)
    : collective_(collective),
      gradients_(std::move(gradients)),
      plan_(std::move(plan)),
      num_workers_(num_workers),
      wire_dtype_(wire_dtype),
      tracker_(&plan_, static_cast<int>(gradients_.size())) {
  int64_t packed = 0;
  for (int b = 0; b < static_cast<int>(plan_.buckets.size()); ++b) {
    bool adjacent = true;
    for (size_t r = 0; r < gradients_.size(); ++r) adjacent = adjacent && Contiguous(static_cast<int>(r), b) != nullptr;
    in_place_.push_back(adjacent);
    buckets_in_place_ += adjacent;
    if (!adjacent) packed = std::max(packed, plan_.bucket_elements[b]);
  }
  fusion_.resize(packed);
  if (wire_dtype_ != DT_FLOAT32) wire16_.resize(std::min(plan_.largest_bucket_elements, kMaxCollectiveElements));
  thread_ = std::thread([this] { CommunicationLoop(); });
}

float* FusedAllReducer::Contiguous(int r, int bucket) const {
  // A bucket holds consecutive variables, highest first (backward order).
  const std::vector<int>& vars = plan_.buckets[bucket];
  const int lo = vars.back(), hi = vars.front();
  for (int v = lo; v < hi; ++v) {
    if (gradients_[r][v].data() + gradients_[r][v].num_elements() != gradients_[r][v + 1].data()) return nullptr;
  }
  return gradients_[r][lo].data();
}

FusedAllReducer::~FusedAllReducer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void FusedAllReducer::BeginStep() {
  absl::MutexLock lock(&mu_);
  tracker_.Reset();
  step_error_ = absl::OkStatus();
  step_active_ = true;
}

void FusedAllReducer::GradientReady(int variable) {
  absl::MutexLock lock(&mu_);
  tracker_.MarkReady(variable);
}

bool FusedAllReducer::HasWork() const {
  return stopping_ || (step_active_ && step_error_.ok() && tracker_.NextReady() >= 0);
}

bool FusedAllReducer::StepDone() const { return !reducing_ && (tracker_.AllTaken() || !step_error_.ok()); }

absl::Status FusedAllReducer::FinishStep(absl::Duration* waited) {
  absl::MutexLock lock(&mu_);
  tracker_.MarkAllReady();
  const absl::Time start = absl::Now();
  mu_.Await(absl::Condition(this, &FusedAllReducer::StepDone));
  const absl::Time end = absl::Now();
  if (waited != nullptr) *waited += end - start;
  if (timeline_ != nullptr) timeline_->Record("wait for all-reduce", "step", start, end);
  step_active_ = false;
  return step_error_;
}

void FusedAllReducer::CommunicationLoop() {
  communication_.Enter();
  ReduceReadyBuckets();
  communication_.Leave();
}

void FusedAllReducer::ReduceReadyBuckets() {
  absl::MutexLock lock(&mu_);
  while (true) {
    mu_.Await(absl::Condition(this, &FusedAllReducer::HasWork));
    if (stopping_) return;
    const int bucket = tracker_.NextReady();
    tracker_.Advance();
    reducing_ = true;
    mu_.Unlock();
    // The bucket's gradients are final and only this thread touches them
    // until the training thread's FinishStep sees the step done.
    absl::Status s = ReduceBucket(bucket);
    mu_.Lock();
    reducing_ = false;
    if (!s.ok() && step_error_.ok()) step_error_ = s;
  }
}

absl::Status FusedAllReducer::AllReduceAcrossWorkers(float* sum, int64_t n) {
  bytes_allreduced_ += n * static_cast<int64_t>(WireDTypeSize(wire_dtype_));
  for (int64_t first = 0; first < n; first += kMaxCollectiveElements) {
    const size_t count = static_cast<size_t>(std::min(kMaxCollectiveElements, n - first));
    float* chunk = sum + first;
    if (wire_dtype_ == DT_FLOAT32) {
      PSTRAIN_RETURN_IF_ERROR(collective_->AllReduceSum(chunk, count));
      continue;
    }
    EncodeFloats(wire_dtype_, chunk, count, wire16_.data());
    PSTRAIN_RETURN_IF_ERROR(collective_->AllReduceSumTyped(wire16_.data(), count, wire_dtype_));
    DecodeFloats(wire_dtype_, wire16_.data(), count, chunk);
  }
  return absl::OkStatus();
}

absl::Status FusedAllReducer::ReduceBucket(int bucket) {
  const int replicas = static_cast<int>(gradients_.size());
  const int64_t elements = plan_.bucket_elements[bucket];
  const std::string args = absl::StrCat(R"("bucket": )", bucket, R"(, "variables": )", plan_.buckets[bucket].size(),
                                        R"(, "bytes": )", elements * static_cast<int64_t>(sizeof(float)));
  auto record = [&](const char* phase, absl::Time start) {
    if (timeline_ != nullptr) timeline_->Record(phase, "allreduce", start, absl::Now(), args);
  };
  absl::Time t = absl::Now();
  if (in_place_[bucket]) {
    float* sum = Contiguous(0, bucket);
    for (int r = 1; r < replicas; ++r) {
      const float* g = Contiguous(r, bucket);
      for (int64_t i = 0; i < elements; ++i) sum[i] += g[i];
    }
    if (replicas > 1) record("sum replicas", t);
    t = absl::Now();
    absl::Status status = AllReduceAcrossWorkers(sum, elements);
    record("allreduce", t);
    if (!status.ok()) return status;
    for (int r = 1; r < replicas; ++r) std::copy_n(sum, elements, Contiguous(r, bucket));
    return absl::OkStatus();
  }
  const std::vector<int>& variables = plan_.buckets[bucket];
  for (int v : variables) {
    float* dst = fusion_.data() + plan_.offset_in_bucket[v];
    const int64_t count = gradients_[0][v].num_elements();
    std::copy_n(gradients_[0][v].data(), count, dst);
    for (int r = 1; r < replicas; ++r) {
      const float* g = gradients_[r][v].data();
      for (int64_t i = 0; i < count; ++i) dst[i] += g[i];
    }
  }
  record("fuse", t);
  t = absl::Now();
  absl::Status status = AllReduceAcrossWorkers(fusion_.data(), elements);
  record("allreduce", t);
  if (!status.ok()) return status;
  t = absl::Now();
  for (int v : variables) {
    const float* src = fusion_.data() + plan_.offset_in_bucket[v];
    for (int r = 0; r < replicas; ++r) std::copy_n(src, gradients_[r][v].num_elements(), gradients_[r][v].data());
  }
  record("unfuse", t);
  return absl::OkStatus();
}

}  // namespace pstrain
