// Dropout with an explicit keep-mask: y = x * keep_mask / keep_probability.
#include <string>

#include "tests/reference/nn_reference.h"
#include "tests/reference/nn_reference_checks.h"

namespace resident::reference {

using detail::require;
using detail::require_size;
using detail::write_grad;

namespace {

void require_keep_probability(const char* op, double keep_probability) {
  require(keep_probability > 0.0 && keep_probability <= 1.0, op,
          "keep_probability = " + std::to_string(keep_probability) + ", allowed (0, 1]");
}

}  // namespace

std::vector<double> dropout_forward(std::span<const double> x,
                                    std::span<const std::uint8_t> keep_mask,
                                    double keep_probability) {
  require_size("dropout_forward", "keep_mask", keep_mask.size(), x.size());
  require_keep_probability("dropout_forward", keep_probability);
  detail::require_binary_mask("dropout_forward", "keep_mask", keep_mask);
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    y[i] = keep_mask[i] != 0 ? x[i] / keep_probability : 0.0;
  return y;
}

void dropout_backward(std::span<const std::uint8_t> keep_mask, double keep_probability,
                      std::span<const double> dy, std::span<double> dx, GradMode mode) {
  require_size("dropout_backward", "dy", dy.size(), keep_mask.size());
  require_size("dropout_backward", "dx", dx.size(), keep_mask.size());
  require_keep_probability("dropout_backward", keep_probability);
  detail::require_binary_mask("dropout_backward", "keep_mask", keep_mask);
  for (std::size_t i = 0; i < dx.size(); ++i)
    write_grad(dx[i], keep_mask[i] != 0 ? dy[i] / keep_probability : 0.0, mode);
}

}  // namespace resident::reference
