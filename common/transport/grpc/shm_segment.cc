#include "common/transport/grpc/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace pstrain {
namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

// "/pstrain-<pid>-<count>-<random>": unique within the host.
std::string FreshName() {
  static std::atomic<uint64_t> count{0};
  static const uint64_t salt = std::random_device{}();
  return absl::StrCat("/pstrain-", getpid(), "-", count.fetch_add(1), "-", absl::Hex(salt));
}

absl::StatusOr<char*> MapShared(int fd, size_t bytes, const std::string& name) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("shared memory ", name, ": mmap of ", bytes, " bytes failed: ", ErrnoText(errno)));
  }
  return static_cast<char*>(p);
}

}  // namespace

SharedSegment::SharedSegment(std::string name, int fd, char* data, size_t size, bool owner)
    : name_(std::move(name)), fd_(fd), data_(data), size_(size), linked_(owner) {}

SharedSegment::~SharedSegment() {
  munmap(data_, size_);
  close(fd_);
  Unlink();
}

absl::StatusOr<std::unique_ptr<SharedSegment>> SharedSegment::Create(size_t bytes) {
  const std::string name = FreshName();
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::FailedPreconditionError(absl::StrCat("shared memory: cannot create ", name, ": ", ErrnoText(errno)));
  }
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    close(fd);
    shm_unlink(name.c_str());
    return absl::ResourceExhaustedError(
        absl::StrCat("shared memory ", name, ": cannot size it to ", bytes, " bytes: ", ErrnoText(err)));
  }
  absl::StatusOr<char*> data = MapShared(fd, bytes, name);
  if (!data.ok()) {
    close(fd);
    shm_unlink(name.c_str());
    return data.status();
  }
  return std::unique_ptr<SharedSegment>(new SharedSegment(name, fd, *data, bytes, /*owner=*/true));
}

absl::StatusOr<std::unique_ptr<SharedSegment>> SharedSegment::Open(const std::string& name, size_t bytes) {
  if (name.size() < 2 || name[0] != '/' || name.find('/', 1) != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("shared memory: '", name, "' is not a segment name"));
  }
  const int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    return absl::FailedPreconditionError(absl::StrCat("shared memory: cannot open ", name, ": ", ErrnoText(errno)));
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat("shared memory ", name, ": not ", bytes, " bytes"));
  }
  absl::StatusOr<char*> data = MapShared(fd, bytes, name);
  if (!data.ok()) {
    close(fd);
    return data.status();
  }
  return std::unique_ptr<SharedSegment>(new SharedSegment(name, fd, *data, bytes, /*owner=*/false));
}

absl::Status SharedSegment::Commit(size_t offset, size_t bytes) {
  if (offset > size_ || bytes > size_ - offset) {
    return absl::OutOfRangeError(absl::StrCat("shared memory ", name_, ": commit past its end"));
  }
  const int err = posix_fallocate(fd_, static_cast<off_t>(offset), static_cast<off_t>(bytes));
  if (err != 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("shared memory ", name_, ": cannot commit ", bytes, " bytes: ", ErrnoText(err)));
  }
  return absl::OkStatus();
}

void SharedSegment::Unlink() {
  if (!linked_) return;
  linked_ = false;
  shm_unlink(name_.c_str());
}

std::string SharedMemoryHostIdentity() {
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  struct stat net;
  struct stat pid;
  if (boot_id.empty() || stat("/proc/self/ns/net", &net) != 0 || stat("/proc/self/ns/pid", &pid) != 0) return "";
  return absl::StrCat(boot_id, "/net:", net.st_ino, "/pid:", pid.st_ino);
}

}  // namespace pstrain
