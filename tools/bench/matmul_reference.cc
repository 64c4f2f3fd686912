#include "tools/bench/matmul_reference.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "glog/logging.h"
#include "oneapi/dnnl/dnnl.h"

namespace pstrain::bench {

MatmulReference MeasureMatmul(int64_t m, int64_t n, int64_t k, int reps) {
  CHECK(m > 0 && n > 0 && k > 0 && reps >= 1);
  MatmulReference r;
  r.m = m;
  r.n = n;
  r.k = k;
  r.reps = reps;
  std::vector<float> a(m * k), b(k * n), c(m * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 7) * 0.01f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 5) * 0.01f;
  auto run = [&] {
    dnnl_status_t s = dnnl_sgemm('N', 'N', m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
    CHECK_EQ(s, dnnl_success) << "dnnl_sgemm failed";
  };
  run();  // warm-up: pages, JIT kernels, thread pool
  const double flop = 2.0 * m * n * k;
  double total = 0;
  r.best_seconds = 1e30;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.best_seconds = std::min(r.best_seconds, s);
    total += s;
  }
  r.gflops = flop / r.best_seconds / 1e9;
  r.mean_gflops = flop * reps / total / 1e9;
  return r;
}

int DnnlThreads() {
  // oneDNN (Debian's build) runs on the OpenMP runtime it links; ask that
  // runtime rather than linking OpenMP here.
  using MaxThreads = int (*)();
  auto fn = reinterpret_cast<MaxThreads>(::dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  return fn != nullptr ? fn() : 1;
}

}  // namespace pstrain::bench
