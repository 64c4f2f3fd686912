// Fuzz target: the TFRecord framing (common/data/records/record_format.h)
// and the file reader over it (record_file.h).
//
// Feeds: the input as the bytes of one TFRecord file, to ScanRecordBytes /
// IndexRecords and DecodeRecordAt of every record found; then the same bytes
// written to a file of the scratch directory, to RecordSet::Index (strict
// and skip_corrupt) and RecordSet::Read of every record.
// Asserts: the records found tile the input from offset 0 without gaps up to
// where the scan stopped; the scan stops at the end of the input, or with a
// DATA_LOSS error "<name>: truncated record at offset N" / "corrupt record
// header at offset N" where N is that stop; a decoded record framed again
// (AppendRecord) is exactly its bytes of the input, and a refused one is
// DATA_LOSS "bad data CRC" at its offset; the file reader finds the same
// records and errors (naming the file) and reads the same data.
// Seeds: tests/fuzz/corpus/tfrecord/ (small valid files, one holding an
// Example, an empty record, a truncated file, a bad data CRC).
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/data/records/record_file.h"
#include "common/data/records/record_format.h"
#include "tests/fuzz/fuzz_util.h"

using pstrain::data::AppendRecord;
using pstrain::data::DecodeRecordAt;
using pstrain::data::RecordLocation;
using pstrain::data::RecordScan;
using pstrain::data::RecordSet;

namespace {

bool StartsWith(absl::string_view s, absl::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// The scan's promises about `bytes`, `name` being the name it was given.
void CheckScan(const RecordScan& scan, absl::string_view bytes, absl::string_view name) {
  uint64_t next = 0;
  for (const RecordLocation& r : scan.records) {
    FUZZ_CHECK(r.offset == next, "record at ", r.offset, ", expected ", next);
    FUZZ_CHECK(r.length <= pstrain::data::kMaxRecordBytes, "length ", r.length);
    next = r.offset + 16 + r.length;
    FUZZ_CHECK(next <= bytes.size(), "record past the end: ", next, " > ", bytes.size());
  }
  FUZZ_CHECK(scan.end == next, "scan stopped at ", scan.end, " after records ending at ", next);
  if (scan.error.ok()) {
    FUZZ_CHECK(scan.end == bytes.size(), "OK scan stopped at ", scan.end, " of ", bytes.size());
    return;
  }
  const std::string at = absl::StrCat(" at offset ", scan.end);
  const absl::string_view message = scan.error.message();
  FUZZ_CHECK(absl::IsDataLoss(scan.error) && scan.end < bytes.size() &&
                 (StartsWith(message, absl::StrCat(name, ": truncated record", at)) ||
                  StartsWith(message, absl::StrCat(name, ": corrupt record header", at))),
             "scan error ", scan.error.ToString(), " stopping at ", scan.end);
}

// Decodes every record of `scan`; the status and data of each.
std::vector<std::pair<absl::Status, std::string>> DecodeAll(const RecordScan& scan, absl::string_view bytes) {
  std::vector<std::pair<absl::Status, std::string>> out;
  for (const RecordLocation& r : scan.records) {
    std::string data;
    absl::Status s = DecodeRecordAt(bytes, r, "mem", &data);
    const absl::string_view framed = bytes.substr(r.offset, 16 + r.length);
    if (s.ok()) {
      std::string again;
      AppendRecord(data, &again);
      FUZZ_CHECK(again == framed, "record at ", r.offset, " decodes to data that frames differently");
    } else {
      FUZZ_CHECK(absl::IsDataLoss(s) &&
                     StartsWith(s.message(), absl::StrCat("mem: bad data CRC in record at offset ", r.offset)),
                 "decoding record at ", r.offset, ": ", s.ToString());
    }
    out.emplace_back(s, std::move(data));
  }
  return out;
}

// The file reader over the same bytes agrees with the in-memory functions.
void CheckFile(absl::string_view bytes, const RecordScan& scan,
               const std::vector<std::pair<absl::Status, std::string>>& decoded) {
  const std::string path = pstrain::fuzz::ScratchDir() + "/in.tfrecord";
  FILE* f = std::fopen(path.c_str(), "wb");
  FUZZ_CHECK(f != nullptr, "cannot create ", path);
  FUZZ_CHECK(std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size(), "short write to ", path);
  std::fclose(f);
  absl::StatusOr<RecordSet> strict = RecordSet::Index({path}, false);
  FUZZ_CHECK(strict.ok() == scan.error.ok(), "file index ", strict.status().ToString(), " vs memory ",
             scan.error.ToString());
  if (!strict.ok()) {
    const std::string expected(scan.error.message().substr(3));  // past "mem"
    FUZZ_CHECK(strict.status().message() == path + expected, "file error ", strict.status().ToString());
  }
  absl::StatusOr<RecordSet> set = RecordSet::Index({path}, true);
  FUZZ_CHECK(set.ok(), "skip_corrupt index failed: ", set.status().ToString());
  FUZZ_CHECK(set->size() == static_cast<int64_t>(scan.records.size()), "file has ", set->size(), " records, memory ",
             scan.records.size());
  FUZZ_CHECK(set->skipped_files_tail() == (scan.error.ok() ? 0 : 1), "skipped ", set->skipped_files_tail());
  FUZZ_CHECK(set->skipped_bytes() == bytes.size() - scan.end, "skipped ", set->skipped_bytes(), " bytes");
  for (int64_t i = 0; i < set->size(); ++i) {
    const RecordLocation& r = set->at(i);
    FUZZ_CHECK(r.offset == scan.records[i].offset && r.length == scan.records[i].length && r.file == 0, "record ", i,
               " differs");
    std::string data;
    absl::Status s = set->Read(i, &data);
    FUZZ_CHECK(s.code() == decoded[i].first.code(), "Read(", i, "): ", s.ToString(), " vs ",
               decoded[i].first.ToString());
    FUZZ_CHECK(!s.ok() || data == decoded[i].second, "Read(", i, ") read other data");
    FUZZ_CHECK(s.ok() || StartsWith(s.message(), path + ": bad data CRC"), "Read(", i, "): ", s.ToString());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  const RecordScan scan = pstrain::data::ScanRecordBytes(bytes, "mem");
  CheckScan(scan, bytes, "mem");
  absl::StatusOr<std::vector<RecordLocation>> index = pstrain::data::IndexRecords(bytes, "mem");
  FUZZ_CHECK(index.ok() == scan.error.ok() && (index.ok() || index.status() == scan.error),
             "IndexRecords disagrees with ScanRecordBytes: ", index.status().ToString());
  const auto decoded = DecodeAll(scan, bytes);
  CheckFile(bytes, scan, decoded);
  return 0;
}
