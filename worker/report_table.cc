#include "worker/report_table.h"

namespace pstrain {
namespace {

// images/sec, its stddev, final loss, wall seconds, then bytes all-reduced
// as two floats that hold it exactly (high and low 24 bits: floats are
// exact integers up to 2^24).
constexpr int kColumns = 6;
constexpr int64_t kLow = int64_t{1} << 24;

}  // namespace

std::vector<float> ReportTable(const WorkerReport& mine, int num_workers) {
  std::vector<float> table(static_cast<size_t>(num_workers) * kColumns, 0.0f);
  float* row = table.data() + mine.worker() * kColumns;
  row[0] = static_cast<float>(mine.images_per_sec());
  row[1] = static_cast<float>(mine.images_per_sec_stddev());
  row[2] = static_cast<float>(mine.final_loss());
  row[3] = static_cast<float>(mine.wall_seconds());
  row[4] = static_cast<float>(mine.bytes_allreduced() / kLow);
  row[5] = static_cast<float>(mine.bytes_allreduced() % kLow);
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
    r.set_bytes_allreduced(static_cast<int64_t>(row[4]) * kLow + static_cast<int64_t>(row[5]));
    report.workers.push_back(r);
  }
  return report;
}

}  // namespace pstrain
