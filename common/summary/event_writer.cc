#include "common/summary/event_writer.h"

#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "proto/summary.pb.h"

namespace pstrain::tb {
namespace {

std::string Hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// Seconds since the Unix epoch, as Event.wall_time holds them.
double WallTime() { return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()); }

// `status` with `context` in front of its message, same code.
absl::Status Annotate(const absl::Status& status, absl::string_view context) {
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<EventFileWriter>> EventFileWriter::Create(const std::string& dir,
                                                                         const std::string& suffix) {
  if (absl::StrContains(suffix, '/')) {
    return absl::InvalidArgumentError(absl::StrCat("event file suffix \"", suffix, "\" must not contain '/'"));
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::ErrnoToStatus(ec.value(), absl::StrCat("cannot create summary directory ", dir));
  }

  const int64_t now_seconds = absl::ToUnixSeconds(absl::Now());
  std::string path = absl::StrCat(dir, "/events.out.tfevents.", now_seconds, ".", Hostname(), ".", ::getpid(),
                                  suffix.empty() ? "" : ".", suffix);
  const std::string context = absl::StrCat("cannot write to summary directory ", dir);
  absl::StatusOr<std::unique_ptr<RecordWriter>> records = RecordWriter::CreateNew(path);
  if (!records.ok()) return Annotate(records.status(), context);

  Event version;
  version.set_wall_time(WallTime());
  version.set_file_version(std::string(kEventFileVersion));
  if (absl::Status s = (*records)->Write(version.SerializeAsString()); !s.ok()) return Annotate(s, context);
  return std::unique_ptr<EventFileWriter>(new EventFileWriter(std::move(path), *std::move(records)));
}

EventFileWriter::~EventFileWriter() {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = records_->Close(); !s.ok()) LOG(WARNING) << "event file: " << s;
}

absl::Status EventFileWriter::AddScalar(absl::string_view tag, int64_t step, double value) {
  return AddScalars(step, {TaggedScalar{std::string(tag), value}});
}

absl::Status EventFileWriter::AddScalars(int64_t step, absl::Span<const TaggedScalar> scalars) {
  if (scalars.empty()) return absl::OkStatus();
  Event event;
  event.set_step(step);
  for (const TaggedScalar& s : scalars) {
    Summary::Value* value = event.mutable_summary()->add_value();
    value->set_tag(s.tag);
    value->set_simple_value(static_cast<float>(s.value));
  }
  absl::MutexLock lock(&mu_);
  event.set_wall_time(WallTime());  // Under the lock: wall times rise through the file.
  return records_->Write(event.SerializeAsString());
}

absl::Status EventFileWriter::Flush() {
  absl::MutexLock lock(&mu_);
  return records_->Sync();
}

}  // namespace pstrain::tb
