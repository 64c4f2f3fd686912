#include "tools/bench/gpu_matmul_reference.h"

#ifdef PSTRAIN_WITH_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "common/status_macros.h"
#include "device/cuda/cuda_check.h"
#include "device/cuda/cuda_context.h"
#include "device/cuda/elementwise.h"
#endif

namespace pstrain::bench {

#ifndef PSTRAIN_WITH_CUDA
absl::StatusOr<MatmulReference> MeasureGpuMatmul(int, int64_t, int64_t, int64_t, int) {
  return absl::UnimplementedError("--device gpu: this pstrain was built without CUDA");
}
#else
absl::StatusOr<MatmulReference> MeasureGpuMatmul(int ordinal, int64_t m, int64_t n, int64_t k, int reps) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaContext> ctx, cuda::CudaContext::Create(ordinal));
  ctx->MakeCurrent();
  // Operands filled with small values (their content does not change the time).
  Tensor a = ctx->Allocate({m, k}), b = ctx->Allocate({k, n}), c = ctx->Allocate({m, n});
  cuda::Fill(cuda::DevicePtr(a), 0.5f, a.num_elements(), ctx->stream());
  cuda::Fill(cuda::DevicePtr(b), 0.25f, b.num_elements(), ctx->stream());
  const float alpha = 1.0f, beta = 0.0f;
  auto gemm = [&] {
    // Row-major C = A B is column-major C^T = B^T A^T.
    PSTRAIN_CUBLAS_CHECK(cublasSgemm(ctx->cublas(), CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                                     static_cast<int>(k), &alpha, cuda::DevicePtr(b), static_cast<int>(n),
                                     cuda::DevicePtr(a), static_cast<int>(k), &beta, cuda::DevicePtr(c),
                                     static_cast<int>(n)));
  };
  cudaEvent_t start, stop;
  PSTRAIN_CUDA_CHECK(cudaEventCreate(&start));
  PSTRAIN_CUDA_CHECK(cudaEventCreate(&stop));
  gemm();  // warm-up
  MatmulReference ref;
  ref.m = m;
  ref.n = n;
  ref.k = k;
  ref.reps = reps;
  double total = 0;
  ref.best_seconds = 1e30;
  for (int i = 0; i < reps; ++i) {
    PSTRAIN_CUDA_CHECK(cudaEventRecord(start, ctx->stream()));
    gemm();
    PSTRAIN_CUDA_CHECK(cudaEventRecord(stop, ctx->stream()));
    PSTRAIN_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    PSTRAIN_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    const double seconds = std::max(1e-9, ms / 1e3);
    total += seconds;
    ref.best_seconds = std::min(ref.best_seconds, seconds);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  const double flop = 2.0 * m * n * k;
  ref.gflops = flop / ref.best_seconds / 1e9;
  ref.mean_gflops = flop * reps / total / 1e9;
  return ref;
}
#endif

}  // namespace pstrain::bench
