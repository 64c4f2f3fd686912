// Shared by the PS-side fuzz targets (ps_service_fuzz, checkpoint_fuzz): a
// PS shard of the tiny model (fuzz_util.h) and the Init request that installs
// its variables, as the chief sends it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/placement.h"
#include "common/transport/frame.h"
#include "proto/ps.pb.h"
#include "ps/shard/shard.h"
#include "tests/fuzz/fuzz_util.h"

namespace pstrain::fuzz {

// With `table`, the shard also holds a small embedding table.
inline PsShardOptions TinyShardOptions(int shard, const std::string& consistency, bool table = true) {
  PsShardOptions options;
  options.shard_index = shard;
  options.num_workers = kTinyWorkers;
  options.consistency = consistency;
  options.staleness = consistency == "ssp" ? 1 : 0;
  options.optimizer.set_name("momentum");
  options.optimizer.set_learning_rate(0.05f);
  // A small embedding table, so sparse pulls and pushes reach its rows (and,
  // past 64 rows on the shard, their eviction).
  options.num_shards = kTinyShards;
  if (!table) return options;
  EmbeddingTableConfig& ads = options.tables.emplace_back();
  ads.set_name("ads");
  ads.set_dim(2);
  ads.set_max_rows(128);
  ads.mutable_optimizer()->set_name("sgd");
  return options;
}

// The chief's Init of `shard` (its parts of the tiny model, values i/64),
// with `restore` when given.
struct InitFrame {
  InitRequest header;
  std::shared_ptr<std::string> payload = std::make_shared<std::string>();

  IncomingFrame Incoming() const {
    std::vector<IncomingFrame::Piece> pieces;
    if (!payload->empty()) pieces.push_back({payload->data(), payload->size()});
    return IncomingFrame(header.SerializeAsString(), std::move(pieces), payload);
  }
};

inline InitFrame TinyInit(int shard, int64_t generation = 1) {
  InitFrame init;
  init.header.set_worker(0);
  init.header.set_total_steps(4);
  init.header.set_generation(generation);
  if (shard == 0) {  // a small data ledger (data.sharding dynamic)
    LedgerSpec* ledger = init.header.mutable_ledger();
    ledger->set_examples_per_epoch(64);
    ledger->set_epochs(2);
    ledger->set_chunk_examples(16);
  }
  for (const VariablePart& part : TinyModelParts()) {
    if (part.shard != shard) continue;
    TensorHeader* t = init.header.add_tensors();
    t->set_name(part.name);
    int64_t n = 1;
    for (int64_t d : part.shape) {
      t->add_shape(d);
      n *= d;
    }
    t->set_dtype(DT_FLOAT32);
    t->set_num_bytes(n * sizeof(float));
    for (int64_t i = 0; i < n; ++i) {
      const float v = static_cast<float>(i % 64) / 64.0f;
      init.payload->append(reinterpret_cast<const char*>(&v), sizeof(v));
    }
  }
  return init;
}

}  // namespace pstrain::fuzz
