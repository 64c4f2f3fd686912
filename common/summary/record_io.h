// TFRecord files: the framing of TensorFlow's record files, which TensorBoard
// event files use.
//
// A file is a sequence of records, each
//   uint64 length          little-endian, the number of data bytes
//   uint32 length_crc      MaskedCrc32c of the 8 length bytes, little-endian
//   byte   data[length]
//   uint32 data_crc        MaskedCrc32c of the data, little-endian
// with nothing before, between or after them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/tfrecord_fields.h"

namespace pstrain::tb {

// CRC-32C (Castagnoli, polynomial 0x1EDC6F41, reflected, initial value and
// final xor 0xFFFFFFFF) of `data`: the CRC of iSCSI, ext4 and TensorFlow.
uint32_t Crc32c(absl::string_view data);

// The checksum a TFRecord stores (common/tfrecord_fields.h).
using ::pstrain::MaskedCrc32c;

// Appends records to one file. Each Write hands its whole record to the
// operating system before it returns (no user-space buffer), so a reader in
// another process sees every record written so far; Sync also makes them
// durable. Not thread-safe: callers serialise access.
//
// After a failed write the file may end in part of a record, so every later
// call returns that first error instead of writing behind it.
class RecordWriter {
 public:
  // Opens `path` for appending, creating it if it does not exist.
  static absl::StatusOr<std::unique_ptr<RecordWriter>> Append(const std::string& path);
  // Creates `path`, which must not exist yet (ALREADY_EXISTS otherwise), so no
  // two writers ever share a file.
  static absl::StatusOr<std::unique_ptr<RecordWriter>> CreateNew(const std::string& path);

  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;
  // Closes the file (without Sync); an error is logged, not raised.
  ~RecordWriter();

  // Appends one record holding `data`. Errors name the file.
  absl::Status Write(absl::string_view data);
  // Flushes the records written so far to the storage device (fsync).
  absl::Status Sync();
  // Syncs and closes the file; later calls return FAILED_PRECONDITION.
  absl::Status Close();

  const std::string& path() const { return path_; }

 private:
  RecordWriter(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  static absl::StatusOr<std::unique_ptr<RecordWriter>> Open(const std::string& path, int flags);

  const std::string path_;
  int fd_;              // -1 once closed.
  absl::Status error_;  // The first failure; sticky.
};

// Reads the records of one file in order, checking both checksums of each.
// Not thread-safe.
class RecordReader {
 public:
  static absl::StatusOr<std::unique_ptr<RecordReader>> Open(const std::string& path);

  RecordReader(const RecordReader&) = delete;
  RecordReader& operator=(const RecordReader&) = delete;
  ~RecordReader();

  // The data of the next record, or std::nullopt at the end of the file when
  // the last record was complete. Errors name the file and the byte offset at
  // which the bad record starts:
  //   OUT_OF_RANGE  the file ends inside a record ("truncated"): the tail of a
  //                 file still being written, or of a writer that died; a
  //                 later read of a live file may find the record complete.
  //   DATA_LOSS     a checksum does not match ("corrupt"): the bytes on disk
  //                 are not what was written.
  // After an error the reader stays at the bad record: Next returns the same
  // kind of error again (reading more of the file if it has grown).
  absl::StatusOr<std::optional<std::string>> Next();

  // Byte offset of the next record to read.
  uint64_t offset() const { return offset_; }
  const std::string& path() const { return path_; }

 private:
  RecordReader(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  // Reads `n` bytes at `offset` into `out`, fewer only where the file ends
  // first; returns how many were read.
  absl::StatusOr<size_t> ReadAt(uint64_t offset, size_t n, std::string* out) const;

  const std::string path_;
  const int fd_;
  uint64_t offset_ = 0;
};

}  // namespace pstrain::tb
