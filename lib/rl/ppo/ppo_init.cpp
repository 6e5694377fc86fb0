#include "lib/rl/ppo/ppo_init.h"

#include <cmath>

namespace resident::ppo {

std::vector<float> orthogonal_matrix(std::size_t rows, std::size_t cols, double gain,
                                     std::mt19937_64& rng) {
  // Orthonormalize the k = min(rows, cols) vectors of length L = max(rows, cols).
  const bool tall = rows >= cols;
  const std::size_t length = tall ? rows : cols, count = tall ? cols : rows;
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<std::vector<double>> q(count, std::vector<double>(length));
  for (auto& v : q)
    for (double& x : v) x = normal(rng);
  for (std::size_t i = 0; i < count; ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      double dot = 0.0;
      for (std::size_t k = 0; k < length; ++k) dot += q[i][k] * q[j][k];
      for (std::size_t k = 0; k < length; ++k) q[i][k] -= dot * q[j][k];
    }
    double norm = 0.0;
    for (double x : q[i]) norm += x * x;
    norm = std::sqrt(norm);
    for (double& x : q[i]) x /= norm;
  }
  std::vector<float> out(rows * cols);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c)
      out[r * cols + c] = static_cast<float>(gain * (tall ? q[c][r] : q[r][c]));
  return out;
}

}  // namespace resident::ppo
