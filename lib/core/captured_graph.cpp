#include "lib/core/captured_graph.h"

#include <utility>

#include "kernels/core/error.h"

namespace resident {

CapturedGraph::~CapturedGraph() {
  if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
}

CapturedGraph::CapturedGraph(CapturedGraph&& other) noexcept
    : exec_(std::exchange(other.exec_, nullptr)) {}

CapturedGraph& CapturedGraph::operator=(CapturedGraph&& other) noexcept {
  if (this != &other) {
    if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
    exec_ = std::exchange(other.exec_, nullptr);
  }
  return *this;
}

void CapturedGraph::capture(cudaStream_t stream, const std::function<void()>& body) {
  cudaGraph_t graph = nullptr;
  RESIDENT_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  try {
    body();
  } catch (...) {
    (void)cudaStreamEndCapture(stream, &graph);
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    throw;
  }
  RESIDENT_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  (void)cudaGraphDestroy(graph);
  RESIDENT_CUDA_CHECK(instantiated);
  if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
  exec_ = exec;
}

void CapturedGraph::launch(cudaStream_t stream) const {
  if (exec_ == nullptr)
    throw Error("CapturedGraph::launch", "no graph", "call capture() first", __FILE__, __LINE__);
  RESIDENT_CUDA_CHECK(cudaGraphLaunch(exec_, stream));
}

}  // namespace resident
