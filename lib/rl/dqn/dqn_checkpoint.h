// The DQN checkpoint (DqnTrainer::save_checkpoint / load_checkpoint): one checkpoint container
// (lib/core/checkpoint_file.h: one checksum, atomic write, validated whole before it is read) of
// kind "dqn-trainer" with the sections
//
//   "config"       u64 config hash (config_hash(config)): another configuration's file is refused
//                  before any other section is read
//   "trainer"      the trainer's own state (DqnTrainerState, in its declaration order)
//   "online-slab"  the online network's slab (lib/nn/slab_checkpoint.h section)
//   "target-slab"  the target network's slab
//   "env"          the env state (DqnEnv::save_state's records)
//   "replay"       optional: the replay (GpuReplayBuffer::save_section)
//
// This file holds the host side of the format (no device copies), so it is tested without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <vector>

#include "lib/core/checkpoint_file.h"

namespace resident::dqn {

inline constexpr const char* kDqnCheckpointKind = "dqn-trainer";
inline constexpr const char* kDqnConfigSection = "config";
inline constexpr const char* kDqnTrainerSection = "trainer";
inline constexpr const char* kDqnOnlineSlabSection = "online-slab";
inline constexpr const char* kDqnTargetSlabSection = "target-slab";
inline constexpr const char* kDqnEnvSection = "env";

// Host copies of the trainer's counters, device accumulators, tracker and policy state.
struct DqnTrainerState {
  std::uint64_t vector_steps = 0, gradient_steps = 0, epoch = 0;
  std::vector<std::uint64_t> tracker_counters, train_counters;
  double epoch_return_sum = 0.0, epoch_loss_sum = 0.0;
  std::vector<float> running_return, recent_returns, current_obs;
};

// The array lengths a trainer expects of a DqnTrainerState.
struct DqnTrainerShape {
  std::size_t tracker_counters = 0, train_counters = 0;
  std::size_t running_return = 0, recent_returns = 0, current_obs = 0;
};

// A writer of kind kDqnCheckpointKind holding the "config" section; the caller adds the others.
CheckpointWriter dqn_checkpoint_writer(std::uint64_t config_hash);

// Reads and validates `path` (the container's errors), then its config hash: another one throws
// resident::Error "checkpoint mismatch" naming the file, the section and both hashes.
CheckpointFile read_dqn_checkpoint(const std::filesystem::path& path,
                                   std::uint64_t expected_config_hash);

std::vector<std::byte> dqn_trainer_section(const DqnTrainerState& state);
// The "trainer" section; an array of another length than `shape`'s throws "checkpoint mismatch"
// naming the file, the section, the field and both lengths.
DqnTrainerState read_dqn_trainer_section(const CheckpointFile& file, const DqnTrainerShape& shape);

}  // namespace resident::dqn
