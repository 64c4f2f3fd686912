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

// Bytes per send() or recv() call, at most.
constexpr size_t kCallBytes = 2 << 20;
// A round's bytes come from and go into memory of the round's size, as a
// model's would, up to this much (then around again).
constexpr int64_t kMaxRoundMemory = int64_t{256} << 20;

}  // namespace

// The memory one connection's rounds are sent from and received into: one
// buffer each way, of a round's bytes (at most kMaxRoundMemory), written
// once so that no page fault is timed. Reusing one small scratch buffer
// instead would keep the bytes in the cache, which no model's bytes are.
struct RoundMemory {
  RoundMemory(int64_t send_bytes, int64_t receive_bytes)
      : out(static_cast<size_t>(std::clamp<int64_t>(send_bytes, 1, kMaxRoundMemory)), 1),
        in(static_cast<size_t>(std::clamp<int64_t>(receive_bytes, 1, kMaxRoundMemory)), 0) {}
  std::vector<char> out;
  std::vector<char> in;
};

namespace {
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
  RoundMemory* memory = nullptr;
  int64_t sent = 0;
  int64_t received = 0;
  bool done() const { return sent >= to_send && received >= to_receive; }
};

// How many bytes the next call moves at byte `done` of `total`, from or
// into `buffer` (so as not to run past its end).
size_t CallBytes(const std::vector<char>& buffer, int64_t done, int64_t total) {
  const int64_t offset = done % static_cast<int64_t>(buffer.size());
  return static_cast<size_t>(std::min<int64_t>(
      {static_cast<int64_t>(kCallBytes), total - done, static_cast<int64_t>(buffer.size()) - offset}));
}

// One step of `flow` after poll said `revents`: Aborted when the peer
// closed or reset the connection.
absl::Status Step(Flow& flow, short revents) {
  std::vector<char>& in = flow.memory->in;
  const std::vector<char>& out = flow.memory->out;
  if ((revents & (POLLIN | POLLHUP | POLLERR)) && flow.received < flow.to_receive) {
    const size_t want = CallBytes(in, flow.received, flow.to_receive);
    const ssize_t n = recv(flow.fd, in.data() + flow.received % in.size(), want, 0);
    if (n == 0) return absl::AbortedError("closed by the peer");
    if (n > 0) flow.received += n;
    if (n < 0 && errno != EAGAIN && errno != EINTR) return absl::AbortedError(strerror(errno));
  }
  if ((revents & (POLLOUT | POLLHUP | POLLERR)) && flow.sent < flow.to_send) {
    const size_t want = CallBytes(out, flow.sent, flow.to_send);
    const ssize_t n = send(flow.fd, out.data() + flow.sent % out.size(), want, MSG_NOSIGNAL);
    if (n > 0) flow.sent += n;
    if (n < 0 && errno != EAGAIN && errno != EINTR) return absl::AbortedError(strerror(errno));
  }
  return absl::OkStatus();
}

// Moves every flow's bytes at once (the content is whatever each flow's
// memory holds). On error `*bad` is the flow: Aborted (closed, reset),
// DeadlineExceeded (nothing moved for `idle`).
absl::Status Pump(std::vector<Flow>& flows, absl::Duration idle, size_t* bad) {
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
      if (absl::Status s = Step(flows[i], fds[i].revents); !s.ok()) return s;
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
  RoundMemory memory(static_cast<int64_t>(h.write_bytes), static_cast<int64_t>(h.read_bytes));
  size_t bad = 0;
  while (true) {
    std::vector<Flow> round = {{fd, h.write_after_read ? 0 : static_cast<int64_t>(h.write_bytes),
                                static_cast<int64_t>(h.read_bytes), &memory}};
    absl::Status s = Pump(round, kSinkIdle, &bad);
    if (s.ok() && h.write_after_read) {
      std::vector<Flow> ack = {{fd, static_cast<int64_t>(h.write_bytes), 0, &memory}};
      s = Pump(ack, kSinkIdle, &bad);
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
    source->memory_.push_back(std::make_unique<RoundMemory>(bytes[i], source->receive_.back()));
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
  for (size_t i = 0; i < fds_.size(); ++i) flows.push_back({fds_[i], send_[i], receive_[i], memory_[i].get()});
  size_t bad = 0;
  absl::Status s = Pump(flows, timeout, &bad);
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat("tcp to ", sinks_[bad], ": ", s.message()));
}

}  // namespace pstrain::bench
