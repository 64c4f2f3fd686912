#include "worker/timeline.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

// The closing of the array, rewritten after every flush.
constexpr char kClosing[] = "\n]\n";

// Names are ours (phases, lanes, variable names); quotes and backslashes
// are escaped all the same, control characters dropped.
std::string JsonString(absl::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) >= 0x20) {
      out += c;
    }
  }
  out += '"';
  return out;
}

absl::Status WriteAt(int fd, absl::string_view data, int64_t offset, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::InternalError(absl::StrCat("timeline ", path, ": write failed: ", std::strerror(errno)));
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// Copies the first `length` bytes of `from` to the start of `to`, in the
// kernel (a reflink where the file system shares extents), falling back to
// read and write where copy_file_range cannot serve the pair.
absl::Status CopyPrefix(int from, int to, int64_t length, const std::string& path) {
  off_t in = 0, out = 0;
  while (in < length) {
    const ssize_t n = copy_file_range(from, &in, to, &out, static_cast<size_t>(length - in), 0);
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EOPNOTSUPP || errno == EINVAL)) break;
    return absl::InternalError(absl::StrCat(
        "timeline ", path, ": copy failed: ", n == 0 ? "the file is shorter than written" : std::strerror(errno)));
  }
  std::string buffer(1 << 20, '\0');
  while (in < length) {
    const ssize_t n = pread(from, buffer.data(), std::min<int64_t>(buffer.size(), length - in), in);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::InternalError(absl::StrCat(
          "timeline ", path, ": read failed: ", n == 0 ? "the file is shorter than written" : std::strerror(errno)));
    }
    if (absl::Status s = WriteAt(to, absl::string_view(buffer.data(), n), out, path); !s.ok()) return s;
    in += n;
    out += n;
  }
  return absl::OkStatus();
}

}  // namespace

std::string Timeline::TimelinePath(const std::string& path, int worker_index) {
  if (path.find("{worker}") != std::string::npos) {
    return absl::StrReplaceAll(path, {{"{worker}", absl::StrCat(worker_index)}});
  }
  if (worker_index == 0) return path;
  const std::filesystem::path p(path);
  return (p.parent_path() / absl::StrCat(p.stem().string(), ".worker", worker_index, p.extension().string())).string();
}

absl::StatusOr<std::unique_ptr<Timeline>> Timeline::Create(const ExperimentConfig& config, int worker_index) {
  const TimelineConfig& c = config.timeline();
  if (c.path().empty()) return nullptr;
  const std::string path = TimelinePath(c.path(), worker_index);
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("timeline.path: cannot create ", path, ": ", std::strerror(errno)));
  }
  std::unique_ptr<Timeline> timeline(new Timeline(path, fd, worker_index, c.start_step(), c.end_step()));
  {
    absl::MutexLock lock(&timeline->mu_);
    const std::string head = "[";
    absl::Status s = WriteAt(fd, absl::StrCat(head, kClosing), 0, path);
    if (!s.ok()) return s;
    timeline->end_offset_ = static_cast<int64_t>(head.size());
    timeline->Append(absl::StrCat(R"({"name": "process_name", "ph": "M", "pid": )", worker_index,
                                  R"(, "args": {"name": "worker )", worker_index, "\"}}"));
  }
  return timeline;
}

Timeline::~Timeline() {
  absl::Status s = Flush();
  if (!s.ok()) LOG(WARNING) << s.message();
  absl::MutexLock lock(&mu_);
  close(fd_);
}

bool Timeline::Tracing() const {
  const int64_t step = step_.load();
  return step >= start_step_ && (end_step_ == 0 || step < end_step_);
}

int Timeline::LaneId(absl::string_view lane) {
  auto it = lanes_.find(lane);
  if (it != lanes_.end()) return it->second;
  const int id = static_cast<int>(lanes_.size()) + 1;
  lanes_.emplace(std::string(lane), id);
  Append(absl::StrCat(R"({"name": "thread_name", "ph": "M", "pid": )", worker_, R"(, "tid": )", id,
                      R"(, "args": {"name": )", JsonString(lane), "}}"));
  Append(absl::StrCat(R"({"name": "thread_sort_index", "ph": "M", "pid": )", worker_, R"(, "tid": )", id,
                      R"(, "args": {"sort_index": )", id, "}}"));
  return id;
}

void Timeline::Append(const std::string& event) {
  if (!pending_.empty() || !empty_) pending_ += ",\n";
  pending_ += event;
  empty_ = false;
}

void Timeline::Record(absl::string_view name, absl::string_view lane, absl::Time start, absl::Time end,
                      absl::string_view args) {
  if (!Tracing()) return;
  const int64_t ts = absl::ToUnixMicros(start);
  const int64_t dur = std::max<int64_t>(0, absl::ToInt64Microseconds(end - start));
  absl::MutexLock lock(&mu_);
  const int tid = LaneId(lane);
  Append(absl::StrCat(R"({"name": )", JsonString(name), R"(, "ph": "X", "ts": )", ts, R"(, "dur": )", dur,
                      R"(, "pid": )", worker_, R"(, "tid": )", tid, R"(, "args": {"step": )", step_.load(),
                      args.empty() ? "" : ", ", args, "}}"));
}

absl::Status Timeline::Flush() {
  absl::MutexLock lock(&mu_);
  if (pending_.empty() || broken_) return absl::OkStatus();
  // A write of more than a page is not atomic: a process killed inside it
  // keeps the pages already copied. So the new file is built beside the old
  // one (the events written so far, the new events, the closing bracket)
  // and renamed over it; a kill anywhere leaves one complete file.
  const std::string staging = path_ + ".partial";
  const int next = open(staging.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  absl::Status s = next < 0 ? absl::InternalError(absl::StrCat("timeline ", path_, ": cannot create ", staging, ": ",
                                                               std::strerror(errno)))
                            : CopyPrefix(fd_, next, end_offset_, path_);
  if (s.ok()) s = WriteAt(next, absl::StrCat(pending_, kClosing), end_offset_, path_);
  if (s.ok() && rename(staging.c_str(), path_.c_str()) != 0) {
    s = absl::InternalError(absl::StrCat("timeline ", path_, ": cannot replace it: ", std::strerror(errno)));
  }
  if (!s.ok()) {
    if (next >= 0) {
      close(next);
      unlink(staging.c_str());
    }
    broken_ = true;
    return s;
  }
  close(fd_);
  fd_ = next;
  end_offset_ += static_cast<int64_t>(pending_.size());
  pending_.clear();
  return absl::OkStatus();
}

}  // namespace pstrain
