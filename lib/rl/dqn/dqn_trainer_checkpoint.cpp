// DqnTrainer::save_checkpoint / load_checkpoint (file format in dqn_checkpoint.h).
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "kernels/core/error.h"
#include "lib/nn/slab_checkpoint.h"
#include "lib/rl/dqn/dqn_checkpoint.h"
#include "lib/rl/dqn/dqn_trainer.h"

namespace resident::rl {

namespace {

enum Section : std::uint32_t {
  kHostCounters = 1,
  kOnlineSlab = 2,
  kTargetSlab = 3,
  kDeviceCounters = 4,
  kDeviceSums = 5,
  kDeviceArrays = 6,
  kEnvState = 7,     // DqnEnv::save_state
  kReplayState = 8,  // GpuReplayBuffer::save_state (optional)
};

template <class T>
std::vector<std::uint8_t> to_bytes(std::span<const T> values) {
  std::vector<std::uint8_t> bytes(values.size_bytes());
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

template <class T>
void append(std::vector<std::uint8_t>& bytes, std::span<const T> values) {
  const std::vector<std::uint8_t> more = to_bytes(values);
  bytes.insert(bytes.end(), more.begin(), more.end());
}

template <class T>
std::vector<T> from_bytes(const std::uint8_t* data, std::size_t count) {
  std::vector<T> values(count);
  if (count != 0) std::memcpy(values.data(), data, count * sizeof(T));
  return values;
}

// A temporary file removed when the guard goes out of scope.
class TempFile {
 public:
  explicit TempFile(std::filesystem::path path) : path_(std::move(path)) {}
  ~TempFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
};

std::filesystem::path beside(const std::filesystem::path& path, const char* suffix) {
  std::filesystem::path p = path;
  p += suffix;
  return p;
}

const std::vector<std::uint8_t>& section(const CheckpointSections& sections, Section tag,
                                         std::size_t expected_bytes,
                                         const std::filesystem::path& path) {
  const auto it = sections.find(tag);
  if (it == sections.end())
    throw Error("DqnCheckpoint", "corrupt checkpoint",
                path.string() + ": section " + std::to_string(tag) + " is missing", __FILE__,
                __LINE__);
  if (expected_bytes != 0 && it->second.size() != expected_bytes)
    throw Error("DqnCheckpoint", "checkpoint mismatch",
                path.string() + ": section " + std::to_string(tag) + " has " +
                    std::to_string(it->second.size()) + " bytes, this trainer needs " +
                    std::to_string(expected_bytes),
                __FILE__, __LINE__);
  return it->second;
}

}  // namespace

void DqnTrainer::save_checkpoint(const std::filesystem::path& path, bool include_replay) {
  if (config_.pipeline != DqnPipeline::Resident)
    throw Error("DqnTrainer::save_checkpoint", "unsupported",
                "checkpoints cover the resident pipeline only", __FILE__, __LINE__);
  const cudaStream_t s = context_.stream();
  context_.synchronize();
  CheckpointSections sections;
  const std::uint64_t host[3] = {vector_steps_, gradient_steps_, epoch_};
  sections[kHostCounters] = to_bytes(std::span<const std::uint64_t>(host));
  {
    const TempFile online(beside(path, ".online.tmp")), target(beside(path, ".target.tmp"));
    online_slab_.save(online.path(), s);
    target_slab_.save(target.path(), s);
    sections[kOnlineSlab] = read_file_bytes(online.path());
    sections[kTargetSlab] = read_file_bytes(target.path());
  }
  std::vector<std::uint8_t> counters;
  append(counters, std::span<const std::uint64_t>(tracker_counters_.download()));
  append(counters, std::span<const std::uint64_t>(train_counters_.download()));
  sections[kDeviceCounters] = counters;
  std::vector<std::uint8_t> sums;
  append(sums, std::span<const double>(epoch_return_sum_.download()));
  append(sums, std::span<const double>(epoch_loss_sum_.download()));
  sections[kDeviceSums] = sums;
  std::vector<std::uint8_t> arrays;
  append(arrays, std::span<const float>(running_return_.download()));
  append(arrays, std::span<const float>(recent_returns_.download()));
  append(arrays, std::span<const float>(current_obs_.download()));
  sections[kDeviceArrays] = arrays;
  sections[kEnvState] = env_->save_state();
  if (include_replay) sections[kReplayState] = gpu_replay_->save_state();
  write_dqn_checkpoint(path, config_hash(config_), sections);
}

void DqnTrainer::load_checkpoint(const std::filesystem::path& path) {
  if (config_.pipeline != DqnPipeline::Resident)
    throw Error("DqnTrainer::load_checkpoint", "unsupported",
                "checkpoints cover the resident pipeline only", __FILE__, __LINE__);
  // 1. Validate everything on the host; nothing changes until all of it passed.
  const CheckpointSections sections = read_dqn_checkpoint(path, config_hash(config_));
  const auto& host = section(sections, kHostCounters, 3 * sizeof(std::uint64_t), path);
  const std::size_t counter_count = tracker_counters_.size() + train_counters_.size();
  const auto& counters = section(sections, kDeviceCounters, counter_count * sizeof(std::uint64_t), path);
  const auto& sums = section(sections, kDeviceSums, 2 * sizeof(double), path);
  const std::size_t float_count = running_return_.size() + recent_returns_.size() + current_obs_.size();
  const auto& arrays = section(sections, kDeviceArrays, float_count * sizeof(float), path);
  const auto& env_state = section(sections, kEnvState, 0, path);
  const auto replay_it = sections.find(kReplayState);
  const TempFile online(beside(path, ".online.tmp")), target(beside(path, ".target.tmp"));
  write_file_bytes(online.path(), section(sections, kOnlineSlab, 0, path));
  write_file_bytes(target.path(), section(sections, kTargetSlab, 0, path));
  try {
    (void)nn::read_slab_checkpoint(online.path(), online_slab_.layout());
    (void)nn::read_slab_checkpoint(target.path(), target_slab_.layout());
  } catch (const Error& e) {
    throw Error("DqnCheckpoint", "checkpoint mismatch",
                path.string() + ": network section: " + e.what(), __FILE__, __LINE__);
  }

  // The env's and replay's states are checked (shapes, sizes) and staged, not yet applied.
  context_.synchronize();
  std::optional<DeviceStateReader> env_staged, replay_staged;
  try {
    env_staged.emplace(env_->stage_state(env_state));
    if (replay_it != sections.end()) replay_staged.emplace(gpu_replay_->stage_state(replay_it->second));
  } catch (const Error& e) {
    throw Error("DqnCheckpoint", "checkpoint mismatch", path.string() + ": " + e.what(), __FILE__,
                __LINE__);
  }

  // 2. Apply.
  env_staged->commit();
  if (replay_staged) replay_staged->commit();
  online_slab_.load(online.path(), context_.stream());
  target_slab_.load(target.path(), context_.stream());
  const std::vector<std::uint64_t> c = from_bytes<std::uint64_t>(counters.data(), counter_count);
  tracker_counters_.upload(std::span<const std::uint64_t>(c).first(tracker_counters_.size()));
  train_counters_.upload(std::span<const std::uint64_t>(c).subspan(tracker_counters_.size()));
  const std::vector<double> d = from_bytes<double>(sums.data(), 2);
  epoch_return_sum_.upload(std::span<const double>(d).first(1));
  epoch_loss_sum_.upload(std::span<const double>(d).subspan(1));
  const std::vector<float> f = from_bytes<float>(arrays.data(), float_count);
  const std::span<const float> fs(f);
  running_return_.upload(fs.first(running_return_.size()));
  recent_returns_.upload(fs.subspan(running_return_.size(), recent_returns_.size()));
  current_obs_.upload(fs.subspan(running_return_.size() + recent_returns_.size()));
  const std::vector<std::uint64_t> h = from_bytes<std::uint64_t>(host.data(), 3);
  vector_steps_ = h[0];
  gradient_steps_ = h[1];
  epoch_ = h[2];
}

}  // namespace resident::rl
