#include "common/compression/compression.h"

#include <cstring>
#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pstrain {
namespace {

// Eigen's 16-bit types hold their bits in one uint16_t.
static_assert(sizeof(Eigen::half) == 2 && sizeof(Eigen::bfloat16) == 2);

// IEEE half precision in hardware (F16C, with AVX): eight conversions per
// instruction, rounding to nearest even as Eigen's software conversion does
// (the same bits; compression_test checks). Chosen at run time: F16C is not
// assumed.
#if defined(__x86_64__)
bool HasF16C() {
  // "avx" also says the OS saves the vector registers; F16C from CPUID leaf 1
  // (clang's __builtin_cpu_supports does not know "f16c").
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __builtin_cpu_supports("avx") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  }();
  return has;
}

__attribute__((target("avx,f16c"))) void EncodeHalfF16C(const float* src, size_t n, uint16_t* dst) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = Eigen::numext::bit_cast<uint16_t>(Eigen::half(src[i]));
}

__attribute__((target("avx,f16c"))) void DecodeHalfF16C(const unsigned char* src, size_t n, float* dst) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i))));
  }
  for (; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, src + 2 * i, 2);
    dst[i] = static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(bits));
  }
}

// sum = a + b, each addition in float rounded to half, 8 at a time.
__attribute__((target("avx,f16c"))) void AddHalfF16C(const uint16_t* a, const uint16_t* b, size_t n, uint16_t* sum) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
    const __m256 y = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(sum + i),
                     _mm256_cvtps_ph(_mm256_add_ps(x, y), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; i < n; ++i) {
    const float s = static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(a[i])) +
                    static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(b[i]));
    sum[i] = Eigen::numext::bit_cast<uint16_t>(Eigen::half(s));
  }
}
#else
bool HasF16C() { return false; }
void EncodeHalfF16C(const float*, size_t, uint16_t*) {}
void DecodeHalfF16C(const unsigned char*, size_t, float*) {}
void AddHalfF16C(const uint16_t*, const uint16_t*, size_t, uint16_t*) {}
#endif

// bfloat16 is the upper half of a float: round to nearest even with integer
// arithmetic and keep NaNs quiet NaNs of the same sign (Eigen's bits;
// compression_test checks). Branch-free, so the loops vectorise.
inline uint16_t FloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t nan = (u & 0x80000000u) != 0 ? 0xFFC0u : 0x7FC0u;
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>((u & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded);
}

inline float Bf16ToFloat(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

void EncodeBf16(const float* src, size_t n, uint16_t* dst) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) dst[i] = FloatToBf16(src[i]);
}

void DecodeBf16(const unsigned char* src, size_t n, float* dst) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, src + 2 * i, 2);
    dst[i] = Bf16ToFloat(bits);
  }
}

void AddBf16(const uint16_t* a, const uint16_t* b, size_t n, uint16_t* sum) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) sum[i] = FloatToBf16(Bf16ToFloat(a[i]) + Bf16ToFloat(b[i]));
}

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

Registry<CompressionEntry>& CompressionRegistry() {
  static auto* registry = new Registry<CompressionEntry>("compression");
  return *registry;
}

std::vector<std::string> CompressionNames() { return CompressionRegistry().Names(); }

absl::StatusOr<Compression> ParseCompression(absl::string_view name) {
  absl::StatusOr<CompressionEntry> entry = CompressionRegistry().Find(name);
  if (!entry.ok()) return absl::InvalidArgumentError(entry.status().message());
  return entry->method;
}

namespace {

const bool kRegistered =
    CompressionRegistry().Register("none", {Compression::kNone, "float32, as computed"}) &&
    CompressionRegistry().Register("fp16", {Compression::kFp16, "IEEE half precision: half the bytes"}) &&
    CompressionRegistry().Register("bf16", {Compression::kBf16, "bfloat16 (float32's exponent): half the bytes"});

}  // namespace

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

bool HardwareHalfConversion() { return HasF16C(); }

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
  if (n == 0) return;  // an empty vector's data() may be null, which memcpy must not get
  switch (dtype) {
    case DT_FLOAT16:
      if (HasF16C()) return EncodeHalfF16C(src, n, static_cast<uint16_t*>(dst));
      return Encode<Eigen::half>(src, n, dst);
    case DT_BFLOAT16:
      return EncodeBf16(src, n, static_cast<uint16_t*>(dst));
    default:
      std::memcpy(dst, src, n * sizeof(float));
  }
}

void DecodeFloats(WireDType dtype, const void* src, size_t n, float* dst) {
  if (n == 0) return;
  switch (dtype) {
    case DT_FLOAT16:
      if (HasF16C()) return DecodeHalfF16C(static_cast<const unsigned char*>(src), n, dst);
      return Decode<Eigen::half>(src, n, dst);
    case DT_BFLOAT16:
      return DecodeBf16(static_cast<const unsigned char*>(src), n, dst);
    default:
      std::memcpy(dst, src, n * sizeof(float));
  }
}

void AddEncoded(WireDType dtype, const void* a, const void* b, size_t n, void* sum) {
  switch (dtype) {
    case DT_FLOAT16:
      if (HasF16C()) {
        return AddHalfF16C(static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b), n,
                           static_cast<uint16_t*>(sum));
      }
      return Add<Eigen::half>(a, b, n, sum);
    case DT_BFLOAT16:
      return AddBf16(static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b), n, static_cast<uint16_t*>(sum));
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
