// SharedSegment: one POSIX shared-memory file, mapped into this process.
//
// The side that creates a segment gives it a fresh name and a size; the
// file is sparse (no memory is used until a writer commits a range), and the
// creator unlinks the name once its peer has opened it, so nothing stays in
// /dev/shm after both have closed it. Writers commit (posix_fallocate) the
// ranges they are about to write, so a full /dev/shm is an error at Commit,
// not a SIGBUS at the first touch.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pstrain {

class SharedSegment {
 public:
  // A new segment of `bytes` under a fresh name, readable and writable by
  // this user only.
  static absl::StatusOr<std::unique_ptr<SharedSegment>> Create(size_t bytes);
  // The segment `name` that a peer created; FAILED_PRECONDITION unless it
  // exists here with exactly `bytes`.
  static absl::StatusOr<std::unique_ptr<SharedSegment>> Open(const std::string& name, size_t bytes);
  ~SharedSegment();
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  const std::string& name() const { return name_; }
  char* data() const { return data_; }
  size_t size() const { return size_; }

  // Backs [offset, offset + bytes) with memory; RESOURCE_EXHAUSTED when the
  // file system has no room (nothing is touched then). Thread-safe.
  absl::Status Commit(size_t offset, size_t bytes);
  // Removes the name (mappings stay valid); safe to call more than once.
  void Unlink();

 private:
  SharedSegment(std::string name, int fd, char* data, size_t size, bool owner);

  std::string name_;
  int fd_;
  char* data_;
  size_t size_;
  bool linked_;  // this side created the name and has not unlinked it yet
};

// Who "this host" is for shared memory: the kernel's boot id and this
// process's network and pid namespaces. Two processes may share a segment
// only when both agree; emulated hosts (network namespaces of one kernel) do
// not, so traffic between them keeps crossing their links. (The pid
// namespace lets a server tell when a client process has gone.)
std::string SharedMemoryHostIdentity();

}  // namespace pstrain
