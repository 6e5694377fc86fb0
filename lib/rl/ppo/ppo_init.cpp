#include "lib/rl/ppo/ppo_init.h"

#include "lib/nn/initializers.h"

namespace resident::ppo {

std::vector<float> orthogonal_matrix(std::size_t rows, std::size_t cols, double gain,
                                     std::mt19937_64& rng) {
  return nn::initial_values(nn::Initializer::orthogonal(gain), rows, cols, rng);
}

}  // namespace resident::ppo
