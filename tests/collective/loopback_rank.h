// The options of one rank of a communicator whose ranks are threads of the
// test process on loopback, meeting through `store` (tests/collective/).
#pragma once

#include <string>

#include "absl/time/time.h"
#include "worker/collective/collective.h"

namespace pstrain::test {

// Deadlines of 60 s: generous for a loaded 2-core machine.
inline CollectiveOptions LoopbackRank(int rank, int size, KeyValueStore* store, const std::string& prefix) {
  CollectiveOptions options;
  options.rank = rank;
  options.size = size;
  options.host = "127.0.0.1";
  options.store = store;
  options.prefix = prefix;
  options.timeout = absl::Seconds(60);
  options.connect_timeout = absl::Seconds(60);
  return options;
}

}  // namespace pstrain::test
