// One example of the Criteo display-advertising format (Criteo's Kaggle and
// Terabyte click logs): a click label, 13 integer ("dense") features I1-I13
// and 26 categorical features C1-C26, any feature possibly missing.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

namespace pstrain::criteo {

inline constexpr int kNumDense = 13;
inline constexpr int kNumCategorical = 26;
// Tab-separated fields of a line: the label, then I1-I13, then C1-C26.
inline constexpr int kNumFields = 1 + kNumDense + kNumCategorical;

struct CriteoRecord {
  // 0 (not clicked) or 1 (clicked).
  float label = 0;
  // I1-I13; std::nullopt where the field was empty (missing).
  std::array<std::optional<int64_t>, kNumDense> dense;
  // C1-C26 as ids (the file writes 8 hexadecimal digits); std::nullopt where
  // the field was empty (missing).
  std::array<std::optional<uint64_t>, kNumCategorical> categorical;

  bool operator==(const CriteoRecord&) const = default;
};

}  // namespace pstrain::criteo
