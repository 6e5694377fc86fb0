#include "lib/nn/initializers.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "kernels/core/error.h"

namespace resident::nn {

namespace {

std::string number(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", x);
  return text;
}

// Error(call = "<kind> initializer", "invalid argument", "<field> = <value>, allowed <range>").
[[noreturn]] void invalid(InitializerKind kind, const std::string& detail, int line) {
  throw Error(std::string(initializer_kind_name(kind)) + " initializer", "invalid argument", detail,
              __FILE__, line);
}

void require_finite(InitializerKind kind, const char* field, double x, int line) {
  if (!std::isfinite(x)) invalid(kind, std::string(field) + " = " + number(x) + ", allowed finite", line);
}

void require_positive(InitializerKind kind, const char* field, double x, int line) {
  if (!std::isfinite(x) || !(x > 0.0))
    invalid(kind, std::string(field) + " = " + number(x) + ", allowed finite and > 0", line);
}

void require_shape(const Initializer& init, std::size_t fan_out, std::size_t fan_in) {
  if (fan_out == 0)
    invalid(init.kind, "fan_out = 0 (rows), allowed >= 1", __LINE__);
  if (fan_in == 0)
    invalid(init.kind, "fan_in = 0 (columns), allowed >= 1", __LINE__);
  if (fan_in > std::numeric_limits<std::size_t>::max() / fan_out)
    invalid(init.kind,
            "fan_out * fan_in = " + std::to_string(fan_out) + " * " + std::to_string(fan_in) +
                ", allowed <= " + std::to_string(std::numeric_limits<std::size_t>::max()),
            __LINE__);
}

template <class Distribution>
std::vector<float> draw(Distribution distribution, std::size_t count, std::mt19937_64& rng) {
  std::vector<float> out(count);
  for (float& x : out) x = static_cast<float>(distribution(rng));
  return out;
}

// gain * Q for a [rows, cols] weight (see the header for the draw order): k = min(rows, cols)
// vectors of length n = max(rows, cols), standard normal, orthonormalized in turn by modified
// Gram-Schmidt in double. Each vector is divided by its positive remaining norm, so R's diagonal
// is positive.
std::vector<float> orthogonal_values(const Initializer& init, std::size_t rows, std::size_t cols,
                                     std::mt19937_64& rng) {
  const bool tall = rows >= cols;  // square: the columns
  const std::size_t n = tall ? rows : cols, k = tall ? cols : rows;
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> q(k * n);  // vector i at q[i * n, (i + 1) * n)
  for (double& x : q) x = normal(rng);
  for (std::size_t i = 0; i < k; ++i) {
    double* qi = q.data() + i * n;
    double drawn_norm = 0.0;
    for (std::size_t e = 0; e < n; ++e) drawn_norm += qi[e] * qi[e];
    for (std::size_t j = 0; j < i; ++j) {
      const double* qj = q.data() + j * n;
      double projection = 0.0;
      for (std::size_t e = 0; e < n; ++e) projection += qi[e] * qj[e];
      for (std::size_t e = 0; e < n; ++e) qi[e] -= projection * qj[e];
    }
    double norm = 0.0;
    for (std::size_t e = 0; e < n; ++e) norm += qi[e] * qi[e];
    norm = std::sqrt(norm);
    // A draw (almost) in the span of the earlier ones; probability ~0 for a Gaussian matrix.
    if (!(norm > 1e-8 * std::sqrt(drawn_norm)))
      throw Error("orthogonal initializer", "rank-deficient draw",
                  "vector " + std::to_string(i) + " of " + std::to_string(k) +
                      " kept a norm of " + number(norm) + " of " + number(std::sqrt(drawn_norm)) +
                      " after projection; allowed > 1e-8 of it (use another seed)",
                  __FILE__, __LINE__);
    for (std::size_t e = 0; e < n; ++e) qi[e] /= norm;
  }
  std::vector<float> out(rows * cols);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c)
      out[r * cols + c] = static_cast<float>(init.gain * (tall ? q[c * n + r] : q[r * n + c]));
  return out;
}

bool reads_fans(InitializerKind kind) {
  return kind != InitializerKind::Constant && kind != InitializerKind::Uniform &&
         kind != InitializerKind::Normal;
}

}  // namespace

std::string_view initializer_kind_name(InitializerKind kind) noexcept {
  switch (kind) {
    case InitializerKind::Constant: return "constant";
    case InitializerKind::Uniform: return "uniform";
    case InitializerKind::Normal: return "normal";
    case InitializerKind::XavierUniform: return "xavier_uniform";
    case InitializerKind::XavierNormal: return "xavier_normal";
    case InitializerKind::KaimingUniform: return "kaiming_uniform";
    case InitializerKind::KaimingNormal: return "kaiming_normal";
    case InitializerKind::Orthogonal: return "orthogonal";
  }
  return "unknown";
}

void validate_initializer(const Initializer& init) {
  switch (init.kind) {
    case InitializerKind::Constant:
      require_finite(init.kind, "value", init.value, __LINE__);
      return;
    case InitializerKind::Uniform:
      require_finite(init.kind, "low", init.low, __LINE__);
      require_finite(init.kind, "high", init.high, __LINE__);
      if (!(init.low < init.high))
        invalid(init.kind,
                "low = " + number(init.low) + ", high = " + number(init.high) + ", allowed low < high",
                __LINE__);
      // high - low must not overflow to inf (the distribution scales by it).
      require_finite(init.kind, "high - low", init.high - init.low, __LINE__);
      return;
    case InitializerKind::Normal:
      require_finite(init.kind, "mean", init.mean, __LINE__);
      require_positive(init.kind, "stddev", init.stddev, __LINE__);
      return;
    case InitializerKind::XavierUniform:
    case InitializerKind::XavierNormal:
    case InitializerKind::KaimingUniform:
    case InitializerKind::KaimingNormal:
    case InitializerKind::Orthogonal:
      require_positive(init.kind, "gain", init.gain, __LINE__);
      return;
  }
  throw Error("initializer", "invalid argument",
              "kind = " + std::to_string(static_cast<int>(init.kind)) +
                  ", allowed an InitializerKind enumerator",
              __FILE__, __LINE__);
}

Initializer Initializer::constant(double value) {
  Initializer init{.kind = InitializerKind::Constant, .value = value};
  validate_initializer(init);
  return init;
}

Initializer Initializer::uniform(double low, double high) {
  Initializer init{.kind = InitializerKind::Uniform, .low = low, .high = high};
  validate_initializer(init);
  return init;
}

Initializer Initializer::normal(double mean, double stddev) {
  Initializer init{.kind = InitializerKind::Normal, .mean = mean, .stddev = stddev};
  validate_initializer(init);
  return init;
}

namespace {
Initializer with_gain(InitializerKind kind, double gain) {
  Initializer init{.kind = kind, .gain = gain};
  validate_initializer(init);
  return init;
}
}  // namespace

Initializer Initializer::xavier_uniform(double gain) {
  return with_gain(InitializerKind::XavierUniform, gain);
}
Initializer Initializer::xavier_normal(double gain) {
  return with_gain(InitializerKind::XavierNormal, gain);
}
Initializer Initializer::kaiming_uniform(double gain) {
  return with_gain(InitializerKind::KaimingUniform, gain);
}
Initializer Initializer::kaiming_normal(double gain) {
  return with_gain(InitializerKind::KaimingNormal, gain);
}
Initializer Initializer::orthogonal(double gain) {
  return with_gain(InitializerKind::Orthogonal, gain);
}

std::string Initializer::describe() const {
  const std::string name(initializer_kind_name(kind));
  switch (kind) {
    case InitializerKind::Constant: return name + "(value=" + number(value) + ")";
    case InitializerKind::Uniform: return name + "(low=" + number(low) + ", high=" + number(high) + ")";
    case InitializerKind::Normal:
      return name + "(mean=" + number(mean) + ", stddev=" + number(stddev) + ")";
    default: return name + "(gain=" + number(gain) + ")";
  }
}

std::vector<float> initial_values(const Initializer& init, std::size_t fan_out, std::size_t fan_in,
                                  std::mt19937_64& rng) {
  validate_initializer(init);
  require_shape(init, fan_out, fan_in);
  const std::size_t count = fan_out * fan_in;
  const double in = static_cast<double>(fan_in);
  const double in_plus_out = static_cast<double>(fan_in) + static_cast<double>(fan_out);
  switch (init.kind) {
    case InitializerKind::Constant:
      return std::vector<float>(count, static_cast<float>(init.value));
    case InitializerKind::Uniform:
      return draw(std::uniform_real_distribution<double>(init.low, init.high), count, rng);
    case InitializerKind::Normal:
      return draw(std::normal_distribution<double>(init.mean, init.stddev), count, rng);
    case InitializerKind::XavierUniform: {
      const double bound = init.gain * std::sqrt(6.0 / in_plus_out);
      return draw(std::uniform_real_distribution<double>(-bound, bound), count, rng);
    }
    case InitializerKind::XavierNormal:
      return draw(std::normal_distribution<double>(0.0, init.gain * std::sqrt(2.0 / in_plus_out)),
                  count, rng);
    case InitializerKind::KaimingUniform: {
      const double bound = init.gain * std::sqrt(3.0 / in);
      return draw(std::uniform_real_distribution<double>(-bound, bound), count, rng);
    }
    case InitializerKind::KaimingNormal:
      return draw(std::normal_distribution<double>(0.0, init.gain / std::sqrt(in)), count, rng);
    case InitializerKind::Orthogonal:
      return orthogonal_values(init, fan_out, fan_in, rng);
  }
  return {};  // unreachable: validate_initializer() rejected the kind
}

std::vector<float> initial_values(const Initializer& init, std::size_t fan_out, std::size_t fan_in,
                                  std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  return initial_values(init, fan_out, fan_in, rng);
}

TensorFans tensor_fans(const ParamSlab& slab, std::string_view name, const Initializer& init) {
  const std::vector<std::size_t>& shape = slab.shape(name);
  if (shape.size() == 1) {
    if (reads_fans(init.kind))
      invalid(init.kind,
              "tensor \"" + std::string(name) + "\" has rank 1 ([" + std::to_string(shape[0]) +
                  "]), allowed rank >= 2 ([fan_out, fan_in]) for an initializer that reads the fans",
              __LINE__);
    return {shape[0], 1};
  }
  if (shape.empty())
    invalid(init.kind, "tensor \"" + std::string(name) + "\" has rank 0, allowed rank >= 1",
            __LINE__);
  TensorFans fans{shape[0], 1};
  for (std::size_t d = 1; d < shape.size(); ++d) fans.fan_in *= shape[d];
  return fans;
}

std::vector<float> upload_initial_values(ParamSlab& slab, std::string_view name,
                                         const Initializer& init, std::mt19937_64& rng,
                                         cudaStream_t stream) {
  const TensorFans fans = tensor_fans(slab, name, init);
  std::vector<float> values = initial_values(init, fans.fan_out, fans.fan_in, rng);
  slab.upload(SlabPart::Params, name, values, stream);
  return values;
}

std::vector<float> upload_initial_values(ParamSlab& slab, std::string_view name,
                                         const Initializer& init, std::uint64_t seed,
                                         cudaStream_t stream) {
  std::mt19937_64 rng(seed);
  return upload_initial_values(slab, name, init, rng, stream);
}

}  // namespace resident::nn
