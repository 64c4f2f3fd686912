#include "common/embedding_keys.h"

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace {

// SplitMix64's finaliser (a bijection; the data library's MixBits, which
// this library cannot depend on): the keys' hashes must be the same on
// every machine and build, which absl::Hash does not promise.
uint64_t MixBits(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Separates the shard hash from the fixed-size tables' row hash, so the
// rows of one shard do not all hash to the same residues.
constexpr uint64_t kShardSalt = 0x5bd1e9955bd1e995ULL;

}  // namespace

uint64_t EmbeddingRowKey(const EmbeddingTableConfig& table, uint64_t id) {
  if (table.cardinality() <= 0) return id;
  return MixBits(id) % static_cast<uint64_t>(table.cardinality());
}

int EmbeddingKeyShard(uint64_t key, int num_shards) {
  return static_cast<int>(MixBits(key ^ kShardSalt) % static_cast<uint64_t>(num_shards));
}

WireDType EmbeddingWireDType(const EmbeddingTableConfig& table) {
  switch (table.wire_dtype()) {
    case EmbeddingTableConfig::fp16:
      return DT_FLOAT16;
    case EmbeddingTableConfig::bf16:
      return DT_BFLOAT16;
    case EmbeddingTableConfig::fp32:
      break;
  }
  return DT_FLOAT32;
}

std::vector<EmbeddingTableConfig> RunEmbeddingTables(const ExperimentConfig& config) {
  std::vector<EmbeddingTableConfig> tables(config.model().tables().begin(), config.model().tables().end());
  const std::string& compression = config.compression();
  for (EmbeddingTableConfig& t : tables) {
    if (t.has_wire_dtype()) continue;
    if (compression == "fp16") t.set_wire_dtype(EmbeddingTableConfig::fp16);
    if (compression == "bf16") t.set_wire_dtype(EmbeddingTableConfig::bf16);
  }
  return tables;
}

uint64_t EmbeddingTableDigest(std::string_view table_name) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : table_name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

void InitialEmbeddingRow(uint64_t seed, uint64_t table_digest, uint64_t key, float scale, absl::Span<float> row) {
  uint64_t state = MixBits(MixBits(seed ^ table_digest) ^ key);
  for (float& v : row) {
    state = MixBits(state);
    // 24 random bits -> [0, 1) -> [-scale, scale).
    const float unit = static_cast<float>(state >> 40) * (1.0f / 16777216.0f);
    v = (2.0f * unit - 1.0f) * scale;
  }
}

}  // namespace pstrain
