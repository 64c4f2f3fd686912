#include "common/data/records/record_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/data/records/record_format.h"
#include "glog/logging.h"

namespace pstrain::data {

absl::StatusOr<RecordFileWriter> RecordFileWriter::CreateNew(const std::string& path, size_t buffer_bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot create"));
  return RecordFileWriter(path, fd, buffer_bytes);
}

RecordFileWriter::RecordFileWriter(RecordFileWriter&& other) noexcept { *this = std::move(other); }

RecordFileWriter& RecordFileWriter::operator=(RecordFileWriter&& other) noexcept {
  if (this == &other) return *this;
  if (fd_ >= 0) {
    absl::Status closed = Close();
    if (!closed.ok()) LOG(WARNING) << closed;
  }
  path_ = std::move(other.path_);
  fd_ = std::exchange(other.fd_, -1);
  buffer_bytes_ = other.buffer_bytes_;
  buffer_ = std::move(other.buffer_);
  records_ = other.records_;
  error_ = std::move(other.error_);
  return *this;
}

RecordFileWriter::~RecordFileWriter() {
  if (fd_ < 0) return;
  absl::Status flushed = Flush();
  if (!flushed.ok()) LOG(WARNING) << flushed;
  if (::close(fd_) != 0) LOG(WARNING) << path_ << ": close failed: " << std::strerror(errno);
}

absl::Status RecordFileWriter::Write(absl::string_view data) {
  if (!error_.ok()) return error_;
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, ": write after close"));
  AppendRecord(data, &buffer_);
  ++records_;
  if (buffer_.size() >= buffer_bytes_) return Flush();
  return absl::OkStatus();
}

absl::Status RecordFileWriter::Flush() {
  if (!error_.ok()) return error_;
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, ": flush after close"));
  size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error_ = absl::ErrnoToStatus(errno, absl::StrCat(path_, ": write failed"));
      return error_;
    }
    done += static_cast<size_t>(n);
  }
  buffer_.clear();
  return absl::OkStatus();
}

absl::Status RecordFileWriter::Close() {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, ": already closed"));
  absl::Status status = Flush();
  if (status.ok() && ::fsync(fd_) != 0) status = absl::ErrnoToStatus(errno, absl::StrCat(path_, ": fsync failed"));
  if (::close(fd_) != 0 && status.ok()) status = absl::ErrnoToStatus(errno, absl::StrCat(path_, ": close failed"));
  fd_ = -1;
  if (!status.ok() && error_.ok()) error_ = status;
  return status;
}

}  // namespace pstrain::data
