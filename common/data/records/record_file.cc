#include "common/data/records/record_file.h"

#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace pstrain::data {
namespace {

absl::Status Errno(int error, const std::string& path, absl::string_view what) {
  return absl::ErrnoToStatus(error, absl::StrCat(path, ": ", what));
}

// Reads exactly `n` bytes at `offset`, retrying short reads; false with
// errno set on an error, false with errno 0 at the end of the file.
bool PreadFully(int fd, char* out, size_t n, uint64_t offset) {
  while (n > 0) {
    const ssize_t got = ::pread(fd, out, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      if (got == 0) errno = 0;
      return false;
    }
    out += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> MatchFiles(const std::string& pattern) {
  glob_t matches{};
  const int rc = ::glob(pattern.c_str(), GLOB_ERR, nullptr, &matches);
  std::vector<std::string> files;
  if (rc == 0) files.assign(matches.gl_pathv, matches.gl_pathv + matches.gl_pathc);
  ::globfree(&matches);
  if (rc == GLOB_NOMATCH || (rc == 0 && files.empty())) {
    return absl::NotFoundError(absl::StrCat("no file matches ", pattern));
  }
  if (rc != 0) return absl::InternalError(absl::StrCat("glob(", pattern, ") failed (", rc, ")"));
  std::sort(files.begin(), files.end());
  return files;
}

absl::StatusOr<RecordSet> RecordSet::Index(std::vector<std::string> files, bool skip_corrupt) {
  if (files.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat("too many record files: ", files.size()));
  }
  RecordSet set;
  set.files_ = std::move(files);
  set.fds_.assign(set.files_.size(), -1);
  for (size_t f = 0; f < set.files_.size(); ++f) {
    set.fds_[f] = ::open(set.files_[f].c_str(), O_RDONLY | O_CLOEXEC);
    if (set.fds_[f] < 0) return Errno(errno, set.files_[f], "cannot open");
    absl::Status indexed = set.IndexFile(static_cast<int32_t>(f), skip_corrupt);
    if (!indexed.ok()) return indexed;
  }
  return set;
}

absl::Status RecordSet::IndexFile(int32_t f, bool skip_corrupt) {
  const std::string& path = files_[f];
  const int fd = fds_[f];
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Errno(errno, path, "cannot stat");
  // Headers only: no read-ahead of the data between them while indexing.
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
  RecordScan scan = ScanRecords(static_cast<uint64_t>(st.st_size), f, path, [&](uint64_t offset, char* header) {
    if (PreadFully(fd, header, kRecordHeaderBytes, offset)) return absl::OkStatus();
    if (errno == 0) return absl::DataLossError(absl::StrCat(path, ": truncated record at offset ", offset));
    return Errno(errno, path, absl::StrCat("cannot read at offset ", offset));
  });
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_NORMAL);
  records_.insert(records_.end(), scan.records.begin(), scan.records.end());
  if (scan.error.ok()) return absl::OkStatus();
  if (!skip_corrupt || !absl::IsDataLoss(scan.error)) return scan.error;
  const uint64_t skipped = static_cast<uint64_t>(st.st_size) - scan.end;
  LOG(WARNING) << scan.error.message() << "; skipping the last " << skipped << " bytes of the file";
  ++skipped_files_tail_;
  skipped_bytes_ += skipped;
  return absl::OkStatus();
}

RecordSet::RecordSet(RecordSet&& other) noexcept { *this = std::move(other); }

RecordSet& RecordSet::operator=(RecordSet&& other) noexcept {
  if (this == &other) return *this;
  CloseAll();
  files_ = std::move(other.files_);
  fds_ = std::move(other.fds_);
  records_ = std::move(other.records_);
  skipped_files_tail_ = other.skipped_files_tail_;
  skipped_bytes_ = other.skipped_bytes_;
  other.fds_.clear();
  other.files_.clear();
  other.records_.clear();
  return *this;
}

RecordSet::~RecordSet() { CloseAll(); }

void RecordSet::CloseAll() {
  for (size_t f = 0; f < fds_.size(); ++f) {
    if (fds_[f] >= 0 && ::close(fds_[f]) != 0) LOG(WARNING) << Errno(errno, files_[f], "close failed");
  }
  fds_.clear();
}

std::string RecordSet::Where(int64_t i) const {
  const RecordLocation& location = at(i);
  return absl::StrCat(file(location.file), ": record at offset ", location.offset);
}

absl::Status RecordSet::Read(int64_t i, std::string* data) const {
  if (i < 0 || i >= size()) return absl::OutOfRangeError(absl::StrCat("record ", i, " of ", size()));
  const RecordLocation& location = at(i);
  const std::string& path = files_[location.file];
  char header[kRecordHeaderBytes];
  char footer[kRecordFooterBytes];
  data->resize(location.length);
  iovec parts[3] = {{header, kRecordHeaderBytes}, {data->data(), location.length}, {footer, kRecordFooterBytes}};
  const size_t want = kRecordHeaderBytes + location.length + kRecordFooterBytes;
  ssize_t got;
  do {
    got = ::preadv(fds_[location.file], parts, 3, static_cast<off_t>(location.offset));
  } while (got < 0 && errno == EINTR);
  if (got < 0) return Errno(errno, path, absl::StrCat("cannot read the record at offset ", location.offset));
  // A regular file returns a short read only at its end.
  if (static_cast<size_t>(got) != want) {
    return absl::DataLossError(absl::StrCat(path, ": truncated record at offset ", location.offset));
  }
  absl::StatusOr<uint64_t> length =
      ParseRecordHeader(absl::string_view(header, kRecordHeaderBytes), path, location.offset);
  if (!length.ok()) return length.status();
  if (*length != location.length) {
    return absl::DataLossError(absl::StrCat(path, ": record at offset ", location.offset, " now has ", *length,
                                            " bytes, indexed with ", location.length));
  }
  return CheckRecordData(*data, absl::string_view(footer, kRecordFooterBytes), path, location.offset);
}

}  // namespace pstrain::data
