// Test helper: examples of the synthetic click-log generator written as
// TFRecord files of tf.train.Example records (common/data/criteo/
// ctr_tf_example.h), the input of data.source ctr_tfrecord.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/data/criteo/ctr_tf_example.h"
#include "common/data/criteo/synthetic_ctr.h"
#include "common/data/records/record_writer.h"

namespace pstrain::test {

// Writes examples [first, first + count) of `generator` to a new file `path`.
inline absl::Status WriteCtrTfRecords(const criteo::SyntheticCtr& generator, uint64_t first, uint64_t count,
                                      const std::string& path) {
  absl::StatusOr<data::RecordFileWriter> writer = data::RecordFileWriter::CreateNew(path);
  if (!writer.ok()) return writer.status();
  for (const criteo::CtrExample& e : generator.Generate(first, count)) {
    if (absl::Status s = writer->Write(criteo::SerializeCtrTfExample({e.record, e.bags})); !s.ok()) return s;
  }
  return writer->Close();
}

}  // namespace pstrain::test
