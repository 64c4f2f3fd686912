// A buffered writer of TFRecord files (record_format.h), for converting
// datasets: records gather in a user-space buffer and reach the file in
// large writes, not one system call each. Writes exactly the framing that
// RecordSet and TensorFlow read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain::data {

class RecordFileWriter {
 public:
  // Creates `path`, which must not exist yet (ALREADY_EXISTS otherwise).
  // Records are handed to the file each time `buffer_bytes` have gathered.
  static absl::StatusOr<RecordFileWriter> CreateNew(const std::string& path, size_t buffer_bytes = size_t{1} << 20);

  RecordFileWriter(RecordFileWriter&& other) noexcept;
  RecordFileWriter& operator=(RecordFileWriter&& other) noexcept;
  RecordFileWriter(const RecordFileWriter&) = delete;
  RecordFileWriter& operator=(const RecordFileWriter&) = delete;
  // Closes the file if Close was not called; what is still buffered is
  // written, and an error is logged, not raised.
  ~RecordFileWriter();

  // Appends one record holding `data`. Errors name the file; after one,
  // every later call returns it (the file may end inside a record).
  absl::Status Write(absl::string_view data);
  // Hands the buffered records to the file (write(2)).
  absl::Status Flush();
  // Flushes, fsyncs and closes the file; later calls are FAILED_PRECONDITION.
  absl::Status Close();

  const std::string& path() const { return path_; }
  int64_t records_written() const { return records_; }

 private:
  RecordFileWriter(std::string path, int fd, size_t buffer_bytes)
      : path_(std::move(path)), fd_(fd), buffer_bytes_(buffer_bytes) {}

  std::string path_;
  int fd_ = -1;  // -1 once closed or moved from
  size_t buffer_bytes_ = 0;
  std::string buffer_;
  int64_t records_ = 0;
  absl::Status error_;  // the first failure; sticky
};

}  // namespace pstrain::data
