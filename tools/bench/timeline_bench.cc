#include "tools/bench/timeline_bench.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "proto/config.pb.h"
#include "worker/timeline.h"

namespace pstrain {
namespace {

using Clock = std::chrono::steady_clock;

double MicrosSince(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

#ifndef OVERLAYFS_SUPER_MAGIC
#define OVERLAYFS_SUPER_MAGIC 0x794c7630
#endif

std::string FileSystemOf(const std::string& dir) {
  struct statfs fs;
  if (statfs(dir.c_str(), &fs) != 0) return "unknown";
  switch (static_cast<uint64_t>(fs.f_type)) {
    case EXT4_SUPER_MAGIC:
      return "ext4";
    case TMPFS_MAGIC:
      return "tmpfs";
    case OVERLAYFS_SUPER_MAGIC:
      return "overlayfs";
    case XFS_SUPER_MAGIC:
      return "xfs";
    case BTRFS_SUPER_MAGIC:
      return "btrfs";
    default:
      return absl::StrFormat("0x%x", static_cast<uint64_t>(fs.f_type));
  }
}

// A directory for the run: `dir` itself, or a fresh one removed after.
class RunDir {
 public:
  static absl::StatusOr<RunDir> Make(const std::string& dir) {
    if (!dir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      if (ec) return absl::FailedPreconditionError(absl::StrCat("--dir ", dir, ": ", ec.message()));
      return RunDir(dir, false);
    }
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/pstrain-timeline-XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("cannot create ", pattern, ": ", std::strerror(errno)));
    }
    return RunDir(pattern, true);
  }
  RunDir(RunDir&& other) noexcept : path_(std::move(other.path_)), owned_(std::exchange(other.owned_, false)) {}
  ~RunDir() {
    std::error_code ec;
    if (owned_) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  RunDir(std::string path, bool owned) : path_(std::move(path)), owned_(owned) {}
  std::string path_;
  bool owned_;
};

int64_t FileBytes(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

struct StepSample {
  double flush_us;
  double append_us;
  int64_t file_bytes;
};

TimelineSpan Span(const std::vector<StepSample>& samples, size_t begin, size_t end) {
  TimelineSpan span;
  for (size_t i = begin; i < end; ++i) {
    span.flush_us += samples[i].flush_us;
    span.append_us += samples[i].append_us;
    span.file_mb += static_cast<double>(samples[i].file_bytes) / 1e6;
  }
  const double n = static_cast<double>(end - begin);
  span.flush_us /= n;
  span.append_us /= n;
  span.file_mb /= n;
  span.ratio = span.append_us > 0 ? span.flush_us / span.append_us : 0;
  return span;
}

// The trainer's lanes and event shapes (worker/trainer.cc, strategies).
constexpr const char* kLanes[] = {"step", "replica 0", "push", "pull", "phases", "allreduce"};

}  // namespace

absl::Status ValidateTimelineBenchOptions(const TimelineBenchOptions& options) {
  if (options.steps < 10) {
    return absl::InvalidArgumentError(absl::StrCat("--steps must be at least 10 (got ", options.steps, ")"));
  }
  if (options.events_per_step < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--events_per_step must be at least 1 (got ", options.events_per_step, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TimelineBenchResult> RunTimelineBench(const TimelineBenchOptions& options) {
  PSTRAIN_RETURN_IF_ERROR(ValidateTimelineBenchOptions(options));
  PSTRAIN_ASSIGN_OR_RETURN(RunDir dir, RunDir::Make(options.dir));
  ExperimentConfig config;
  config.mutable_timeline()->set_path(dir.path() + "/timeline.json");
  config.mutable_timeline()->set_end_step(options.steps);
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Timeline> timeline, Timeline::Create(config, 0));
  const std::string reference_path = dir.path() + "/reference.json";
  const int reference = open(reference_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (reference < 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot create ", reference_path, ": ", std::strerror(errno)));
  }
  std::vector<StepSample> samples;
  samples.reserve(options.steps);
  std::string added;
  int64_t before = FileBytes(timeline->path());
  absl::Status failed;
  for (int64_t step = 0; step < options.steps && failed.ok(); ++step) {
    timeline->SetStep(step);
    const absl::Time t0 = absl::Now();
    for (int e = 0; e < options.events_per_step; ++e) {
      timeline->Record(absl::StrCat("push batch ", e), kLanes[e % std::size(kLanes)], t0, t0 + absl::Microseconds(e),
                       absl::StrCat(R"("variables": )", e % 7 + 1, R"(, "ok": true)"));
    }
    const Clock::time_point flush_start = Clock::now();
    failed = timeline->Flush();
    const double flush_us = MicrosSince(flush_start);
    const int64_t after = FileBytes(timeline->path());
    // The reference appends as many bytes as the step added.
    added.assign(static_cast<size_t>(std::max<int64_t>(after - before, 0)), 'x');
    const Clock::time_point append_start = Clock::now();
    if (write(reference, added.data(), added.size()) != static_cast<ssize_t>(added.size()) && failed.ok()) {
      failed = absl::InternalError(absl::StrCat("write to ", reference_path, ": ", std::strerror(errno)));
    }
    samples.push_back({flush_us, MicrosSince(append_start), after});
    before = after;
  }
  close(reference);
  if (!failed.ok()) return failed;

  TimelineBenchResult result;
  result.options = options;
  result.file_system = FileSystemOf(dir.path());
  result.final_file_bytes = samples.back().file_bytes;
  result.bytes_per_step = static_cast<double>(result.final_file_bytes) / static_cast<double>(options.steps);
  const size_t tenth = samples.size() / 10;
  result.first_tenth = Span(samples, 0, tenth);
  result.last_tenth = Span(samples, samples.size() - tenth, samples.size());
  // Least squares: flush_us = fixed_us + us_per_mb * file_mb.
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const StepSample& s : samples) {
    const double x = static_cast<double>(s.file_bytes) / 1e6;
    sx += x;
    sy += s.flush_us;
    sxx += x * x;
    sxy += x * s.flush_us;
    result.total_flush_s += s.flush_us / 1e6;
    result.total_append_s += s.append_us / 1e6;
  }
  const double n = static_cast<double>(samples.size());
  const double denominator = n * sxx - sx * sx;
  result.us_per_mb = denominator > 0 ? (n * sxy - sx * sy) / denominator : 0;
  result.fixed_us = (sy - result.us_per_mb * sx) / n;
  return result;
}

std::string FormatTimelineBenchTable(const TimelineBenchResult& r) {
  auto line = [](const char* name, const TimelineSpan& s) {
    return absl::StrFormat("  %-18s %9.1f us %12.1f us %9.1fx %10.2f MB\n", name, s.flush_us, s.append_us, s.ratio,
                           s.file_mb);
  };
  return absl::StrCat(
      absl::StrFormat("timeline flush: %d steps x %d events (%.0f bytes a step), file %.2f MB at the end, on %s\n",
                      r.options.steps, r.options.events_per_step, r.bytes_per_step, r.final_file_bytes / 1e6,
                      r.file_system),
      absl::StrFormat("  %-18s %12s %15s %10s %13s\n", "", "flush", "plain append", "ratio", "file"),
      line("first tenth", r.first_tenth), line("last tenth", r.last_tenth),
      absl::StrFormat("  a flush costs about %.1f us + %.1f us per MB of file so far\n", r.fixed_us, r.us_per_mb),
      absl::StrFormat("  whole run: flushes %.3f s, plain appends %.3f s\n", r.total_flush_s, r.total_append_s));
}

std::string FormatTimelineBenchJson(const TimelineBenchResult& r) {
  auto span = [](const TimelineSpan& s) {
    return absl::StrFormat("{\"flush_us\":%.4g,\"append_us\":%.4g,\"ratio\":%.4g,\"file_mb\":%.4g}", s.flush_us,
                           s.append_us, s.ratio, s.file_mb);
  };
  return absl::StrFormat(
      "{\"steps\":%d,\"events_per_step\":%d,\"file_system\":\"%s\",\"bytes_per_step\":%.6g,\"final_file_bytes\":%d,"
      "\"first_tenth\":%s,\"last_tenth\":%s,\"fixed_us\":%.4g,\"us_per_mb\":%.4g,\"total_flush_s\":%.4g,"
      "\"total_append_s\":%.4g}",
      r.options.steps, r.options.events_per_step, r.file_system, r.bytes_per_step, r.final_file_bytes,
      span(r.first_tenth), span(r.last_tenth), r.fixed_us, r.us_per_mb, r.total_flush_s, r.total_append_s);
}

}  // namespace pstrain
