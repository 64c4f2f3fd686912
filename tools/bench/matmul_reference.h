// The roofline beside the model benchmark: what oneDNN's own fp32 GEMM
// (dnnl_sgemm) achieves on this machine with the same thread count (oneDNN's
// OpenMP threads, i.e. OMP_NUM_THREADS), measured in the same process; and,
// for bf16 runs, oneDNN's bf16 matmul (bf16 x bf16 -> f32, what mixed
// precision's products run on).
#pragma once

#include <cstdint>

namespace pstrain::bench {

struct MatmulReference {
  int64_t m = 0, n = 0, k = 0;
  int reps = 0;             // timed repetitions (one untimed warm-up runs first)
  double best_seconds = 0;  // fastest repetition
  double gflops = 0;        // 2*m*n*k / best_seconds / 1e9 (the figure benchmarks compare with)
  double mean_gflops = 0;   // over all timed repetitions
};

// C = A * B with row-major fp32 A [m, k], B [k, n] (filled with small
// values), `reps` >= 1 timed repetitions; best of them.
MatmulReference MeasureMatmul(int64_t m, int64_t n, int64_t k, int reps);
// The same with bf16 A and B and an fp32 C, on oneDNN's matmul primitive
// (its bf16 kernels where the processor has AVX-512 BF16 or AMX).
MatmulReference MeasureBf16Matmul(int64_t m, int64_t n, int64_t k, int reps);

// The thread count oneDNN's CPU engine runs with (omp_get_max_threads() of
// the OpenMP runtime it is built on; 1 when it is not an OpenMP build).
int DnnlThreads();

}  // namespace pstrain::bench
