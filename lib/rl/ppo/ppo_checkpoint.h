// The checkpoint file of a PPO trainer (host only; PpoTrainer::save/load do the device side).
// Little-endian, every section padded to a multiple of 8 bytes:
//
//   8   magic "RSDPPO\0\0"           8   version (kPpoCheckpointVersion), u64
//   8   config hash (config_hash)    8   updates done
//   8   device counter count C       8C  device counters (sampling, step slot, minibatch)
//   8   L, then L bytes              host RNG state (the host-staged sampler's, as text)
//   8   L, then L bytes              the parameter slab's own checkpoint file (params, AdamW m,
//                                    v and step; lib/nn/slab_checkpoint.h)
//   8   L, then L bytes              the environment state (VectorEnv::save_state)
//   8   checksum of every byte before it (FNV-1a 64)
//
// write_ppo_checkpoint writes a temporary file beside `path`, fsyncs it and renames it over
// `path`. read_ppo_checkpoint validates magic, version, structure, exact size, checksum and the
// config hash before it returns, and throws resident::Error naming what is wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace resident::ppo {

inline constexpr std::uint64_t kPpoCheckpointVersion = 1;

struct PpoCheckpointData {
  std::uint64_t config_hash = 0;
  std::uint64_t updates_done = 0;
  std::vector<std::uint64_t> device_counters;
  std::string host_rng;
  std::vector<std::byte> slab_file;
  std::vector<std::byte> env_state;
};

void write_ppo_checkpoint(const std::filesystem::path& path, const PpoCheckpointData& data);

// Throws "not a PPO checkpoint", "unsupported checkpoint version", "corrupt checkpoint"
// (truncated, trailing bytes, malformed, checksum mismatch) or "checkpoint mismatch" (another
// configuration's hash), or an I/O error.
PpoCheckpointData read_ppo_checkpoint(const std::filesystem::path& path,
                                      std::uint64_t expected_config_hash);

// Whole-file helpers (also used for the embedded slab file).
std::vector<std::byte> read_file_bytes(const std::filesystem::path& path);
void write_file_atomically(const std::filesystem::path& path, const std::vector<std::byte>& bytes);

}  // namespace resident::ppo
