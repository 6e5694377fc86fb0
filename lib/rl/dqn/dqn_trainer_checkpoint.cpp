// DqnTrainer::save_checkpoint / load_checkpoint (file format in dqn_checkpoint.h).
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "lib/core/checkpoint_file.h"
#include "lib/nn/slab_checkpoint.h"
#include "lib/rl/dqn/dqn_checkpoint.h"
#include "lib/rl/dqn/dqn_trainer.h"

namespace resident::dqn {

namespace {

std::vector<std::byte> as_bytes(const std::vector<std::uint8_t>& values) {
  const auto* first = reinterpret_cast<const std::byte*>(values.data());
  return {first, first + values.size()};
}

std::span<const std::uint8_t> as_u8(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()};
}

}  // namespace

void DqnTrainer::save_checkpoint(const std::filesystem::path& path, bool include_replay) {
  if (config_.pipeline != DqnPipeline::Resident)
    throw Error("DqnTrainer::save_checkpoint", "unsupported",
                "checkpoints cover the resident pipeline only", __FILE__, __LINE__);
  const cudaStream_t s = context_.stream();
  context_.synchronize();
  DqnTrainerState state;
  state.vector_steps = vector_steps_;
  state.gradient_steps = gradient_steps_;
  state.epoch = epoch_;
  state.tracker_counters = tracker_counters_.download();
  state.train_counters = train_counters_.download();
  state.epoch_return_sum = epoch_return_sum_.download().at(0);
  state.epoch_loss_sum = epoch_loss_sum_.download().at(0);
  state.running_return = running_return_.download();
  state.recent_returns = recent_returns_.download();
  state.current_obs = current_obs_.download();

  CheckpointWriter out = dqn_checkpoint_writer(config_hash(config_));
  out.add(kDqnTrainerSection, dqn_trainer_section(state));
  out.add(kDqnOnlineSlabSection,
          nn::slab_section(online_slab_.layout(), nn::download_slab_state(online_slab_, s)));
  out.add(kDqnTargetSlabSection,
          nn::slab_section(target_slab_.layout(), nn::download_slab_state(target_slab_, s)));
  out.add(kDqnEnvSection, as_bytes(env_->save_state()));
  if (include_replay) gpu_replay_->save_section(out);
  out.write(path);
}

void DqnTrainer::load_checkpoint(const std::filesystem::path& path) {
  if (config_.pipeline != DqnPipeline::Resident)
    throw Error("DqnTrainer::load_checkpoint", "unsupported",
                "checkpoints cover the resident pipeline only", __FILE__, __LINE__);
  // 1. Validate everything on the host; nothing changes until all of it passed.
  const CheckpointFile file = read_dqn_checkpoint(path, config_hash(config_));
  const DqnTrainerState state =
      read_dqn_trainer_section(file, {tracker_counters_.size(), train_counters_.size(),
                                      running_return_.size(), recent_returns_.size(),
                                      current_obs_.size()});
  const nn::SlabState online =
      nn::read_slab_section(file, kDqnOnlineSlabSection, online_slab_.layout());
  const nn::SlabState target =
      nn::read_slab_section(file, kDqnTargetSlabSection, target_slab_.layout());

  // The env's and replay's states are checked (shapes, sizes) and staged, not yet applied.
  context_.synchronize();
  std::optional<DeviceStateReader> env_staged, replay_staged;
  try {
    env_staged.emplace(env_->stage_state(as_u8(file.section(kDqnEnvSection))));
  } catch (const Error& e) {
    if (e.error_name() != "state mismatch") throw;
    throw Error("DqnTrainer::load_checkpoint(\"" + path.string() + "\" section \"" +
                    kDqnEnvSection + "\")",
                "checkpoint mismatch", e.what(), __FILE__, __LINE__);
  }
  if (file.has(kReplaySection)) replay_staged.emplace(gpu_replay_->stage_section(file));

  // 2. Apply.
  env_staged->commit();
  if (replay_staged) replay_staged->commit();
  const cudaStream_t s = context_.stream();
  nn::upload_slab_state(online_slab_, online, s);
  nn::upload_slab_state(target_slab_, target, s);
  tracker_counters_.upload(state.tracker_counters);
  train_counters_.upload(state.train_counters);
  epoch_return_sum_.upload(std::span<const double>(&state.epoch_return_sum, 1));
  epoch_loss_sum_.upload(std::span<const double>(&state.epoch_loss_sum, 1));
  running_return_.upload(state.running_return);
  recent_returns_.upload(state.recent_returns);
  current_obs_.upload(state.current_obs);
  vector_steps_ = state.vector_steps;
  gradient_steps_ = state.gradient_steps;
  epoch_ = state.epoch;
}

}  // namespace resident::dqn
