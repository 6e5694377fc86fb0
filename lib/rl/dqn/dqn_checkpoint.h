// The DQN checkpoint file (DqnTrainer::save_checkpoint / load_checkpoint). Little-endian:
//
//   bytes   field
//   8       magic "RSDDQNCK"
//   4       version (kDqnCheckpointVersion)
//   4       0 (reserved)
//   8       config hash (config_hash(config))
//   8       payload bytes P
//   P       sections, each: u32 tag, u32 0, u64 length, the bytes, zero padding to 8
//   8       checksum: FNV-1a 64 of every byte before it
//
// Sections: host counters, the online slab checkpoint file (slab_checkpoint.h format: params,
// AdamW m, v and step), the target slab checkpoint file, the device counters and accumulators,
// the tracker and policy arrays, the env state (DqnEnv::save_state) and, optionally, the replay
// state (GpuReplayBuffer::save_state). The file is written to a temporary
// beside the path, flushed, fsynced and renamed over it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace resident::rl {

inline constexpr std::uint32_t kDqnCheckpointVersion = 2;

using CheckpointSections = std::map<std::uint32_t, std::vector<std::uint8_t>>;

// Writes atomically; throws resident::Error on an I/O failure (the old file, if any, stays).
void write_dqn_checkpoint(const std::filesystem::path& path, std::uint64_t config_hash,
                          const CheckpointSections& sections);

// Reads and validates (magic, version, exact size, checksum, config hash, section structure);
// throws resident::Error naming the file and what is wrong.
CheckpointSections read_dqn_checkpoint(const std::filesystem::path& path,
                                       std::uint64_t expected_config_hash);

// The whole contents of a file (throws naming it).
std::vector<std::uint8_t> read_file_bytes(const std::filesystem::path& path);
// Writes bytes to `path` (plain write; throws naming it).
void write_file_bytes(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes);

}  // namespace resident::rl
