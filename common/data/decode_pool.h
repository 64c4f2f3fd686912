// DecodePool: decodes the examples of an encoded dataset (dataset.h) on a
// fixed set of threads. One pool serves every batcher and the evaluation of
// a worker; calls from several threads at once are fine.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/data/dataset.h"

namespace pstrain {

class DecodePool {
 public:
  // `threads` >= 1.
  explicit DecodePool(int threads);
  ~DecodePool();
  DecodePool(const DecodePool&) = delete;
  DecodePool& operator=(const DecodePool&) = delete;

  int threads() const { return threads_; }

  // Decodes data's examples `indices` (data.encoded()) into out (one
  // example_shape of floats each, in order) and labels; example i with
  // seeds[i] (DecodeSeed). Blocks until every example is done; returns the
  // first error. The output of each example depends only on its index,
  // seed and `train`, never on the number of threads.
  absl::Status Decode(const Dataset& data, absl::Span<const int64_t> indices, absl::Span<const uint64_t> seeds,
                      bool train, float* out, int32_t* labels);

 private:
  struct Impl;
  const int threads_;
  std::unique_ptr<Impl> impl_;
};

// The pool size for data.decode_threads: itself when > 0, else the
// processor's cores (at least 1).
int DecodeThreads(int configured);

// The augmentation seed of `example` in `epoch` of a run seeded `seed`.
uint64_t DecodeSeed(uint64_t seed, int64_t epoch, int64_t example);

}  // namespace pstrain
