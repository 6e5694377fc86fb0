// PpoTrainer::save / load (checkpoint phase; format in ppo_checkpoint.h).
#include <filesystem>
#include <sstream>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "lib/nn/slab_checkpoint.h"
#include "lib/rl/ppo/ppo_checkpoint.h"
#include "lib/rl/ppo/ppo_trainer.h"

namespace resident::ppo {

namespace {

std::filesystem::path slab_temp_path(const std::filesystem::path& path) {
  return path.string() + ".slab.tmp";
}

}  // namespace

void PpoTrainer::save(const std::filesystem::path& path) {
  const NvtxRange range("ppo/save");
  const cudaStream_t s = stream();
  context_.synchronize();
  PpoCheckpointData d;
  d.config_hash = config_hash(config_);
  d.updates_done = updates_done_;
  d.device_counters.resize(counters_.size());
  RESIDENT_CUDA_CHECK(cudaMemcpyAsync(d.device_counters.data(), counters_.data(), counters_.bytes(),
                                      cudaMemcpyDeviceToHost, s));
  RESIDENT_CUDA_CHECK(cudaStreamSynchronize(s));
  std::ostringstream rng;
  rng << host_rng_;
  d.host_rng = rng.str();
  const std::filesystem::path slab_path = slab_temp_path(path);
  slab_.save(slab_path, s);
  d.slab_file = read_file_bytes(slab_path);
  std::filesystem::remove(slab_path);
  d.env_state = env_.save_state(s);
  write_ppo_checkpoint(path, d);
}

void PpoTrainer::load(const std::filesystem::path& path) {
  const NvtxRange range("ppo/load");
  const cudaStream_t s = stream();
  // Everything is validated before anything changes.
  const PpoCheckpointData d = read_ppo_checkpoint(path, config_hash(config_));
  if (d.device_counters.size() != counters_.size())
    throw Error("PpoTrainer::load(" + path.string() + ")", "checkpoint mismatch",
                std::to_string(d.device_counters.size()) + " device counters, this trainer has " +
                    std::to_string(counters_.size()),
                __FILE__, __LINE__);
  env_.check_state(d.env_state);
  std::mt19937_64 rng;
  std::istringstream rng_text(d.host_rng);
  rng_text >> rng;
  if (!rng_text)
    throw Error("PpoTrainer::load(" + path.string() + ")", "corrupt checkpoint",
                "the host RNG state does not parse", __FILE__, __LINE__);
  const std::filesystem::path slab_path = slab_temp_path(path);
  write_file_atomically(slab_path, d.slab_file);
  try {
    (void)nn::read_slab_checkpoint(slab_path, slab_.layout());
    context_.synchronize();
    slab_.load(slab_path, s);
  } catch (...) {
    std::filesystem::remove(slab_path);
    throw;
  }
  std::filesystem::remove(slab_path);
  env_.load_state(d.env_state, s);
  RESIDENT_CUDA_CHECK(cudaMemcpyAsync(counters_.data(), d.device_counters.data(), counters_.bytes(),
                                      cudaMemcpyHostToDevice, s));
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(metric_sums_.data(), 0, metric_sums_.bytes(), s));
  RESIDENT_CUDA_CHECK(cudaStreamSynchronize(s));
  updates_done_ = d.updates_done;
  host_rng_ = rng;
}

}  // namespace resident::ppo
