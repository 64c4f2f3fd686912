// CudaCopyEngine: the CopyEngine (device/copy_engine.h) of a CudaContext:
// two copy streams of its own (device-to-host and host-to-device, so the
// GPU's copy engines work both ways beside its compute), ordered against
// the context's compute stream by events:
//   Download: an event on the compute stream; the download stream waits for
//             it, copies, records a second event; a completion thread waits
//             for that one (cudaEventSynchronize, in the order queued) and
//             runs `done` there, never on a CUDA callback thread.
//   Upload:   the upload stream waits for the compute queued so far (the
//             previous step may still read the old value), copies, and the
//             compute stream waits for the copy's event; the host goes on.
// The host tensors should be pinned (CudaContext::AllocateHost) for the
// copies to be asynchronous.
#pragma once

#include <cuda_runtime.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "device/copy_engine.h"
#include "device/cuda/cuda_context.h"

namespace pstrain::cuda {

class CudaCopyEngine final : public CopyEngine {
 public:
  // `context` outlives the engine.
  explicit CudaCopyEngine(CudaContext* context);
  ~CudaCopyEngine() override;  // drains first

  void Download(const Tensor& src, const Tensor& dst, std::function<void()> done) override;
  void Upload(const Tensor& src, const Tensor& dst) override;
  void Drain() override;

 private:
  struct Pending {
    cudaEvent_t copied;
    std::function<void()> done;
  };
  // An event recorded on `stream` now (destroyed by whoever waits for it).
  cudaEvent_t RecordOn(cudaStream_t stream);
  void Complete();  // the completion thread

  CudaContext* const context_;
  cudaStream_t download_stream_ = nullptr;
  cudaStream_t upload_stream_ = nullptr;
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<Pending> pending_;
  bool completing_ = false;  // the completion thread is running a `done`
  bool stopping_ = false;
  std::thread completer_;
};

}  // namespace pstrain::cuda
