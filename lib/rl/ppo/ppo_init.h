// Orthogonal initialization (Saxe et al. 2014) of PPO's actor and critic, as CleanRL's
// layer_init: hidden layers gain sqrt(2), the policy head 0.01, the value head 1; zero biases.
#pragma once

#include <cstddef>
#include <random>
#include <vector>

namespace resident::ppo {

// A [rows, cols] row-major matrix with orthonormal rows (rows < cols) or columns (rows >= cols),
// times gain: nn::initial_values(nn::Initializer::orthogonal(gain), rows, cols, rng) (draws and
// modified Gram-Schmidt in double as lib/nn/initializers.h says), continuing `rng`.
std::vector<float> orthogonal_matrix(std::size_t rows, std::size_t cols, double gain,
                                     std::mt19937_64& rng);

}  // namespace resident::ppo
