// Reads TensorBoard event files (such as EventFileWriter writes) back into
// scalar points: for tests and tools that inspect a run's summaries.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pstrain::tb {

// One scalar value of one event.
struct ScalarPoint {
  std::string tag;
  int64_t step = 0;
  double value = 0;      // The stored float, widened.
  double wall_time = 0;  // Seconds since the Unix epoch.
};

struct EventFileContents {
  // The file_version of the first event ("brain.Event:2" for our files);
  // empty when the first event carries none.
  std::string file_version;
  // Every scalar of the file, in file order (and, within an event, in the
  // order its values were added). Events and values of other kinds (graphs,
  // images, histograms, ...) are skipped.
  std::vector<ScalarPoint> scalars;
};

// Reads the whole file at `path`, checking both checksums of every record.
// Errors name the file and, for a bad record, its byte offset: OUT_OF_RANGE
// when the file ends inside a record (a file still being written may be
// complete when read again), DATA_LOSS when a checksum does not match or a
// record is not an Event; NOT_FOUND etc. when the file cannot be opened.
absl::StatusOr<EventFileContents> ReadEventFile(const std::string& path);

}  // namespace pstrain::tb
