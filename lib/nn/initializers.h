// Weight initializers: seeded, deterministic host-side fills of a row-major weight
// [fan_out, fan_in] (fan_in = columns), computed in double from std::mt19937_64 and stored as
// float. Setup only: the values are made on the host and uploaded once.
//
//   const Initializer init = Initializer::kaiming_uniform(relu_gain);
//   std::vector<float> w = initial_values(init, /*fan_out=*/256, /*fan_in=*/64, /*seed=*/7);
//   upload_initial_values(slab, "fc1.weight", init, /*seed=*/7, stream);  // same values
//
// Kinds and their value distributions (the variance is what every kind but Constant sets):
//   Constant(value)         every element = value
//   Uniform(low, high)      U[low, high)                       mean (low+high)/2, var (high-low)^2/12
//   Normal(mean, stddev)    N(mean, stddev^2)
//   XavierUniform(gain)     U[-b, b], b = gain*sqrt(6/(fan_in+fan_out))       var gain^2*2/(fan_in+fan_out)
//   XavierNormal(gain)      N(0, s^2), s = gain*sqrt(2/(fan_in+fan_out))      (Glorot & Bengio 2010)
//   KaimingUniform(gain)    U[-b, b], b = gain*sqrt(3/fan_in)                 var gain^2/fan_in
//   KaimingNormal(gain)     N(0, s^2), s = gain/sqrt(fan_in)                  (He et al. 2015, fan_in mode)
//   Orthogonal(gain)        gain*Q, Q from the QR decomposition of a standard normal matrix with R's
//                           diagonal positive (Saxe et al. 2014), so Q is Haar distributed: orthonormal
//                           rows when fan_out <= fan_in (W W^T = gain^2 I), orthonormal columns when
//                           fan_out > fan_in (W^T W = gain^2 I).
// The gain matches the layer's nonlinearity: relu_gain = sqrt(2) for ReLU (He et al.),
// tanh_gain = 5/3, 1 for linear/sigmoid layers (PyTorch's calculate_gain gives the same values).
//
// Draw order (part of the contract: a seed names the same values in every build with the same
// standard library): Uniform, Normal, Xavier and Kaiming take their values element by element in
// row-major order from one distribution object per call. Orthogonal draws the k = min(fan_out, fan_in)
// vectors of length max(fan_out, fan_in) that it orthonormalizes one after the other (the rows of
// W when fan_out < fan_in, the columns of W otherwise, square included), then runs modified
// Gram-Schmidt in double; dividing each vector by its positive remaining norm is the diag(R) > 0
// sign convention. One pass suffices here: its loss of orthogonality is about 1e-16 * cond(draw),
// far below float rounding for any Gaussian draw. Constant draws nothing.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <numbers>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "lib/nn/param_slab.h"

namespace resident::nn {

// Gains for the layer's nonlinearity (the weight's variance is scaled by gain^2).
inline constexpr double relu_gain = std::numbers::sqrt2;  // ReLU: sqrt(2)
inline constexpr double tanh_gain = 5.0 / 3.0;            // tanh
inline constexpr double linear_gain = 1.0;                // identity, sigmoid

enum class InitializerKind {
  Constant,
  Uniform,
  Normal,
  XavierUniform,
  XavierNormal,
  KaimingUniform,
  KaimingNormal,
  Orthogonal,
};

// "constant", "uniform", ..., "orthogonal".
std::string_view initializer_kind_name(InitializerKind kind) noexcept;

// One initializer: the kind and the fields it reads (the others are ignored). Build it with the
// named constructors, which validate their arguments (throw resident::Error naming the field,
// its value and the allowed range); initial_values validates again, for hand-set fields.
struct Initializer {
  InitializerKind kind = InitializerKind::Constant;
  double value = 0.0;   // Constant: finite
  double low = 0.0;     // Uniform: finite, low < high
  double high = 0.0;    // Uniform: finite
  double mean = 0.0;    // Normal: finite
  double stddev = 0.0;  // Normal: finite, > 0
  double gain = 1.0;    // Xavier, Kaiming, Orthogonal: finite, > 0

  static Initializer constant(double value);
  static Initializer uniform(double low, double high);
  static Initializer normal(double mean, double stddev);
  static Initializer xavier_uniform(double gain = linear_gain);
  static Initializer xavier_normal(double gain = linear_gain);
  static Initializer kaiming_uniform(double gain = relu_gain);
  static Initializer kaiming_normal(double gain = relu_gain);
  static Initializer orthogonal(double gain = linear_gain);

  // "kaiming_uniform(gain=1.4142135623730951)", for messages and logs.
  std::string describe() const;
};

// Throws resident::Error when a field the kind reads is out of range.
void validate_initializer(const Initializer& init);

// The values of a [fan_out, fan_in] row-major weight, from a generator seeded with `seed`.
// fan_out, fan_in >= 1 and fan_out * fan_in must fit in size_t; throws resident::Error otherwise.
std::vector<float> initial_values(const Initializer& init, std::size_t fan_out, std::size_t fan_in,
                                  std::uint64_t seed);
// The same, continuing `rng` (several tensors drawn from one generator in turn).
std::vector<float> initial_values(const Initializer& init, std::size_t fan_out, std::size_t fan_in,
                                  std::mt19937_64& rng);

// The (fan_out, fan_in) of a slab tensor: a 2-D or higher shape {out, in...} gives
// (out, product of the rest); a 1-D shape {n} gives (n, 1) and is accepted only by the kinds that
// do not read the fans (Constant, Uniform, Normal).
struct TensorFans {
  std::size_t fan_out = 0;
  std::size_t fan_in = 0;
};
TensorFans tensor_fans(const ParamSlab& slab, std::string_view name, const Initializer& init);

// Setup: initial_values for the slab tensor `name` (after slab.finalize()), uploaded into its
// params with ParamSlab::upload (blocking). Returns the uploaded values.
std::vector<float> upload_initial_values(ParamSlab& slab, std::string_view name,
                                         const Initializer& init, std::uint64_t seed,
                                         cudaStream_t stream);
std::vector<float> upload_initial_values(ParamSlab& slab, std::string_view name,
                                         const Initializer& init, std::mt19937_64& rng,
                                         cudaStream_t stream);

}  // namespace resident::nn
