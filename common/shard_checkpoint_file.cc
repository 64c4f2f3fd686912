#include "common/shard_checkpoint_file.h"

#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

constexpr char kMagic[8] = {'P', 'S', 'T', 'R', 'C', 'K', 'P', 'T'};

// The embedding tables' arrays, from `offset` on (moved past them).
absl::Status DecodeTables(const std::string& data, const std::string& path, size_t& offset, ShardCheckpointView& view) {
  std::set<std::string> listed;
  for (const ShardCheckpointHeader::Table& t : view.header.tables()) {
    if (!listed.insert(t.name()).second) {
      return absl::DataLossError(absl::StrCat(path, ": table ", t.name(), " is listed twice"));
    }
    if (t.dim() < 1 || t.dim() > 4096 || t.slots() < 0 || t.slots() > 16 || t.rows() < 0 || t.version() < 0 ||
        t.live_keys() < 0) {
      return absl::DataLossError(absl::StrCat(path, ": table ", t.name(), " has dim ", t.dim(), ", ", t.slots(),
                                              " slots, ", t.rows(), " rows, ", t.live_keys(), " live keys and version ",
                                              t.version()));
    }
    // At most 4096 x 17 x 4 + 12 bytes per row: no overflow below 2^40 rows.
    const uint64_t per_row = sizeof(uint64_t) + sizeof(uint32_t) + uint64_t{4} * t.dim() * (1 + t.slots());
    const uint64_t rows = static_cast<uint64_t>(t.rows());
    const uint64_t live = t.has_live_keys() ? static_cast<uint64_t>(t.live_keys()) : 0;
    if (rows > (uint64_t{1} << 40) || live > (uint64_t{1} << 40) ||
        rows * per_row + live * sizeof(uint64_t) > data.size() - offset) {
      return absl::DataLossError(
          absl::StrCat(path, ": ", data.size(), " bytes, fewer than its table ", t.name(), " describes"));
    }
    ShardCheckpointTable table{t.name(), t.dim(), t.slots(), t.rows(), t.version()};
    table.keys_offset = offset;
    table.updates_offset = offset + rows * sizeof(uint64_t);
    table.data_offset = table.updates_offset + rows * sizeof(uint32_t);
    table.live_keys = t.has_live_keys() ? t.live_keys() : -1;
    table.live_keys_offset = offset + rows * per_row;
    offset += rows * per_row + live * sizeof(uint64_t);
    view.tables.push_back(std::move(table));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ShardCheckpointView> DecodeShardCheckpoint(const std::string& data, const std::string& path) {
  uint32_t length = 0;
  if (data.size() < sizeof(kMagic) + sizeof(length) || std::memcmp(data.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError(absl::StrCat(path, ": not a PS shard checkpoint"));
  }
  std::memcpy(&length, data.data() + sizeof(kMagic), sizeof(length));
  size_t offset = sizeof(kMagic) + sizeof(length);
  ShardCheckpointView view;
  if (length > data.size() - offset || !view.header.ParseFromArray(data.data() + offset, static_cast<int>(length))) {
    return absl::DataLossError(absl::StrCat(path, ": malformed header"));
  }
  // An increment builds on an earlier step's file (0: it holds every row).
  const int64_t since = view.header.tables_since_step();
  if (since != 0 && (since < 0 || since >= view.header.step())) {
    return absl::DataLossError(
        absl::StrCat(path, ": its tables build on step ", since, ", not one before its own step ", view.header.step()));
  }
  offset += length;
  std::set<std::string> listed;
  for (const ShardCheckpointHeader::Entry& e : view.header.entries()) {
    ShardCheckpointEntry entry{e.name(), Shape(e.shape().begin(), e.shape().end()), e.version(), e.slots(), 0, offset};
    if (!listed.insert(e.name()).second) {
      return absl::DataLossError(absl::StrCat(path, ": variable ", e.name(), " is listed twice"));
    }
    if (e.version() < 0 || e.slots() < 0 || e.slots() > 16) {
      return absl::DataLossError(
          absl::StrCat(path, ": variable ", e.name(), " has version ", e.version(), " and ", e.slots(), " slots"));
    }
    entry.elements = CheckedNumElements(entry.shape);
    const size_t left = data.size() - offset;
    if (entry.elements < 0 ||
        static_cast<uint64_t>(entry.elements) * sizeof(float) * (1 + static_cast<uint64_t>(e.slots())) > left) {
      return absl::DataLossError(absl::StrCat(path, ": ", data.size(), " bytes, fewer than its header describes"));
    }
    offset += static_cast<size_t>(entry.elements) * sizeof(float) * (1 + e.slots());
    view.entries.push_back(std::move(entry));
  }
  PSTRAIN_RETURN_IF_ERROR(DecodeTables(data, path, offset, view));
  if (offset != data.size()) {
    return absl::DataLossError(absl::StrCat(path, ": ", data.size(), " bytes but its header describes ", offset));
  }
  return view;
}

absl::Status AppendShardCheckpointHeader(DurableFileWriter& writer, const ShardCheckpointHeader& header) {
  const std::string serialized = header.SerializeAsString();
  const uint32_t length = static_cast<uint32_t>(serialized.size());
  PSTRAIN_RETURN_IF_ERROR(writer.Append(kMagic, sizeof(kMagic)));
  PSTRAIN_RETURN_IF_ERROR(writer.Append(&length, sizeof(length)));
  return writer.Append(serialized.data(), serialized.size());
}

}  // namespace pstrain
