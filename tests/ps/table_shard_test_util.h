// Shards holding one embedding table "ads", driven through PsShard's own
// calls (Init, SparsePush, SparsePull): the helpers of the table checkpoint
// tests.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "ps/shard/shard.h"

namespace pstrain::table_test {

constexpr int kDim = 4;

// A one-worker async shard (adagrad, seed 3) with one table "ads" of
// `dim`; with `max_rows`, lru eviction.
inline PsShardOptions TableShardOptions(int dim = kDim, int64_t max_rows = 0) {
  PsShardOptions o;
  o.num_workers = 1;
  o.consistency = "async";
  o.optimizer.set_name("adagrad");
  o.optimizer.set_learning_rate(0.1f);
  o.seed = 3;
  EmbeddingTableConfig& t = o.tables.emplace_back();
  t.set_name("ads");
  t.set_dim(dim);
  if (max_rows > 0) {
    t.set_max_rows(max_rows);
    t.set_eviction(EmbeddingTableConfig::lru);
  }
  return o;
}

// `header` and `n` payload bytes at `data` as a received frame.
template <typename Header>
IncomingFrame Frame(const Header& header, const void* data = nullptr, size_t n = 0) {
  OutgoingFrame out = OutgoingFrame::FromHeader(header);
  auto bytes = std::make_shared<std::string>(static_cast<const char*>(data), n);
  if (n > 0) out.chunks.push_back(ConstChunk{bytes->data(), bytes->size(), bytes});
  return IncomingFrame::FromOutgoing(std::move(out));
}

// A shard of `o` after its Init (generation 1; restoring `restore` when
// given); `init_status` gets the Init's answer.
inline std::unique_ptr<PsShard> Shard(const PsShardOptions& o, const ShardRestore* restore, absl::Status* init_status) {
  absl::StatusOr<std::unique_ptr<PsShard>> shard = PsShard::Create(o);
  EXPECT_TRUE(shard.ok()) << shard.status();
  InitRequest init;
  init.set_generation(1);
  if (restore != nullptr) *init.mutable_restore() = *restore;
  IncomingFrame frame = Frame(init);
  InitResponse response;
  *init_status = (*shard)->Init(init, frame, &response);
  return *std::move(shard);
}

// An async push of gradient `g` in every element of the rows of `keys`.
inline void Push(PsShard& shard, const std::vector<uint64_t>& keys, float g) {
  SparsePushRequest request;
  request.set_table("ads");
  request.set_num_ids(static_cast<int64_t>(keys.size()));
  request.set_dim(kDim);
  std::string payload(reinterpret_cast<const char*>(keys.data()), keys.size() * 8);
  const std::vector<float> grads(keys.size() * kDim, g);
  payload.append(reinterpret_cast<const char*>(grads.data()), grads.size() * 4);
  IncomingFrame frame = Frame(request, payload.data(), payload.size());
  ASSERT_TRUE(shard.SparsePush(request, frame).ok());
}

// The rows of `keys` and the table's version.
inline std::pair<std::vector<float>, int64_t> Pull(PsShard& shard, const std::vector<uint64_t>& keys) {
  SparsePullRequest request;
  request.set_table("ads");
  request.set_num_ids(static_cast<int64_t>(keys.size()));
  IncomingFrame frame = Frame(request, keys.data(), keys.size() * 8);
  std::pair<std::vector<float>, int64_t> out;
  shard.SparsePull(request, frame, [&out](absl::Status s, OutgoingFrame answer) {
    ASSERT_TRUE(s.ok()) << s;
    IncomingFrame in = IncomingFrame::FromOutgoing(std::move(answer));
    SparsePullResponse header;
    ASSERT_TRUE(in.ParseHeader(&header));
    out.second = header.version();
    out.first.resize(in.remaining() / 4);
    ASSERT_TRUE(in.Read(out.first.data(), in.remaining()).ok());
  });
  return out;
}

}  // namespace pstrain::table_test
