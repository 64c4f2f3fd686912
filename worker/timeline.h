// Timeline: one worker's Chrome-trace file (config `timeline`), the JSON
// array format that chrome://tracing and Perfetto open.
//
// Each event is a complete event ("ph": "X") with the wall-clock start in
// microseconds since the Unix epoch (so the files of several workers line
// up), its duration, the worker as "pid" and a named lane as "tid" ("step",
// "replica 0", "push", "allreduce", ...; the names travel as thread_name
// metadata). Events are recorded only while the current step is inside
// [start_step, end_step).
//
// Crash safety: the file always holds a complete JSON array. Events are
// buffered and written by Flush (the trainer calls it after every traced
// step), which builds the next file beside it ("<path>.partial": the events
// so far copied in the kernel, the new ones, the closing bracket) and
// renames it over the path. A process killed at any moment, inside a flush
// too, leaves the last flush's complete file (and perhaps a stale
// .partial). Each flush copies the file so far: the window is meant to be
// steps, not a whole long run.
//
// Thread-safe: Record is called from the training thread, backward threads
// (gradient-ready hooks), RPC completion callbacks and the all-reduce
// thread.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/config.pb.h"

namespace pstrain {

class Timeline {
 public:
  // Null when config.timeline().path() is empty. The path of worker
  // `worker_index` is TimelinePath's; an error names it when it cannot be
  // created.
  static absl::StatusOr<std::unique_ptr<Timeline>> Create(const ExperimentConfig& config, int worker_index);
  // `path` with "{worker}" replaced by the index; without "{worker}",
  // workers other than 0 get ".worker<i>" before the extension.
  static std::string TimelinePath(const std::string& path, int worker_index);
  ~Timeline();

  // The step the worker is at; events are kept while it is traced.
  void SetStep(int64_t step) { step_ = step; }
  bool Tracing() const;
  // Records `name` from `start` to `end` on `lane`, with a "step" argument
  // and `args` (a JSON object's members, e.g. R"("bytes": 4096)", or "").
  void Record(absl::string_view name, absl::string_view lane, absl::Time start, absl::Time end,
              absl::string_view args = "") ABSL_LOCKS_EXCLUDED(mu_);
  // Appends the events recorded since the last flush (see crash safety).
  absl::Status Flush() ABSL_LOCKS_EXCLUDED(mu_);

  const std::string& path() const { return path_; }

 private:
  Timeline(std::string path, int fd, int worker, int64_t start_step, int64_t end_step)
      : path_(std::move(path)), fd_(fd), worker_(worker), start_step_(start_step), end_step_(end_step) {}
  // The lane's thread id, announcing it in the file the first time.
  int LaneId(absl::string_view lane) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Append(const std::string& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  int fd_ ABSL_GUARDED_BY(mu_);  // the file last renamed to path_
  const int worker_;
  const int64_t start_step_;
  const int64_t end_step_;  // 0: no end
  std::atomic<int64_t> step_{0};

  absl::Mutex mu_;
  std::map<std::string, int, std::less<>> lanes_ ABSL_GUARDED_BY(mu_);
  std::string pending_ ABSL_GUARDED_BY(mu_);     // events not yet written, comma-separated
  int64_t end_offset_ ABSL_GUARDED_BY(mu_) = 0;  // where the closing bracket starts
  bool empty_ ABSL_GUARDED_BY(mu_) = true;       // nothing written yet
  bool broken_ ABSL_GUARDED_BY(mu_) = false;     // a write failed: stop writing
};

}  // namespace pstrain
