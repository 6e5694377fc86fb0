// PpoTrainer::save / load (checkpoint phase; format in ppo_checkpoint.h).
#include <filesystem>
#include <span>
#include <sstream>
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "lib/core/checkpoint_file.h"
#include "lib/nn/slab_checkpoint.h"
#include "lib/rl/ppo/ppo_checkpoint.h"
#include "lib/rl/ppo/ppo_trainer.h"

namespace resident::ppo {

void PpoTrainer::save(const std::filesystem::path& path) {
  const NvtxRange range("ppo/save");
  const cudaStream_t s = stream();
  context_.synchronize();
  PpoTrainerState state;
  state.updates_done = updates_done_;
  state.device_counters.resize(counters_.size());
  RESIDENT_CUDA_CHECK(cudaMemcpyAsync(state.device_counters.data(), counters_.data(),
                                      counters_.bytes(), cudaMemcpyDeviceToHost, s));
  RESIDENT_CUDA_CHECK(cudaStreamSynchronize(s));
  std::ostringstream rng;
  rng << host_rng_;
  state.host_rng = rng.str();

  CheckpointWriter out = ppo_checkpoint_writer(config_hash(config_));
  out.add(kPpoTrainerSection, ppo_trainer_section(state));
  out.add(kPpoSlabSection, nn::slab_section(slab_.layout(), nn::download_slab_state(slab_, s)));
  out.add(kPpoEnvSection, env_.save_state(s));
  out.write(path);
}

void PpoTrainer::load(const std::filesystem::path& path) {
  const NvtxRange range("ppo/load");
  const cudaStream_t s = stream();
  // Everything is validated before anything changes.
  const CheckpointFile file = read_ppo_checkpoint(path, config_hash(config_));
  const PpoTrainerState state = read_ppo_trainer_section(file, counters_.size());
  std::mt19937_64 rng;
  std::istringstream rng_text(state.host_rng);
  rng_text >> rng;
  if (!rng_text)
    throw Error("PpoTrainer::load(\"" + path.string() + "\" section \"" + kPpoTrainerSection +
                    "\")",
                "corrupt checkpoint", "the host RNG state does not parse", __FILE__, __LINE__);
  const nn::SlabState slab = nn::read_slab_section(file, kPpoSlabSection, slab_.layout());
  const std::span<const std::byte> env_state = file.section(kPpoEnvSection);
  try {
    env_.check_state(env_state);
  } catch (const Error& e) {
    throw Error("PpoTrainer::load(\"" + path.string() + "\" section \"" + kPpoEnvSection + "\")",
                e.error_name(), e.what(), __FILE__, __LINE__);
  }

  context_.synchronize();
  nn::upload_slab_state(slab_, slab, s);
  env_.load_state(env_state, s);
  RESIDENT_CUDA_CHECK(cudaMemcpyAsync(counters_.data(), state.device_counters.data(),
                                      counters_.bytes(), cudaMemcpyHostToDevice, s));
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(metric_sums_.data(), 0, metric_sums_.bytes(), s));
  RESIDENT_CUDA_CHECK(cudaStreamSynchronize(s));
  updates_done_ = state.updates_done;
  host_rng_ = rng;
}

}  // namespace resident::ppo
