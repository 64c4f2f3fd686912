// Gradient (and value) compression on the wire: the config's `compression`.
//
//   none  float32, as computed
//   fp16  IEEE half precision (1 sign, 5 exponent, 10 mantissa bits)
//   bf16  bfloat16 (the float32 exponent, 7 mantissa bits)
//   topk  the topk_ratio share of each gradient's elements largest in
//         magnitude, as (index, float32 value) pairs, with error feedback:
//         what was not sent is added to the next gradient (topk.h)
// fp16 and bf16 halve the bytes of PS pushes and pulls and of all-reduce
// buffers; topk cuts pushes to about 2 x topk_ratio of their size (an index
// beside each value). Parameter servers keep float32 values and optimizer
// state whatever travels. Conversions round to nearest even (Eigen's half
// and bfloat16); values beyond fp16's range become infinities, as in every
// framework's fp16 compression.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/registry.h"
#include "proto/ps.pb.h"

namespace pstrain {

enum class Compression { kNone, kFp16, kBf16, kTopK };

// Compression methods by config name, each registered where its encoding
// lives (none, fp16, bf16: compression.cc; topk: topk.cc). Config
// validation takes the allowed `compression` values from it.
struct CompressionEntry {
  Compression method = Compression::kNone;
  // One line for documentation and messages.
  std::string summary;
};
Registry<CompressionEntry>& CompressionRegistry();

// The registered names, sorted.
std::vector<std::string> CompressionNames();
// InvalidArgument listing the names for anything else.
absl::StatusOr<Compression> ParseCompression(absl::string_view name);
// The wire dtype dense values travel in: DT_FLOAT16 for fp16, DT_BFLOAT16 for
// bf16, DT_FLOAT32 otherwise (top-k sends float32 values).
WireDType DenseWireDType(Compression compression);

// Bytes per element of `dtype` (4 or 2); 0 for a value this build does not
// know (a newer peer's).
size_t WireDTypeSize(WireDType dtype);
// True when fp16 conversions run on the processor's F16C instructions
// (detected at run time; otherwise in software, with the same results).
bool HardwareHalfConversion();

// "floats", "fp16 values" or "bf16 values", for messages.
const char* WireDTypeElements(WireDType dtype);

// Converts n floats to `dtype` (DT_FLOAT16 or DT_BFLOAT16; DT_FLOAT32 copies)
// into dst, which holds n * WireDTypeSize(dtype) bytes. With n == 0 nothing
// is read or written (src and dst may be null: an empty push).
void EncodeFloats(WireDType dtype, const float* src, size_t n, void* dst);
// The reverse: n elements of `dtype` at src (any alignment) to floats; as
// above, n == 0 touches nothing.
void DecodeFloats(WireDType dtype, const void* src, size_t n, float* dst);
// dst[i] += decoded src[i], for summing 16-bit gradients without a float copy.
void AddDecodedFloats(WireDType dtype, const void* src, size_t n, float* dst);
// sum[i] = a[i] + b[i] for n elements of `dtype`, each sum computed in float
// and rounded to dtype (the reduction of 16-bit all-reduces); sum may alias
// a or b.
void AddEncoded(WireDType dtype, const void* a, const void* b, size_t n, void* sum);

}  // namespace pstrain
