// Files that are either whole or absent: written under a temporary name,
// fsynced, renamed into place (and the directory fsynced), with their size
// and CRC32C computed on the way so readers can tell a complete file from a
// truncated or corrupted one. Used by checkpoints.
#pragma once

#include <boost/crc.hpp>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pstrain {

struct FileDigest {
  uint64_t bytes = 0;
  uint32_t crc32c = 0;
};

// CRC32C (Castagnoli): reflected polynomial 0x1EDC6F41, initial and final
// XOR 0xFFFFFFFF. Feed it bytes with process_bytes; checksum() is the CRC so far.
using Crc32cEngine = boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true>;

// CRC32C of `size` bytes.
uint32_t Crc32c(const void* data, size_t size);

class DurableFileWriter {
 public:
  // Opens "<path>.tmp"; errors name the path and the system's reason.
  static absl::StatusOr<DurableFileWriter> Create(const std::string& path);
  DurableFileWriter(DurableFileWriter&& other) noexcept;
  DurableFileWriter& operator=(DurableFileWriter&&) = delete;
  // Removes the temporary file unless committed.
  ~DurableFileWriter();

  absl::Status Append(const void* data, size_t size);
  // Flushes and fsyncs the file, renames it to `path`, fsyncs the directory.
  absl::StatusOr<FileDigest> Commit();

 private:
  DurableFileWriter(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_ = -1;
  uint64_t bytes_ = 0;
  Crc32cEngine crc_;
};

// Writes `contents` to `path` durably (DurableFileWriter).
absl::StatusOr<FileDigest> WriteFileDurably(const std::string& path, const std::string& contents);

// Reads a whole file. With `expected`, a size or CRC32C that differs is
// DATA_LOSS naming the file and both values.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path, const FileDigest* expected = nullptr);

// Creates `dir` if missing and checks a file can be written in it durably;
// PERMISSION_DENIED naming `what` (e.g. "checkpoint.dir") and `dir` if not.
absl::Status EnsureWritableDirectory(const std::string& dir, const std::string& what);

// Fsyncs a directory (after entries in it were created, renamed or removed).
absl::Status SyncDirectory(const std::string& dir);

}  // namespace pstrain
