#include "common/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pstrain {
namespace {

std::string Errno() { return std::strerror(errno); }

std::string TempPath(const std::string& path) { return path + ".tmp"; }

}  // namespace

uint32_t Crc32c(const void* data, size_t size) {
  Crc32cEngine engine;
  engine.process_bytes(data, size);
  return engine.checksum();
}

absl::StatusOr<DurableFileWriter> DurableFileWriter::Create(const std::string& path) {
  const std::string temp = TempPath(path);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::PermissionDeniedError(absl::StrCat("cannot create ", temp, ": ", Errno()));
  return DurableFileWriter(path, fd);
}

DurableFileWriter::DurableFileWriter(DurableFileWriter&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_), bytes_(other.bytes_), crc_(other.crc_) {
  other.fd_ = -1;
}

DurableFileWriter::~DurableFileWriter() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(TempPath(path_).c_str());
}

absl::Status DurableFileWriter::Append(const void* data, size_t size) {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, ": already committed"));
  const char* p = static_cast<const char*>(data);
  size_t left = size;
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ResourceExhaustedError(absl::StrCat("writing ", TempPath(path_), ": ", Errno()));
    p += n;
    left -= static_cast<size_t>(n);
  }
  crc_.process_bytes(data, size);
  bytes_ += size;
  return absl::OkStatus();
}

absl::StatusOr<FileDigest> DurableFileWriter::Commit() {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, ": already committed"));
  const std::string temp = TempPath(path_);
  if (::fsync(fd_) != 0) return absl::DataLossError(absl::StrCat("fsync ", temp, ": ", Errno()));
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    ::unlink(temp.c_str());
    return absl::DataLossError(absl::StrCat("close ", temp, ": ", Errno()));
  }
  if (::rename(temp.c_str(), path_.c_str()) != 0) {
    const std::string why = Errno();
    ::unlink(temp.c_str());
    return absl::DataLossError(absl::StrCat("rename ", temp, " to ", path_, ": ", why));
  }
  const std::string dir = std::filesystem::path(path_).parent_path().string();
  if (absl::Status s = SyncDirectory(dir.empty() ? "." : dir); !s.ok()) return s;
  return FileDigest{bytes_, crc_.checksum()};
}

absl::StatusOr<FileDigest> WriteFileDurably(const std::string& path, const std::string& contents) {
  absl::StatusOr<DurableFileWriter> writer = DurableFileWriter::Create(path);
  if (!writer.ok()) return writer.status();
  if (absl::Status s = writer->Append(contents.data(), contents.size()); !s.ok()) return s;
  return writer->Commit();
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path, const FileDigest* expected) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", Errno()));
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("reading ", path, ": ", Errno()));
  std::string data = std::move(contents).str();
  if (expected != nullptr) {
    if (data.size() != expected->bytes) {
      return absl::DataLossError(
          absl::StrCat(path, ": ", data.size(), " bytes, expected ", expected->bytes, " (truncated or replaced)"));
    }
    const uint32_t crc = Crc32c(data.data(), data.size());
    if (crc != expected->crc32c) {
      return absl::DataLossError(
          absl::StrFormat("%s: CRC32C %08x, expected %08x (corrupted)", path, crc, expected->crc32c));
    }
  }
  return data;
}

absl::Status EnsureWritableDirectory(const std::string& dir, const std::string& what) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat(what, " ", dir, ": cannot create it: ", ec.message()));
  const std::string probe = (std::filesystem::path(dir) / ".writable").string();
  absl::StatusOr<FileDigest> written = WriteFileDurably(probe, "pstrain");
  if (!written.ok()) {
    return absl::PermissionDeniedError(absl::StrCat(what, " ", dir, " is not writable: ", written.status().message()));
  }
  std::filesystem::remove(probe, ec);
  return absl::OkStatus();
}

absl::Status SyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return absl::DataLossError(absl::StrCat("open directory ", dir, ": ", Errno()));
  const int rc = ::fsync(fd);
  const std::string why = rc != 0 ? Errno() : "";
  ::close(fd);
  if (rc != 0) return absl::DataLossError(absl::StrCat("fsync directory ", dir, ": ", why));
  return absl::OkStatus();
}

}  // namespace pstrain
