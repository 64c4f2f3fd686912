// Copies between pinned host mirrors and a GPU on streams of their own
// (CudaCopyEngine, cuda_copy_engine.h).
#include "device/cuda/cuda_copy_engine.h"

#include "device/cuda/cuda_check.h"

namespace pstrain::cuda {

CudaCopyEngine::CudaCopyEngine(CudaContext* context) : context_(context) {
  context_->MakeCurrent();
  PSTRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&download_stream_, cudaStreamNonBlocking));
  PSTRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&upload_stream_, cudaStreamNonBlocking));
  completer_ = std::thread([this] { Complete(); });
}

CudaCopyEngine::~CudaCopyEngine() {
  Drain();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  completer_.join();
  context_->MakeCurrent();  // the streams' GPU, whichever thread destroys the engine
  cudaStreamDestroy(download_stream_);
  cudaStreamDestroy(upload_stream_);
}

cudaEvent_t CudaCopyEngine::RecordOn(cudaStream_t stream) {
  cudaEvent_t event = nullptr;
  PSTRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  PSTRAIN_CUDA_CHECK(cudaEventRecord(event, stream));
  return event;
}

void CudaCopyEngine::Download(const Tensor& src, const Tensor& dst, std::function<void()> done) {
  CHECK(src.num_bytes() == dst.num_bytes() && dst.on_host()) << "Download: a device tensor into a host one";
  cudaEvent_t computed = RecordOn(context_->stream());
  PSTRAIN_CUDA_CHECK(cudaStreamWaitEvent(download_stream_, computed, 0));
  PSTRAIN_CUDA_CHECK(cudaEventDestroy(computed));  // destroyed once complete; the wait holds it
  PSTRAIN_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.num_bytes(), cudaMemcpyDeviceToHost, download_stream_));
  Pending pending{RecordOn(download_stream_), std::move(done)};
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back(std::move(pending));
  }
  changed_.notify_all();
}

void CudaCopyEngine::Upload(const Tensor& src, const Tensor& dst) {
  CHECK(src.num_bytes() == dst.num_bytes() && src.on_host()) << "Upload: a host tensor into a device one";
  cudaEvent_t computed = RecordOn(context_->stream());
  PSTRAIN_CUDA_CHECK(cudaStreamWaitEvent(upload_stream_, computed, 0));
  PSTRAIN_CUDA_CHECK(cudaEventDestroy(computed));
  PSTRAIN_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.num_bytes(), cudaMemcpyHostToDevice, upload_stream_));
  cudaEvent_t copied = RecordOn(upload_stream_);
  PSTRAIN_CUDA_CHECK(cudaStreamWaitEvent(context_->stream(), copied, 0));
  PSTRAIN_CUDA_CHECK(cudaEventDestroy(copied));
}

void CudaCopyEngine::Complete() {
  context_->MakeCurrent();
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    changed_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
    if (pending_.empty()) return;
    Pending pending = std::move(pending_.front());
    pending_.pop_front();
    completing_ = true;
    lock.unlock();
    PSTRAIN_CUDA_CHECK(cudaEventSynchronize(pending.copied));
    PSTRAIN_CUDA_CHECK(cudaEventDestroy(pending.copied));
    if (pending.done) pending.done();
    lock.lock();
    completing_ = false;
    changed_.notify_all();
  }
}

void CudaCopyEngine::Drain() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return pending_.empty() && !completing_; });
  }
  PSTRAIN_CUDA_CHECK(cudaStreamSynchronize(upload_stream_));
}

}  // namespace pstrain::cuda
