// Writes TensorBoard event files: scalar series (loss, throughput, ...) that
// TensorBoard plots, for `summaries: {dir, every_steps}`.
//
// A file is a TFRecord file (record_io.h) of Event messages
// (proto/summary.proto, wire-compatible with tensorflow.Event): first one
// carrying file_version "brain.Event:2", then one per AddScalar/AddScalars
// call. Point TensorBoard at the directory (`tensorboard --logdir <dir>`).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/summary/record_io.h"

namespace pstrain::tb {

// The version string of the first event of every file.
inline constexpr absl::string_view kEventFileVersion = "brain.Event:2";

// One value of a series at some step.
struct TaggedScalar {
  std::string tag;  // The series, e.g. "loss" or "train/images_per_sec".
  double value;     // Stored as a float, as TensorBoard's simple_value is.
};

// One event file. Thread-safe: calls from several threads are serialised,
// and each call's event reaches the file whole, in call order.
//
// Every Add* hands its event to the operating system before returning, so
// TensorBoard sees it while the run goes on; Flush makes the file durable.
// I/O errors are returned, never fatal; after one, later calls return it too
// (the file keeps every event written before it).
class EventFileWriter {
 public:
  // Creates `dir` (and its parents) if needed and, in it, the file
  //   events.out.tfevents.<unix seconds>.<hostname>.<pid>.<suffix>
  // (TensorBoard's naming; ".<suffix>" is left out when `suffix` is empty),
  // then writes the file_version event. `suffix` names the writer, e.g. the
  // role ("chief", "ps0"); it must not contain '/'. Errors name `dir` when it
  // cannot be created or written; ALREADY_EXISTS when this process already
  // made a writer with the same suffix in `dir` in the same second.
  static absl::StatusOr<std::unique_ptr<EventFileWriter>> Create(const std::string& dir, const std::string& suffix);

  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;
  // Flushes and closes the file; an error is logged, not raised.
  ~EventFileWriter();

  // Records `value` as the point at `step` of series `tag`.
  absl::Status AddScalar(absl::string_view tag, int64_t step, double value);
  // Records several series at `step` as one event, e.g.
  //   AddScalars(step, {{"loss", loss}, {"images_per_sec", rate}}).
  // Nothing is written when `scalars` is empty.
  absl::Status AddScalars(int64_t step, absl::Span<const TaggedScalar> scalars);
  // Makes every event written so far durable (fsync).
  absl::Status Flush();

  // The file's full path.
  const std::string& path() const { return path_; }

 private:
  EventFileWriter(std::string path, std::unique_ptr<RecordWriter> records)
      : path_(std::move(path)), records_(std::move(records)) {}

  const std::string path_;
  absl::Mutex mu_;
  std::unique_ptr<RecordWriter> records_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain::tb
