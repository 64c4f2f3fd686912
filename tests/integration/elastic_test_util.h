// Checks shared by the elastic integration tests (PS and all-reduce): the
// data ledger's counts in result.json and the membership record.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/metrics/result_json.h"
#include "gtest/gtest.h"

namespace pstrain::test {

// Every epoch trained exactly once, the last one included, and the run's
// examples in all. A run of train.epochs is whole epochs; one of
// train.steps ends part-way through its last (the examples of its steps).
inline void ExpectEveryExampleOnce(const LedgerReport& ledger, bool whole_epochs = true) {
  ASSERT_GT(ledger.examples_done_size(), 0);
  if (whole_epochs) {
    ASSERT_EQ(ledger.total_examples() % ledger.examples_per_epoch(), 0);
  }
  int64_t done = 0;
  for (int e = 0; e < ledger.examples_done_size(); ++e) {
    done += ledger.examples_done(e);
    const int64_t planned =
        std::min(ledger.examples_per_epoch(), ledger.total_examples() - int64_t{e} * ledger.examples_per_epoch());
    EXPECT_EQ(ledger.examples_done(e), planned) << "epoch " << e;
  }
  EXPECT_EQ(done, ledger.total_examples());
  EXPECT_EQ(ledger.completions_refused(), 0);
  int64_t by_workers = 0;
  for (int64_t n : ledger.examples_by_worker()) by_workers += n;
  EXPECT_EQ(by_workers, done);
}

// Whether result.json's membership records `change` for `worker`.
inline bool HasChange(const RunResult& result, int worker, const std::string& change) {
  for (const MembershipChange& c : result.membership()) {
    if (c.worker() == worker && c.change() == change) return true;
  }
  return false;
}

}  // namespace pstrain::test
