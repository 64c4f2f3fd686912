// An echo whose answer the caller wants received in place
// (CallOptions::receive_into), for the ucx tests on one host and across
// emulated hosts: which payload ranges landed where the caller said, before
// the answer was read.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/transport/transport_test_util.h"

namespace pstrain::testing_util {

// The payload ranges a call's receive_into was asked for and gave.
struct InPlaceRecord {
  std::mutex mu;
  std::map<uint64_t, size_t> placed;  // offset -> bytes
};

// A destination that places every range wholly inside `dst` (none when
// `place` is false), recording each in `record`.
inline PayloadDestination RecordedDestination(std::string* dst, bool place, InPlaceRecord* record) {
  return [dst, place, record](uint64_t offset, size_t bytes) -> void* {
    std::lock_guard<std::mutex> lock(record->mu);
    if (!place || offset > dst->size() || bytes > dst->size() - offset) return nullptr;
    record->placed[offset] = bytes;
    return dst->data() + offset;
  };
}

// Echoes chunks of `sizes` (a small one first, so part 0 holds payload too)
// with a destination that places every range wholly inside `dst` (the
// payload's size), unless `place` is false. Checks that the answer is whole,
// that each placed range held its bytes before the answer was read, and
// that reading it into `dst` leaves the payload there.
inline ::testing::AssertionResult InPlaceEcho(Channel& channel, const std::vector<size_t>& sizes, bool place,
                                              InPlaceRecord* record, absl::Duration timeout = absl::Seconds(60)) {
  std::string expected;
  OutgoingFrame request;
  request.header = "in place";
  uint32_t seed = 7;
  for (size_t size : sizes) {
    std::string bytes = Bytes(size, seed++);
    expected += bytes;
    request.chunks.push_back(OwnedChunk(std::move(bytes)));
  }
  std::string dst(expected.size(), '\0');
  CallOptions options;
  options.deadline = absl::Now() + timeout;
  options.receive_into = RecordedDestination(&dst, place, record);
  IncomingFrame response;
  absl::Status status = channel.CallSync("Echo", std::move(request), options, &response);
  if (!status.ok()) return ::testing::AssertionFailure() << status;
  if (response.header() != "in place") return ::testing::AssertionFailure() << "header " << response.header();
  if (response.payload_bytes() != expected.size()) {
    return ::testing::AssertionFailure() << response.payload_bytes() << " payload bytes, " << expected.size()
                                         << " sent";
  }
  std::lock_guard<std::mutex> lock(record->mu);
  for (const auto& [offset, bytes] : record->placed) {
    if (dst.compare(offset, bytes, expected, offset, bytes) != 0) {
      return ::testing::AssertionFailure()
             << "the range at payload offset " << offset << " (" << bytes << " bytes) was not received in place";
    }
  }
  if (absl::Status read = response.Read(dst.data(), dst.size()); !read.ok()) {
    return ::testing::AssertionFailure() << read;
  }
  if (dst != expected) return ::testing::AssertionFailure() << "the payload read in place differs";
  return ::testing::AssertionSuccess();
}

}  // namespace pstrain::testing_util
