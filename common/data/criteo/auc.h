// Click-prediction metrics over a whole evaluation set: ROC AUC and log loss.
//
// They live beside the Criteo reader (pstrain_data) rather than in
// common/metrics because the synthetic CTR generator computes its planted
// AUC with them, and pstrain_data does not link pstrain_metrics
// (docs/ARCHITECTURE.md); the worker, which links pstrain_data, can use
// them as they are.
#pragma once

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace pstrain::criteo {

// The area under the ROC curve of `scores` for `labels` (each 0 or 1): the
// probability that a random positive scores above a random negative, a tie
// counting 1/2 (Mann-Whitney U / (positives x negatives), ties given their
// average rank). Exact: pairs are counted in integers after one sort,
// O(n log n). INVALID_ARGUMENT for empty input, sizes that differ, a label
// other than 0 or 1, a NaN score, or labels of one class only.
absl::StatusOr<double> RocAuc(absl::Span<const double> scores, absl::Span<const float> labels);
absl::StatusOr<double> RocAuc(absl::Span<const float> scores, absl::Span<const float> labels);

// Mean binary cross-entropy -[y log p + (1 - y) log(1 - p)] with p clamped
// to [1e-7, 1 - 1e-7]. INVALID_ARGUMENT for empty input, sizes that differ,
// a label other than 0 or 1, or a probability outside [0, 1] (or NaN).
absl::StatusOr<double> LogLoss(absl::Span<const double> probabilities, absl::Span<const float> labels);

}  // namespace pstrain::criteo
