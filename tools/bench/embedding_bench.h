// The embedding-table benchmark behind `pstrain-bench embedding`.
//
// Batches of a CTR model's ids: `batch_size` examples of `features` ids
// each, every feature's ids drawn from a Zipf distribution with exponent
// `zipf` over `cardinality` ranks (common/data/criteo/synthetic_ctr.h), each
// rank hashed to a 64-bit id. One table of `dim` floats holds them all.
//
// Two parts, each beside a reference measured in the same run:
//   in process   the shard's own table (ps/embedding/embedding_table.h:
//                Read, then Apply of one gradient row per key) against a
//                plain absl::flat_hash_map<id, row> lookup (inserting a
//                missing row) and SGD update of the same keys: rows per
//                second each, and their ratios;
//   over the PS  `servers` shards (RunParameterServer, threads of this
//                process, on 127.0.0.1) and `workers` worker threads, each
//                with an EmbeddingClient over its own `transport`, async:
//                per round a batch is deduplicated, its rows pulled and one
//                gradient row per key pushed. Rows pulled and updated per
//                second (all workers; per shard = / servers) and the rows'
//                bytes both ways in Gbit/s.
// Both parts use the same optimizer (`optimizer`, default sgd so the
// reference's update is the same arithmetic).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/ps.pb.h"

namespace pstrain::bench {

struct EmbeddingBenchOptions {
  int servers = 2;                 // >= 1
  int workers = 2;                 // >= 1
  int batch_size = 512;            // examples per round, >= 1
  int features = 26;               // ids per example, >= 1
  int dim = 16;                    // in [1, 4096]
  int64_t cardinality = 10000000;  // ranks per feature, >= 1
  double zipf = 1.05;              // > 0
  std::string transport = "grpc";
  std::string optimizer = "sgd";
  std::string wire_dtype = "fp32";
  double seconds = 2.0;       // per part, > 0
  int64_t warmup_rounds = 2;  // >= 0
  uint64_t seed = 1;
};

struct EmbeddingBenchResult {
  // In process.
  int64_t local_rounds = 0;
  double table_lookups_per_sec = 0;  // EmbeddingTable::Read, rows/s
  double table_updates_per_sec = 0;  // EmbeddingTable::Apply, rows/s
  double map_lookups_per_sec = 0;    // the hash map's, rows/s
  double map_updates_per_sec = 0;
  double lookup_ratio = 0;  // table / map
  double update_ratio = 0;
  // Over the PS.
  int64_t rounds = 0;              // all workers
  double unique_fraction = 0;      // keys pulled / ids drawn
  double pulled_rows_per_sec = 0;  // all workers
  double pushed_rows_per_sec = 0;
  double sparse_gbps = 0;          // rows' payload bytes, pulled + pushed
  int64_t client_pulled_rows = 0;  // what the clients asked for (timed and warm-up)
  int64_t client_pushed_rows = 0;
  // Each shard's table at the end (rows, memory per row, rows pulled and
  // pushed, counted by the shard).
  std::vector<TableStats> shards;
};

// InvalidArgument naming the bad option.
absl::Status ValidateEmbeddingBenchOptions(const EmbeddingBenchOptions& options);
absl::StatusOr<EmbeddingBenchResult> RunEmbeddingBench(const EmbeddingBenchOptions& options);
// The human table (several lines, newline-terminated).
std::string FormatEmbeddingBenchTable(const EmbeddingBenchOptions& options, const EmbeddingBenchResult& result);
// One JSON object on one line (no newline).
std::string FormatEmbeddingBenchJson(const EmbeddingBenchOptions& options, const EmbeddingBenchResult& result);

}  // namespace pstrain::bench
