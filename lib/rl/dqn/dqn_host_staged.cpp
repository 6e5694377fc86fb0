// The host-staged DQN pipeline: the classic round trips that the resident pipeline removes, as a
// framework driving a CPU replay runs them. The same env, policy and network kernels run eagerly
// on the device; per vector step the transitions are downloaded into a CpuReplayBuffer; per
// gradient step a batch is sampled and assembled on the host and uploaded, and the TD errors and
// the loss are downloaded, checked and turned into priority updates on the host. Staging goes
// through pinned buffers (an efficient host pipeline, the fair baseline), copies are ordered on
// the trainer's stream.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/core/philox.h"
#include "kernels/rl/dqn/train_metrics.h"
#include "lib/replay/cpu_replay_buffer.h"
#include "lib/rl/dqn/dqn_trainer.h"

namespace resident::dqn {

namespace kd = kernels::dqn;

namespace {

constexpr std::uint64_t kHostSamplerStreamId = 0x4451484f53545247ull;

// A pinned host array (cudaMallocHost): the staging of the host-staged pipeline.
template <class T>
class PinnedArray {
 public:
  explicit PinnedArray(std::size_t count) : count_(count) {
    void* p = nullptr;
    RESIDENT_CUDA_CHECK(cudaMallocHost(&p, std::max<std::size_t>(count, 1) * sizeof(T)));
    data_ = static_cast<T*>(p);
  }
  ~PinnedArray() { (void)cudaFreeHost(data_); }
  PinnedArray(const PinnedArray&) = delete;
  PinnedArray& operator=(const PinnedArray&) = delete;
  T* data() noexcept { return data_; }
  std::span<const T> view() const noexcept { return {data_, count_}; }
  std::size_t bytes() const noexcept { return count_ * sizeof(T); }

 private:
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

template <class T>
void d2h(T* host, const T* device, std::size_t count, cudaStream_t stream) {
  RESIDENT_CUDA_CHECK(
      cudaMemcpyAsync(host, device, count * sizeof(T), cudaMemcpyDeviceToHost, stream));
}

template <class T>
void h2d(T* device, const T* host, std::size_t count, cudaStream_t stream) {
  RESIDENT_CUDA_CHECK(
      cudaMemcpyAsync(device, host, count * sizeof(T), cudaMemcpyHostToDevice, stream));
}

}  // namespace

struct DqnTrainer::HostStaging {
  CpuReplayBuffer replay;
  std::mt19937_64 rng;
  SampledBatch sampled;
  // One collection step's transitions, downloaded.
  PinnedArray<float> states, next_states, rewards;
  PinnedArray<std::int32_t> actions;
  PinnedArray<std::uint8_t> dones;
  // One batch, assembled on the host and uploaded.
  PinnedArray<float> batch_states, batch_next_states, batch_rewards, batch_weights;
  PinnedArray<std::int32_t> batch_actions;
  PinnedArray<std::uint8_t> batch_dones;
  // Downloaded every train step.
  PinnedArray<float> td_errors, loss;
  // The uploaded batch on the device: states then next states in one [2b, d] block (the
  // layout of the GPU replay's batches, so both pipelines run the same train step).
  DeviceBuffer<float> d_states, d_rewards, d_weights;
  DeviceBuffer<std::int32_t> d_actions;
  DeviceBuffer<std::uint8_t> d_dones;

  HostStaging(const ReplayConfig& config, std::uint64_t seed, std::size_t n, std::size_t d,
              std::size_t b)
      : replay(config),
        rng(mix_seed(seed, kHostSamplerStreamId)),
        states(n * d),
        next_states(n * d),
        rewards(n),
        actions(n),
        dones(n),
        batch_states(b * d),
        batch_next_states(b * d),
        batch_rewards(b),
        batch_weights(b),
        batch_actions(b),
        batch_dones(b),
        td_errors(b),
        loss(1),
        d_states(2 * b * d),
        d_rewards(b),
        d_weights(b),
        d_actions(b),
        d_dones(b) {}
};

void DqnTrainer::HostStagingDeleter::operator()(HostStaging* staging) const noexcept {
  delete staging;
}

void DqnTrainer::set_up_host_staged(const ReplayConfig& replay) {
  staged_.reset(new HostStaging(replay, config_.seed, n_, d_, b_));
}

void DqnTrainer::host_staged_step(bool train) {
  const NvtxRange range("dqn/host_staged_step");
  const cudaStream_t s = context_.stream();
  HostStaging& h = *staged_;
  collect_step(/*tracker_beside=*/false);
  d2h(h.states.data(), trans_states_.data(), n_ * d_, s);
  d2h(h.next_states.data(), trans_next_states_.data(), n_ * d_, s);
  d2h(h.rewards.data(), env_->step_outputs().rewards, n_, s);
  d2h(h.actions.data(), actions_.data(), n_, s);
  d2h(h.dones.data(), trans_dones_.data(), n_, s);
  context_.synchronize();
  h.replay.insert_batch({h.states.view(), h.actions.view(), h.rewards.view(), h.next_states.view(),
                         h.dones.view()});
  if (!train) return;
  for (std::size_t g = 0; g < config_.gradient_steps_per_env_step; ++g) {
    h.replay.sample(b_, h.rng, h.sampled);
    std::memcpy(h.batch_states.data(), h.sampled.states.data(), h.batch_states.bytes());
    std::memcpy(h.batch_next_states.data(), h.sampled.next_states.data(),
                h.batch_next_states.bytes());
    std::memcpy(h.batch_rewards.data(), h.sampled.rewards.data(), h.batch_rewards.bytes());
    std::memcpy(h.batch_weights.data(), h.sampled.is_weights.data(), h.batch_weights.bytes());
    std::memcpy(h.batch_actions.data(), h.sampled.actions.data(), h.batch_actions.bytes());
    std::memcpy(h.batch_dones.data(), h.sampled.dones.data(), h.batch_dones.bytes());
    h2d(h.d_states.data(), h.batch_states.data(), b_ * d_, s);
    h2d(h.d_states.data() + b_ * d_, h.batch_next_states.data(), b_ * d_, s);
    h2d(h.d_rewards.data(), h.batch_rewards.data(), b_, s);
    h2d(h.d_weights.data(), h.batch_weights.data(), b_, s);
    h2d(h.d_actions.data(), h.batch_actions.data(), b_, s);
    h2d(h.d_dones.data(), h.batch_dones.data(), b_, s);
    train_on_batch({h.d_states.data(), h.d_actions.data(), h.d_rewards.data(),
                    h.d_states.data() + b_ * d_, h.d_dones.data(), h.d_weights.data(),
                    /*states_then_next_states=*/true});
    kd::launch_train_metrics(metrics_state(), loss_.data(), td_errors_.data(), b_, s);
    d2h(h.td_errors.data(), td_errors_.data(), b_, s);
    d2h(h.loss.data(), loss_.data(), 1, s);
    context_.synchronize();
    const std::uint64_t step = gradient_steps_ + g + 1;
    const std::span<const float> td = h.td_errors.view();
    const bool bad_td =
        std::any_of(td.begin(), td.end(), [](float v) { return !std::isfinite(v); });
    if (!std::isfinite(h.loss.data()[0]) || bad_td)
      throw Error("DqnTrainer::train_epoch", "non-finite loss or TD error",
                  "at gradient step " + std::to_string(step) + " (host-staged; loss " +
                      std::to_string(h.loss.data()[0]) + "); training stopped",
                  __FILE__, __LINE__);
    h.replay.update_priorities(h.sampled.indices, h.sampled.generations, td);
  }
}

}  // namespace resident::dqn
