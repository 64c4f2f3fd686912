// TcpLaneConnection: one end of a TCP lane (tcp_lane_wire.h), the socket and
// the order of its bytes, shared by the client's end (tcp_lane_client.h) and
// the server's (tcp_lane_server.h).
//
// Messages are written whole and in the order given, each straight from its
// chunks (one gathered write: no copy into a buffer of ours). Messages are
// read one after another: the fixed header, the meta bytes, then each
// payload chunk straight into the memory the end names for it (Place).
// Reading runs on the socket's strand; once the connection is up (Split),
// writing runs on a strand of its own over a second descriptor of the same
// connection, so one end sends and receives at once on two threads, and
// neither direction ever waits for the other.
//
// The first error (a lost connection, a malformed message, Close) breaks the
// connection for good: queued messages are dropped and OnBroken runs once,
// on the reading strand.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "boost/asio/ip/tcp.hpp"
#include "common/transport/frame.h"
#include "common/transport/grpc/tcp_lane_wire.h"

namespace pstrain {

// A message to send: its fixed header and meta bytes, then its payload
// chunks, kept alive until written.
struct TcpLaneMessage {
  std::string head;
  std::vector<ConstChunk> chunks;

  static TcpLaneMessage Request(uint64_t call_id, std::string_view method, OutgoingFrame frame);
  // `frame` is sent only with an OK status; otherwise the status's message.
  static TcpLaneMessage Answer(uint64_t call_id, const absl::Status& status, OutgoingFrame frame);
};

// A message received, up to its payload.
struct TcpLaneIncoming {
  TcpLaneHeader header;
  std::string text;
  std::string frame_header;
  std::vector<uint64_t> chunk_sizes;
};

// The host of "host:port", "[v6]:port" or "ipv4:host:port" (gRPC's forms);
// empty when `address` has no port.
std::string TcpLaneHostOf(std::string_view address);

// Socket options of both ends: no Nagle (a small answer goes at once) and
// keepalive probes that break a connection to a vanished peer within about
// 30 s.
void SetTcpLaneSocketOptions(boost::asio::ip::tcp::socket& socket);

class TcpLaneConnection : public std::enable_shared_from_this<TcpLaneConnection> {
 public:
  // `socket`: on a strand of its own (the reading strand), connected by the
  // time it is used. Payloads over `max_payload_bytes` are malformed.
  TcpLaneConnection(boost::asio::ip::tcp::socket socket, uint64_t max_payload_bytes);
  virtual ~TcpLaneConnection() = default;
  TcpLaneConnection(const TcpLaneConnection&) = delete;
  TcpLaneConnection& operator=(const TcpLaneConnection&) = delete;

  // Queues `message`; thread-safe. Dropped once the connection is broken.
  void Send(TcpLaneMessage message);
  // Breaks the connection with `why` (if it was not already); thread-safe.
  void Close(absl::Status why);

 protected:
  // The reading socket; before Split, the only one.
  boost::asio::ip::tcp::socket& socket() { return socket_; }
  bool broken() const { return broken_.load(); }
  // Once connected, before the first Send: gives writing a descriptor and a
  // strand of its own (on `writer`). Breaks the connection when the
  // descriptor cannot be duplicated. On the reading strand.
  void Split(const boost::asio::any_io_executor& writer);
  // Reads messages until the connection breaks. On the reading strand, once.
  void StartReading();
  // Breaks the connection (if it was not already); thread-safe.
  void Break(absl::Status why);

  // On the strand. A message's header and meta bytes have arrived: an error
  // breaks the connection with it.
  virtual absl::Status OnHeader(const TcpLaneIncoming& message) = 0;
  // Where chunk `index` (at `offset` of the payload) goes: memory of
  // chunk_sizes[index] bytes, never null.
  virtual char* Place(const TcpLaneIncoming& message, size_t index, uint64_t offset) = 0;
  // The whole message; `pieces` are the chunks where Place put them.
  virtual void OnMessage(TcpLaneIncoming message, std::vector<IncomingFrame::Piece> pieces) = 0;
  // Once, when the connection breaks.
  virtual void OnBroken(const absl::Status& why) = 0;

 private:
  void ReadHeader();
  void ReadMeta();
  void ReadChunk(size_t index, uint64_t offset);
  void WriteNext();
  // Breaks the connection for a failed read or write, unless broken already.
  void Failed(const boost::system::error_code& error, const char* doing);

  boost::asio::ip::tcp::socket socket_;                   // reads (and, before Split, the greeting)
  std::unique_ptr<boost::asio::ip::tcp::socket> writer_;  // set by Split
  const uint64_t max_payload_bytes_;
  std::atomic<bool> broken_{false};
  // On the writing strand:
  bool writing_ = false;
  std::deque<TcpLaneMessage> queue_;
  // On the reading strand:
  char header_bytes_[kTcpLaneHeaderBytes];
  std::string meta_;
  TcpLaneIncoming incoming_;
  std::vector<IncomingFrame::Piece> pieces_;
};

}  // namespace pstrain
