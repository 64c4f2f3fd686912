// The TFRecord framing as pure functions over bytes: what the file reader
// (record_file.h), the writer (record_writer.h), the tools and the fuzz
// target (tests/fuzz/tfrecord_fuzz.cc) share, so they all run one parser.
//
// A TFRecord file is a sequence of records, each
//   uint64 length          little-endian, the number of data bytes
//   uint32 length_crc      MaskedCrc32c of the 8 length bytes, little-endian
//   byte   data[length]
//   uint32 data_crc        MaskedCrc32c of the data, little-endian
// with nothing before, between or after them (common/summary/record_io.h
// writes the same framing for TensorBoard).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/tfrecord_fields.h"

namespace pstrain::data {

inline constexpr uint64_t kRecordHeaderBytes = 12;  // length + its masked CRC
inline constexpr uint64_t kRecordFooterBytes = 4;   // masked CRC of the data
// A header that announces more data than this is taken for corrupt: no image
// record comes near it, and trusting a flipped bit would allocate exabytes.
inline constexpr uint64_t kMaxRecordBytes = uint64_t{1} << 30;

// TensorFlow's masked CRC-32C (common/tfrecord_fields.h).
using ::pstrain::MaskedCrc32c;

// Where one record lies: `file` indexes the file list of its RecordSet,
// `offset` is the byte offset of the record's header, `length` the number of
// its data bytes (so the record spans offset .. offset + 16 + length).
struct RecordLocation {
  int32_t file = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
};

// Appends one whole record (header, data, footer) holding `data` to `out`.
void AppendRecord(absl::string_view data, std::string* out);

// Decodes a record header (exactly kRecordHeaderBytes bytes) into the data
// length. DATA_LOSS "<name>: corrupt record header at offset <offset>" when
// the CRC does not match or the length is over kMaxRecordBytes.
absl::StatusOr<uint64_t> ParseRecordHeader(absl::string_view header, absl::string_view name, uint64_t offset);

// Checks `data` against its footer (exactly kRecordFooterBytes bytes).
// DATA_LOSS "<name>: bad data CRC in record at offset <offset>" otherwise.
absl::Status CheckRecordData(absl::string_view data, absl::string_view footer, absl::string_view name, uint64_t offset);

// What scanning one file's records found.
struct RecordScan {
  std::vector<RecordLocation> records;  // the complete records before `end`
  absl::Status error;                   // OK when the whole input was records
  uint64_t end = 0;                     // the input size when OK, else the offset of the bad record
};

// Reads kRecordHeaderBytes bytes at `offset` into `header` (which has room).
using HeaderReader = std::function<absl::Status(uint64_t offset, char* header)>;

// Walks the records of an input of `size` bytes by their headers alone,
// reading each through `read` and stepping over data and footer; the records
// get file index `file`. Stops at the first bad record, whose DATA_LOSS
// error names `name` and the offset where the record starts:
//   "<name>: truncated record at offset N"      the input ends inside it
//   "<name>: corrupt record header at offset N" ParseRecordHeader refused it
// An error of `read` stops the scan and is returned as is. Data CRCs are
// not checked (that needs the data: CheckRecordData).
RecordScan ScanRecords(uint64_t size, int32_t file, absl::string_view name, const HeaderReader& read);

// ScanRecords over bytes in memory.
RecordScan ScanRecordBytes(absl::string_view bytes, absl::string_view name, int32_t file = 0);

// The records of `bytes`, or the error of ScanRecordBytes.
absl::StatusOr<std::vector<RecordLocation>> IndexRecords(absl::string_view bytes, absl::string_view name);

// The data of the record at `location` of `bytes` (the in-memory twin of
// RecordSet::Read): both CRCs checked, and the header must still announce
// `location.length`. DATA_LOSS naming `name` and the offset otherwise;
// OUT_OF_RANGE when the record does not lie inside `bytes`.
absl::Status DecodeRecordAt(absl::string_view bytes, const RecordLocation& location, absl::string_view name,
                            std::string* data);

}  // namespace pstrain::data
