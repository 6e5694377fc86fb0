// ReplayConfig: the parameters of a prioritized replay buffer (CPU or GPU), their validation,
// and the annealed importance-sampling exponent beta at a given step.
//
// Semantics shared by every buffer built from a ReplayConfig (DESIGN.md, "Prioritized replay:
// exact semantics"):
//   stored priority  p_i = (|delta_i| + epsilon)^alpha
//   proportional     P(i) = p_i / sum_j p_j
//   rank-based       P(i) = rank(i)^-alpha / sum_{r=1..M} r^-alpha, rank 1 = largest priority,
//                    M = number of live items with a positive priority
//   IS weight        w_i = (N * P(i))^-beta / max_j w_j, the max from the minimum live P
#pragma once

#include <cstddef>
#include <cstdint>

namespace resident {

// Slot indices are int32 on the device.
inline constexpr std::size_t kMaxReplayCapacity = 2147483647;
inline constexpr std::size_t kMaxReplayStateDim = 2147483647;

// How a batch of B draws covers the priority mass.
enum class ReplaySampling {
  Stratified,   // B equal strata of the total mass, one uniform draw in each
  Independent,  // B independent draws over the whole mass (with replacement)
};

// How stored priorities turn into sampling probabilities.
enum class ReplayPriorityMode {
  Proportional,  // P(i) proportional to p_i
  Rank,          // P(i) proportional to 1 / rank(i)^alpha
};

struct ReplayConfig {
  std::size_t capacity = 0;   // slots in the ring buffer, [1, kMaxReplayCapacity]; must be set
  std::size_t state_dim = 0;  // floats per state, [1, kMaxReplayStateDim]; must be set
  double alpha = 0.6;         // priority exponent, finite, >= 0 (0 = uniform)
  double beta_start = 0.4;    // IS exponent at step 0, in [0, 1]
  double beta_max = 1.0;      // IS exponent from step beta_annealing_steps on, in [beta_start, 1]
  std::uint64_t beta_annealing_steps = 100000;  // 0: beta_max from step 0
  double epsilon = 1e-6;                        // added to |delta| before the exponent, finite, > 0
  ReplaySampling sampling = ReplaySampling::Stratified;
  ReplayPriorityMode mode = ReplayPriorityMode::Proportional;
};

// Throws resident::Error listing every invalid field of `config`, each as
// "<field> = <value>, allowed <range>". Returns normally when all fields are valid.
void validate(const ReplayConfig& config);

// Throws resident::Error unless 1 <= batch <= size (a batch is drawn from the `size` live items).
void validate_batch(std::size_t batch, std::size_t size);

// beta after `step` sample calls: beta_start + (beta_max - beta_start) * step / annealing_steps,
// equal to beta_max for step >= beta_annealing_steps (and always when annealing_steps == 0).
double beta_at(const ReplayConfig& config, std::uint64_t step);

}  // namespace resident
