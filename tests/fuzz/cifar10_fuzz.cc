// Fuzz target: CIFAR-10's binary batches (common/data/cifar10_reader.h).
//
// Feeds: the input as the bytes of one batch file to AppendCifar10Records.
// Asserts: a refused file is DATA_LOSS naming the file and appends nothing;
// an accepted one appends exactly size / 3073 examples whose labels are its
// records' first bytes and whose pixels are the other bytes / 255, and the
// dataset stays valid.
// Seeds: tests/fuzz/corpus/cifar10/ (two whole records; a truncated one).
#include <cstdint>
#include <string>

#include "common/data/cifar10_reader.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  pstrain::Dataset d;
  d.example_shape = {3, 32, 32};
  d.num_classes = 10;
  const absl::Status s = pstrain::AppendCifar10Records(bytes, "batch.bin", &d);
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == absl::StatusCode::kDataLoss, "refusal is not DATA_LOSS: ", s.ToString());
    FUZZ_CHECK(s.message().rfind("batch.bin: ", 0) == 0, "refusal does not name the file: ", s.ToString());
    FUZZ_CHECK(d.num_examples == 0 && d.images.empty() && d.labels.empty(), "a refused file appended examples");
    return 0;
  }
  const size_t records = size / pstrain::kCifar10RecordBytes;
  FUZZ_CHECK(size % pstrain::kCifar10RecordBytes == 0, "accepted ", size, " bytes, not whole records");
  FUZZ_CHECK(d.num_examples == static_cast<int64_t>(records), "examples ", d.num_examples, " for ", records);
  for (size_t r = 0; r < records; ++r) {
    const uint8_t* record = data + r * pstrain::kCifar10RecordBytes;
    FUZZ_CHECK(d.labels[r] == record[0], "label of record ", r);
    FUZZ_CHECK(d.images[r * 3072 + 1000] == record[1001] * (1.0f / 255.0f), "pixel of record ", r);
  }
  FUZZ_CHECK(pstrain::ValidateDataset(d).ok(), "invalid dataset: ", pstrain::ValidateDataset(d).ToString());
  return 0;
}
