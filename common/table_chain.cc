#include "common/table_chain.h"

#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/durable_file.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

// The table `name` of `file`, with the first file's dim and slots.
absl::StatusOr<const ShardCheckpointTable*> FindTable(const DecodedShardCheckpoint& file, const std::string& name,
                                                      const ShardCheckpointTable* first) {
  for (const ShardCheckpointTable& t : file.view.tables) {
    if (t.name != name) continue;
    if (first != nullptr && (t.dim != first->dim || t.slots != first->slots)) {
      return absl::FailedPreconditionError(absl::StrCat("checkpoint ", file.path, ": table ", name, " has dim ", t.dim,
                                                        " and ", t.slots, " slots, the file it builds on ", first->dim,
                                                        " and ", first->slots));
    }
    return &t;
  }
  return absl::FailedPreconditionError(absl::StrCat("checkpoint ", file.path, " has no table ", name));
}

// Writes `inc`'s rows over `rows` (`at`: each key's row in `rows`).
void ApplyIncrement(const TableRows& inc, size_t floats, TableRows& rows, absl::flat_hash_map<uint64_t, size_t>& at) {
  for (size_t j = 0; j < inc.keys.size(); ++j) {
    auto [it, added] = at.emplace(inc.keys[j], rows.keys.size());
    if (added) {
      rows.keys.push_back(inc.keys[j]);
      rows.updates.push_back(0);
      rows.data.resize(rows.data.size() + floats);
    }
    rows.updates[it->second] = inc.updates[j];
    std::memcpy(rows.data.data() + it->second * floats, inc.data.data() + j * floats, floats * sizeof(float));
  }
}

// Keeps the rows whose key is in `live`, in order.
void KeepLive(const absl::flat_hash_set<uint64_t>& live, size_t floats, TableRows& rows,
              absl::flat_hash_map<uint64_t, size_t>& at) {
  size_t kept = 0;
  at.clear();
  for (size_t i = 0; i < rows.keys.size(); ++i) {
    if (!live.contains(rows.keys[i])) continue;
    rows.keys[kept] = rows.keys[i];
    rows.updates[kept] = rows.updates[i];
    std::memmove(rows.data.data() + kept * floats, rows.data.data() + i * floats, floats * sizeof(float));
    at[rows.keys[kept]] = kept;
    ++kept;
  }
  rows.keys.resize(kept);
  rows.updates.resize(kept);
  rows.data.resize(kept * floats);
}

}  // namespace

TableRows FileRows(const ShardCheckpointTable& t, const std::string& data) {
  TableRows rows;
  const size_t n = static_cast<size_t>(t.rows);
  rows.keys.resize(n);
  rows.updates.resize(n);
  rows.data.resize(n * t.dim * (1 + t.slots));
  std::memcpy(rows.keys.data(), data.data() + t.keys_offset, n * sizeof(uint64_t));
  std::memcpy(rows.updates.data(), data.data() + t.updates_offset, n * sizeof(uint32_t));
  std::memcpy(rows.data.data(), data.data() + t.data_offset, rows.data.size() * sizeof(float));
  return rows;
}

absl::StatusOr<TableRows> RowsAfterChain(const std::vector<DecodedShardCheckpoint>& chain, const std::string& name,
                                         const ShardCheckpointTable** last) {
  if (chain.empty()) return absl::InvalidArgumentError("RowsAfterChain: no files");
  absl::StatusOr<const ShardCheckpointTable*> first = FindTable(chain[0], name, nullptr);
  if (!first.ok()) return first.status();
  TableRows rows = FileRows(**first, chain[0].data);
  const size_t floats = static_cast<size_t>((*first)->dim) * (1 + (*first)->slots);
  absl::flat_hash_map<uint64_t, size_t> at;
  at.reserve(rows.keys.size());
  for (size_t i = 0; i < rows.keys.size(); ++i) at[rows.keys[i]] = i;
  *last = *first;
  for (size_t f = 1; f < chain.size(); ++f) {
    absl::StatusOr<const ShardCheckpointTable*> t = FindTable(chain[f], name, *first);
    if (!t.ok()) return t.status();
    ApplyIncrement(FileRows(**t, chain[f].data), floats, rows, at);
    if ((*t)->live_keys >= 0) {
      absl::flat_hash_set<uint64_t> live;
      live.reserve((*t)->live_keys);
      for (int64_t k = 0; k < (*t)->live_keys; ++k) {
        uint64_t key;
        std::memcpy(&key, chain[f].data.data() + (*t)->live_keys_offset + k * sizeof(uint64_t), sizeof(key));
        live.insert(key);
      }
      KeepLive(live, floats, rows, at);
    }
    *last = *t;
  }
  return rows;
}

absl::StatusOr<DecodedShardCheckpoint> ReadShardCheckpoint(const ShardRestore& restore) {
  const FileDigest expected{restore.bytes(), restore.crc32c()};
  DecodedShardCheckpoint file;
  file.path = restore.path();
  PSTRAIN_ASSIGN_OR_RETURN(file.data, ReadWholeFile(restore.path(), &expected));
  PSTRAIN_ASSIGN_OR_RETURN(file.view, DecodeShardCheckpoint(file.data, file.path));
  return file;
}

absl::StatusOr<std::vector<DecodedShardCheckpoint>> ReadTableChain(const ShardRestore& restore,
                                                                   DecodedShardCheckpoint last, int shard) {
  std::vector<DecodedShardCheckpoint> chain;
  if (last.view.header.tables_since_step() > 0) {
    for (const ShardRestore& link : restore.table_base()) {
      PSTRAIN_ASSIGN_OR_RETURN(DecodedShardCheckpoint file, ReadShardCheckpoint(link));
      chain.push_back(std::move(file));
    }
  }
  chain.push_back(std::move(last));
  for (size_t i = 0; i < chain.size(); ++i) {
    const ShardCheckpointHeader& h = chain[i].view.header;
    const int64_t expected = i == 0 ? 0 : chain[i - 1].view.header.step();
    if (h.tables_since_step() != expected || h.shard() != shard) {
      return absl::DataLossError(absl::StrCat(
          "checkpoint ", chain[i].path, " (shard ", h.shard(), ", step ", h.step(), ") builds its tables on step ",
          h.tables_since_step(), ", but the chain given for shard ", shard, " has ",
          i == 0 ? std::string("no file before it") : absl::StrCat("step ", expected, " before it")));
    }
  }
  return chain;
}

}  // namespace pstrain
