// QNetwork: the DQN Q-function, an Mlp from the nn kit over one ParamSlab, with an optional
// dueling head (Q = V + A - mean A). The online and the target network are two QNetworks of
// the same shape on two slabs: their layouts are identical, so a target update is one kernel
// over the params slab.
//
//   ParamSlab slab;  QNetwork q({...}, max_batch, slab);  slab.finalize();
//   q.bind(seed, stream);                                         // setup: arena, init
//   const float* values = q.forward(context, x, batch);          // [batch, A], hot path
//   q.backward(context, x, d_values, batch);                      // grads accumulate
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "lib/core/device_buffer.h"
#include "lib/core/scratch_arena.h"
#include "lib/core/stream.h"
#include "lib/nn/mlp.h"
#include "lib/nn/param_slab.h"

namespace resident::dqn {

struct QNetworkShape {
  std::size_t observation_size = 0;
  std::size_t action_count = 0;
  std::vector<std::size_t> hidden;
  bool dueling = false;
};

class QNetwork {
 public:
  // Declares the tensors ("q.<l>.weight", "q.<l>.bias") in `slab` (before its finalize()).
  QNetwork(const QNetworkShape& shape, std::size_t max_batch, nn::ParamSlab& slab);

  // After slab.finalize(): allocates the arena of the saved tensors and initializes the
  // parameters from `seed` (Kaiming uniform, zero biases). Setup only.
  void bind(std::uint64_t seed, cudaStream_t stream);

  // Q-values [batch, A], valid until the next forward of this network. Hot path.
  const float* forward(const StreamContext& context, const float* x, std::size_t batch);
  // Parameter gradients of sum(d_values * Q) into the slab's grads (mode: accumulate, or
  // overwrite every grad of this network: no zeroing needed); must follow the forward of the
  // same x, or of a larger batch starting with it (its first `batch` rows: the trainer's
  // [states; next_states] forward). Hot path.
  void backward(const StreamContext& context, const float* x, const float* d_values,
                std::size_t batch, nn::GradMode mode = nn::GradMode::Accumulate);

  std::size_t action_count() const noexcept { return shape_.action_count; }
  std::size_t observation_size() const noexcept { return shape_.observation_size; }
  const nn::Mlp& mlp() const noexcept { return mlp_; }

 private:
  QNetworkShape shape_;
  std::size_t max_batch_;
  nn::Mlp mlp_;
  std::unique_ptr<ScratchArena> arena_;
  DeviceBuffer<float> q_, d_head_;  // dueling only: [max_batch, A], [max_batch, 1 + A]
};

}  // namespace resident::dqn
