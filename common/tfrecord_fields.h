// The fixed-width pieces of TensorFlow's TFRecord framing, shared by the
// TensorBoard event files (common/summary/record_io.h) and the TFRecord data
// files (common/data/records/record_format.h): little-endian 32- and 64-bit
// fields, and the masked CRC-32C each record carries for its length and its
// data.
#pragma once

#include <cstdint>

#include "absl/strings/string_view.h"
#include "common/durable_file.h"

namespace pstrain {

// The checksum a TFRecord stores: Crc32c(data) (common/durable_file.h)
// rotated right by 15 bits plus 0xa282ead8 (mod 2^32), so that the CRC of
// data that embeds CRCs stays strong.
inline uint32_t MaskedCrc32c(absl::string_view data) {
  const uint32_t crc = Crc32c(data.data(), data.size());
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

inline void EncodeFixed32(uint32_t v, char* out) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>(v >> (8 * i));
}

inline void EncodeFixed64(uint64_t v, char* out) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(v >> (8 * i));
}

inline uint32_t DecodeFixed32(const char* in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  return v;
}

inline uint64_t DecodeFixed64(const char* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  return v;
}

}  // namespace pstrain
