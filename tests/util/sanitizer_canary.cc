// A program with one deliberate bug of the kind the sanitizer build it was
// compiled in must report: tools/check.sh runs it first and insists on the
// report, so a sanitizer stage that silently checks nothing fails CI.
//   thread:            two threads increment a plain int (a data race)
//   address,undefined: a read one past the end of a heap array
// A correct program guarded by absl::Mutex runs first and must stay quiet
// under ThreadSanitizer (absl's synchronisation is instrumented,
// cmake/tsan_absl.cmake).
#include <cstdio>
#include <cstring>
#include <thread>

#include "absl/synchronization/mutex.h"

namespace {

int Guarded() {
  absl::Mutex mu;
  int counter = 0;
  auto add = [&] {
    for (int i = 0; i < 10000; ++i) {
      absl::MutexLock lock(&mu);
      ++counter;
    }
  };
  std::thread a(add), b(add);
  a.join();
  b.join();
  return counter;
}

int Racy() {
  int counter = 0;
  auto add = [&] {
    for (int i = 0; i < 10000; ++i) ++counter;
  };
  std::thread a(add), b(add);
  a.join();
  b.join();
  return counter;
}

int OutOfBounds(int n) {
  int* values = new int[n];
  std::memset(values, 0, n * sizeof(int));
  const int past_the_end = values[n];
  delete[] values;
  return past_the_end;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s guarded|race|overflow\n", argv[0]);
    return 2;
  }
  if (std::strcmp(argv[1], "guarded") == 0) return Guarded() == 20000 ? 0 : 1;
  if (std::strcmp(argv[1], "race") == 0) return Racy() > 0 ? 0 : 1;
  if (std::strcmp(argv[1], "overflow") == 0) return OutOfBounds(argc + 6);
  return 2;
}
