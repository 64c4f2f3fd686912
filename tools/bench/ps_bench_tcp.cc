#include "tools/bench/ps_bench_tcp.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/host_port.h"
#include "glog/logging.h"

namespace pstrain::bench {
namespace {

constexpr size_t kScratchBytes = 2 << 20;
// A sink waits this long for a round's bytes (the source may sit at a
// meeting between its warm-up and its timed rounds).
constexpr absl::Duration kSinkIdle = absl::Seconds(600);

// What a sink does per round: read `read_bytes`, write `write_bytes` (at the
// same time, or once the round is read when `write_after_read`).
struct Header {
  uint64_t read_bytes = 0;
  uint64_t write_bytes = 0;
  uint64_t write_after_read = 0;
};
constexpr size_t kHeaderBytes = 3 * sizeof(uint64_t);

void PutU64(uint64_t v, char* out) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint64_t GetU64(const char* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  return v;
}

absl::StatusOr<sockaddr_in> ParseIpv4(const std::string& address) {
  absl::StatusOr<HostPort> hp = ParseHostPort(address);
  if (!hp.ok()) return hp.status();
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(hp->port));
  if (inet_pton(AF_INET, hp->host.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("tcp: '", address, "' is not an IPv4 address and port"));
  }
  return addr;
}

absl::Status Errno(const std::string& what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", strerror(errno)));
}

void SetNoDelayNonBlocking(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

// Bytes one connection still moves this round.
struct Flow {
  int fd = -1;
  int64_t to_send = 0;
  int64_t to_receive = 0;
  int64_t sent = 0;
  int64_t received = 0;
  bool done() const { return sent >= to_send && received >= to_receive; }
};

// One step of `flow` after poll said `revents`: Aborted when the peer
// closed or reset the connection.
absl::Status Step(Flow& flow, short revents, std::vector<char>& scratch) {
  if ((revents & (POLLIN | POLLHUP | POLLERR)) && flow.received < flow.to_receive) {
    const size_t want = std::min<int64_t>(scratch.size(), flow.to_receive - flow.received);
    const ssize_t n = recv(flow.fd, scratch.data(), want, 0);
    if (n == 0) return absl::AbortedError("closed by the peer");
    if (n > 0) flow.received += n;
    if (n < 0 && errno != EAGAIN && errno != EINTR) return absl::AbortedError(strerror(errno));
  }
  if ((revents & (POLLOUT | POLLHUP | POLLERR)) && flow.sent < flow.to_send) {
    const size_t want = std::min<int64_t>(scratch.size(), flow.to_send - flow.sent);
    const ssize_t n = send(flow.fd, scratch.data(), want, MSG_NOSIGNAL);
    if (n > 0) flow.sent += n;
    if (n < 0 && errno != EAGAIN && errno != EINTR) return absl::AbortedError(strerror(errno));
  }
  return absl::OkStatus();
}

// Moves every flow's bytes at once (the content is whatever `scratch`
// holds). On error `*bad` is the flow: Aborted (closed, reset),
// DeadlineExceeded (nothing moved for `idle`).
absl::Status Pump(std::vector<Flow>& flows, absl::Duration idle, std::vector<char>& scratch, size_t* bad) {
  std::vector<pollfd> fds(flows.size());
  const int idle_ms = static_cast<int>(absl::ToInt64Milliseconds(idle));
  while (true) {
    bool pending = false;
    for (size_t i = 0; i < flows.size(); ++i) {
      const Flow& f = flows[i];
      const short events = (f.sent < f.to_send ? POLLOUT : 0) | (f.received < f.to_receive ? POLLIN : 0);
      fds[i] = {events != 0 ? f.fd : -1, events, 0};
      pending = pending || events != 0;
    }
    if (!pending) return absl::OkStatus();
    const int ready = poll(fds.data(), fds.size(), idle_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return Errno("poll");
    for (size_t i = 0; i < flows.size(); ++i) {
      *bad = i;
      if (ready == 0 && !flows[i].done()) {
        return absl::DeadlineExceededError(absl::StrCat("nothing moved for ", absl::FormatDuration(idle)));
      }
      if (absl::Status s = Step(flows[i], fds[i].revents, scratch); !s.ok()) return s;
    }
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpSink>> TcpSink::Listen(const std::string& address) {
  absl::StatusOr<sockaddr_in> addr = ParseIpv4(address);
  if (!addr.ok()) return addr.status();
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("tcp sink: socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) != 0 || listen(fd, 64) != 0) {
    const absl::Status error = Errno(absl::StrCat("tcp sink: listen on ", address));
    close(fd);
    return error;
  }
  std::unique_ptr<TcpSink> sink(new TcpSink(fd));
  sink->acceptor_ = std::thread([s = sink.get()] { s->AcceptLoop(); });
  return sink;
}

TcpSink::~TcpSink() {
  std::vector<std::thread> servers;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
    for (int fd : connections_) shutdown(fd, SHUT_RDWR);
  }
  acceptor_.join();
  {
    absl::MutexLock lock(&mu_);
    servers.swap(servers_);
  }
  for (std::thread& t : servers) t.join();
  absl::MutexLock lock(&mu_);
  for (int fd : connections_) close(fd);
  close(listen_fd_);
}

void TcpSink::AcceptLoop() {
  while (true) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0 && (errno == EINTR || errno == ECONNABORTED)) continue;
    absl::MutexLock lock(&mu_);
    if (fd < 0 || stopping_) {
      if (fd >= 0) close(fd);
      return;
    }
    connections_.push_back(fd);
    servers_.emplace_back([this, fd] { Serve(fd); });
  }
}

// The header, then rounds until the source closes between two rounds.
void TcpSink::Serve(int fd) {
  char raw[kHeaderBytes];
  if (recv(fd, raw, sizeof(raw), MSG_WAITALL) != static_cast<ssize_t>(sizeof(raw))) return;
  const Header h{GetU64(raw), GetU64(raw + 8), GetU64(raw + 16)};
  SetNoDelayNonBlocking(fd);
  std::vector<char> scratch(kScratchBytes);
  size_t bad = 0;
  while (true) {
    std::vector<Flow> round = {
        {fd, h.write_after_read ? 0 : static_cast<int64_t>(h.write_bytes), static_cast<int64_t>(h.read_bytes)}};
    absl::Status s = Pump(round, kSinkIdle, scratch, &bad);
    if (s.ok() && h.write_after_read) {
      std::vector<Flow> ack = {{fd, static_cast<int64_t>(h.write_bytes), 0}};
      s = Pump(ack, kSinkIdle, scratch, &bad);
    }
    if (s.ok()) continue;
    // The source closing before it sent a round's first byte is its end.
    if (!(absl::IsAborted(s) && round[0].received == 0)) LOG(WARNING) << "tcp sink: " << s;
    return;
  }
}

absl::StatusOr<std::unique_ptr<TcpSource>> TcpSource::Connect(const std::vector<std::string>& sinks,
                                                              const std::vector<int64_t>& bytes, bool both_directions,
                                                              absl::Duration timeout) {
  std::unique_ptr<TcpSource> source(new TcpSource);
  source->scratch_.resize(kScratchBytes);
  const absl::Time deadline = absl::Now() + timeout;
  for (size_t i = 0; i < sinks.size(); ++i) {
    if (bytes[i] <= 0) continue;  // a sink with nothing to carry
    absl::StatusOr<sockaddr_in> addr = ParseIpv4(sinks[i]);
    if (!addr.ok()) return addr.status();
    int fd = -1;
    while (true) {
      fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) return Errno("tcp source: socket");
      if (connect(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) == 0) break;
      const int connect_errno = errno;
      const absl::Status error = Errno(absl::StrCat("tcp source: connect to ", sinks[i]));
      close(fd);
      if (connect_errno != ECONNREFUSED || absl::Now() >= deadline) return error;
      absl::SleepFor(absl::Milliseconds(20));  // its sink is not listening yet
    }
    source->fds_.push_back(fd);
    source->sinks_.push_back(sinks[i]);
    source->send_.push_back(bytes[i]);
    source->receive_.push_back(both_directions ? bytes[i] : 8);
    char raw[kHeaderBytes];
    PutU64(bytes[i], raw);
    PutU64(source->receive_.back(), raw + 8);
    PutU64(both_directions ? 0 : 1, raw + 16);
    if (send(fd, raw, sizeof(raw), MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(raw))) {
      return Errno(absl::StrCat("tcp source: header to ", sinks[i]));
    }
    SetNoDelayNonBlocking(fd);
  }
  return source;
}

TcpSource::~TcpSource() {
  for (int fd : fds_) close(fd);
}

absl::Status TcpSource::Round(absl::Duration timeout) {
  std::vector<Flow> flows;
  for (size_t i = 0; i < fds_.size(); ++i) flows.push_back({fds_[i], send_[i], receive_[i]});
  size_t bad = 0;
  absl::Status s = Pump(flows, timeout, scratch_, &bad);
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat("tcp to ", sinks_[bad], ": ", s.message()));
}

}  // namespace pstrain::bench
