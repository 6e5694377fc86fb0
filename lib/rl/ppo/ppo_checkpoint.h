// The PPO checkpoint (PpoTrainer::save / load): one checkpoint container
// (lib/core/checkpoint_file.h: one checksum, atomic write, validated whole before it is read) of
// kind "ppo-trainer" with the sections
//
//   "config"   u64 config hash (config_hash(config)): another configuration's file is refused
//              before any other section is read
//   "trainer"  updates done, the device counters (sampling, step slot, minibatch) and the host
//              RNG state (the host-staged sampler's, as text)
//   "slab"     the parameter slab: params, AdamW m, v and step (lib/nn/slab_checkpoint.h section)
//   "env"      the environment state (VectorEnv::save_state)
//
// This file holds the host side of the format (no device copies), so it is tested without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "lib/core/checkpoint_file.h"

namespace resident::ppo {

inline constexpr const char* kPpoCheckpointKind = "ppo-trainer";
inline constexpr const char* kPpoConfigSection = "config";
inline constexpr const char* kPpoTrainerSection = "trainer";
inline constexpr const char* kPpoSlabSection = "slab";
inline constexpr const char* kPpoEnvSection = "env";

struct PpoTrainerState {
  std::uint64_t updates_done = 0;
  std::vector<std::uint64_t> device_counters;
  std::string host_rng;
};

// A writer of kind kPpoCheckpointKind holding the "config" section; the caller adds the others.
CheckpointWriter ppo_checkpoint_writer(std::uint64_t config_hash);

// Reads and validates `path` (the container's errors), then its config hash: another one throws
// resident::Error "checkpoint mismatch" naming the file, the section and both hashes.
CheckpointFile read_ppo_checkpoint(const std::filesystem::path& path,
                                   std::uint64_t expected_config_hash);

std::vector<std::byte> ppo_trainer_section(const PpoTrainerState& state);
// The "trainer" section; another number of device counters throws "checkpoint mismatch" naming
// the file, the section and both counts.
PpoTrainerState read_ppo_trainer_section(const CheckpointFile& file,
                                         std::size_t device_counter_count);

}  // namespace resident::ppo
