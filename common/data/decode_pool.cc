#include "common/data/decode_pool.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "common/data/portable_random.h"

namespace pstrain {

struct DecodePool::Impl {
  explicit Impl(int threads) : pool(static_cast<size_t>(threads)) {}
  boost::asio::thread_pool pool;
};

DecodePool::DecodePool(int threads) : threads_(std::max(1, threads)), impl_(std::make_unique<Impl>(threads_)) {}

DecodePool::~DecodePool() { impl_->pool.join(); }

absl::Status DecodePool::Decode(const Dataset& data, absl::Span<const int64_t> indices,
                                absl::Span<const uint64_t> seeds, bool train, float* out, int32_t* labels) {
  const int64_t n = static_cast<int64_t>(indices.size());
  const int64_t example = ExampleSize(data);
  // Contiguous chunks, a few per thread so a slow image does not hold the rest.
  const int64_t chunks = std::min<int64_t>(n, int64_t{threads_} * 4);
  if (chunks == 0) return absl::OkStatus();
  absl::BlockingCounter done(static_cast<int>(chunks));
  absl::Mutex mu;
  absl::Status first;
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
    boost::asio::post(impl_->pool, [&, begin, end] {
      for (int64_t i = begin; i < end; ++i) {
        absl::StatusOr<int32_t> label = data.decoder->Decode(indices[i], seeds[i], train, out + i * example);
        if (!label.ok()) {
          absl::MutexLock lock(&mu);
          if (first.ok()) first = label.status();
          break;
        }
        labels[i] = *label;
      }
      done.DecrementCount();
    });
  }
  done.Wait();
  return first;
}

int DecodeThreads(int configured) {
  if (configured > 0) return configured;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

uint64_t DecodeSeed(uint64_t seed, int64_t epoch, int64_t example) {
  return DeriveSeed(DeriveSeed(seed ^ 0x6a09e667f3bcc908ULL, static_cast<uint64_t>(epoch)),
                    static_cast<uint64_t>(example));
}

}  // namespace pstrain
