#include "common/data/records/record_format.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/tfrecord_fields.h"

namespace pstrain::data {
namespace {

absl::Status Truncated(absl::string_view name, uint64_t offset) {
  return absl::DataLossError(absl::StrCat(name, ": truncated record at offset ", offset));
}

}  // namespace

void AppendRecord(absl::string_view data, std::string* out) {
  char header[kRecordHeaderBytes];
  EncodeFixed64(data.size(), header);
  EncodeFixed32(MaskedCrc32c(absl::string_view(header, 8)), header + 8);
  char footer[kRecordFooterBytes];
  EncodeFixed32(MaskedCrc32c(data), footer);
  out->reserve(out->size() + kRecordHeaderBytes + data.size() + kRecordFooterBytes);
  out->append(header, kRecordHeaderBytes);
  out->append(data.data(), data.size());
  out->append(footer, kRecordFooterBytes);
}

absl::StatusOr<uint64_t> ParseRecordHeader(absl::string_view header, absl::string_view name, uint64_t offset) {
  if (header.size() != kRecordHeaderBytes) return Truncated(name, offset);
  const uint64_t length = DecodeFixed64(header.data());
  if (MaskedCrc32c(header.substr(0, 8)) != DecodeFixed32(header.data() + 8)) {
    return absl::DataLossError(absl::StrCat(name, ": corrupt record header at offset ", offset));
  }
  if (length > kMaxRecordBytes) {
    return absl::DataLossError(absl::StrCat(name, ": corrupt record header at offset ", offset, ": length ", length,
                                            " is over the limit of ", kMaxRecordBytes, " bytes"));
  }
  return length;
}

absl::Status CheckRecordData(absl::string_view data, absl::string_view footer, absl::string_view name,
                             uint64_t offset) {
  if (footer.size() != kRecordFooterBytes) return Truncated(name, offset);
  if (MaskedCrc32c(data) != DecodeFixed32(footer.data())) {
    return absl::DataLossError(absl::StrCat(name, ": bad data CRC in record at offset ", offset));
  }
  return absl::OkStatus();
}

RecordScan ScanRecords(uint64_t size, int32_t file, absl::string_view name, const HeaderReader& read) {
  RecordScan scan;
  uint64_t offset = 0;
  char header[kRecordHeaderBytes];
  while (offset < size) {
    scan.end = offset;
    if (size - offset < kRecordHeaderBytes) {
      scan.error = Truncated(name, offset);
      return scan;
    }
    scan.error = read(offset, header);
    if (!scan.error.ok()) return scan;
    absl::StatusOr<uint64_t> length = ParseRecordHeader(absl::string_view(header, kRecordHeaderBytes), name, offset);
    if (!length.ok()) {
      scan.error = length.status();
      return scan;
    }
    // length <= kMaxRecordBytes, so the sum cannot overflow.
    const uint64_t span = kRecordHeaderBytes + *length + kRecordFooterBytes;
    if (size - offset < span) {
      scan.error = Truncated(name, offset);
      return scan;
    }
    scan.records.push_back(RecordLocation{file, offset, *length});
    offset += span;
  }
  scan.end = size;
  return scan;
}

RecordScan ScanRecordBytes(absl::string_view bytes, absl::string_view name, int32_t file) {
  return ScanRecords(bytes.size(), file, name, [bytes](uint64_t offset, char* header) {
    std::memcpy(header, bytes.data() + offset, kRecordHeaderBytes);
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<RecordLocation>> IndexRecords(absl::string_view bytes, absl::string_view name) {
  RecordScan scan = ScanRecordBytes(bytes, name);
  if (!scan.error.ok()) return scan.error;
  return std::move(scan.records);
}

absl::Status DecodeRecordAt(absl::string_view bytes, const RecordLocation& location, absl::string_view name,
                            std::string* data) {
  if (location.offset > bytes.size() || location.length > kMaxRecordBytes ||
      bytes.size() - location.offset < kRecordHeaderBytes + location.length + kRecordFooterBytes) {
    return absl::OutOfRangeError(absl::StrCat(name, ": record at offset ", location.offset, " of ", location.length,
                                              " bytes lies past the end (", bytes.size(), " bytes)"));
  }
  const absl::string_view record = bytes.substr(location.offset);
  absl::StatusOr<uint64_t> length = ParseRecordHeader(record.substr(0, kRecordHeaderBytes), name, location.offset);
  if (!length.ok()) return length.status();
  if (*length != location.length) {
    return absl::DataLossError(absl::StrCat(name, ": record at offset ", location.offset, " now has ", *length,
                                            " bytes, indexed with ", location.length));
  }
  const absl::string_view payload = record.substr(kRecordHeaderBytes, location.length);
  absl::Status checked = CheckRecordData(
      payload, record.substr(kRecordHeaderBytes + location.length, kRecordFooterBytes), name, location.offset);
  if (!checked.ok()) return checked;
  data->assign(payload.data(), payload.size());
  return absl::OkStatus();
}

}  // namespace pstrain::data
