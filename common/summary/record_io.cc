#include "common/summary/record_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/durable_file.h"
#include "common/tfrecord_fields.h"
#include "glog/logging.h"

namespace pstrain::tb {
namespace {

constexpr size_t kHeaderBytes = 12;  // uint64 length + uint32 masked CRC of it.
constexpr size_t kFooterBytes = 4;   // uint32 masked CRC of the data.
absl::Status Errno(int error, absl::string_view what, const std::string& path) {
  return absl::ErrnoToStatus(error, absl::StrCat(path, ": ", what));
}

}  // namespace

uint32_t Crc32c(absl::string_view data) { return pstrain::Crc32c(data.data(), data.size()); }

// ---- RecordWriter ----

absl::StatusOr<std::unique_ptr<RecordWriter>> RecordWriter::Append(const std::string& path) {
  return Open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC);
}

absl::StatusOr<std::unique_ptr<RecordWriter>> RecordWriter::CreateNew(const std::string& path) {
  return Open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC);
}

absl::StatusOr<std::unique_ptr<RecordWriter>> RecordWriter::Open(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) return Errno(errno, "cannot open for writing", path);
  return std::unique_ptr<RecordWriter>(new RecordWriter(path, fd));
}

RecordWriter::~RecordWriter() {
  if (fd_ >= 0 && ::close(fd_) != 0) LOG(WARNING) << Errno(errno, "close failed", path_);
}

absl::Status RecordWriter::Write(absl::string_view data) {
  if (!error_.ok()) return error_;
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, ": write after close"));
  // One buffer, so the record reaches the file in one write(2) in the usual case.
  std::string record(kHeaderBytes + data.size() + kFooterBytes, '\0');
  EncodeFixed64(data.size(), &record[0]);
  EncodeFixed32(MaskedCrc32c(absl::string_view(record.data(), 8)), &record[8]);
  record.replace(kHeaderBytes, data.size(), data.data(), data.size());
  EncodeFixed32(MaskedCrc32c(data), &record[kHeaderBytes + data.size()]);

  size_t written = 0;
  while (written < record.size()) {
    const ssize_t n = ::write(fd_, record.data() + written, record.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error_ = Errno(errno, "write failed", path_);
      return error_;
    }
    written += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status RecordWriter::Sync() {
  if (!error_.ok()) return error_;
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, ": sync after close"));
  if (::fsync(fd_) != 0) error_ = Errno(errno, "fsync failed", path_);
  return error_;
}

absl::Status RecordWriter::Close() {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, ": already closed"));
  absl::Status status = Sync();
  if (::close(fd_) != 0 && status.ok()) status = Errno(errno, "close failed", path_);
  fd_ = -1;
  return status;
}

// ---- RecordReader ----

absl::StatusOr<std::unique_ptr<RecordReader>> RecordReader::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno(errno, "cannot open for reading", path);
  return std::unique_ptr<RecordReader>(new RecordReader(path, fd));
}

RecordReader::~RecordReader() { ::close(fd_); }

absl::StatusOr<size_t> RecordReader::ReadAt(uint64_t offset, size_t n, std::string* out) const {
  out->resize(n);
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd_, out->data() + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Errno(errno, absl::StrCat("read failed at byte offset ", offset + got), path_);
    if (r == 0) break;  // End of file.
    got += static_cast<size_t>(r);
  }
  out->resize(got);
  return got;
}

absl::StatusOr<std::optional<std::string>> RecordReader::Next() {
  auto truncated = [&](absl::string_view detail) {
    return absl::OutOfRangeError(
        absl::StrCat(path_, ": truncated record at byte offset ", offset_, ": the file ends ", detail));
  };
  auto corrupt = [&](absl::string_view field, uint32_t stored, uint32_t computed) {
    return absl::DataLossError(
        absl::StrFormat("%s: corrupt record at byte offset %d: %s checksum mismatch (stored %#010x, computed %#010x)",
                        path_, offset_, field, stored, computed));
  };

  std::string header;
  absl::StatusOr<size_t> got = ReadAt(offset_, kHeaderBytes, &header);
  if (!got.ok()) return got.status();
  if (*got == 0) return std::nullopt;
  if (*got < kHeaderBytes) {
    return truncated(absl::StrCat(*got, " bytes into its ", kHeaderBytes, "-byte header"));
  }
  const uint64_t length = DecodeFixed64(header.data());
  const uint32_t stored_length_crc = DecodeFixed32(header.data() + 8);
  const uint32_t length_crc = MaskedCrc32c(absl::string_view(header.data(), 8));
  if (stored_length_crc != length_crc) return corrupt("length", stored_length_crc, length_crc);

  // The length is genuine (its checksum matched); check it against the file
  // before allocating, so a file cut short never makes us read a huge buffer.
  struct stat st;
  if (::fstat(fd_, &st) != 0) return Errno(errno, "fstat failed", path_);
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  const uint64_t body_offset = offset_ + kHeaderBytes;
  const uint64_t available = file_size > body_offset ? file_size - body_offset : 0;
  if (length > available || available - length < kFooterBytes) {
    return truncated(
        absl::StrCat("inside its ", length, " data bytes and checksum (", available, " bytes of them are present)"));
  }

  std::string body;
  got = ReadAt(offset_ + kHeaderBytes, length + kFooterBytes, &body);
  if (!got.ok()) return got.status();
  if (*got < length + kFooterBytes) {
    return truncated(
        absl::StrCat("inside its ", length, " data bytes and checksum (", *got, " bytes of them are present)"));
  }
  const absl::string_view data(body.data(), length);
  const uint32_t stored_data_crc = DecodeFixed32(body.data() + length);
  const uint32_t data_crc = MaskedCrc32c(data);
  if (stored_data_crc != data_crc) return corrupt("data", stored_data_crc, data_crc);

  offset_ += kHeaderBytes + length + kFooterBytes;
  body.resize(length);
  return std::optional<std::string>(std::move(body));
}

}  // namespace pstrain::tb
