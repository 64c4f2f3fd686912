// Random access to the records of TFRecord files (record_format.h has the
// framing): a RecordSet indexes a list of files once, by their record
// headers alone, and then reads any record by its number, from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/data/records/record_format.h"

namespace pstrain::data {

// The paths glob(3) matches to `pattern`, sorted (so the shards of a dataset,
// "train-00000-of-01024" .., come in order). NOT_FOUND naming the pattern
// when nothing matches; other glob failures are INTERNAL.
absl::StatusOr<std::vector<std::string>> MatchFiles(const std::string& pattern);

class RecordSet {
 public:
  // Opens every file of `files` (kept open until destruction) and indexes its
  // records, in file order. Reads only each record's 12-byte header and steps
  // over its data, so indexing a dataset reads a few bytes per record, not the
  // dataset. Errors name the file and, for a bad record, the byte offset where
  // it starts (record_format.h, ScanRecords): DATA_LOSS "truncated record" or
  // "corrupt record header". With `skip_corrupt` a bad record and the rest of
  // its file (there is no reliable way to find the next record) are skipped
  // and counted instead, with a warning. A file that cannot be opened is an
  // error either way; an empty file holds 0 records.
  static absl::StatusOr<RecordSet> Index(std::vector<std::string> files, bool skip_corrupt);

  RecordSet(RecordSet&& other) noexcept;
  RecordSet& operator=(RecordSet&& other) noexcept;
  RecordSet(const RecordSet&) = delete;
  RecordSet& operator=(const RecordSet&) = delete;
  ~RecordSet();  // closes the files

  // The number of records, over all files.
  int64_t size() const { return static_cast<int64_t>(records_.size()); }
  // Record `i` (0 <= i < size()).
  const RecordLocation& at(int64_t i) const { return records_[static_cast<size_t>(i)]; }
  const std::string& file(int32_t f) const { return files_[static_cast<size_t>(f)]; }
  const std::vector<std::string>& files() const { return files_; }
  // Record `i` for messages: "<file>: record at offset <byte>".
  std::string Where(int64_t i) const;

  // Files whose tail (from a bad record to the end) Index skipped, and the
  // bytes those tails held; both 0 without skip_corrupt.
  int64_t skipped_files_tail() const { return skipped_files_tail_; }
  uint64_t skipped_bytes() const { return skipped_bytes_; }

  // Reads the data of record `i` into `data` with one positioned read
  // (thread-safe), checking both CRCs and that the header still announces the
  // indexed length. DATA_LOSS naming the file and the record's offset when
  // they do not match ("bad data CRC") or the file got shorter; OUT_OF_RANGE
  // when `i` is not a record number.
  absl::Status Read(int64_t i, std::string* data) const;

 private:
  RecordSet() = default;
  void CloseAll();
  // Indexes file `f` (already open as fds_[f]) and appends its records.
  absl::Status IndexFile(int32_t f, bool skip_corrupt);

  std::vector<std::string> files_;
  std::vector<int> fds_;  // one per file, -1 where not open
  std::vector<RecordLocation> records_;
  int64_t skipped_files_tail_ = 0;
  uint64_t skipped_bytes_ = 0;
};

}  // namespace pstrain::data
