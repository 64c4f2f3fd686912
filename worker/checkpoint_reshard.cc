#include "worker/checkpoint_reshard.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/durable_file.h"
#include "common/shard_checkpoint_file.h"
#include "common/status_macros.h"
#include "common/table_chain.h"
#include "worker/table_reshard.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;

// The checkpoint's files, decoded, and where each of its parts lies.
struct OldCheckpoint {
  std::vector<DecodedShardCheckpoint> files;  // per old shard
  // Per variable: its parts in element order, each (file, entry, first element).
  struct Segment {
    int file = 0;
    const ShardCheckpointEntry* entry = nullptr;
    int64_t start = 0;
  };
  std::map<std::string, std::vector<Segment>> variables;
  int slots = -1;
};

absl::StatusOr<OldCheckpoint> ReadOld(const std::string& from, const CheckpointManifest& manifest,
                                      const std::vector<ShardRestore>& files) {
  OldCheckpoint old;
  std::map<std::string, std::pair<int, const ShardCheckpointEntry*>> where;  // part -> (file, entry)
  old.files.reserve(files.size());
  for (const ShardRestore& f : files) {
    PSTRAIN_ASSIGN_OR_RETURN(DecodedShardCheckpoint file, ReadShardCheckpoint(f));
    old.files.push_back(std::move(file));
  }
  for (size_t f = 0; f < old.files.size(); ++f) {
    for (const ShardCheckpointEntry& e : old.files[f].view.entries) {
      where[e.name] = {static_cast<int>(f), &e};
      if (old.slots >= 0 && e.slots != old.slots) {
        return absl::DataLossError(absl::StrCat(from, ": ", e.name, " has ", e.slots, " slots, others ", old.slots));
      }
      old.slots = e.slots;
    }
  }
  std::map<std::string, std::map<int, std::pair<int, const ShardCheckpointEntry*>>> ordered;
  for (const CheckpointManifest::Part& p : manifest.parts()) {
    auto it = where.find(p.name());
    if (it == where.end()) {
      return absl::DataLossError(absl::StrCat(from, ": part ", p.name(), " is in the MANIFEST but in no shard file"));
    }
    int index = 0;
    ordered[PartVariable(p.name(), &index)][index] = it->second;
  }
  for (const auto& [variable, by_index] : ordered) {
    int64_t start = 0;
    for (const auto& [index, at] : by_index) {
      old.variables[variable].push_back({at.first, at.second, start});
      start += at.second->elements;
    }
  }
  return old;
}

int64_t Elements(const std::vector<OldCheckpoint::Segment>& segments) {
  return segments.empty() ? 0 : segments.back().start + segments.back().entry->elements;
}

// The same variables, element for element, there and here.
absl::Status CheckSameVariables(const OldCheckpoint& old, const std::vector<VariablePart>& parts,
                                const std::string& from) {
  std::map<std::string, int64_t> here;
  for (const VariablePart& p : parts) here[PartVariable(p.name)] += p.count;
  for (const auto& [variable, elements] : here) {
    auto it = old.variables.find(variable);
    if (it == old.variables.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint ", from, " cannot be resharded: variable ", variable, " is not in it"));
    }
    if (Elements(it->second) != elements) {
      return absl::FailedPreconditionError(absl::StrCat("checkpoint ", from, " cannot be resharded: variable ",
                                                        variable, " has ", Elements(it->second), " elements there, ",
                                                        elements, " here"));
    }
  }
  for (const auto& [variable, segments] : old.variables) {
    if (here.count(variable) == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint ", from, " cannot be resharded: variable ", variable, " is not in this run"));
    }
  }
  return absl::OkStatus();
}

// Appends array k of elements [first, first + count) of `variable`.
absl::Status AppendRange(const OldCheckpoint& old, const std::string& variable, int k, int64_t first, int64_t count,
                         DurableFileWriter& writer) {
  for (const OldCheckpoint::Segment& s : old.variables.at(variable)) {
    const int64_t lo = std::max(first, s.start), hi = std::min(first + count, s.start + s.entry->elements);
    if (lo >= hi) continue;
    const char* base = old.files[s.file].data.data() + s.entry->ArrayOffset(k);
    PSTRAIN_RETURN_IF_ERROR(writer.Append(base + (lo - s.start) * sizeof(float), (hi - lo) * sizeof(float)));
  }
  return absl::OkStatus();
}

// The version of the old part holding `first` (the parts of a sync run all
// have the step's).
int64_t VersionAt(const OldCheckpoint& old, const std::string& variable, int64_t first) {
  for (const OldCheckpoint::Segment& s : old.variables.at(variable)) {
    if (first < s.start + s.entry->elements) return s.entry->version;
  }
  return old.variables.at(variable).back().entry->version;
}

// Appends each table's keys, update counts and rows.
absl::Status AppendTables(const std::vector<ReshardedTable>& tables, DurableFileWriter& writer) {
  for (const ReshardedTable& t : tables) {
    PSTRAIN_RETURN_IF_ERROR(writer.Append(t.rows.keys.data(), t.rows.keys.size() * sizeof(uint64_t)));
    PSTRAIN_RETURN_IF_ERROR(writer.Append(t.rows.updates.data(), t.rows.updates.size() * sizeof(uint32_t)));
    PSTRAIN_RETURN_IF_ERROR(writer.Append(t.rows.data.data(), t.rows.data.size() * sizeof(float)));
  }
  return absl::OkStatus();
}

// New shard `shard`'s file: its parts of the variables, then its `tables`
// whole.
absl::StatusOr<FileDigest> WriteShard(const OldCheckpoint& old, const CheckpointManifest& manifest,
                                      const std::vector<VariablePart>& parts, int shard,
                                      const std::vector<ReshardedTable>& tables, const std::string& path) {
  ShardCheckpointHeader header;
  header.set_shard(shard);
  header.set_step(manifest.step());
  header.set_optimizer(manifest.optimizer());
  std::vector<const VariablePart*> mine;
  for (const VariablePart& p : parts) {
    if (p.shard != shard) continue;
    mine.push_back(&p);
    ShardCheckpointHeader::Entry* e = header.add_entries();
    e->set_name(p.name);
    for (int64_t d : p.shape) e->add_shape(d);
    e->set_version(VersionAt(old, PartVariable(p.name), p.offset));
    e->set_slots(std::max(old.slots, 0));
  }
  for (const ReshardedTable& t : tables) *header.add_tables() = t.header;
  PSTRAIN_ASSIGN_OR_RETURN(DurableFileWriter writer, DurableFileWriter::Create(path));
  PSTRAIN_RETURN_IF_ERROR(AppendShardCheckpointHeader(writer, header));
  for (const VariablePart* p : mine) {
    for (int k = 0; k <= std::max(old.slots, 0); ++k) {
      PSTRAIN_RETURN_IF_ERROR(AppendRange(old, PartVariable(p->name), k, p->offset, p->count, writer));
    }
  }
  PSTRAIN_RETURN_IF_ERROR(AppendTables(tables, writer));
  return writer.Commit();
}

}  // namespace

absl::StatusOr<CheckpointManifest> ReshardCheckpoint(const std::string& from, const CheckpointManifest& manifest,
                                                     const std::vector<ShardRestore>& files,
                                                     const std::vector<VariablePart>& parts,
                                                     const std::vector<EmbeddingTableConfig>& tables, int num_shards,
                                                     const std::string& to) {
  PSTRAIN_ASSIGN_OR_RETURN(const OldCheckpoint old, ReadOld(from, manifest, files));
  PSTRAIN_RETURN_IF_ERROR(CheckSameVariables(old, parts, from));
  PSTRAIN_ASSIGN_OR_RETURN(const std::vector<std::vector<ReshardedTable>> rows,
                           ReshardTables(files, old.files, tables, num_shards));
  std::error_code ec;
  fs::remove_all(to, ec);
  fs::create_directories(to, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create ", to, ": ", ec.message()));
  CheckpointManifest resharded = manifest;
  resharded.clear_parts();
  resharded.clear_shards();
  for (const VariablePart& p : parts) {
    CheckpointManifest::Part* part = resharded.add_parts();
    part->set_name(p.name);
    for (int64_t d : p.shape) part->add_shape(d);
    part->set_shard(p.shard);
  }
  for (int s = 0; s < num_shards; ++s) {
    const std::string file = absl::StrCat("shard-", s, "-of-", num_shards, ".ckpt");
    PSTRAIN_ASSIGN_OR_RETURN(const FileDigest digest,
                             WriteShard(old, manifest, parts, s, rows[s], (fs::path(to) / file).string()));
    CheckpointManifest::ShardFile* f = resharded.add_shards();
    f->set_shard(s);
    f->set_file(file);
    f->set_bytes(digest.bytes);
    f->set_crc32c(digest.crc32c);
  }
  PSTRAIN_RETURN_IF_ERROR(
      WriteFileDurably((fs::path(to) / "MANIFEST").string(), resharded.SerializeAsString()).status());
  PSTRAIN_RETURN_IF_ERROR(SyncDirectory(to));
  return resharded;
}

}  // namespace pstrain
