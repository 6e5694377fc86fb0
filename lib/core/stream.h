// Owners of a CUDA stream and of a cuBLAS handle bound to it. StreamContext holds both,
// plus the cuBLAS workspace set explicitly so that cuBLAS never allocates while a graph
// is being captured. Math mode is plain fp32 (no TF32) unless asked for.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>

#include "lib/core/device_buffer.h"

namespace resident {

class Stream {
 public:
  Stream();  // non-blocking with respect to the legacy default stream
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;

  cudaStream_t get() const noexcept { return stream_; }
  // Host synchronization: for setup, tests and sanctioned readbacks only.
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

// A CUDA event for ordering work between streams (timing disabled): record() on one stream,
// make_wait() another on it. Capturable: inside a graph capture the two become a graph edge.
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;

  cudaEvent_t get() const noexcept { return event_; }
  void record(cudaStream_t stream) const;
  // Work enqueued on `stream` after this call starts after the last record()'s work.
  void make_wait(cudaStream_t stream) const;

 private:
  cudaEvent_t event_ = nullptr;
};

class CublasHandle {
 public:
  CublasHandle(cudaStream_t stream, void* workspace, std::size_t workspace_bytes, bool allow_tf32);
  ~CublasHandle();
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  CublasHandle(CublasHandle&& other) noexcept;
  CublasHandle& operator=(CublasHandle&& other) noexcept;

  cublasHandle_t get() const noexcept { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

struct StreamContextOptions {
  std::size_t cublas_workspace_bytes = std::size_t{32} << 20;  // cuBLAS' advice for Hopper
  bool allow_tf32 = false;
};

// One stream, one cuBLAS handle on it, one cuBLAS workspace.
class StreamContext {
 public:
  explicit StreamContext(StreamContextOptions options = {});

  cudaStream_t stream() const noexcept { return stream_.get(); }
  cublasHandle_t cublas() const noexcept { return cublas_.get(); }
  // The cuBLAS workspace, also lent to cuBLASLt calls on this context's stream (ordered after
  // every other use of it on the same stream, so one workspace serves both).
  void* cublas_workspace() const noexcept {
    return const_cast<std::byte*>(cublas_workspace_.data());
  }
  std::size_t cublas_workspace_bytes() const noexcept { return cublas_workspace_.bytes(); }
  void synchronize() const { stream_.synchronize(); }

 private:
  Stream stream_;
  DeviceBuffer<std::byte> cublas_workspace_;
  CublasHandle cublas_;
};

}  // namespace resident
