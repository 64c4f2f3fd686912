// The timeline flush benchmark behind `pstrain-bench timeline`.
//
// A worker's timeline (worker/timeline.h) stays a complete JSON array at
// every moment: each flush copies the file so far into a new file, appends
// the step's events and the closing bracket, and renames it over the old
// one. So a flush costs more as the file grows. This measures by how much,
// for `steps` traced steps of `events_per_step` events each (names, lanes
// and arguments like the trainer's), beside the reference measured in the
// same run: a plain append of the same bytes to an ordinary file (one write
// per step), which is what a timeline that may be torn by a kill would pay.
//
// Figures: the mean flush and append time over the first and the last tenth
// of the steps, with the file size there; a least-squares line
//   flush time = fixed + per_mb * (file size in MB)
// over every step, which gives what a flush will cost at any file size; and
// the file system the directory is on (copy_file_range shares extents on
// some, such as XFS and Btrfs, and copies bytes on others, such as ext4,
// tmpfs and overlayfs).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace pstrain {

struct TimelineBenchOptions {
  int64_t steps = 1000;      // traced steps, each one flush; at least 10
  int events_per_step = 50;  // at least 1
  std::string dir;           // where the files go ("": a fresh directory under $TMPDIR, removed after)
};

// InvalidArgument naming the first bad option.
absl::Status ValidateTimelineBenchOptions(const TimelineBenchOptions& options);

struct TimelineSpan {
  double flush_us = 0;   // mean time of a timeline flush
  double append_us = 0;  // mean time of the plain append of the same bytes
  double ratio = 0;      // flush_us / append_us
  double file_mb = 0;    // mean file size over the span (MB = 1e6 bytes)
};

struct TimelineBenchResult {
  TimelineBenchOptions options;
  std::string file_system;       // e.g. "ext4", "tmpfs", "overlayfs", or the magic number in hex
  double bytes_per_step = 0;     // mean bytes a step adds to the file
  int64_t final_file_bytes = 0;  // the timeline file at the end
  TimelineSpan first_tenth;
  TimelineSpan last_tenth;
  double fixed_us = 0;        // the line's value at an empty file
  double us_per_mb = 0;       // the line's slope
  double total_flush_s = 0;   // every flush of the run
  double total_append_s = 0;  // every reference append
};

// Runs the benchmark. Errors name the file that could not be written.
absl::StatusOr<TimelineBenchResult> RunTimelineBench(const TimelineBenchOptions& options);

// A human-readable table; one JSON object (no trailing newline).
std::string FormatTimelineBenchTable(const TimelineBenchResult& result);
std::string FormatTimelineBenchJson(const TimelineBenchResult& result);

}  // namespace pstrain
