// ThroughputTracker: images/sec statistics computed as tf_cnn_benchmarks does
// (benchmark_cnn.get_perf_timing), so numbers compare with its published ones.
//
// Each measured step contributes one speed sample batch_size / seconds:
//   mean        = mean of the samples
//   stddev      = population standard deviation of the samples (numpy.std)
//   uncertainty = stddev / sqrt(n)                    (printed after "+/-")
//   jitter      = 1.4826 * median(|sample - median|)  (a robust spread)
// Steps below warmup_steps are ignored. All statistics are 0 before the first
// measured step. Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pstrain {

class ThroughputTracker {
 public:
  // batch_size: images per step (the global batch when tracking the whole job).
  ThroughputTracker(int64_t batch_size, int64_t warmup_steps);

  // Records that 0-based `step` took `seconds` (> 0, CHECKed). Ignored when step < warmup_steps.
  void RecordStep(int64_t step, double seconds);

  int64_t num_measured_steps() const { return static_cast<int64_t>(speeds_.size()); }
  double mean_images_per_sec() const;
  double stddev() const;
  double uncertainty() const;
  double jitter() const;
  // Measured images / measured seconds (tf's "total images/sec" over the measured steps).
  double aggregate_images_per_sec() const;

  // "<step+1>\timages/sec: M +/- U (jitter = J)\t<loss %.3f>", as tf_cnn_benchmarks
  // prints it: "%i\timages/sec: %.1f +/- %.1f (jitter = %.1f)\t%.3f".
  std::string ProgressLine(int64_t step, double loss) const;

 private:
  int64_t batch_size_;
  int64_t warmup_steps_;
  std::vector<double> speeds_;  // images/sec of each measured step.
  double measured_seconds_ = 0;
};

}  // namespace pstrain
