#include "common/transport/shared_values.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/environment.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

// Address space reserved for the arena; only what is handed out is memory.
constexpr uint64_t kReservedBytes = uint64_t{64} << 30;
// Buffers start on cache lines (and so hold floats at aligned addresses).
constexpr uint64_t kAlignment = 64;
// Memory is committed in steps of this much, ahead of the buffers.
constexpr uint64_t kCommitStep = uint64_t{2} << 20;

uint64_t RoundUp(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

std::string ErrnoText(int err) { return std::strerror(err); }

// The arena's memfd, sized and sealed at that size, mapped read-write.
absl::StatusOr<std::pair<int, char*>> MakeArena(uint64_t bytes) {
  const int fd = memfd_create("pstrain-shared-values", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return absl::FailedPreconditionError(absl::StrCat("memfd_create: ", ErrnoText(errno)));
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
    const int err = errno;
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat("sizing the arena to ", bytes, " bytes: ", ErrnoText(err)));
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat("mapping the arena: ", ErrnoText(err)));
  }
  return std::make_pair(fd, static_cast<char*>(p));
}

}  // namespace

// Bytes handed out so far (a bump pointer), committed memory, and the
// buffers given back, by size.
struct SharedValues::Free {
  absl::Mutex mu;
  uint64_t next ABSL_GUARDED_BY(mu) = 0;
  uint64_t committed ABSL_GUARDED_BY(mu) = 0;
  absl::flat_hash_map<uint64_t, std::vector<uint64_t>> by_size ABSL_GUARDED_BY(mu);
};

SharedValues::SharedValues(int fd, char* data, uint64_t size)
    : fd_(fd), data_(data), size_(size), free_(std::make_unique<Free>()) {}

SharedValues* SharedValues::Get() {
  static SharedValues* const arena = []() -> SharedValues* {
    if (IntFromEnvironment("PSTRAIN_SHARED_VALUES", 1, "0 or 1", 0) == 0) return nullptr;
    absl::StatusOr<std::pair<int, char*>> made = MakeArena(kReservedBytes);
    if (!made.ok()) {
      LOG(WARNING) << "shared values: none in this process (" << made.status().message()
                   << "); colocated pulls are copied through their lane";
      return nullptr;
    }
    return new SharedValues(made->first, made->second, kReservedBytes);  // lives as long as the process
  }();
  return arena;
}

std::shared_ptr<Buffer> SharedValues::Allocate(size_t bytes) {
  const uint64_t size = RoundUp(std::max<uint64_t>(bytes, 1), kAlignment);
  uint64_t offset = 0;
  {
    absl::MutexLock lock(&free_->mu);
    auto it = free_->by_size.find(size);
    if (it != free_->by_size.end() && !it->second.empty()) {
      offset = it->second.back();
      it->second.pop_back();
    } else {
      if (size > size_ - free_->next) return nullptr;
      offset = free_->next;
      if (offset + size > free_->committed) {
        const uint64_t commit_to = std::min(size_, RoundUp(offset + size, kCommitStep));
        const int err = posix_fallocate(fd_, static_cast<off_t>(free_->committed),
                                        static_cast<off_t>(commit_to - free_->committed));
        if (err != 0) {
          LOG_FIRST_N(WARNING, 1) << "shared values: cannot commit " << commit_to - free_->committed << " bytes more ("
                                  << ErrnoText(err) << "); values go on the heap";
          return nullptr;
        }
        free_->committed = commit_to;
      }
      free_->next = offset + size;
    }
  }
  std::shared_ptr<void> give_back(nullptr, [this, offset, size](void*) { Release(offset, size); });
  return Buffer::Borrow(data_ + offset, bytes, std::move(give_back));
}

void SharedValues::Release(uint64_t offset, uint64_t bytes) {
  absl::MutexLock lock(&free_->mu);
  free_->by_size[bytes].push_back(offset);
}

std::optional<uint64_t> SharedValues::OffsetOf(const void* data, size_t bytes) const {
  // As addresses: `data` may point anywhere, not only into the arena.
  const uintptr_t p = reinterpret_cast<uintptr_t>(data), start = reinterpret_cast<uintptr_t>(data_);
  if (p < start || p - start > size_ || bytes > size_ - (p - start)) return std::nullopt;
  return static_cast<uint64_t>(p - start);
}

uint64_t SharedValues::committed() const {
  absl::MutexLock lock(&free_->mu);
  return free_->committed;
}

std::shared_ptr<Buffer> AllocateShareableValue(size_t bytes) {
  if (SharedValues* arena = SharedValues::Get(); arena != nullptr) {
    if (std::shared_ptr<Buffer> buffer = arena->Allocate(bytes); buffer != nullptr) return buffer;
  }
  return Buffer::AllocateUninitialized(bytes);
}

absl::StatusOr<std::unique_ptr<PeerValues>> PeerValues::Open(int64_t pid, int fd, uint64_t bytes) {
  const std::string path = absl::StrCat("/proc/", pid, "/fd/", fd);
  const int own = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (own < 0) return absl::FailedPreconditionError(absl::StrCat("shared values: open ", path, ": ", ErrnoText(errno)));
  struct stat st;
  if (fstat(own, &st) != 0 || static_cast<uint64_t>(st.st_size) != bytes || bytes == 0) {
    close(own);
    return absl::FailedPreconditionError(
        absl::StrCat("shared values: ", path, " is not an arena of ", bytes, " bytes"));
  }
  void* p = mmap(nullptr, bytes, PROT_READ, MAP_SHARED | MAP_NORESERVE, own, 0);
  const int err = errno;
  close(own);  // the mapping keeps the file
  if (p == MAP_FAILED) {
    return absl::FailedPreconditionError(absl::StrCat("shared values: mapping ", path, ": ", ErrnoText(err)));
  }
  return std::unique_ptr<PeerValues>(new PeerValues(static_cast<const char*>(p), bytes));
}

PeerValues::~PeerValues() { munmap(const_cast<char*>(data_), size_); }

absl::StatusOr<const char*> PeerValues::At(uint64_t offset, uint64_t bytes) const {
  if (offset > size_ || bytes > size_ - offset) {
    return absl::DataLossError(
        absl::StrCat("shared values: ", bytes, " bytes at ", offset, " lie outside the peer's arena of ", size_));
  }
  return data_ + offset;
}

}  // namespace pstrain
