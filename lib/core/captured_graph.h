// CapturedGraph: a CUDA graph captured from whatever a callable enqueues on one stream, and
// relaunched as a whole. Capture throws (and leaves nothing half-built) when the callable does
// something a capture forbids (a synchronization, a pageable copy, an allocation).
#pragma once

#include <cuda_runtime_api.h>

#include <functional>

namespace resident {

class CapturedGraph {
 public:
  CapturedGraph() = default;
  ~CapturedGraph();
  CapturedGraph(CapturedGraph&& other) noexcept;
  CapturedGraph& operator=(CapturedGraph&& other) noexcept;
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  // Replaces any earlier graph with the capture of body() on `stream`.
  void capture(cudaStream_t stream, const std::function<void()>& body);
  void launch(cudaStream_t stream) const;
  bool captured() const noexcept { return exec_ != nullptr; }

 private:
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace resident
