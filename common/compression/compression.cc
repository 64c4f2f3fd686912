#include "common/compression/compression.h"

#include <cstring>

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pstrain {
namespace {

// Eigen's 16-bit types hold their bits in one uint16_t.
static_assert(sizeof(Eigen::half) == 2 && sizeof(Eigen::bfloat16) == 2);

template <typename Half>
void Encode(const float* src, size_t n, void* dst) {
  uint16_t* out = static_cast<uint16_t*>(dst);
  for (size_t i = 0; i < n; ++i) out[i] = Eigen::numext::bit_cast<uint16_t>(Half(src[i]));
}

// `src` may be unaligned (a transport's buffer): read bits with memcpy.
template <typename Half>
void Decode(const void* src, size_t n, float* dst) {
  const unsigned char* in = static_cast<const unsigned char*>(src);
  for (size_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, in + 2 * i, 2);
    dst[i] = static_cast<float>(Eigen::numext::bit_cast<Half>(bits));
  }
}

template <typename Half>
void AddDecoded(const void* src, size_t n, float* dst) {
  const unsigned char* in = static_cast<const unsigned char*>(src);
  for (size_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, in + 2 * i, 2);
    dst[i] += static_cast<float>(Eigen::numext::bit_cast<Half>(bits));
  }
}

template <typename Half>
void Add(const void* a, const void* b, size_t n, void* sum) {
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  uint16_t* out = static_cast<uint16_t*>(sum);
  for (size_t i = 0; i < n; ++i) {
    const float s = static_cast<float>(Eigen::numext::bit_cast<Half>(x[i])) +
                    static_cast<float>(Eigen::numext::bit_cast<Half>(y[i]));
    out[i] = Eigen::numext::bit_cast<uint16_t>(Half(s));
  }
}

}  // namespace

const std::vector<std::string>& CompressionNames() {
  static const auto* names = new std::vector<std::string>{"none", "fp16", "bf16", "topk"};
  return *names;
}

absl::StatusOr<Compression> ParseCompression(absl::string_view name) {
  if (name == "none") return Compression::kNone;
  if (name == "fp16") return Compression::kFp16;
  if (name == "bf16") return Compression::kBf16;
  if (name == "topk") return Compression::kTopK;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown compression '", name, "'; known: ", absl::StrJoin(CompressionNames(), ", ")));
}

WireDType DenseWireDType(Compression compression) {
  switch (compression) {
    case Compression::kFp16:
      return DT_FLOAT16;
    case Compression::kBf16:
      return DT_BFLOAT16;
    default:
      return DT_FLOAT32;
  }
}

size_t WireDTypeSize(WireDType dtype) {
  switch (dtype) {
    case DT_FLOAT32:
      return 4;
    case DT_FLOAT16:
    case DT_BFLOAT16:
      return 2;
    default:
      return 0;
  }
}

const char* WireDTypeElements(WireDType dtype) {
  switch (dtype) {
    case DT_FLOAT16:
      return "fp16 values";
    case DT_BFLOAT16:
      return "bf16 values";
    default:
      return "floats";
  }
}

void EncodeFloats(WireDType dtype, const float* src, size_t n, void* dst) {
  switch (dtype) {
    case DT_FLOAT16:
      return Encode<Eigen::half>(src, n, dst);
    case DT_BFLOAT16:
      return Encode<Eigen::bfloat16>(src, n, dst);
    default:
      std::memcpy(dst, src, n * sizeof(float));
  }
}

void DecodeFloats(WireDType dtype, const void* src, size_t n, float* dst) {
  switch (dtype) {
    case DT_FLOAT16:
      return Decode<Eigen::half>(src, n, dst);
    case DT_BFLOAT16:
      return Decode<Eigen::bfloat16>(src, n, dst);
    default:
      std::memcpy(dst, src, n * sizeof(float));
  }
}

void AddEncoded(WireDType dtype, const void* a, const void* b, size_t n, void* sum) {
  switch (dtype) {
    case DT_FLOAT16:
      return Add<Eigen::half>(a, b, n, sum);
    case DT_BFLOAT16:
      return Add<Eigen::bfloat16>(a, b, n, sum);
    default: {
      const float* x = static_cast<const float*>(a);
      const float* y = static_cast<const float*>(b);
      float* out = static_cast<float*>(sum);
      for (size_t i = 0; i < n; ++i) out[i] = x[i] + y[i];
    }
  }
}

void AddDecodedFloats(WireDType dtype, const void* src, size_t n, float* dst) {
  switch (dtype) {
    case DT_FLOAT16:
      return AddDecoded<Eigen::half>(src, n, dst);
    case DT_BFLOAT16:
      return AddDecoded<Eigen::bfloat16>(src, n, dst);
    default: {
      const unsigned char* in = static_cast<const unsigned char*>(src);
      for (size_t i = 0; i < n; ++i) {
        float v;
        std::memcpy(&v, in + 4 * i, 4);
        dst[i] += v;
      }
    }
  }
}

}  // namespace pstrain
