#include "ps/ps_service.h"

#include "absl/strings/str_cat.h"
#include "common/ps_rpc.h"

namespace pstrain {
namespace {

template <typename Request>
bool ParseOrReject(const IncomingFrame& frame, std::string_view method, Request* request, const Responder& respond) {
  if (frame.ParseHeader(request)) return true;
  respond(absl::InvalidArgumentError(absl::StrCat(std::string(method), ": malformed request header")), {});
  return false;
}

void Reply(const Responder& respond, const absl::Status& status, const google::protobuf::MessageLite& response) {
  if (!status.ok()) {
    respond(status, {});
    return;
  }
  respond(absl::OkStatus(), OutgoingFrame::FromHeader(response));
}

}  // namespace

void PsService::Handle(std::string_view method, IncomingFrame frame, Responder respond) {
  if (method == ps_rpc::kPull) {
    PullRequest request;
    if (ParseOrReject(frame, method, &request, respond)) shard_->Pull(request, std::move(respond));
  } else if (method == ps_rpc::kPush) {
    PushRequest request;
    PushResponse response;
    if (ParseOrReject(frame, method, &request, respond))
      Reply(respond, shard_->Push(request, frame, &response), response);
  } else if (method == ps_rpc::kInit) {
    InitRequest request;
    InitResponse response;
    if (ParseOrReject(frame, method, &request, respond))
      Reply(respond, shard_->Init(request, frame, &response), response);
  } else if (method == ps_rpc::kHeartbeat) {
    HeartbeatRequest request;
    HeartbeatResponse response;
    if (ParseOrReject(frame, method, &request, respond))
      Reply(respond, shard_->Heartbeat(request, &response), response);
  } else if (method == ps_rpc::kDone) {
    DoneRequest request;
    if (ParseOrReject(frame, method, &request, respond)) Reply(respond, shard_->Done(request), DoneResponse());
  } else if (method == ps_rpc::kCheckpoint) {
    CheckpointRequest request;
    if (ParseOrReject(frame, method, &request, respond)) {
      absl::StatusOr<CheckpointResponse> response = shard_->Checkpoint(request);
      Reply(respond, response.status(), response.ok() ? *response : CheckpointResponse());
    }
  } else if (method == ps_rpc::kChunk) {
    ChunkRequest request;
    if (ParseOrReject(frame, method, &request, respond)) {
      absl::StatusOr<ChunkResponse> response = shard_->Chunk(request);
      Reply(respond, response.status(), response.ok() ? *response : ChunkResponse());
    }
  } else if (method == ps_rpc::kSparsePull) {
    SparsePullRequest request;
    if (ParseOrReject(frame, method, &request, respond)) shard_->SparsePull(request, frame, std::move(respond));
  } else if (method == ps_rpc::kSparsePush) {
    SparsePushRequest request;
    if (ParseOrReject(frame, method, &request, respond)) {
      absl::StatusOr<SparsePushResponse> response = shard_->SparsePush(request, frame);
      Reply(respond, response.status(), response.ok() ? *response : SparsePushResponse());
    }
  } else if (method == ps_rpc::kStats) {
    StatsRequest request;
    if (ParseOrReject(frame, method, &request, respond))
      Reply(respond, absl::OkStatus(), shard_->Stats(request, /*with_ledger_state=*/true));
  } else {
    respond(absl::UnimplementedError(absl::StrCat("unknown PS method '", std::string(method), "'")), {});
  }
}

}  // namespace pstrain
