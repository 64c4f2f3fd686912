#include "common/metrics/throughput.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

// numpy.median: the middle value, or the mean of the two middle values.
double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  const double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  const double lower = *std::max_element(v.begin(), v.begin() + mid);
  return (lower + upper) / 2;
}

}  // namespace

ThroughputTracker::ThroughputTracker(int64_t batch_size, int64_t warmup_steps)
    : batch_size_(batch_size), warmup_steps_(warmup_steps) {
  CHECK_GT(batch_size, 0);
  CHECK_GE(warmup_steps, 0);
}

void ThroughputTracker::RecordStep(int64_t step, double seconds) {
  CHECK(seconds > 0 && std::isfinite(seconds)) << "step " << step << " took " << seconds << " s";
  if (step < warmup_steps_) return;
  speeds_.push_back(static_cast<double>(batch_size_) / seconds);
  measured_seconds_ += seconds;
}

double ThroughputTracker::mean_images_per_sec() const {
  if (speeds_.empty()) return 0;
  double sum = 0;
  for (double s : speeds_) sum += s;
  return sum / speeds_.size();
}

double ThroughputTracker::stddev() const {
  if (speeds_.empty()) return 0;
  const double mean = mean_images_per_sec();
  double sq = 0;
  for (double s : speeds_) sq += (s - mean) * (s - mean);
  return std::sqrt(sq / speeds_.size());
}

double ThroughputTracker::uncertainty() const {
  if (speeds_.empty()) return 0;
  return stddev() / std::sqrt(static_cast<double>(speeds_.size()));
}

double ThroughputTracker::jitter() const {
  if (speeds_.empty()) return 0;
  const double median = Median(speeds_);
  std::vector<double> dev(speeds_.size());
  for (size_t i = 0; i < speeds_.size(); ++i) dev[i] = std::abs(speeds_[i] - median);
  return 1.4826 * Median(std::move(dev));
}

double ThroughputTracker::aggregate_images_per_sec() const {
  if (speeds_.empty()) return 0;
  return static_cast<double>(batch_size_) * speeds_.size() / measured_seconds_;
}

std::string ThroughputTracker::ProgressLine(int64_t step, double loss) const {
  return absl::StrFormat("%i\timages/sec: %.1f +/- %.1f (jitter = %.1f)\t%.3f", step + 1, mean_images_per_sec(),
                         uncertainty(), jitter(), loss);
}

}  // namespace pstrain
