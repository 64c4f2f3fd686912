#include "common/transport/grpc/grpc_transport.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <set>

#include "absl/base/config.h"
#ifdef ABSL_HAVE_THREAD_SANITIZER
#include <sanitizer/tsan_interface.h>
#endif
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/transport/grpc/grpc_log.h"
#include "common/transport/grpc/grpc_shm.h"
#include "common/transport/grpc/tcp_lane_client.h"
#include "common/transport/grpc/tcp_lane_connection.h"
#include "common/transport/grpc/tcp_lane_server.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

constexpr char kServicePrefix[] = "/pstrain.ParameterServer/";

grpc::Status ToGrpcStatus(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

void ReleaseChunkOwner(void* user_data) { delete static_cast<std::shared_ptr<const void>*>(user_data); }

// gRPC hands our objects (a call's state, a reactor) from the thread that
// starts an operation to the thread that completes it through its own
// queues. Debian's gRPC is not built with ThreadSanitizer, so that handoff is
// invisible to it; these mark it (no-ops in other builds). Every write before
// HandOff(x) happens before every access after TakeBack(x).
#ifdef ABSL_HAVE_THREAD_SANITIZER
void HandOff(const void* object) { __tsan_release(const_cast<void*>(object)); }
void TakeBack(const void* object) { __tsan_acquire(const_cast<void*>(object)); }
#else
void HandOff(const void*) {}
void TakeBack(const void*) {}
#endif

// Header slice plus one zero-copy slice per chunk.
grpc::ByteBuffer ToByteBuffer(OutgoingFrame frame) {
  std::vector<grpc::Slice> slices;
  slices.reserve(frame.chunks.size() + 1);
  slices.emplace_back(EncodeWireHeader(frame.header));
  for (ConstChunk& chunk : frame.chunks) {
    if (chunk.size == 0) continue;
    auto* owner = new std::shared_ptr<const void>(std::move(chunk.owner));
    slices.emplace_back(const_cast<void*>(chunk.data), chunk.size, &ReleaseChunkOwner, owner);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

// A received message's bytes as pieces, kept alive by `keepalive`.
struct Wire {
  std::vector<IncomingFrame::Piece> pieces;
  std::shared_ptr<const void> keepalive;
};
absl::StatusOr<Wire> WireOf(const grpc::ByteBuffer& buffer) {
  auto slices = std::make_shared<std::vector<grpc::Slice>>();
  grpc::Status dumped = buffer.Dump(slices.get());
  if (!dumped.ok()) return FromGrpcStatus(dumped);
  Wire wire;
  wire.pieces.reserve(slices->size());
  for (const grpc::Slice& s : *slices) {
    if (s.size() > 0) wire.pieces.push_back({reinterpret_cast<const char*>(s.begin()), s.size()});
  }
  wire.keepalive = std::move(slices);
  return wire;
}

int ClampToInt(int64_t bytes) { return static_cast<int>(std::min<int64_t>(bytes, INT_MAX)); }

// Channel arguments for bulk tensor traffic, applied on both ends: large
// HTTP/2 frames and flow-control look-ahead, and large TCP reads, so a
// multi-megabyte tensor crosses in few frames and few syscalls.
template <typename SetInt>
void SetBulkTransferArgs(const TransportOptions& options, SetInt set_int) {
  set_int(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 16 * 1024 * 1024 - 1);  // the HTTP/2 maximum
  set_int(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 64 * 1024 * 1024);
  set_int(GRPC_ARG_TCP_READ_CHUNK_SIZE, 4 * 1024 * 1024);
  set_int(GRPC_ARG_TCP_MIN_READ_CHUNK_SIZE, 256 * 1024);
  set_int(GRPC_ARG_TCP_MAX_READ_CHUNK_SIZE, 16 * 1024 * 1024);
}

// ---- client ----

class GrpcChannel : public Channel {
 public:
  // `token`: sent with every call (empty: none). `address` names the server
  // in errors. `shm_half_bytes`: each half of the channel's shared-memory
  // lane (0: none). `tcp_lane`: large calls may go through a TCP lane
  // (tcp_lane_client.h) with answers of up to `max_message_bytes`.
  GrpcChannel(std::shared_ptr<grpc::Channel> channel, std::string token, std::string address, bool tls,
              size_t shm_half_bytes = 0, bool tcp_lane = false, int64_t max_message_bytes = 0)
      : peer_(std::make_shared<Peer>(std::move(channel), std::move(address), tls, std::move(token), shm_half_bytes,
                                     tcp_lane, max_message_bytes)) {}

  void Call(std::string_view method, OutgoingFrame request, const CallOptions& options,
            ResponseCallback done) override {
    Start(peer_, std::string(method), std::move(request), options, std::move(done));
  }

 private:
  // The server end of the channel and what every call carries; calls in
  // flight share it.
  struct Peer {
    Peer(std::shared_ptr<grpc::Channel> c, std::string a, bool t, std::string k, size_t shm_half_bytes, bool tcp_lane,
         int64_t max_message_bytes)
        : channel(c),
          stub(std::move(c)),
          address(std::move(a)),
          tls(t),
          token(std::move(k)),
          shm(std::make_shared<ClientShm>(shm_half_bytes)),
          lane(std::make_shared<TcpLaneClient>(address, tcp_lane, static_cast<uint64_t>(max_message_bytes))) {}
    std::shared_ptr<grpc::Channel> channel;
    grpc::GenericStub stub;
    const std::string address;
    const bool tls;  // this end uses TLS
    const std::string token;
    const std::shared_ptr<ClientShm> shm;
    const std::shared_ptr<TcpLaneClient> lane;
  };

  // One call in flight, owned by its completion.
  struct CallState {
    grpc::ClientContext context;
    grpc::ByteBuffer request;
    grpc::ByteBuffer response;
    ResponseCallback done;
    std::string method;
    CallOptions options;
    std::shared_ptr<ClientShm> shm;
    ClientShm::Sent sent;                 // what went through shared memory
    std::shared_ptr<TcpLaneClient> lane;  // the attach call's
  };

  static void Start(const std::shared_ptr<Peer>& peer, std::string method, OutgoingFrame request,
                    const CallOptions& options, ResponseCallback done) {
    if (std::optional<std::string> offer = peer->shm->OfferIfDue(request.payload_bytes())) {
      OfferSharedMemory(*peer, *offer);
    }
    if (peer->shm->CallThroughLane(method, request, options, done)) return;
    if (TcpLaneClient::Suits(request, options) && peer->shm->WillNotAttach() && peer->lane->AttachDue()) {
      AttachTcpLane(*peer);
    }
    if (peer->lane->Call(method, request, options, done)) return;
    auto* state = new CallState;
    state->done = std::move(done);
    state->method = std::move(method);
    state->options = options;
    state->shm = peer->shm;
    state->sent = peer->shm->Prepare(request, state->context);
    state->request = ToByteBuffer(std::move(request));
    if (options.deadline != absl::InfiniteFuture()) state->context.set_deadline(absl::ToChronoTime(options.deadline));
    state->context.set_wait_for_ready(options.wait_for_ready);
    if (!peer->token.empty()) state->context.AddMetadata(kTokenMetadataKey, BearerValue(peer->token));
    HandOff(state);
    peer->stub.UnaryCall(&state->context, kServicePrefix + state->method, grpc::StubOptions(), &state->request,
                         &state->response, [weak = std::weak_ptr<Peer>(peer), state](grpc::Status status) {
                           TakeBack(state);
                           Complete(weak, std::unique_ptr<CallState>(state), FromGrpcStatus(status));
                         });
  }

  // Runs a finished call's callback; a call that waited for a server that
  // never accepted it says why, and one whose shared-memory lane the server
  // no longer knows (it restarted) goes again through the socket.
  static void Complete(const std::weak_ptr<Peer>& weak, std::unique_ptr<CallState> call, absl::Status status) {
    // Not owned here unless needed: the channel must not be destroyed from
    // its own completion.
    const bool waited = call->options.wait_for_ready && absl::IsDeadlineExceeded(status);
    if (std::shared_ptr<Peer> peer = waited ? weak.lock() : nullptr;
        peer != nullptr && peer->channel->GetState(false) == GRPC_CHANNEL_TRANSIENT_FAILURE) {
      ClientShm::Withdraw(call->sent);
      ExplainUnreachable(peer, std::move(call->done));
      return;
    }
    if (ClientShm::ServerLostLane(status, call->sent)) {
      call->shm->Forget(call->sent);
      if (std::shared_ptr<Peer> peer = weak.lock()) {
        Start(peer, std::move(call->method), std::move(call->sent.original), call->options, std::move(call->done));
        return;
      }
    }
    // Take what the callback needs, then destroy the call (context, buffers)
    // before running it: user code must not outlive gRPC's view of the call.
    ResponseCallback done = std::move(call->done);
    absl::StatusOr<IncomingFrame> frame = Answer(status, *call);  // holds slice refs
    call.reset();
    if (!frame.ok()) {
      done(frame.status(), {});
    } else {
      done(absl::OkStatus(), *std::move(frame));
    }
  }

  // A finished call's answer: its error, or the response (its payload from
  // shared memory when the server put it there).
  static absl::StatusOr<IncomingFrame> Answer(const absl::Status& status, CallState& call) {
    if (!status.ok()) return call.shm->Finish(status, call.context, {}, nullptr, call.sent);
    absl::StatusOr<Wire> wire = WireOf(call.response);
    if (!wire.ok()) return wire.status();
    return call.shm->Finish(status, call.context, std::move(wire->pieces), std::move(wire->keepalive), call.sent);
  }

  // Offers the channel's shared-memory lane to the server (grpc_shm.h); calls
  // go through the socket until it accepts.
  static void OfferSharedMemory(Peer& peer, const std::string& offer) {
    auto* attach = new CallState;
    attach->shm = peer.shm;
    attach->context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    attach->context.set_wait_for_ready(true);
    attach->context.AddMetadata(kShmOfferKey, offer);
    if (!peer.token.empty()) attach->context.AddMetadata(kTokenMetadataKey, BearerValue(peer.token));
    attach->request = ToByteBuffer(OutgoingFrame());
    HandOff(attach);
    peer.stub.UnaryCall(&attach->context, kShmAttachMethod, grpc::StubOptions(), &attach->request, &attach->response,
                        [attach](grpc::Status status) {
                          TakeBack(attach);
                          std::unique_ptr<CallState> owned(attach);
                          owned->shm->Attached(FromGrpcStatus(status), owned->context.GetServerTrailingMetadata());
                        });
  }

  // Asks the server for its TCP lane (tcp_lane_client.h); calls go through
  // gRPC until the lane is connected.
  static void AttachTcpLane(Peer& peer) {
    auto* attach = new CallState;
    attach->lane = peer.lane;
    attach->context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    if (!peer.token.empty()) attach->context.AddMetadata(kTokenMetadataKey, BearerValue(peer.token));
    attach->request = ToByteBuffer(OutgoingFrame());
    HandOff(attach);
    peer.stub.UnaryCall(&attach->context, kTcpLaneAttachMethod, grpc::StubOptions(), &attach->request,
                        &attach->response, [attach](grpc::Status status) {
                          TakeBack(attach);
                          std::unique_ptr<CallState> owned(attach);
                          const GrpcMetadata& trailing = owned->context.GetServerTrailingMetadata();
                          auto it = trailing.find(kTcpLaneOfferKey);
                          const std::string offer =
                              it == trailing.end() ? "" : std::string(it->second.data(), it->second.size());
                          owned->lane->Attached(FromGrpcStatus(status), offer);
                        });
  }

  // Completes `done` with DEADLINE_EXCEEDED and the reason the connection
  // keeps failing (a TLS handshake refused, a plaintext peer, nobody
  // listening), which a call without wait_for_ready reports at once.
  static void ExplainUnreachable(const std::shared_ptr<Peer>& peer, ResponseCallback done) {
    auto* probe = new CallState;
    probe->done = std::move(done);
    probe->context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
    probe->request = ToByteBuffer(OutgoingFrame());
    HandOff(probe);
    peer->stub.UnaryCall(
        &probe->context, std::string(kServicePrefix) + "Probe", grpc::StubOptions(), &probe->request, &probe->response,
        [probe, address = peer->address, tls = peer->tls](grpc::Status status) {
          TakeBack(probe);
          std::unique_ptr<CallState> owned(probe);
          ResponseCallback done = std::move(owned->done);
          owned.reset();
          std::string why;
          if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
            why = absl::StrCat("; the connection fails with: ", status.error_message());
            // A TLS server closes a plaintext client's connection without a word.
            if (!tls && absl::StrContains(status.error_message(), "Socket closed")) {
              absl::StrAppend(&why,
                              " (this role speaks plaintext: if the server uses TLS, give this role the same "
                              "security.tls)");
            }
          }
          done(absl::DeadlineExceededError(absl::StrCat("deadline passed while waiting to connect to ", address, why)),
               {});
        });
  }

  std::shared_ptr<Peer> peer_;
};

// ---- server ----

// Serves one unary call: read the request, hand it to the Handler, write the
// answer whenever the handler responds (possibly later, from another thread).
// If gRPC cancels the call first (client deadline, server shutdown grace), the
// call is finished with CANCELLED at once and a later answer is dropped.
class UnaryReactor : public grpc::ServerGenericBidiReactor {
 public:
  // `token`: what every call must present (empty: nothing); refusals are
  // logged through `refused`.
  // `lanes`: the server's TCP lanes (null: none).
  UnaryReactor(grpc::GenericCallbackServerContext* context, pstrain::Handler* handler, const std::string& token,
               RefusedPeerLog* refused, ServerShm* shm, const TcpLaneServer* lanes)
      : context_(context), handler_(handler), shm_(shm), lanes_(lanes), guard_(std::make_shared<Guard>()) {
    if (!token.empty() && !Presents(token)) {
      refused->Refused(context_->peer(), "no or wrong token (security.token_file)");
      FinishOnce(grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                              "no or wrong token (security.token_file): this server does not answer the call"));
      return;
    }
    HandOff(this);
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    TakeBack(this);
    if (!ok) {
      FinishOnce(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no request message"));
      return;
    }
    const std::string& full = context_->method();
    if (full == kShmAttachMethod) return AnswerAttach();
    if (full == kTcpLaneAttachMethod) return AnswerTcpLaneAttach();
    if (full.rfind(kServicePrefix, 0) != 0) {
      FinishOnce(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, absl::StrCat("unknown service method ", full)));
      return;
    }
    absl::StatusOr<IncomingFrame> frame = ReadRequest();
    if (!frame.ok()) {
      FinishOnce(ToGrpcStatus(frame.status()));
      return;
    }
    std::shared_ptr<Guard> guard = guard_;
    handler_->Handle(std::string_view(full).substr(sizeof(kServicePrefix) - 1), *std::move(frame),
                     [this, guard](absl::Status status, OutgoingFrame response) {
                       if (!guard->Claim()) return;  // cancelled or already answered
                       if (!status.ok()) {
                         HandOff(this);
                         Finish(ToGrpcStatus(status));
                         return;
                       }
                       ServerShm::PutResponse(lane_.get(), response, *context_);
                       response_ = ToByteBuffer(std::move(response));
                       HandOff(this);
                       StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
                     });
  }

  // The request, its payload from the call's shared-memory lane when it names
  // a block there.
  absl::StatusOr<IncomingFrame> ReadRequest() {
    lane_ = shm_->LaneOf(context_->client_metadata());
    absl::StatusOr<Wire> wire = WireOf(request_);
    if (!wire.ok()) return wire.status();
    return ServerShm::ReadRequest(context_->client_metadata(), lane_.get(), std::move(wire->pieces),
                                  std::move(wire->keepalive));
  }

  // Serves kShmAttachMethod: the new lane's id in the trailing metadata, or
  // why the offer is refused.
  void AnswerAttach() {
    if (!guard_->Claim()) return;
    if (absl::Status attached = shm_->Attach(*context_); !attached.ok()) {
      HandOff(this);
      Finish(ToGrpcStatus(attached));
      return;
    }
    response_ = ToByteBuffer(OutgoingFrame());
    HandOff(this);
    StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
  }

  // Serves kTcpLaneAttachMethod: the lane's offer in the trailing metadata,
  // or UNIMPLEMENTED when this server has none.
  void AnswerTcpLaneAttach() {
    if (!guard_->Claim()) return;
    HandOff(this);
    if (lanes_ == nullptr) {
      Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no TCP lanes here (TLS, or PSTRAIN_GRPC_TCP_LANE=0)"));
      return;
    }
    context_->AddTrailingMetadata(kTcpLaneOfferKey, lanes_->offer().Encode());
    response_ = ToByteBuffer(OutgoingFrame());
    StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
  }

  // Whether the call's metadata carries `token`.
  bool Presents(const std::string& token) const {
    const auto& metadata = context_->client_metadata();
    auto it = metadata.find(kTokenMetadataKey);
    return it != metadata.end() && PresentsToken(std::string_view(it->second.data(), it->second.size()), token);
  }

  void OnCancel() override {
    TakeBack(this);
    FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "call cancelled before the server answered"));
  }
  void OnWriteDone(bool ok) override { TakeBack(this); }
  void OnDone() override {
    TakeBack(this);
    delete this;
  }

 private:
  // Whoever claims the guard first finishes the call; the reactor lives until
  // OnDone, which gRPC calls only after Finish.
  struct Guard {
    // True for the first caller only.
    bool Claim() { return !claimed.exchange(true); }
    std::atomic<bool> claimed{false};
  };
  void FinishOnce(const grpc::Status& status) {
    if (!guard_->Claim()) return;
    HandOff(this);
    Finish(status);
  }

  grpc::GenericCallbackServerContext* context_;
  pstrain::Handler* handler_;
  ServerShm* shm_;
  const TcpLaneServer* lanes_;
  std::shared_ptr<ShmLane> lane_;  // the call's shared-memory lane, if any
  std::shared_ptr<Guard> guard_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
};

class FrameService : public grpc::CallbackGenericService {
 public:
  // `lanes`: the server's TCP lanes (null: none); must outlive the service's calls.
  FrameService(pstrain::Handler* handler, std::string token, bool shared_memory, const TcpLaneServer* lanes)
      : handler_(handler), token_(std::move(token)), shm_(shared_memory, handler), lanes_(lanes) {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* context) override {
    return new UnaryReactor(context, handler_, token_, &refused_, &shm_, lanes_);
  }
  // Closes the shared-memory lanes: once gRPC has stopped, so no new ones come.
  void CloseLanes() { shm_.CloseLanes(); }

 private:
  pstrain::Handler* handler_;
  const std::string token_;
  RefusedPeerLog refused_;
  ServerShm shm_;
  const TcpLaneServer* const lanes_;
};

class GrpcServer : public Server {
 public:
  GrpcServer(std::unique_ptr<TcpLaneServer> lanes, std::unique_ptr<FrameService> service,
             std::unique_ptr<grpc::Server> server, int port)
      : lanes_(std::move(lanes)), service_(std::move(service)), server_(std::move(server)), port_(port) {}
  ~GrpcServer() override { Shutdown(absl::Seconds(1)); }

  int port() const override { return port_; }
  void Shutdown(absl::Duration grace) override {
    if (shut_down_) return;
    shut_down_ = true;
    server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
    server_->Wait();
    if (lanes_ != nullptr) lanes_->Close();
    service_->CloseLanes();
  }

 private:
  std::unique_ptr<TcpLaneServer> lanes_;  // outlives the service, which names it
  std::unique_ptr<FrameService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_;
  bool shut_down_ = false;
};

// gRPC 1.51 runs the callbacks of the callback API on a process-wide
// completion queue with threads of its own ("nexting" threads),
// reference-counted by the channels using it: when the last channel goes,
// the queue is shut down and deleted while its threads may still use it,
// and the next channel makes a new one. Channels destroyed while their
// connections fail (a refused TLS handshake, a plaintext peer), or transports
// made and destroyed one after another, run that teardown and abort inside
// gRPC ("ref_counted.h: assertion failed: prior > 0", SIGSEGV in
// grpc_completion_queue_next). So the first grpc transport of a process
// keeps one channel that has made a callback call (to 127.0.0.1:1, where
// nothing listens: it fails at once) for the process's lifetime: the queue
// is made once and never torn down before exit. (Reachable from a static,
// so leak checkers do not count it.)
void KeepCallbackQueueForTheProcess() {
  static Channel* const kept = [] {
    auto* channel = new GrpcChannel(grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials()),
                                    /*token=*/"", "127.0.0.1:1", /*tls=*/false);
    CallOptions options;
    options.deadline = absl::Now() + absl::Milliseconds(200);
    channel->CallSync("KeepAlive", OutgoingFrame(), options, nullptr).IgnoreError();
    return channel;
  }();
  (void)kept;
}

// security.tls.reload_seconds: the files, re-read by gRPC that often; a
// pair whose key does not match its certificate is not taken.
// A client without a certificate of its own watches the CA file only.
std::shared_ptr<grpc::experimental::CertificateProviderInterface> WatchFiles(const TransportSecurity& security) {
  if (security.cert_path.empty()) {
    return std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(security.ca_path,
                                                                                security.reload_seconds);
  }
  return std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      security.key_path, security.cert_path, security.ca_path, security.reload_seconds);
}

class GrpcTransport : public Transport {
 public:
  explicit GrpcTransport(const TransportOptions& options) : options_(options) { KeepCallbackQueueForTheProcess(); }

  absl::StatusOr<std::unique_ptr<Channel>> Connect(const std::string& address) override {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(ClampToInt(options_.max_message_bytes));
    args.SetMaxSendMessageSize(ClampToInt(options_.max_message_bytes));
    // Each channel gets its own TCP connection, so shards do not share one.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    SetBulkTransferArgs(options_, [&args](const char* key, int value) { args.SetInt(key, value); });
    const TransportSecurity& security = options_.security;
    std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
    if (security.tls && security.reload_seconds > 0) {
      grpc::experimental::TlsChannelCredentialsOptions tls;
      tls.set_certificate_provider(WatchFiles(security));
      tls.watch_root_certs();
      if (!security.cert_path.empty()) tls.watch_identity_key_cert_pairs();
      tls.set_verify_server_certs(true);
      credentials = grpc::experimental::TlsCredentials(tls);
    } else if (security.tls) {
      grpc::SslCredentialsOptions tls;
      tls.pem_root_certs = security.ca_pem;
      tls.pem_private_key = security.private_key_pem;
      tls.pem_cert_chain = security.cert_chain_pem;
      credentials = grpc::SslCredentials(tls);
    }
    if (security.tls && !security.server_name.empty()) args.SetSslTargetNameOverride(security.server_name);
    if (credentials == nullptr) return absl::InternalError(absl::StrCat("cannot create TLS credentials for ", address));
    auto channel = grpc::CreateCustomChannel(address, credentials, args);
    if (channel == nullptr) return absl::InvalidArgumentError(absl::StrCat("cannot create channel to ", address));
    return std::unique_ptr<Channel>(new GrpcChannel(std::move(channel), security.token, address, security.tls,
                                                    SharedMemoryHalfBytes(), TcpLanes(), options_.max_message_bytes));
  }

  absl::StatusOr<std::unique_ptr<Server>> Serve(const std::string& address, Handler* handler) override {
    const TransportSecurity& security = options_.security;
    std::unique_ptr<TcpLaneServer> lanes = ListenForTcpLanes(address, handler);
    auto service = std::make_unique<FrameService>(handler, security.token, SharedMemoryHalfBytes() > 0, lanes.get());
    std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
    const grpc_ssl_client_certificate_request_type client_certs =
        security.require_client_cert ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                     : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
    if (security.tls && security.reload_seconds > 0) {
      grpc::experimental::TlsServerCredentialsOptions tls(WatchFiles(security));
      tls.watch_root_certs();
      tls.watch_identity_key_cert_pairs();
      tls.set_cert_request_type(client_certs);
      credentials = grpc::experimental::TlsServerCredentials(tls);
    } else if (security.tls) {
      grpc::SslServerCredentialsOptions tls(client_certs);
      tls.pem_root_certs = security.ca_pem;
      tls.pem_key_cert_pairs.push_back({security.private_key_pem, security.cert_chain_pem});
      credentials = grpc::SslServerCredentials(tls);
    }
    if (credentials == nullptr) return absl::InternalError(absl::StrCat("cannot create TLS credentials for ", address));
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort(address, credentials, &port);
    builder.SetMaxReceiveMessageSize(ClampToInt(options_.max_message_bytes));
    builder.SetMaxSendMessageSize(ClampToInt(options_.max_message_bytes));
    builder.RegisterCallbackGenericService(service.get());
    SetBulkTransferArgs(options_, [&builder](const char* key, int value) { builder.AddChannelArgument(key, value); });
    std::unique_ptr<grpc::Server> server;
    {
      GrpcLogCapture capture;  // a bind failure is said once, below
      server = builder.BuildAndStart();
      if (server == nullptr || port == 0) {
        return absl::UnavailableError(
            absl::StrCat("cannot listen on ", address, ": ", ListenFailureCause(capture.text())));
      }
    }
    return std::unique_ptr<Server>(new GrpcServer(std::move(lanes), std::move(service), std::move(server), port));
  }

 private:
  // Each half of a channel's shared-memory lane; 0 (none) with TLS, which
  // keeps every byte inside the TLS session.
  size_t SharedMemoryHalfBytes() const { return options_.security.tls ? 0 : SharedMemoryHalfBytesFromEnvironment(); }
  // TCP lanes for large calls between hosts (tcp_lane_client.h); none with
  // TLS, which keeps every byte inside the TLS session.
  bool TcpLanes() const { return !options_.security.tls && TcpLanesFromEnvironment(); }
  // The server's TCP lanes on the host of `address`, or none (when off, or
  // when it cannot listen there: said once, and gRPC carries everything).
  std::unique_ptr<TcpLaneServer> ListenForTcpLanes(const std::string& address, Handler* handler) const {
    if (!TcpLanes()) return nullptr;
    absl::StatusOr<std::unique_ptr<TcpLaneServer>> lanes =
        TcpLaneServer::Listen(TcpLaneHostOf(address), handler, static_cast<uint64_t>(options_.max_message_bytes));
    if (lanes.ok()) return *std::move(lanes);
    LOG(WARNING) << "grpc: serving " << address << " without TCP lanes: " << lanes.status();
    return nullptr;
  }

  TransportOptions options_;
};

// gRPC carries TLS and the token (security.h); between processes of one host
// (one kernel and network namespace) large frames go through shared memory
// (grpc_shm.h) unless TLS is on.
const bool kRegistered =
    RegisterTransport("grpc", [](const TransportOptions& options) { return CreateGrpcTransport(options); },
                      {.security = true, .same_host_zero_copy = true});

}  // namespace

std::unique_ptr<Transport> CreateGrpcTransport(const TransportOptions& options) {
  RouteGrpcLogs();
  return std::make_unique<GrpcTransport>(options);
}

}  // namespace pstrain
