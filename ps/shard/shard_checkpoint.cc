#include "ps/shard/shard_checkpoint.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/durable_file.h"
#include "common/shard_checkpoint_file.h"
#include "common/status_macros.h"
#include "common/table_chain.h"
#include "common/tensor.h"

namespace pstrain {
absl::StatusOr<CheckpointResponse> WriteShardCheckpoint(
    const std::string& path, int shard, int64_t step, const std::string& optimizer,
    const std::map<std::string, std::unique_ptr<ShardVariable>>& variables, SparseTables* tables,
    int64_t tables_since_step) {
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
  const SparseTables::Snapshots rows =
      tables != nullptr ? tables->TakeSnapshots(step, tables_since_step) : SparseTables::Snapshots();
  for (const SparseTables::Snapshot& t : rows.tables) *header.add_tables() = t.header;
  header.set_tables_since_step(rows.since_step);
  PSTRAIN_ASSIGN_OR_RETURN(DurableFileWriter writer, DurableFileWriter::Create(path));
  PSTRAIN_RETURN_IF_ERROR(AppendShardCheckpointHeader(writer, header));
  for (const Snapshot& snapshot : snapshots) {
    PSTRAIN_RETURN_IF_ERROR(writer.Append(snapshot.value->data(), snapshot.bytes));
    for (const std::vector<float>& slot : snapshot.slots) {
      PSTRAIN_RETURN_IF_ERROR(writer.Append(slot.data(), slot.size() * sizeof(float)));
    }
  }
  for (const SparseTables::Snapshot& t : rows.tables) {
    PSTRAIN_RETURN_IF_ERROR(writer.Append(t.rows.keys.data(), t.rows.keys.size() * sizeof(uint64_t)));
    PSTRAIN_RETURN_IF_ERROR(writer.Append(t.rows.updates.data(), t.rows.updates.size() * sizeof(uint32_t)));
    PSTRAIN_RETURN_IF_ERROR(writer.Append(t.rows.data.data(), t.rows.data.size() * sizeof(float)));
    PSTRAIN_RETURN_IF_ERROR(writer.Append(t.live_keys.data(), t.live_keys.size() * sizeof(uint64_t)));
  }
  PSTRAIN_ASSIGN_OR_RETURN(FileDigest digest, writer.Commit());
  CheckpointResponse response;
  response.set_bytes(digest.bytes);
  response.set_crc32c(digest.crc32c);
  response.set_variables(static_cast<int64_t>(variables.size()));
  response.set_tables_since_step(rows.since_step);
  return response;
}

namespace {

// Refuses (through `refuse`) a file whose variables are not `variables`:
// as many, each with the same shape and slot count.
template <typename Refuse>
absl::Status CheckVariablesFit(const ShardCheckpointView& view,
                               const std::map<std::string, std::unique_ptr<ShardVariable>>& variables,
                               const Refuse& refuse) {
  if (view.entries.size() != variables.size()) {
    return refuse(absl::StrCat(view.entries.size(), " variables there, ", variables.size(), " here"));
  }
  // As many entries as variables, each listed once (the decoder checks):
  // every one is restored.
  for (const ShardCheckpointEntry& e : view.entries) {
    auto it = variables.find(e.name);
    if (it == variables.end()) return refuse(absl::StrCat("variable ", e.name, " is not on this shard here"));
    const ShardVariable& var = *it->second;
    if (e.shape != var.shape) {
      return refuse(absl::StrCat("variable ", e.name, " has shape ", ShapeToString(e.shape), " there, ",
                                 ShapeToString(var.shape), " here"));
    }
    absl::MutexLock lock(&it->second->mu);
    if (static_cast<int>(it->second->slots.size()) != e.slots) {
      return refuse(absl::StrCat("variable ", e.name, " has ", e.slots, " optimizer slots there, ",
                                 it->second->slots.size(), " here"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LoadShardCheckpoint(const ShardRestore& restore, int shard, const std::string& optimizer,
                                 std::map<std::string, std::unique_ptr<ShardVariable>>& variables,
                                 SparseTables* tables) {
  PSTRAIN_ASSIGN_OR_RETURN(DecodedShardCheckpoint file, ReadShardCheckpoint(restore));
  const std::string path = file.path;
  const ShardCheckpointView& view = file.view;
  auto refuse = [&path](const std::string& why) {
    return absl::FailedPreconditionError(absl::StrCat("checkpoint ", path, " does not fit this run: ", why));
  };
  if (view.header.shard() != shard)
    return refuse(absl::StrCat("written by shard ", view.header.shard(), ", this is shard ", shard));
  if (view.header.optimizer() != optimizer) {
    return refuse(absl::StrCat("optimizer ", view.header.optimizer(), " there, ", optimizer, " here"));
  }
  PSTRAIN_RETURN_IF_ERROR(CheckVariablesFit(view, variables, refuse));
  if (tables == nullptr && !view.tables.empty()) {
    return refuse(absl::StrCat(view.tables.size(), " embedding tables there, none here"));
  }
  // The tables come from the file's chain, the dense values from the file.
  std::vector<DecodedShardCheckpoint> chain;
  if (tables != nullptr) {
    PSTRAIN_ASSIGN_OR_RETURN(chain, ReadTableChain(restore, std::move(file), shard));
    PSTRAIN_RETURN_IF_ERROR(tables->Restore(chain, restore.step()));
  } else {
    chain.push_back(std::move(file));
  }
  const std::string& data = chain.back().data;
  for (const ShardCheckpointEntry& e : chain.back().view.entries) {
    ShardVariable& var = *variables.at(e.name);
    absl::MutexLock lock(&var.mu);
    std::memcpy(var.value->data(), data.data() + e.ArrayOffset(0), var.bytes());
    for (size_t k = 0; k < var.slots.size(); ++k) {
      std::memcpy(var.slots[k].data(), data.data() + e.ArrayOffset(static_cast<int>(k) + 1), var.bytes());
    }
    var.version = e.version;
  }
  return absl::OkStatus();
}

}  // namespace pstrain
