#include "lib/rl/dqn/dqn_checkpoint.h"

#include <string>

namespace resident::dqn {

CheckpointWriter dqn_checkpoint_writer(std::uint64_t config_hash) {
  CheckpointWriter out(kDqnCheckpointKind);
  out.add(kDqnConfigSection, SectionWriter().put<std::uint64_t>(config_hash).take());
  return out;
}

CheckpointFile read_dqn_checkpoint(const std::filesystem::path& path,
                                   std::uint64_t expected_config_hash) {
  CheckpointFile file = CheckpointFile::read(path, kDqnCheckpointKind);
  SectionReader r = file.reader(kDqnConfigSection);
  const auto hash = r.get<std::uint64_t>("config hash");
  r.finish();
  if (hash != expected_config_hash)
    r.mismatch("config hash " + std::to_string(hash) + " in the file, " +
               std::to_string(expected_config_hash) +
               " in this trainer (the file was written under another configuration)");
  return file;
}

std::vector<std::byte> dqn_trainer_section(const DqnTrainerState& state) {
  return SectionWriter()
      .put<std::uint64_t>(state.vector_steps)
      .put<std::uint64_t>(state.gradient_steps)
      .put<std::uint64_t>(state.epoch)
      .put_array<std::uint64_t>(state.tracker_counters)
      .put_array<std::uint64_t>(state.train_counters)
      .put<double>(state.epoch_return_sum)
      .put<double>(state.epoch_loss_sum)
      .put_array<float>(state.running_return)
      .put_array<float>(state.recent_returns)
      .put_array<float>(state.current_obs)
      .take();
}

DqnTrainerState read_dqn_trainer_section(const CheckpointFile& file, const DqnTrainerShape& shape) {
  SectionReader r = file.reader(kDqnTrainerSection);
  DqnTrainerState s;
  s.vector_steps = r.get<std::uint64_t>("vector steps");
  s.gradient_steps = r.get<std::uint64_t>("gradient steps");
  s.epoch = r.get<std::uint64_t>("epoch");
  s.tracker_counters =
      r.get_array_matching<std::uint64_t>("tracker counters", shape.tracker_counters);
  s.train_counters = r.get_array_matching<std::uint64_t>("train counters", shape.train_counters);
  s.epoch_return_sum = r.get<double>("epoch return sum");
  s.epoch_loss_sum = r.get<double>("epoch loss sum");
  s.running_return = r.get_array_matching<float>("running returns", shape.running_return);
  s.recent_returns = r.get_array_matching<float>("recent returns", shape.recent_returns);
  s.current_obs = r.get_array_matching<float>("current observations", shape.current_obs);
  r.finish();
  return s;
}

}  // namespace resident::dqn
