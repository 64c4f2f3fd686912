#include "tools/bench/matmul_reference.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "glog/logging.h"
#include "oneapi/dnnl/dnnl.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace pstrain::bench {

namespace {

// One untimed warm-up of `run` (pages, JIT kernels, thread pool), then
// `reps` timed ones of an m x n x k product.
MatmulReference TimeRepetitions(int64_t m, int64_t n, int64_t k, int reps, const std::function<void()>& run) {
  MatmulReference r;
  r.m = m;
  r.n = n;
  r.k = k;
  r.reps = reps;
  run();
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

}  // namespace

MatmulReference MeasureMatmul(int64_t m, int64_t n, int64_t k, int reps) {
  CHECK(m > 0 && n > 0 && k > 0 && reps >= 1);
  std::vector<float> a(m * k), b(k * n), c(m * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 7) * 0.01f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 5) * 0.01f;
  return TimeRepetitions(m, n, k, reps, [&] {
    dnnl_status_t s = dnnl_sgemm('N', 'N', m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
    CHECK_EQ(s, dnnl_success) << "dnnl_sgemm failed";
  });
}

MatmulReference MeasureBf16Matmul(int64_t m, int64_t n, int64_t k, int reps) {
  CHECK(m > 0 && n > 0 && k > 0 && reps >= 1);
  using dnnl::memory;
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const memory::desc a_desc({m, k}, memory::data_type::bf16, memory::format_tag::ab);
  const memory::desc b_desc({k, n}, memory::data_type::bf16, memory::format_tag::ab);
  const memory::desc c_desc({m, n}, memory::data_type::f32, memory::format_tag::ab);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_desc, b_desc, c_desc), engine);
  const dnnl::matmul matmul(pd);
  memory a(a_desc, engine), b(b_desc, engine), c(c_desc, engine);
  // Small values, as the fp32 reference uses: bf16 1/128 steps (bits 0x3c00 + i).
  auto fill = [](memory& mem, int64_t count, int period) {
    auto* bits = static_cast<uint16_t*>(mem.get_data_handle());
    for (int64_t i = 0; i < count; ++i) bits[i] = static_cast<uint16_t>(0x3c00 + i % period);
  };
  fill(a, m * k, 7);
  fill(b, k * n, 5);
  auto run = [&] {
    matmul.execute(stream, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
    stream.wait();
  };
  return TimeRepetitions(m, n, k, reps, run);
}

int DnnlThreads() {
  // oneDNN (Debian's build) runs on the OpenMP runtime it links; ask that
  // runtime rather than linking OpenMP here.
  using MaxThreads = int (*)();
  auto fn = reinterpret_cast<MaxThreads>(::dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  return fn != nullptr ? fn() : 1;
}

}  // namespace pstrain::bench
