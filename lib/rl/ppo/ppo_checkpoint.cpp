#include "lib/rl/ppo/ppo_checkpoint.h"

namespace resident::ppo {

CheckpointWriter ppo_checkpoint_writer(std::uint64_t config_hash) {
  CheckpointWriter out(kPpoCheckpointKind);
  out.add(kPpoConfigSection, SectionWriter().put<std::uint64_t>(config_hash).take());
  return out;
}

CheckpointFile read_ppo_checkpoint(const std::filesystem::path& path,
                                   std::uint64_t expected_config_hash) {
  CheckpointFile file = CheckpointFile::read(path, kPpoCheckpointKind);
  SectionReader r = file.reader(kPpoConfigSection);
  const auto hash = r.get<std::uint64_t>("config hash");
  r.finish();
  if (hash != expected_config_hash)
    r.mismatch("config hash " + std::to_string(hash) + " in the file, " +
               std::to_string(expected_config_hash) +
               " in this trainer (the file was written under another configuration)");
  return file;
}

std::vector<std::byte> ppo_trainer_section(const PpoTrainerState& state) {
  return SectionWriter()
      .put<std::uint64_t>(state.updates_done)
      .put_array<std::uint64_t>(state.device_counters)
      .put_string(state.host_rng)
      .take();
}

PpoTrainerState read_ppo_trainer_section(const CheckpointFile& file,
                                         std::size_t device_counter_count) {
  SectionReader r = file.reader(kPpoTrainerSection);
  PpoTrainerState state;
  state.updates_done = r.get<std::uint64_t>("updates done");
  state.device_counters =
      r.get_array_matching<std::uint64_t>("device counters", device_counter_count);
  state.host_rng = r.get_string("host RNG");
  r.finish();
  return state;
}

}  // namespace resident::ppo
