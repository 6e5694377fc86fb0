// CUDA-graph harness of the model GPU tests: a captured step, "graph replay equals eager bit for
// bit", and step timing. Contracts:
//   - StepGraph(stream, mode, body): captures what body() enqueues on stream (in `mode`; the model
//     tests use cudaStreamCaptureModeThreadLocal, KAN's cudaStreamCaptureModeGlobal so that any
//     host interaction fails the capture) and instantiates it; launch() replays it on stream;
//     the graph and its exec are destroyed with the object. A capture that throws ends the
//     capture and leaves nothing behind.
//   - run_eager_then_replayed(ctx, steps, eager, graphed): eager() `steps` times, synchronize,
//     capture one graphed() (ThreadLocal), replay it `steps` times, synchronize. eager and graphed
//     must act on two models built alike, with their own outputs or the same inputs.
//   - expect_replay_equals_eager(eager, graphed, initial, stream): the Params parts of the two
//     slabs equal bit for bit (memcmp: "graph replay and eager steps differ") and differ from
//     `initial` (a fresh model's slab: "the steps did not change the parameters"). Returns the
//     number of parameters compared (0 after a size mismatch, which fails).
//   - mean_event_ms(stream, reps, launch): mean ms per launch() over reps calls between two CUDA
//     events recorded on stream (waits for the second); warm-up is the caller's.
//   - mean_wall_ms(ctx, reps, launch): mean wall-clock ms per launch() over reps calls up to
//     ctx.synchronize() after the last; the caller synchronizes before.
//   - expect_wall_timed_step(ctx, enqueue, loss, warmups, reps): enqueue() (one train step) run
//     eagerly and synchronized, loss[0] finite; then captured (ThreadLocal), `warmups` replays,
//     synchronize, and the mean_wall_ms of `reps` replays, loss[0] still finite. Returns the mean.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "kernels/core/error.h"
#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "lib/nn/param_slab.h"

namespace resident::test {

class StepGraph {
 public:
  template <class Body>
  StepGraph(cudaStream_t stream, cudaStreamCaptureMode mode, Body&& body) {
    RESIDENT_CUDA_CHECK(cudaStreamBeginCapture(stream, mode));
    try {
      body();
    } catch (...) {
      (void)cudaStreamEndCapture(stream, &graph_);
      if (graph_ != nullptr) (void)cudaGraphDestroy(graph_);
      throw;
    }
    RESIDENT_CUDA_CHECK(cudaStreamEndCapture(stream, &graph_));
    const cudaError_t instantiated = cudaGraphInstantiate(&exec_, graph_, 0);
    if (instantiated != cudaSuccess) (void)cudaGraphDestroy(graph_);
    RESIDENT_CUDA_CHECK(instantiated);
  }
  ~StepGraph() {
    if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
    if (graph_ != nullptr) (void)cudaGraphDestroy(graph_);
  }
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  void launch(cudaStream_t stream) const { RESIDENT_CUDA_CHECK(cudaGraphLaunch(exec_, stream)); }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

template <class Eager, class Graphed>
void run_eager_then_replayed(const StreamContext& ctx, int steps, Eager&& eager,
                             Graphed&& graphed) {
  for (int i = 0; i < steps; ++i) eager();
  ctx.synchronize();
  const StepGraph graph(ctx.stream(), cudaStreamCaptureModeThreadLocal, graphed);
  for (int i = 0; i < steps; ++i) graph.launch(ctx.stream());
  ctx.synchronize();
}

inline std::size_t expect_replay_equals_eager(const nn::ParamSlab& eager,
                                              const nn::ParamSlab& graphed,
                                              const nn::ParamSlab& initial,
                                              cudaStream_t stream) {
  const std::vector<float> pa = eager.download(nn::SlabPart::Params, stream);
  const std::vector<float> pb = graphed.download(nn::SlabPart::Params, stream);
  const std::vector<float> init = initial.download(nn::SlabPart::Params, stream);
  EXPECT_EQ(pa.size(), pb.size());
  if (pa.size() != pb.size()) return 0;
  EXPECT_EQ(std::memcmp(pa.data(), pb.data(), pa.size() * sizeof(float)), 0)
      << "graph replay and eager steps differ";
  EXPECT_NE(std::memcmp(pa.data(), init.data(), pa.size() * sizeof(float)), 0)
      << "the steps did not change the parameters";
  return pa.size();
}

template <class Launch>
float mean_event_ms(cudaStream_t stream, int reps, Launch&& launch) {
  cudaEvent_t start = nullptr, stop = nullptr;
  RESIDENT_CUDA_CHECK(cudaEventCreate(&start));
  RESIDENT_CUDA_CHECK(cudaEventCreate(&stop));
  RESIDENT_CUDA_CHECK(cudaEventRecord(start, stream));
  for (int i = 0; i < reps; ++i) launch();
  RESIDENT_CUDA_CHECK(cudaEventRecord(stop, stream));
  RESIDENT_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  RESIDENT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  RESIDENT_CUDA_CHECK(cudaEventDestroy(start));
  RESIDENT_CUDA_CHECK(cudaEventDestroy(stop));
  return ms / static_cast<float>(reps);
}

template <class Launch>
double mean_wall_ms(const StreamContext& ctx, int reps, Launch&& launch) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) launch();
  ctx.synchronize();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
             .count() /
         reps;
}

template <class Enqueue>
double expect_wall_timed_step(const StreamContext& ctx, Enqueue&& enqueue,
                              DeviceBuffer<float>& loss, int warmups, int reps) {
  enqueue();
  ctx.synchronize();
  EXPECT_TRUE(std::isfinite(loss.download()[0]));
  const StepGraph graph(ctx.stream(), cudaStreamCaptureModeThreadLocal, enqueue);
  for (int i = 0; i < warmups; ++i) graph.launch(ctx.stream());
  ctx.synchronize();
  const double ms = mean_wall_ms(ctx, reps, [&] { graph.launch(ctx.stream()); });
  EXPECT_TRUE(std::isfinite(loss.download()[0]));
  return ms;
}

}  // namespace resident::test
