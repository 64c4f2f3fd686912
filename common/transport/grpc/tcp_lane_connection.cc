#include "common/transport/grpc/tcp_lane_connection.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "boost/asio/buffer.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/read.hpp"
#include "boost/asio/write.hpp"
#include "common/environment.h"

namespace pstrain {
namespace {

namespace asio = boost::asio;

TcpLaneMessage Encode(TcpLaneHeader header, std::string_view text, OutgoingFrame frame) {
  TcpLaneMessage message;
  std::vector<uint64_t> sizes;
  for (ConstChunk& chunk : frame.chunks) {
    if (chunk.size == 0) continue;
    sizes.push_back(chunk.size);
    header.payload_bytes += chunk.size;
    message.chunks.push_back(std::move(chunk));
  }
  header.text_bytes = static_cast<uint32_t>(text.size());
  header.frame_header_bytes = static_cast<uint32_t>(frame.header.size());
  header.num_chunks = static_cast<uint32_t>(sizes.size());
  message.head = header.Encode();
  message.head.append(EncodeTcpLaneMeta(text, frame.header, sizes));
  return message;
}

}  // namespace

TcpLaneMessage TcpLaneMessage::Request(uint64_t call_id, std::string_view method, OutgoingFrame frame) {
  TcpLaneHeader header;
  header.kind = TcpLaneKind::kRequest;
  header.call_id = call_id;
  return Encode(header, method.substr(0, kTcpLaneMaxTextBytes), std::move(frame));
}

TcpLaneMessage TcpLaneMessage::Answer(uint64_t call_id, const absl::Status& status, OutgoingFrame frame) {
  TcpLaneHeader header;
  header.kind = TcpLaneKind::kAnswer;
  header.call_id = call_id;
  header.status_code = static_cast<uint32_t>(status.code());
  if (!status.ok()) {
    const std::string text(status.message().substr(0, kTcpLaneMaxTextBytes));
    return Encode(header, text, OutgoingFrame());
  }
  return Encode(header, "", std::move(frame));
}

std::string TcpLaneHostOf(std::string_view address) {
  for (std::string_view scheme : {"ipv4:", "ipv6:", "dns:///", "dns:"}) {
    if (address.starts_with(scheme)) {
      address.remove_prefix(scheme.size());
      break;
    }
  }
  const size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) return "";
  std::string_view host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return std::string(host);
}

void SetTcpLaneSocketOptions(asio::ip::tcp::socket& socket) {
  boost::system::error_code ignored;
  socket.set_option(asio::ip::tcp::no_delay(true), ignored);
  socket.set_option(asio::socket_base::keep_alive(true), ignored);
  const int fd = socket.native_handle();
  const int idle = 10, interval = 5, count = 4;
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

TcpLaneConnection::TcpLaneConnection(asio::ip::tcp::socket socket, uint64_t max_payload_bytes)
    : socket_(std::move(socket)), max_payload_bytes_(max_payload_bytes) {}

void TcpLaneConnection::Split(const asio::any_io_executor& writer) {
  const int fd = ::dup(socket_.native_handle());
  boost::system::error_code error;
  writer_ = std::make_unique<asio::ip::tcp::socket>(writer);
  if (fd >= 0) writer_->assign(socket_.local_endpoint(error).protocol(), fd, error);
  if (fd < 0 || error) {
    if (fd >= 0 && !writer_->is_open()) ::close(fd);
    Break(absl::UnavailableError(
        absl::StrCat("TCP lane: cannot duplicate the socket: ", fd < 0 ? std::strerror(errno) : error.message())));
  }
}

void TcpLaneConnection::Send(TcpLaneMessage message) {
  asio::post(writer_->get_executor(), [self = shared_from_this(), m = std::move(message)]() mutable {
    if (self->broken()) return;
    self->queue_.push_back(std::move(m));
    if (!self->writing_) self->WriteNext();
  });
}

void TcpLaneConnection::Close(absl::Status why) { Break(std::move(why)); }

void TcpLaneConnection::Break(absl::Status why) {
  if (broken_.exchange(true)) return;
  // Fails the reads and writes in flight on both descriptors; each strand
  // then closes its own socket.
  ::shutdown(socket_.native_handle(), SHUT_RDWR);
  auto self = shared_from_this();
  if (writer_ != nullptr) {
    asio::post(writer_->get_executor(), [self] {
      self->queue_.clear();
      boost::system::error_code ignored;
      self->writer_->close(ignored);
    });
  }
  asio::post(socket_.get_executor(), [self, why = std::move(why)] {
    boost::system::error_code ignored;
    self->socket_.close(ignored);
    self->OnBroken(why);
  });
}

void TcpLaneConnection::Failed(const boost::system::error_code& error, const char* doing) {
  if (broken()) return;
  Break(absl::UnavailableError(absl::StrCat("TCP lane connection lost while ", doing, ": ", error.message())));
}

void TcpLaneConnection::StartReading() { ReadHeader(); }

// Reads exactly `size` bytes into `data`, then runs `done`. Before each
// read the socket is told to report readable only once min(rest, cap) bytes
// are queued (SO_RCVLOWAT): fewer wake-ups per megabyte, never more than the
// rest, so the last bytes of a message never wait for more.
template <typename Done>
void ReadFully(asio::ip::tcp::socket& socket, char* data, size_t size, Done done) {
  static const int64_t cap = IntFromEnvironment("PSTRAIN_LANE_LOWAT_KB", 256, "KiB", 0) * 1024;
  if (size == 0) return done(boost::system::error_code());
  if (cap > 0) {
    const int value = static_cast<int>(std::min<uint64_t>(size, cap));
    setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVLOWAT, &value, sizeof(value));
  }
  socket.async_read_some(asio::buffer(data, size), [&socket, data, size, done = std::move(done)](
                                                       const boost::system::error_code& error, size_t n) mutable {
    if (error) return done(error);
    ReadFully(socket, data + n, size - n, std::move(done));
  });
}

void TcpLaneConnection::ReadHeader() {
  ReadFully(
      socket_, header_bytes_, kTcpLaneHeaderBytes, [self = shared_from_this()](const boost::system::error_code& error) {
        if (error) return self->Failed(error, "reading a header");
        absl::StatusOr<TcpLaneHeader> header =
            TcpLaneHeader::Parse(std::string_view(self->header_bytes_, kTcpLaneHeaderBytes), self->max_payload_bytes_);
        if (!header.ok()) return self->Break(header.status());
        self->incoming_ = TcpLaneIncoming();
        self->incoming_.header = *header;
        self->ReadMeta();
      });
}

void TcpLaneConnection::ReadMeta() {
  meta_.resize(incoming_.header.meta_bytes());
  ReadFully(socket_, meta_.data(), meta_.size(), [self = shared_from_this()](const boost::system::error_code& error) {
    if (error) return self->Failed(error, "reading a message");
    TcpLaneIncoming& m = self->incoming_;
    const std::string_view meta(self->meta_);
    m.text = std::string(meta.substr(0, m.header.text_bytes));
    m.frame_header = std::string(meta.substr(m.header.text_bytes, m.header.frame_header_bytes));
    absl::StatusOr<std::vector<uint64_t>> sizes = ParseTcpLaneChunkSizes(
        meta.substr(m.header.text_bytes + m.header.frame_header_bytes), m.header.num_chunks, m.header.payload_bytes);
    if (!sizes.ok()) return self->Break(sizes.status());
    m.chunk_sizes = *std::move(sizes);
    if (absl::Status ready = self->OnHeader(m); !ready.ok()) return self->Break(ready);
    self->pieces_.clear();
    self->ReadChunk(0, 0);
  });
}

void TcpLaneConnection::ReadChunk(size_t index, uint64_t offset) {
  if (index == incoming_.chunk_sizes.size()) {
    OnMessage(std::move(incoming_), std::move(pieces_));
    pieces_.clear();
    if (!broken()) ReadHeader();
    return;
  }
  const uint64_t size = incoming_.chunk_sizes[index];
  char* place = Place(incoming_, index, offset);
  pieces_.push_back({place, size});
  ReadFully(socket_, place, size,
            [self = shared_from_this(), index, offset, size](const boost::system::error_code& error) {
              if (error) return self->Failed(error, "reading a payload");
              self->ReadChunk(index + 1, offset + size);
            });
}

void TcpLaneConnection::WriteNext() {
  if (broken() || queue_.empty()) {
    writing_ = false;
    return;
  }
  writing_ = true;
  const TcpLaneMessage& m = queue_.front();
  std::vector<asio::const_buffer> buffers;
  buffers.reserve(m.chunks.size() + 1);
  buffers.emplace_back(m.head.data(), m.head.size());
  for (const ConstChunk& chunk : m.chunks) buffers.emplace_back(chunk.data, chunk.size);
  asio::async_write(*writer_, buffers, [self = shared_from_this()](const boost::system::error_code& error, size_t) {
    if (error) return self->Failed(error, "writing");
    if (self->broken()) return;
    self->queue_.pop_front();
    self->WriteNext();
  });
}

}  // namespace pstrain
