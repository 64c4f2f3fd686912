// Buffer::Allocate: zero-filled and 64-byte aligned at every size; from
// kFreshPagesBytes up, pages of their own that take memory only where
// touched (what lets a byte-scaled emulated worker keep its real model's
// variables for nothing).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "common/tensor.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

// How many of the pages of [data, data + bytes) are in memory (mincore).
int64_t ResidentPages(const void* data, size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const auto start = reinterpret_cast<uintptr_t>(data) / page * page;
  const size_t length = reinterpret_cast<uintptr_t>(data) + bytes - start;
  std::vector<unsigned char> in_core((length + page - 1) / page);
  EXPECT_EQ(mincore(reinterpret_cast<void*>(start), length, in_core.data()), 0) << std::strerror(errno);
  int64_t resident = 0;
  for (unsigned char c : in_core) resident += c & 1;
  return resident;
}

TEST(BufferTest, AllocationsAreZeroAndAlignedOnBothSidesOfTheFreshPagesSize) {
  for (size_t bytes : {size_t{1}, size_t{4096}, Buffer::kFreshPagesBytes - 4, Buffer::kFreshPagesBytes,
                       Buffer::kFreshPagesBytes * 3 + 12}) {
    std::shared_ptr<Buffer> buffer = Buffer::Allocate(bytes);
    ASSERT_NE(buffer->data(), nullptr);
    EXPECT_EQ(buffer->size(), bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer->data()) % 64, 0u) << bytes;
    const auto* p = static_cast<const unsigned char*>(buffer->data());
    for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(p[i], 0) << bytes << " bytes, byte " << i;
    std::memset(buffer->data(), 0xab, bytes);  // all of it is writable
  }
}

TEST(BufferTest, LargeAllocationsTakeMemoryOnlyWherePagesAreWritten) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t bytes = 64 * Buffer::kFreshPagesBytes;
  std::shared_ptr<Buffer> buffer = Buffer::Allocate(bytes);
  EXPECT_EQ(ResidentPages(buffer->data(), bytes), 0);
  static_cast<char*>(buffer->data())[0] = 1;
  static_cast<char*>(buffer->data())[bytes - 1] = 1;
  // Two pages, or two huge pages where transparent huge pages back it.
  const int64_t resident = ResidentPages(buffer->data(), bytes);
  EXPECT_GE(resident, 2);
  EXPECT_LE(resident, 2 * static_cast<int64_t>((size_t{2} << 20) / page)) << "of " << bytes / page;
  // A tensor of that size is built on such a buffer.
  Tensor t(Shape{static_cast<int64_t>(bytes / sizeof(float))});
  EXPECT_EQ(ResidentPages(t.raw(), t.num_bytes()), 0);
  EXPECT_EQ(t.data()[t.num_elements() / 2], 0.0f);  // reading maps no page of its own
}

}  // namespace
}  // namespace pstrain
