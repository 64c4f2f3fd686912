#include "common/transport/grpc/grpc_shm.h"

#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/environment.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

constexpr char kShmLaneKey[] = "pstrain-shm-lane";    // every call of an attached channel; the attach's answer
constexpr char kShmBlockKey[] = "pstrain-shm-block";  // a frame whose payload is a block of the lane
constexpr size_t kDefaultHalfMegabytes = 256;
constexpr size_t kMaxLanes = 1024;
// In an UNAVAILABLE answer: the server does not know the lane a call named.
constexpr char kUnknownLane[] = "shared-memory lane unknown to this server";

std::optional<std::string_view> Find(const GrpcMetadata& metadata, std::string_view key) {
  auto it = metadata.find(grpc::string_ref(key.data(), key.size()));
  if (it == metadata.end()) return std::nullopt;
  return std::string_view(it->second.data(), it->second.size());
}

}  // namespace

size_t SharedMemoryHalfBytesFromEnvironment() {
  const int64_t mb = IntFromEnvironment("PSTRAIN_GRPC_SHARED_MEMORY_MB", kDefaultHalfMegabytes, "MiB", 0);
  return static_cast<size_t>(mb) << 20;
}

bool LaneCallsFromEnvironment() {
  static const bool on = SwitchFromEnvironment("PSTRAIN_GRPC_LANE_CALLS", true);
  return on;
}

bool ClientShm::WillNotAttach() const {
  if (half_bytes_ == 0) return true;
  absl::MutexLock lock(&mu_);
  return state_ == State::kRefused;
}

std::optional<std::string> ClientShm::OfferIfDue(size_t payload_bytes) {
  if (half_bytes_ == 0 || payload_bytes < kShmMinPayloadBytes) return std::nullopt;
  absl::MutexLock lock(&mu_);
  if (state_ != State::kNotOffered) return std::nullopt;
  absl::StatusOr<std::shared_ptr<ShmLane>> lane = ShmLane::CreateForClient(half_bytes_);
  if (!lane.ok()) {
    LOG(INFO) << "grpc: no shared memory for this channel (" << lane.status() << "); it uses the socket";
    state_ = State::kRefused;
    return std::nullopt;
  }
  lane_ = *std::move(lane);
  state_ = State::kOffered;
  return lane_->offer().Encode();
}

void ClientShm::Attached(const absl::Status& status, const GrpcMetadata& trailing) {
  const std::string lane_id(Find(trailing, kShmLaneKey).value_or(""));
  absl::MutexLock lock(&mu_);
  if (state_ != State::kOffered) return;
  if (lane_ != nullptr) lane_->Unlink();  // the server has it open, or never will
  const bool transient = absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
  if (status.ok() && !lane_id.empty()) {
    state_ = State::kAttached;
    lane_id_ = lane_id;
    if (LaneCallsFromEnvironment()) {
      lane_->ReadServerValues();  // so that answers of the server's values come lent, not copied
      caller_ = std::make_shared<ShmLaneCaller>(lane_);
    }
    return;
  }
  if (!transient) VLOG(1) << "grpc: the server takes no shared memory from this channel: " << status;
  lane_ = nullptr;
  state_ = transient ? State::kNotOffered : State::kRefused;
}

bool ClientShm::CallThroughLane(std::string_view method, OutgoingFrame& request, const CallOptions& options,
                                ResponseCallback& done) {
  std::shared_ptr<ShmLaneCaller> caller;
  {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kAttached || caller_ == nullptr) return false;
    caller = caller_;
  }
  if (!options.wait_for_ready && caller->Call(method, request, options.deadline, done)) return true;
  if (!caller->usable()) Drop(caller);
  return false;
}

void ClientShm::Drop(const std::shared_ptr<ShmLaneCaller>& caller) {
  std::shared_ptr<ShmLaneCaller> dropped;  // destroyed outside the lock
  absl::MutexLock lock(&mu_);
  if (caller_ != caller) return;
  dropped = std::move(caller_);
  state_ = State::kNotOffered;
  lane_ = nullptr;
}

ClientShm::Sent ClientShm::Prepare(OutgoingFrame& frame, grpc::ClientContext& context) {
  Sent sent;
  {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kAttached) return sent;
    sent.lane = lane_;
    context.AddMetadata(kShmLaneKey, lane_id_);
  }
  std::vector<ConstChunk> chunks = frame.chunks;
  sent.block = sent.lane->Write(frame);
  if (sent.block.has_value()) {
    context.AddMetadata(kShmBlockKey, sent.block->Encode());
    sent.original = OutgoingFrame{frame.header, std::move(chunks)};
  }
  return sent;
}

absl::StatusOr<IncomingFrame> ClientShm::Finish(const absl::Status& call, const grpc::ClientContext& context,
                                                std::vector<IncomingFrame::Piece> wire,
                                                std::shared_ptr<const void> keepalive, const Sent& sent) {
  if (!call.ok()) {
    Withdraw(sent);
    return call;
  }
  const std::optional<std::string_view> block = Find(context.GetServerTrailingMetadata(), kShmBlockKey);
  if (!block.has_value()) return IncomingFrame::FromWire(std::move(wire), std::move(keepalive));
  if (sent.lane == nullptr) {
    return absl::InternalError("grpc: the server answered through shared memory on a call that named no lane");
  }
  absl::StatusOr<ShmDescriptor> descriptor = ShmDescriptor::Parse(*block);
  if (!descriptor.ok()) return descriptor.status();
  return sent.lane->Read(std::move(wire), std::move(keepalive), *descriptor);
}

bool ClientShm::ServerLostLane(const absl::Status& call, const Sent& sent) {
  return sent.lane != nullptr && absl::IsUnavailable(call) && absl::StrContains(call.message(), kUnknownLane);
}

void ClientShm::Withdraw(const Sent& sent) {
  if (sent.block.has_value()) sent.lane->Withdraw(*sent.block);
}

void ClientShm::Forget(const Sent& sent) {
  Withdraw(sent);
  std::shared_ptr<ShmLaneCaller> dropped;  // destroyed outside the lock
  absl::MutexLock lock(&mu_);
  if (lane_ != sent.lane) return;
  dropped = std::move(caller_);
  state_ = State::kNotOffered;
  lane_ = nullptr;
}

absl::Status ServerShm::Attach(grpc::ServerContextBase& call) {
  if (!enabled_) return absl::UnimplementedError("this server takes no shared memory (TLS, or turned off)");
  const std::optional<std::string_view> text = Find(call.client_metadata(), kShmOfferKey);
  if (!text.has_value()) return absl::InvalidArgumentError("attach: no shared memory offer");
  absl::StatusOr<ShmOffer> offer = ShmOffer::Parse(*text);
  if (!offer.ok()) return offer.status();
  absl::StatusOr<std::shared_ptr<ShmLane>> lane = ShmLane::AcceptOffer(*offer);
  if (!lane.ok()) return lane.status();
  absl::MutexLock lock(&mu_);
  ForgetDeadClientsLocked();
  if (lanes_.size() >= kMaxLanes) {
    return absl::ResourceExhaustedError(absl::StrCat("this server has ", kMaxLanes, " shared memory lanes already"));
  }
  const uint64_t id = next_id_++;
  std::unique_ptr<ShmLaneCallee> callee =
      handler_ != nullptr ? std::make_unique<ShmLaneCallee>(*lane, handler_) : nullptr;
  lanes_[id] = ServedLane{*std::move(lane), std::move(callee)};
  call.AddTrailingMetadata(kShmLaneKey, absl::StrCat(id));
  return absl::OkStatus();
}

void ServerShm::CloseLanes() {
  absl::flat_hash_map<uint64_t, ServedLane> lanes;
  {
    absl::MutexLock lock(&mu_);
    lanes.swap(lanes_);
  }
  for (auto& [id, served] : lanes) {
    if (served.callee != nullptr) served.callee->Close();
  }
}

void ServerShm::PutResponse(ShmLane* lane, OutgoingFrame& response, grpc::ServerContextBase& call) {
  if (lane == nullptr) return;
  if (std::optional<ShmDescriptor> block = lane->Write(response))
    call.AddTrailingMetadata(kShmBlockKey, block->Encode());
}

std::shared_ptr<ShmLane> ServerShm::LaneOf(const GrpcMetadata& client_metadata) const {
  const std::optional<std::string_view> text = Find(client_metadata, kShmLaneKey);
  uint64_t id = 0;
  if (!text.has_value() || !absl::SimpleAtoi(absl::string_view(text->data(), text->size()), &id)) return nullptr;
  absl::MutexLock lock(&mu_);
  auto it = lanes_.find(id);
  return it == lanes_.end() ? nullptr : it->second.lane;
}

absl::StatusOr<IncomingFrame> ServerShm::ReadRequest(const GrpcMetadata& client_metadata, ShmLane* lane,
                                                     std::vector<IncomingFrame::Piece> wire,
                                                     std::shared_ptr<const void> keepalive) {
  const std::optional<std::string_view> block = Find(client_metadata, kShmBlockKey);
  if (!block.has_value()) return IncomingFrame::FromWire(std::move(wire), std::move(keepalive));
  if (lane == nullptr) {
    return absl::UnavailableError(absl::StrCat(kUnknownLane, " (it restarted?); the client attaches again"));
  }
  absl::StatusOr<ShmDescriptor> descriptor = ShmDescriptor::Parse(*block);
  if (!descriptor.ok()) return descriptor.status();
  return lane->Read(std::move(wire), std::move(keepalive), *descriptor);
}

// Lanes whose client dropped them or whose process has exited (a crash
// leaves no detach call).
void ServerShm::ForgetDeadClientsLocked() {
  absl::erase_if(lanes_, [](const auto& entry) {
    return entry.second.lane->client_closed() || ProcessHasExited(entry.second.lane->client_pid());
  });
}

}  // namespace pstrain
