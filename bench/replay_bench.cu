// Prioritized replay benchmarks. One PER step = sample B + gather + IS weights +
// priority update, state_dim 64, buffer full:
//   per_step/resident        GPU buffer, the step captured once and graph-replayed
//   per_step/resident_eager  GPU buffer, launched eagerly
//   per_step/resident_no_programmatic_launch  the graph-replayed step with its kernels in plain
//                            stream order (the update may otherwise start while the draw
//                            finishes: kernels/core/programmatic_launch.cuh); 1e6 x 256 only
//   per_step/resident_untraced      per_step/resident without the audit (its CUPTI callback on
//                            the graph launch falls inside the timed window); 1e3, 1e6, 1e7 x 256
//   per_step/resident_back_to_back  16 graph-replayed steps per timed window, launched without a
//                            wait (the host's launch of one step overlaps the GPU's work on the
//                            one before), time per step; 1e3, 1e6, 1e7 x 256
//   per_step/host_staged     CPU sum-tree, plus the batch upload and the TD-error download
// per_step/resident times one step from an idle GPU: the window holds the host's graph launch,
// so it moves with the host's speed; back_to_back is the GPU's time per step.
// swept over capacity 1e3..1e7 and B in {256, 1024}. Also insert throughput and the
// rank-based step (a device radix sort of all priorities, then the draw), and each half of the
// graph-replayed step alone (step_part/sample_gather, step_part/update).
#include <benchmark/benchmark.h>
#include <curand.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "bench/harness.h"
#include "lib/core/device_buffer.h"
#include "lib/core/library_checks.h"
#include "kernels/core/programmatic_launch.h"
#include "lib/core/stream.h"
#include "lib/replay/cpu_replay_buffer.h"
#include "lib/replay/gpu_replay_buffer.h"

namespace {

using namespace resident;

constexpr std::size_t kDim = 64;
constexpr std::size_t kChunk = std::size_t{1} << 18;  // rows per fill insert

ReplayConfig config_for(std::size_t capacity, ReplayPriorityMode mode) {
  ReplayConfig c;
  c.capacity = capacity;
  c.state_dim = kDim;
  c.mode = mode;
  return c;
}

// Random device rows, reused to fill buffers chunk by chunk (setup only).
struct DeviceRows {
  DeviceBuffer<float> states, next_states, rewards;
  DeviceBuffer<std::int32_t> actions;
  DeviceBuffer<std::uint8_t> dones;
  explicit DeviceRows(std::size_t rows)
      : states(rows * kDim), next_states(rows * kDim), rewards(rows), actions(rows), dones(rows) {
    curandGenerator_t gen = nullptr;
    RESIDENT_CURAND_CHECK(curandCreateGenerator(&gen, CURAND_RNG_PSEUDO_PHILOX4_32_10));
    RESIDENT_CURAND_CHECK(curandSetPseudoRandomGeneratorSeed(gen, 1234));
    RESIDENT_CURAND_CHECK(curandGenerateUniform(gen, states.data(), states.size()));
    RESIDENT_CURAND_CHECK(curandGenerateUniform(gen, next_states.data(), next_states.size()));
    RESIDENT_CURAND_CHECK(curandGenerateUniform(gen, rewards.data(), rewards.size()));
    RESIDENT_CURAND_CHECK(curandDestroyGenerator(gen));
    RESIDENT_CUDA_CHECK(cudaMemset(actions.data(), 1, actions.bytes()));
    RESIDENT_CUDA_CHECK(cudaMemset(dones.data(), 0, dones.bytes()));
    RESIDENT_CUDA_CHECK(cudaDeviceSynchronize());
  }
  DeviceTransitions view() const {
    return {states.data(), actions.data(), rewards.data(), next_states.data(), dones.data()};
  }
};

void fill(GpuReplayBuffer& gpu, const DeviceRows& rows, std::size_t chunk) {
  for (std::size_t done = 0; done < gpu.capacity(); done += chunk)
    gpu.insert_batch(rows.view(), std::min(chunk, gpu.capacity() - done));
}

// Fresh TD errors on the device for the updates.
DeviceBuffer<float> device_td_errors(std::size_t batch) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> td(batch);
  for (float& t : td) t = normal(rng);
  DeviceBuffer<float> d(batch);
  d.upload(td);
  return d;
}

// Which part of the step a row times: all of it, or one half (to see where the time goes).
enum class StepPart { kWhole, kSampleOnly, kUpdateOnly };

// How a row's timed window is built: steps launched per window (back to back when more than
// one; graph-replayed rows only) and whether the audit traces it.
struct StepWindow {
  int steps = 1;
  bool traced = true;
};

void BM_gpu_step(benchmark::State& state, ReplayPriorityMode mode, bool graphed, StepPart part,
                 StepWindow window) {
  const auto capacity = static_cast<std::size_t>(state.range(0));
  const auto batch = static_cast<std::size_t>(state.range(1));
  Stream stream;
  GpuReplayBuffer gpu(config_for(capacity, mode), batch, 42, stream.get());
  {
    const DeviceRows rows(std::min(capacity, kChunk));
    fill(gpu, rows, std::min(capacity, kChunk));
    stream.synchronize();
  }
  const DeviceBuffer<float> td = device_td_errors(batch);
  const DeviceSampledBatch drawn = gpu.sample(batch);  // the slots an update-only row updates
  const auto step = [&] {
    if (part == StepPart::kUpdateOnly) {
      gpu.update_priorities(drawn.indices, drawn.generations, td.data(), batch);
      return;
    }
    const DeviceSampledBatch b = gpu.sample(batch);
    if (part == StepPart::kWhole) gpu.update_priorities(b.indices, b.generations, td.data(), batch);
  };
  cudaGraphExec_t exec = nullptr;
  if (graphed) {
    cudaGraph_t graph = nullptr;
    RESIDENT_CUDA_CHECK(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeGlobal));
    step();
    RESIDENT_CUDA_CHECK(cudaStreamEndCapture(stream.get(), &graph));
    RESIDENT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    RESIDENT_CUDA_CHECK(cudaGraphDestroy(graph));
  }
  const auto body = [&] {
    for (int i = 0; i < window.steps; ++i) {
      if (graphed)
        bench::check_cuda(cudaGraphLaunch(exec, stream.get()), "cudaGraphLaunch");
      else
        step();
    }
  };
  bench::TimedPhase timed(state, "replay/step", bench::zero_transfer_contract(), stream.get(),
                          window.traced);
  timed.count_steps_per_iteration(window.steps);
  timed.warm_up(body, 10);
  for (auto _ : state) timed.iteration(body);
  timed.finish();
  timed.set_rate("samples_per_s", static_cast<double>(batch));
  if (exec != nullptr) (void)cudaGraphExecDestroy(exec);
}

// The classic pipeline: CPU sum-tree sample, batch assembled in pinned memory and uploaded,
// TD errors downloaded after the (here empty) train step, priorities updated on the CPU.
void BM_host_staged_step(benchmark::State& state) {
  const auto capacity = static_cast<std::size_t>(state.range(0));
  const auto batch = static_cast<std::size_t>(state.range(1));
  Stream stream;
  CpuReplayBuffer cpu(config_for(capacity, ReplayPriorityMode::Proportional));
  {
    std::mt19937_64 rng(1);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    const std::size_t chunk = std::min<std::size_t>(capacity, 1 << 16);
    std::vector<float> states(chunk * kDim), rewards(chunk);
    for (float& x : states) x = value(rng);
    for (float& x : rewards) x = value(rng);
    const std::vector<std::int32_t> actions(chunk, 1);
    const std::vector<std::uint8_t> dones(chunk, 0);
    for (std::size_t done = 0; done < capacity; done += chunk) {
      const std::size_t n = std::min(chunk, capacity - done);
      cpu.insert_batch({std::span<const float>(states).first(n * kDim),
                        std::span<const std::int32_t>(actions).first(n),
                        std::span<const float>(rewards).first(n),
                        std::span<const float>(states).first(n * kDim),
                        std::span<const std::uint8_t>(dones).first(n)});
    }
  }
  // Pinned staging and device destinations of one batch.
  struct Pinned {
    void* ptr = nullptr;
    explicit Pinned(std::size_t bytes) { RESIDENT_CUDA_CHECK(cudaMallocHost(&ptr, bytes)); }
    ~Pinned() { (void)cudaFreeHost(ptr); }
  };
  const std::size_t row_bytes = batch * kDim * sizeof(float);
  Pinned h_states(row_bytes), h_next(row_bytes), h_small(batch * 16), h_td(batch * sizeof(float));
  DeviceBuffer<float> d_states(batch * kDim), d_next(batch * kDim), d_weights(batch), d_rewards(batch);
  DeviceBuffer<std::int32_t> d_actions(batch);
  DeviceBuffer<std::uint8_t> d_dones(batch);
  const DeviceBuffer<float> d_td = device_td_errors(batch);
  std::mt19937_64 rng(9);
  SampledBatch out;
  const auto body = [&] {
    cpu.sample(batch, rng, out);
    std::copy(out.states.begin(), out.states.end(), static_cast<float*>(h_states.ptr));
    std::copy(out.next_states.begin(), out.next_states.end(), static_cast<float*>(h_next.ptr));
    auto* small = static_cast<std::byte*>(h_small.ptr);
    std::memcpy(small, out.is_weights.data(), batch * sizeof(float));
    std::memcpy(small + batch * 4, out.rewards.data(), batch * sizeof(float));
    std::memcpy(small + batch * 8, out.actions.data(), batch * sizeof(std::int32_t));
    std::memcpy(small + batch * 12, out.dones.data(), batch);
    cudaStream_t s = stream.get();
    RESIDENT_CUDA_CHECK(cudaMemcpyAsync(d_states.data(), h_states.ptr, row_bytes, cudaMemcpyHostToDevice, s));
    RESIDENT_CUDA_CHECK(cudaMemcpyAsync(d_next.data(), h_next.ptr, row_bytes, cudaMemcpyHostToDevice, s));
    RESIDENT_CUDA_CHECK(cudaMemcpyAsync(d_weights.data(), small, batch * 4, cudaMemcpyHostToDevice, s));
    RESIDENT_CUDA_CHECK(cudaMemcpyAsync(d_rewards.data(), small + batch * 4, batch * 4, cudaMemcpyHostToDevice, s));
    RESIDENT_CUDA_CHECK(cudaMemcpyAsync(d_actions.data(), small + batch * 8, batch * 4, cudaMemcpyHostToDevice, s));
    RESIDENT_CUDA_CHECK(cudaMemcpyAsync(d_dones.data(), small + batch * 12, batch, cudaMemcpyHostToDevice, s));
    RESIDENT_CUDA_CHECK(cudaMemcpyAsync(h_td.ptr, d_td.data(), batch * sizeof(float), cudaMemcpyDeviceToHost, s));
    stream.synchronize();
    cpu.update_priorities(out.indices, out.generations,
                          std::span<const float>(static_cast<const float*>(h_td.ptr), batch));
  };
  bench::TimedPhase timed(state, "replay/step", audit::TransferContract{}, stream.get());
  timed.warm_up(body, 10);
  for (auto _ : state) timed.iteration(body);
  timed.finish();
  timed.set_rate("samples_per_s", static_cast<double>(batch));
}

void BM_gpu_insert(benchmark::State& state) {
  const auto rows = static_cast<std::size_t>(state.range(0));
  const std::size_t capacity = 1'000'000;
  Stream stream;
  GpuReplayBuffer gpu(config_for(capacity, ReplayPriorityMode::Proportional), 256, 1, stream.get());
  const DeviceRows source(rows);
  const auto body = [&] { gpu.insert_batch(source.view(), rows); };
  bench::TimedPhase timed(state, "replay/insert", bench::zero_transfer_contract(), stream.get());
  timed.warm_up(body, 10);
  for (auto _ : state) timed.iteration(body);
  timed.finish();
  timed.set_rate("rows_per_s", static_cast<double>(rows));
}

void capacity_by_batch(benchmark::internal::Benchmark* b) {
  b->ArgNames({"capacity", "batch"});
  for (std::int64_t capacity : {1'000, 10'000, 100'000, 1'000'000, 10'000'000})
    for (std::int64_t batch : {256, 1024})
      if (batch <= capacity) b->Args({capacity, batch});  // a batch never exceeds the size
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  bench::add_context();
  capacity_by_batch(bench::configure(benchmark::RegisterBenchmark(
      "per_step/resident", BM_gpu_step, ReplayPriorityMode::Proportional, true, StepPart::kWhole,
      StepWindow{})));
  capacity_by_batch(bench::configure(benchmark::RegisterBenchmark(
      "per_step/resident_eager", BM_gpu_step, ReplayPriorityMode::Proportional, false,
      StepPart::kWhole, StepWindow{})));
  for (const auto& [name, part] : {std::pair{"step_part/sample_gather", StepPart::kSampleOnly},
                                   std::pair{"step_part/update", StepPart::kUpdateOnly}})
    bench::configure(benchmark::RegisterBenchmark(name, BM_gpu_step, ReplayPriorityMode::Proportional,
                                                  true, part, StepWindow{}))
        ->ArgNames({"capacity", "batch"})
        ->Args({1'000, 256})
        ->Args({1'000'000, 256})
        ->Args({10'000'000, 256});
  bench::configure(benchmark::RegisterBenchmark(
                       "per_step/resident_no_programmatic_launch",
                       [](benchmark::State& state) {
                         const ProgrammaticLaunchScope stream_ordered(false);
                         BM_gpu_step(state, ReplayPriorityMode::Proportional, true,
                                     StepPart::kWhole, StepWindow{});
                       }))
      ->ArgNames({"capacity", "batch"})
      ->Args({1'000'000, 256});
  // A row's iterations are counted in its reported (per-step) time: a window of 16 steps would
  // run 16x the default minimum time of windows (5 x ~45k windows, ~60 s per row in the main job
  // on an H200), so its minimum time is divided by the steps per window.
  for (const auto& [name, window] :
       {std::pair{"per_step/resident_untraced", StepWindow{1, false}},
        std::pair{"per_step/resident_back_to_back", StepWindow{16, true}}}) {
    auto* row = bench::configure(benchmark::RegisterBenchmark(
        name, BM_gpu_step, ReplayPriorityMode::Proportional, true, StepPart::kWhole, window));
    if (window.steps > 1) row->MinTime(bench::kDefaultMinTimeSeconds / window.steps);
    row->ArgNames({"capacity", "batch"})
        ->Args({1'000, 256})
        ->Args({1'000'000, 256})
        ->Args({10'000'000, 256});
  }
  capacity_by_batch(bench::configure(benchmark::RegisterBenchmark("per_step/host_staged", BM_host_staged_step)));
  bench::configure(benchmark::RegisterBenchmark("rank_step/resident", BM_gpu_step,
                                                ReplayPriorityMode::Rank, true, StepPart::kWhole,
                                                StepWindow{}))
      ->ArgNames({"capacity", "batch"})
      ->Args({10'000, 256})
      ->Args({100'000, 256})
      ->Args({1'000'000, 256})
      ->Args({10'000'000, 256});
  bench::configure(benchmark::RegisterBenchmark("insert/resident", BM_gpu_insert))
      ->ArgNames({"rows"})
      ->Arg(32)  // a DQN vector step (32 envs): the one-warp tree path
      ->Arg(64)
      ->Arg(4096)
      ->Arg(65536);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
