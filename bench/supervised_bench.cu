// Supervised time-series models, each registered model at its small reference configuration,
// batch 256, window L = 64, F = 32 input columns (the synthetic series, 20,000 steps, column 0
// the target, horizon 1), AdamW + global-norm clip, MSE (a quantile head, tft: pinball over
// [0.1, 0.5, 0.9], validated by its median's MSE; a classifier, tlob: cross-entropy on the
// trend labels the trainer computes on the device, balanced threshold; its epoch rows run under the
// same SupervisedEpochContract, the two readbacks carrying {train, validation loss} and
// {macro F1, accuracy}):
//   supervised_step/resident/model:<m>  one train step as one CUDA-graph replay (zero grads,
//     device gather of the batch through the epoch's permutation, forward, loss, backward, clip,
//     AdamW); 20 steps back to back per timed window, reported per step; zero-transfer contract.
//   supervised_step/host_fed/model:<m>  the same step as a typical PyTorch loop runs it: the
//     batch assembled on the host, uploaded from pinned memory, eager kernels, the loss read back.
//   supervised_epoch/resident/model:<m>, supervised_epoch/host_fed/model:<m>  one train_epoch()
//     (every training window once, in a new shuffled order, then the validation pass) in each
//     pipeline; the resident row runs under SupervisedEpochContract (2 scalar D2H, 0 bulk D2H,
//     0 H2D, 2 waits).
//   supervised_sample/resident/model:diffusion  the diffusion forecaster's 200-step ancestral
//     sampler for 256 windows (one sample each, summarized to the mean on the device) as one
//     CUDA-graph replay; zero-transfer contract; forecasts_per_s.
// Counters: windows_per_s (training windows per second of the timed part) and peak_device_bytes
// (device memory the trainer holds: free memory before its construction minus after; nothing is
// allocated after construction, so this is its peak; the dataset is counted separately in
// dataset_device_bytes).
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/harness.h"
#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "lib/data/series_dataset.h"
#include "lib/models/diffusion/diffusion_model.h"
#include "lib/models/model_registry.h"
#include "lib/models/supervised_trainer.h"

namespace {

using namespace resident;
using namespace resident::models;

constexpr int kStepsPerWindow = 20;

SupervisedTrainerConfig bench_config(TrainerPipeline pipeline) {
  SupervisedTrainerConfig c;
  c.batch = 256;
  c.window = 64;
  c.horizon = 1;
  c.epochs = 1000000;    // train_epoch() never reaches the epoch limit during a bench
  c.patience = 1000000;  // nor the patience
  c.seed = 7;
  c.pipeline = pipeline;
  return c;
}

std::size_t free_device_bytes() {
  std::size_t free = 0, total = 0;
  bench::check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  bench::check_cuda(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return free;
}

// The dataset (built once per row; its device memory is measured too) and a trainer of `model`.
struct BenchSetup {
  BenchSetup(const std::string& model, TrainerPipeline pipeline)
      : config(bench_config(pipeline)),
        free_before_dataset(free_device_bytes()),
        dataset(data::make_synthetic_series({.seed = 3, .steps = 20000, .features = 32}),
                window_spec(config), stream.get()),
        free_before_trainer(free_device_bytes()),
        trainer(make_supervised_trainer(model, config, dataset)),
        free_after_trainer(free_device_bytes()) {}

  void set_memory_counters(benchmark::State& state) const {
    const auto bytes = [](std::size_t before, std::size_t after) {
      return static_cast<double>(before > after ? before - after : 0);
    };
    state.counters["peak_device_bytes"] = bytes(free_before_trainer, free_after_trainer);
    state.counters["dataset_device_bytes"] = bytes(free_before_dataset, free_before_trainer);
    state.counters["parameters"] = static_cast<double>(trainer->model().slab().total_elements());
  }

  SupervisedTrainerConfig config;
  Stream stream;
  std::size_t free_before_dataset;
  data::SeriesDataset dataset;
  std::size_t free_before_trainer;
  std::unique_ptr<SupervisedTrainer> trainer;
  std::size_t free_after_trainer;
};

void BM_step(benchmark::State& state, const std::string& model, TrainerPipeline pipeline) {
  BenchSetup setup(model, pipeline);
  SupervisedTrainer& trainer = *setup.trainer;
  const bool resident = pipeline == TrainerPipeline::Resident;
  bench::TimedPhase timed(state, resident ? "supervised/step" : "supervised/host_fed_step",
                          resident ? bench::zero_transfer_contract() : audit::TransferContract{},
                          trainer.context().stream());
  std::size_t index = 0;
  const auto window = [&] {
    for (int i = 0; i < kStepsPerWindow; ++i) {
      if (resident) {
        trainer.resident_step();
      } else {
        (void)trainer.host_fed_step(index++);
      }
    }
  };
  timed.count_steps_per_iteration(kStepsPerWindow);
  timed.warm_up(window, 2);
  for (auto _ : state) timed.iteration(window);
  timed.finish();
  timed.set_rate("windows_per_s", static_cast<double>(setup.config.batch));
  setup.set_memory_counters(state);
  state.SetLabel(trainer.model().describe());
}

audit::TransferContract resident_epoch_contract() {
  return {.phase = "supervised/epoch",
          .max_d2h_scalar = SupervisedEpochContract::max_d2h_scalar,
          .max_d2h_bulk = SupervisedEpochContract::max_d2h_bulk,
          .max_h2d = SupervisedEpochContract::max_h2d,
          .max_syncs = SupervisedEpochContract::max_syncs};
}

void BM_epoch(benchmark::State& state, const std::string& model, TrainerPipeline pipeline) {
  BenchSetup setup(model, pipeline);
  SupervisedTrainer& trainer = *setup.trainer;
  const bool resident = pipeline == TrainerPipeline::Resident;
  bench::TimedPhase timed(state, resident ? "supervised/epoch" : "supervised/host_fed_epoch",
                          resident ? resident_epoch_contract() : audit::TransferContract{},
                          trainer.context().stream());
  const auto epoch = [&] { (void)trainer.train_epoch(); };
  timed.warm_up(epoch, 1);
  for (auto _ : state) timed.iteration(epoch);
  timed.finish();
  timed.set_rate("windows_per_s",
                 static_cast<double>(trainer.steps_per_epoch() * setup.config.batch));
  state.counters["steps_per_epoch"] = static_cast<double>(trainer.steps_per_epoch());
  setup.set_memory_counters(state);
  state.SetLabel(trainer.model().describe());
}

void BM_sample_diffusion(benchmark::State& state) {
  constexpr std::size_t kWindows = 256;
  const ModelShape shape{64, 32, 1, kWindows};
  auto base = make_supervised_model("diffusion", shape, 7);
  auto& model = dynamic_cast<DiffusionModel&>(*base);
  StreamContext context;
  std::vector<float> windows(kWindows * shape.window * shape.features);
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal;
  for (float& v : windows) v = normal(rng);
  bench::check_cuda(cudaMemcpy(model.sampler_window(), windows.data(),
                               windows.size() * sizeof(float), cudaMemcpyHostToDevice),
                    "cudaMemcpy");
  DeviceBuffer<float> mean(kWindows * shape.outputs);
  model.capture_sampler(context, kWindows, 1, 0, {mean.data()});
  bench::TimedPhase timed(state, "supervised/sample", bench::zero_transfer_contract(),
                          context.stream());
  const auto sample = [&] { model.launch_sampler(context.stream()); };
  timed.warm_up(sample, 2);
  for (auto _ : state) timed.iteration(sample);
  timed.finish();
  timed.set_rate("forecasts_per_s", static_cast<double>(kWindows));
  state.SetLabel(model.describe());
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  resident::bench::add_context();
  for (const std::string& model : supervised_model_names()) {
    for (const auto& [name, pipeline] :
         {std::pair{"resident", TrainerPipeline::Resident},
          std::pair{"host_fed", TrainerPipeline::HostFed}}) {
      // Google Benchmark copies the name; older releases take it only as a C string.
      const std::string step = "supervised_step/" + std::string(name) + "/model:" + model;
      const std::string epoch = "supervised_epoch/" + std::string(name) + "/model:" + model;
      resident::bench::configure(
          benchmark::RegisterBenchmark(step.c_str(), BM_step, model, pipeline));
      resident::bench::configure(
          benchmark::RegisterBenchmark(epoch.c_str(), BM_epoch, model, pipeline), 3);
    }
  }
  resident::bench::configure(benchmark::RegisterBenchmark(
      "supervised_sample/resident/model:diffusion", BM_sample_diffusion));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
