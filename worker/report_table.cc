#include "worker/report_table.h"

namespace pstrain {
namespace {

// images/sec, its stddev, final loss, wall seconds, then the counts
// (bytes all-reduced, peak RSS, peak device memory, step arena, overflow
// steps) each as two floats that hold it exactly (high and low 24 bits:
// floats are exact integers up to 2^24, so counts up to 2^48), then the loss
// scale and the input wait's seconds and share (float values).
constexpr int kColumns = 17;
constexpr int64_t kLow = int64_t{1} << 24;

void PutCount(float* pair, int64_t count) {
  pair[0] = static_cast<float>(count / kLow);
  pair[1] = static_cast<float>(count % kLow);
}

int64_t GetCount(const float* pair) { return static_cast<int64_t>(pair[0]) * kLow + static_cast<int64_t>(pair[1]); }

}  // namespace

std::vector<float> ReportTable(const WorkerReport& mine, int num_workers) {
  std::vector<float> table(static_cast<size_t>(num_workers) * kColumns, 0.0f);
  float* row = table.data() + mine.worker() * kColumns;
  row[0] = static_cast<float>(mine.images_per_sec());
  row[1] = static_cast<float>(mine.images_per_sec_stddev());
  row[2] = static_cast<float>(mine.final_loss());
  row[3] = static_cast<float>(mine.wall_seconds());
  PutCount(row + 4, mine.bytes_allreduced());
  PutCount(row + 6, mine.peak_rss_bytes());
  PutCount(row + 8, mine.peak_device_bytes());
  PutCount(row + 10, mine.step_arena_bytes());
  PutCount(row + 12, mine.overflow_steps());
  row[14] = static_cast<float>(mine.loss_scale());
  row[15] = static_cast<float>(mine.input_wait_seconds());
  row[16] = static_cast<float>(mine.input_wait_share());
  return table;
}

ClusterReport ReportsFromTable(const WorkerReport& mine, const std::vector<float>& summed, int num_workers) {
  ClusterReport report;
  report.workers.push_back(mine);
  for (int i = 0; i < num_workers; ++i) {
    if (i == mine.worker()) continue;
    const float* row = summed.data() + i * kColumns;
    WorkerReport r;
    r.set_worker(i);
    r.set_steps(mine.steps());
    r.set_images_per_sec(row[0]);
    r.set_images_per_sec_stddev(row[1]);
    r.set_final_loss(row[2]);
    r.set_wall_seconds(row[3]);
    r.set_bytes_allreduced(GetCount(row + 4));
    r.set_peak_rss_bytes(GetCount(row + 6));
    r.set_peak_device_bytes(GetCount(row + 8));
    r.set_step_arena_bytes(GetCount(row + 10));
    r.set_overflow_steps(GetCount(row + 12));
    r.set_loss_scale(row[14]);
    r.set_input_wait_seconds(row[15]);
    r.set_input_wait_share(row[16]);
    report.workers.push_back(r);
  }
  return report;
}

}  // namespace pstrain
