#include "lib/core/stream.h"

#include <utility>

#include "lib/core/library_checks.h"

namespace resident {

Stream::Stream() { RESIDENT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }

Stream::~Stream() {
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

Stream::Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

void Stream::synchronize() const { RESIDENT_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

Event::Event() { RESIDENT_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming)); }

Event::~Event() {
  if (event_ != nullptr) (void)cudaEventDestroy(event_);
}

Event::Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr) (void)cudaEventDestroy(event_);
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

void Event::record(cudaStream_t stream) const { RESIDENT_CUDA_CHECK(cudaEventRecord(event_, stream)); }

void Event::make_wait(cudaStream_t stream) const {
  RESIDENT_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0));
}

CublasHandle::CublasHandle(cudaStream_t stream, void* workspace, std::size_t workspace_bytes,
                           bool allow_tf32) {
  RESIDENT_CUBLAS_CHECK(cublasCreate(&handle_));
  try {
    RESIDENT_CUBLAS_CHECK(cublasSetStream(handle_, stream));
    RESIDENT_CUBLAS_CHECK(cublasSetWorkspace(handle_, workspace, workspace_bytes));
    RESIDENT_CUBLAS_CHECK(cublasSetMathMode(
        handle_, allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  } catch (...) {
    (void)cublasDestroy(handle_);
    throw;
  }
}

CublasHandle::~CublasHandle() {
  if (handle_ != nullptr) (void)cublasDestroy(handle_);
}

CublasHandle::CublasHandle(CublasHandle&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)) {}

CublasHandle& CublasHandle::operator=(CublasHandle&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) (void)cublasDestroy(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

StreamContext::StreamContext(StreamContextOptions options)
    : stream_(),
      cublas_workspace_(options.cublas_workspace_bytes),
      cublas_(stream_.get(), cublas_workspace_.data(), cublas_workspace_.bytes(),
              options.allow_tf32) {}

}  // namespace resident
