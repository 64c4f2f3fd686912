#include "common/summary/event_reader.h"

#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/summary/record_io.h"
#include "proto/summary.pb.h"

namespace pstrain::tb {

absl::StatusOr<EventFileContents> ReadEventFile(const std::string& path) {
  absl::StatusOr<std::unique_ptr<RecordReader>> reader = RecordReader::Open(path);
  if (!reader.ok()) return reader.status();

  EventFileContents contents;
  for (bool first = true;; first = false) {
    const uint64_t offset = (*reader)->offset();
    absl::StatusOr<std::optional<std::string>> record = (*reader)->Next();
    if (!record.ok()) return record.status();
    if (!record->has_value()) break;

    Event event;
    if (!event.ParseFromString(**record)) {
      return absl::DataLossError(absl::StrCat(path, ": record at byte offset ", offset, " is not an Event"));
    }
    if (first && event.what_case() == Event::kFileVersion) contents.file_version = event.file_version();
    if (event.what_case() != Event::kSummary) continue;
    for (const Summary::Value& value : event.summary().value()) {
      if (value.value_case() != Summary::Value::kSimpleValue) continue;
      contents.scalars.push_back({value.tag(), event.step(), value.simple_value(), event.wall_time()});
    }
  }
  return contents;
}

}  // namespace pstrain::tb
