// SharedValues: memory of this process that processes colocated with it may
// map read-only and read in place (a PS shard's variable values, which a
// worker on the same host then pulls with one copy, straight into its
// model, instead of a copy into a lane and another out of it).
//
// One arena per process: a sealed-size memfd (no name in /dev/shm, nothing
// left behind when the process dies), reserved large and sparse, its pages
// committed (fallocate) as buffers are first handed out, so an exhausted
// memory limit is a fall-back to the heap, never a SIGBUS. A peer opens it
// through /proc/<pid>/fd/<fd> (PeerValues; the same user, pid namespace and
// host, as a lane's peers are). Buffers go back to the arena when their last
// owner lets go and are reused for buffers of the same size (a shard's
// values come in few sizes, each allocated again and again).
//
// Contract with readers: a buffer lent to a peer (a pull answer through a
// lane, shm_lane.h) is owned by the lend until the peer gives it back, so
// the arena never hands it out again while the peer may read it; a value
// buffer is never written once published (ps/variable/shard_variable.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "common/tensor.h"

namespace pstrain {

class SharedValues {
 public:
  // This process's arena, made on first use; null when turned off
  // (PSTRAIN_SHARED_VALUES=0) or when it cannot be made here.
  static SharedValues* Get();

  // `bytes` of uninitialised arena memory at a 64-byte boundary, back in the
  // arena once the last owner lets go; null when the arena has no room (or
  // its memory cannot be committed): the caller allocates elsewhere.
  std::shared_ptr<Buffer> Allocate(size_t bytes);
  // Where [data, data + bytes) lies in the arena; nullopt unless wholly in it.
  std::optional<uint64_t> OffsetOf(const void* data, size_t bytes) const;

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }
  // Bytes of the arena committed so far (tests).
  uint64_t committed() const;

  SharedValues(const SharedValues&) = delete;
  SharedValues& operator=(const SharedValues&) = delete;

 private:
  struct Free;
  SharedValues(int fd, char* data, uint64_t size);
  void Release(uint64_t offset, uint64_t bytes);

  const int fd_;
  char* const data_;
  const uint64_t size_;
  std::unique_ptr<Free> free_;
};

// A value buffer for a CPU shard: from this process's SharedValues when there
// is one with room, else from the heap (uninitialised either way).
std::shared_ptr<Buffer> AllocateShareableValue(size_t bytes);

// Another process's SharedValues, mapped read-only.
class PeerValues {
 public:
  // Maps the arena process `pid` holds open as `fd`, `bytes` long.
  // FAILED_PRECONDITION naming what failed (no such descriptor, another
  // size, no permission).
  static absl::StatusOr<std::unique_ptr<PeerValues>> Open(int64_t pid, int fd, uint64_t bytes);
  ~PeerValues();
  PeerValues(const PeerValues&) = delete;
  PeerValues& operator=(const PeerValues&) = delete;

  // The bytes at [offset, offset + bytes); DATA_LOSS unless wholly inside.
  absl::StatusOr<const char*> At(uint64_t offset, uint64_t bytes) const;

 private:
  PeerValues(const char* data, uint64_t size) : data_(data), size_(size) {}
  const char* const data_;
  const uint64_t size_;
};

}  // namespace pstrain
