#include "ps/shard_checkpoint.h"

#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/durable_file.h"
#include "common/status_macros.h"
#include "common/tensor.h"

namespace pstrain {
namespace {

constexpr char kMagic[8] = {'P', 'S', 'T', 'R', 'C', 'K', 'P', 'T'};

}  // namespace

absl::StatusOr<CheckpointResponse> WriteShardCheckpoint(
    const std::string& path, int shard, int64_t step, const std::string& optimizer,
    const std::map<std::string, std::unique_ptr<ShardVariable>>& variables) {
  // A snapshot per variable, each taken under its own lock: the published
  // value (immutable while referenced) and a copy of the optimizer slots.
  // Writing then needs no lock, so pushes of async/ssp runs go on meanwhile.
  struct Snapshot {
    std::shared_ptr<Buffer> value;
    size_t bytes = 0;
    std::vector<std::vector<float>> slots;
  };
  ShardCheckpointHeader header;
  header.set_shard(shard);
  header.set_step(step);
  header.set_optimizer(optimizer);
  std::vector<Snapshot> snapshots;
  snapshots.reserve(variables.size());
  for (const auto& [name, var] : variables) {
    absl::MutexLock lock(&var->mu);
    ShardCheckpointHeader::Entry* e = header.add_entries();
    e->set_name(name);
    for (int64_t d : var->shape) e->add_shape(d);
    e->set_version(var->version.load());
    e->set_slots(static_cast<int32_t>(var->slots.size()));
    snapshots.push_back({var->value, var->bytes(), var->slots});
  }
  const std::string serialized = header.SerializeAsString();
  const uint32_t length = static_cast<uint32_t>(serialized.size());
  PSTRAIN_ASSIGN_OR_RETURN(DurableFileWriter writer, DurableFileWriter::Create(path));
  PSTRAIN_RETURN_IF_ERROR(writer.Append(kMagic, sizeof(kMagic)));
  PSTRAIN_RETURN_IF_ERROR(writer.Append(&length, sizeof(length)));
  PSTRAIN_RETURN_IF_ERROR(writer.Append(serialized.data(), serialized.size()));
  for (const Snapshot& snapshot : snapshots) {
    PSTRAIN_RETURN_IF_ERROR(writer.Append(snapshot.value->data(), snapshot.bytes));
    for (const std::vector<float>& slot : snapshot.slots) {
      PSTRAIN_RETURN_IF_ERROR(writer.Append(slot.data(), slot.size() * sizeof(float)));
    }
  }
  PSTRAIN_ASSIGN_OR_RETURN(FileDigest digest, writer.Commit());
  CheckpointResponse response;
  response.set_bytes(digest.bytes);
  response.set_crc32c(digest.crc32c);
  response.set_variables(static_cast<int64_t>(variables.size()));
  return response;
}

absl::Status LoadShardCheckpoint(const ShardRestore& restore, int shard, const std::string& optimizer,
                                 std::map<std::string, std::unique_ptr<ShardVariable>>& variables) {
  const FileDigest expected{restore.bytes(), restore.crc32c()};
  PSTRAIN_ASSIGN_OR_RETURN(std::string data, ReadWholeFile(restore.path(), &expected));
  const std::string& path = restore.path();
  uint32_t length = 0;
  if (data.size() < sizeof(kMagic) + sizeof(length) || std::memcmp(data.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError(absl::StrCat(path, ": not a PS shard checkpoint"));
  }
  std::memcpy(&length, data.data() + sizeof(kMagic), sizeof(length));
  size_t offset = sizeof(kMagic) + sizeof(length);
  ShardCheckpointHeader header;
  if (length > data.size() - offset || !header.ParseFromArray(data.data() + offset, static_cast<int>(length))) {
    return absl::DataLossError(absl::StrCat(path, ": malformed header"));
  }
  offset += length;
  auto refuse = [&path](const std::string& why) {
    return absl::FailedPreconditionError(absl::StrCat("checkpoint ", path, " does not fit this run: ", why));
  };
  if (header.shard() != shard)
    return refuse(absl::StrCat("written by shard ", header.shard(), ", this is shard ", shard));
  if (header.optimizer() != optimizer) {
    return refuse(absl::StrCat("optimizer ", header.optimizer(), " there, ", optimizer, " here"));
  }
  if (header.entries_size() != static_cast<int>(variables.size())) {
    return refuse(absl::StrCat(header.entries_size(), " variables there, ", variables.size(), " here"));
  }
  // Check everything before changing anything.
  size_t needed = offset;
  std::set<std::string> listed;
  for (const ShardCheckpointHeader::Entry& e : header.entries()) {
    // As many entries as variables, each listed once: every variable is restored.
    if (!listed.insert(e.name()).second) {
      return absl::DataLossError(absl::StrCat(path, ": variable ", e.name(), " is listed twice"));
    }
    if (e.version() < 0) {
      return absl::DataLossError(absl::StrCat(path, ": variable ", e.name(), " has version ", e.version()));
    }
    auto it = variables.find(e.name());
    if (it == variables.end()) return refuse(absl::StrCat("variable ", e.name(), " is not on this shard here"));
    const ShardVariable& var = *it->second;
    const Shape shape(e.shape().begin(), e.shape().end());
    if (shape != var.shape) {
      return refuse(absl::StrCat("variable ", e.name(), " has shape ", ShapeToString(shape), " there, ",
                                 ShapeToString(var.shape), " here"));
    }
    {
      absl::MutexLock lock(&it->second->mu);
      if (static_cast<int>(it->second->slots.size()) != e.slots()) {
        return refuse(absl::StrCat("variable ", e.name(), " has ", e.slots(), " optimizer slots there, ",
                                   it->second->slots.size(), " here"));
      }
    }
    needed += static_cast<size_t>(1 + e.slots()) * var.bytes();
  }
  if (needed != data.size()) {
    return absl::DataLossError(absl::StrCat(path, ": ", data.size(), " bytes but its header describes ", needed));
  }
  for (const ShardCheckpointHeader::Entry& e : header.entries()) {
    ShardVariable& var = *variables.at(e.name());
    absl::MutexLock lock(&var.mu);
    std::memcpy(var.value->data(), data.data() + offset, var.bytes());
    offset += var.bytes();
    for (std::vector<float>& slot : var.slots) {
      std::memcpy(slot.data(), data.data() + offset, var.bytes());
      offset += var.bytes();
    }
    var.version = e.version();
  }
  return absl::OkStatus();
}

}  // namespace pstrain
