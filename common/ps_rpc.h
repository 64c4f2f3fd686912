// The methods of the ParameterServer service (proto/ps.proto), named once for
// both ends: the worker's PsClient calls them, the PS's PsService dispatches
// on them. tests/ps checks them against the service in ps.proto.
#pragma once

#include <array>
#include <string_view>

namespace pstrain::ps_rpc {

inline constexpr std::string_view kInit = "Init";
inline constexpr std::string_view kPull = "Pull";
inline constexpr std::string_view kPush = "Push";
inline constexpr std::string_view kHeartbeat = "Heartbeat";
inline constexpr std::string_view kDone = "Done";
inline constexpr std::string_view kStats = "Stats";
inline constexpr std::string_view kCheckpoint = "Checkpoint";
inline constexpr std::string_view kChunk = "Chunk";
inline constexpr std::string_view kSparsePull = "SparsePull";
inline constexpr std::string_view kSparsePush = "SparsePush";

inline constexpr std::array<std::string_view, 10> kAll = {kInit,  kPull,       kPush,  kHeartbeat,  kDone,
                                                          kStats, kCheckpoint, kChunk, kSparsePull, kSparsePush};

// Control methods: small requests that decide liveness, membership, data
// and checkpoints (a heartbeat missed for long evicts a worker). A client
// sends them on a connection of their own to each shard, so they never wait
// behind the bulk push and pull bytes of the other methods, in a sender's
// buffers or in its transport's queues (docs/TRANSPORTS.md, "Control
// traffic first").
inline constexpr std::array<std::string_view, 5> kControl = {kHeartbeat, kDone, kStats, kCheckpoint, kChunk};

constexpr bool IsControl(std::string_view method) {
  for (std::string_view control : kControl) {
    if (method == control) return true;
  }
  return false;
}

}  // namespace pstrain::ps_rpc
