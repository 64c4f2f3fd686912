#include "tools/data/shard_writer.h"

#include <filesystem>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/data/records/record_writer.h"
#include "common/status_macros.h"

namespace pstrain::data_tool {

absl::StatusOr<int64_t> WriteShards(const SplitSource& split, int shards, const std::string& out) {
  namespace fs = std::filesystem;
  int64_t bytes = 0;
  for (int s = 0; s < shards; ++s) {
    const std::string name = absl::StrFormat("%s-%05d-of-%05d", split.name, s, shards);
    const std::string tmp = (fs::path(out) / (name + ".tmp")).string();
    PSTRAIN_ASSIGN_OR_RETURN(data::RecordFileWriter writer, data::RecordFileWriter::CreateNew(tmp));
    for (int64_t i = s; i < split.size; i += shards) {
      PSTRAIN_ASSIGN_OR_RETURN(const data::ImageExample example, split.example(i));
      const std::string record = data::SerializeImageExample(example);
      PSTRAIN_RETURN_IF_ERROR(writer.Write(record));
      bytes += static_cast<int64_t>(record.size()) + 16;  // + the framing
    }
    PSTRAIN_RETURN_IF_ERROR(writer.Close());
    std::error_code ec;
    fs::rename(tmp, fs::path(out) / name, ec);
    if (ec) return absl::InternalError(absl::StrCat("renaming ", tmp, ": ", ec.message()));
  }
  return bytes;
}

}  // namespace pstrain::data_tool
