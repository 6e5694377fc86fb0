// Every backward of the nn references (tests/reference/nn_reference.h) against central finite
// differences of its forward, at edge sizes, on fresh seeded random inputs; overwrite and
// accumulate for every backward; and the checker itself, including negative controls that a
// wrong backward is rejected.
//
// An op's differentiable inputs are packed into one vector (Linear: [x | W | b]), so a single
// check covers every gradient the backward writes. The check contracts the op's output with a
// fixed random upstream gradient (check_backward, step 1e-6 relative to |x|). The tolerance on the max relative error (floor 1e-3, see
// FiniteDifferenceOptions) is stated per op in kOps; every check prints its error and the share
// of the tolerance used.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "tests/reference/finite_difference.h"
#include "tests/reference/nn_reference.h"

namespace {

namespace ref = resident::reference;
using ref::GradMode;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kNormEps = 1e-5;  // LayerNorm and RMSNorm

// The edge sizes every op runs at: single element, small odd, odd not a multiple of anything
// tile-like, and larger with rows > cols.
struct Size {
  std::size_t rows = 0;
  std::size_t cols = 0;
};
constexpr Size kSizes[] = {{1, 1}, {3, 5}, {7, 13}, {33, 17}};

std::vector<double> uniform_values(std::size_t n, double low, double high, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> uniform(low, high);
  std::vector<double> values(n);
  for (double& v : values) v = uniform(rng);
  return values;
}

// Consecutive parts of a packed vector, e.g. [x | W | b].
class Packing {
 public:
  explicit Packing(std::vector<std::size_t> sizes) : sizes_(std::move(sizes)) {}

  std::size_t total() const {
    return std::accumulate(sizes_.begin(), sizes_.end(), std::size_t{0});
  }

  template <typename T>
  std::span<T> part(std::span<T> packed, std::size_t index) const {
    const std::size_t offset = std::accumulate(
        sizes_.begin(), sizes_.begin() + static_cast<std::ptrdiff_t>(index), std::size_t{0});
    return packed.subspan(offset, sizes_[index]);
  }

 private:
  std::vector<std::size_t> sizes_;
};

// An op with its differentiable inputs packed into one vector; everything else (shapes,
// targets, masks, hyperparameters) is captured by the two functions.
struct PackedOp {
  std::vector<double> input;
  ref::VectorFunction forward;
  // Writes the packed input gradient for `upstream` (the shape of forward's output) with `mode`.
  std::function<void(std::span<const double> input, std::span<const double> upstream,
                     std::span<double> grad, GradMode mode)>
      backward;
};

struct OpSpec {
  const char* name;
  double tolerance;  // on the max relative error against central differences
  std::function<PackedOp(Size, std::mt19937_64&)> make;
};

ref::VectorJacobianProduct overwriting_vjp(const PackedOp& op) {
  return [&op](std::span<const double> x, std::span<const double> upstream) {
    std::vector<double> grad(x.size(), kNaN);
    op.backward(x, upstream, grad, GradMode::Overwrite);
    return grad;
  };
}

// ---------------------------------------------------------------------------------------------
// The ops.

using ElementwiseForward = std::function<std::vector<double>(std::span<const double>)>;
using ElementwiseBackward = std::function<void(std::span<const double>, std::span<const double>,
                                               std::span<double>, GradMode)>;

// x [rows, cols] uniform in [-3, 3]: both sides of every kink and threshold used below.
std::function<PackedOp(Size, std::mt19937_64&)> elementwise(ElementwiseForward forward,
                                                            ElementwiseBackward backward) {
  return [forward, backward](Size size, std::mt19937_64& rng) {
    return PackedOp{uniform_values(size.rows * size.cols, -3.0, 3.0, rng), forward, backward};
  };
}

// Linear [batch = rows, in = cols, out = cols / 2 + 1]; packed [x | W | b].
PackedOp linear_op(Size size, std::mt19937_64& rng, bool with_bias) {
  const ref::LinearShape shape{size.rows, size.cols, size.cols / 2 + 1};
  const Packing packing({shape.batch * shape.in_features, shape.out_features * shape.in_features,
                         with_bias ? shape.out_features : 0});
  PackedOp op;
  op.input = uniform_values(packing.total(), -1.0, 1.0, rng);
  op.forward = [shape, packing](std::span<const double> p) {
    return ref::linear_forward(shape, packing.part(p, 0), packing.part(p, 1), packing.part(p, 2));
  };
  op.backward = [shape, packing](std::span<const double> p, std::span<const double> dy,
                                 std::span<double> grad, GradMode mode) {
    ref::linear_backward(shape, packing.part(p, 0), packing.part(p, 1), dy,
                         {packing.part(grad, 0), packing.part(grad, 1), packing.part(grad, 2)},
                         mode);
  };
  return op;
}

// x [rows, 2 * cols] -> y [rows, cols].
PackedOp glu_op(Size size, std::mt19937_64& rng) {
  PackedOp op;
  op.input = uniform_values(size.rows * 2 * size.cols, -3.0, 3.0, rng);
  op.forward = [size](std::span<const double> x) {
    return ref::glu_forward(size.rows, size.cols, x);
  };
  op.backward = [size](std::span<const double> x, std::span<const double> dy, std::span<double> dx,
                       GradMode mode) { ref::glu_backward(size.rows, size.cols, x, dy, dx, mode); };
  return op;
}

// Keep probability 0.75, the mask drawn here.
PackedOp dropout_op(Size size, std::mt19937_64& rng) {
  constexpr double kKeep = 0.75;
  std::bernoulli_distribution keep(kKeep);
  std::vector<std::uint8_t> mask(size.rows * size.cols);
  for (std::uint8_t& m : mask) m = keep(rng) ? 1 : 0;
  PackedOp op;
  op.input = uniform_values(mask.size(), -3.0, 3.0, rng);
  op.forward = [mask](std::span<const double> x) { return ref::dropout_forward(x, mask, kKeep); };
  op.backward = [mask](std::span<const double>, std::span<const double> dy, std::span<double> dx,
                       GradMode mode) { ref::dropout_backward(mask, kKeep, dy, dx, mode); };
  return op;
}

// x [rows, cols], gamma and beta [cols]; packed [x | gamma | beta].
PackedOp layer_norm_op(Size size, std::mt19937_64& rng) {
  const Packing packing({size.rows * size.cols, size.cols, size.cols});
  PackedOp op;
  op.input = uniform_values(packing.total(), -2.0, 2.0, rng);
  op.forward = [size, packing](std::span<const double> p) {
    return ref::layer_norm_forward(size.rows, size.cols, packing.part(p, 0), packing.part(p, 1),
                                   packing.part(p, 2), kNormEps);
  };
  op.backward = [size, packing](std::span<const double> p, std::span<const double> dy,
                                std::span<double> grad, GradMode mode) {
    ref::layer_norm_backward(
        size.rows, size.cols, packing.part(p, 0), packing.part(p, 1), dy, kNormEps,
        {packing.part(grad, 0), packing.part(grad, 1), packing.part(grad, 2)}, mode);
  };
  return op;
}

// x [rows, cols], gamma [cols]; packed [x | gamma].
PackedOp rms_norm_op(Size size, std::mt19937_64& rng) {
  const Packing packing({size.rows * size.cols, size.cols});
  PackedOp op;
  op.input = uniform_values(packing.total(), -2.0, 2.0, rng);
  op.forward = [size, packing](std::span<const double> p) {
    return ref::rms_norm_forward(size.rows, size.cols, packing.part(p, 0), packing.part(p, 1),
                                 kNormEps);
  };
  op.backward = [size, packing](std::span<const double> p, std::span<const double> dy,
                                std::span<double> grad, GradMode mode) {
    ref::rms_norm_backward(size.rows, size.cols, packing.part(p, 0), packing.part(p, 1), dy,
                           kNormEps, {packing.part(grad, 0), packing.part(grad, 1)}, mode);
  };
  return op;
}

// Without a mask: x [rows, cols]. Causal: a stack of `rows` [cols, cols] score matrices.
// The causal log-softmax's masked outputs are a constant -infinity; the contracted function
// reads them as 0 (their derivative is 0 either way), so the check sees every visible output.
PackedOp softmax_op(Size size, std::mt19937_64& rng, ref::SoftmaxMask mask, bool log) {
  const std::size_t rows = mask == ref::SoftmaxMask::Causal ? size.rows * size.cols : size.rows;
  const std::size_t cols = size.cols;
  PackedOp op;
  op.input = uniform_values(rows * cols, -4.0, 4.0, rng);
  op.forward = [rows, cols, mask, log](std::span<const double> x) {
    if (!log) return ref::softmax_forward(rows, cols, x, mask);
    std::vector<double> y = ref::log_softmax_forward(rows, cols, x, mask);
    for (double& v : y) v = std::isinf(v) ? 0.0 : v;
    return y;
  };
  op.backward = [rows, cols, mask, log](std::span<const double> x, std::span<const double> dy,
                                        std::span<double> dx, GradMode mode) {
    if (log) {
      ref::log_softmax_backward(rows, cols, x, dy, mask, dx, mode);
    } else {
      ref::softmax_backward(rows, cols, x, dy, mask, dx, mode);
    }
  };
  return op;
}

// batch = rows; cols -> cols + 2 (tanh, bias) -> 3 (GELU, bias) -> 2 (identity, no bias);
// packed [x | params].
PackedOp mlp_op(Size size, std::mt19937_64& rng) {
  const std::vector<ref::MlpLayer> layers = {
      {size.cols, size.cols + 2, true, {ref::ActivationKind::Tanh}},
      {size.cols + 2, 3, true, {ref::ActivationKind::GeluTanh}},
      {3, 2, false, {ref::ActivationKind::Identity}},
  };
  const std::size_t batch = size.rows;
  const Packing packing({batch * size.cols, ref::mlp_parameter_count(layers)});
  PackedOp op;
  op.input = uniform_values(packing.total(), -1.0, 1.0, rng);
  op.forward = [layers, batch, packing](std::span<const double> p) {
    return ref::mlp_forward(layers, batch, packing.part(p, 1), packing.part(p, 0));
  };
  op.backward = [layers, batch, packing](std::span<const double> p, std::span<const double> dy,
                                         std::span<double> grad, GradMode mode) {
    ref::mlp_backward(layers, batch, packing.part(p, 1), packing.part(p, 0), dy,
                      {packing.part(grad, 0), packing.part(grad, 1)}, mode);
  };
  return op;
}

// A scalar loss of prediction [rows, cols]; the upstream gradient is the loss's d_loss.
using LossForward = std::function<double(std::span<const double> prediction)>;
using LossBackward = std::function<void(std::span<const double> prediction, double d_loss,
                                        std::span<double> d_prediction, GradMode mode)>;

PackedOp loss_op(std::vector<double> prediction, LossForward forward, LossBackward backward) {
  PackedOp op;
  op.input = std::move(prediction);
  op.forward = [forward](std::span<const double> p) { return std::vector<double>{forward(p)}; };
  op.backward = [backward](std::span<const double> p, std::span<const double> d_loss,
                           std::span<double> grad,
                           GradMode mode) { backward(p, d_loss[0], grad, mode); };
  return op;
}

PackedOp mse_op(Size size, std::mt19937_64& rng) {
  const auto target = uniform_values(size.rows * size.cols, -2.0, 2.0, rng);
  return loss_op(
      uniform_values(target.size(), -2.0, 2.0, rng),
      [target](std::span<const double> p) { return ref::mse_loss(p, target); },
      [target](std::span<const double> p, double d_loss, std::span<double> grad, GradMode mode) {
        ref::mse_loss_backward(p, target, d_loss, grad, mode);
      });
}

// delta 1, |prediction - target| up to 4: both branches. Weights in [0.1, 1] or none.
PackedOp huber_op(Size size, std::mt19937_64& rng, bool weighted) {
  constexpr double kDelta = 1.0;
  const auto [rows, cols] = size;
  const auto target = uniform_values(rows * cols, -2.0, 2.0, rng);
  const auto weights = weighted ? uniform_values(rows, 0.1, 1.0, rng) : std::vector<double>{};
  return loss_op(
      uniform_values(target.size(), -2.0, 2.0, rng),
      [=](std::span<const double> p) {
        return ref::huber_loss(rows, cols, p, target, weights, kDelta);
      },
      [=](std::span<const double> p, double d_loss, std::span<double> grad, GradMode mode) {
        ref::huber_loss_backward(rows, cols, p, target, weights, kDelta, d_loss, grad, mode);
      });
}

// prediction [rows, K = cols], taus (k + 0.5) / K, target [rows].
PackedOp pinball_op(Size size, std::mt19937_64& rng) {
  const auto [rows, cols] = size;
  std::vector<double> taus(cols);
  for (std::size_t k = 0; k < cols; ++k)
    taus[k] = (static_cast<double>(k) + 0.5) / static_cast<double>(cols);
  const auto target = uniform_values(rows, -2.0, 2.0, rng);
  return loss_op(
      uniform_values(rows * cols, -2.0, 2.0, rng),
      [=](std::span<const double> p) { return ref::pinball_loss(rows, p, target, taus); },
      [=](std::span<const double> p, double d_loss, std::span<double> grad, GradMode mode) {
        ref::pinball_loss_backward(rows, p, target, taus, d_loss, grad, mode);
      });
}

// logits [rows, cols] -> log_prob [rows] of uniformly drawn actions.
PackedOp categorical_log_prob_op(Size size, std::mt19937_64& rng) {
  const auto [rows, cols] = size;
  std::uniform_int_distribution<std::int32_t> action(0, static_cast<std::int32_t>(cols) - 1);
  std::vector<std::int32_t> actions(rows);
  for (std::int32_t& a : actions) a = action(rng);
  PackedOp op;
  op.input = uniform_values(rows * cols, -3.0, 3.0, rng);
  op.forward = [=](std::span<const double> logits) {
    return ref::categorical_log_prob(rows, cols, logits, actions);
  };
  op.backward = [=](std::span<const double> logits, std::span<const double> d_log_prob,
                    std::span<double> d_logits, GradMode mode) {
    ref::categorical_log_prob_backward(rows, cols, logits, actions, d_log_prob, d_logits, mode);
  };
  return op;
}

// logits [rows, cols] -> entropy [rows].
PackedOp categorical_entropy_op(Size size, std::mt19937_64& rng) {
  const auto [rows, cols] = size;
  PackedOp op;
  op.input = uniform_values(rows * cols, -3.0, 3.0, rng);
  op.forward = [=](std::span<const double> logits) {
    return ref::categorical_entropy(rows, cols, logits);
  };
  op.backward = [=](std::span<const double> logits, std::span<const double> d_entropy,
                    std::span<double> d_logits, GradMode mode) {
    ref::categorical_entropy_backward(rows, cols, logits, d_entropy, d_logits, mode);
  };
  return op;
}

// The check's error is rounding noise, about 1e-16 |y| / h = 1e-10 per output that a perturbed
// input touches, judged against the relative floor 1e-3 for small derivatives. Elementwise ops
// touch one output per input (max relative error seen: 7e-9 over all sizes); the others touch a
// row, a column or everything (Linear, norms, softmax, MLP, losses; max seen 3.1e-7, MLP 33x17).
constexpr double kElementwiseTolerance = 1e-7;
constexpr double kCoupledTolerance = 1e-6;

const std::vector<OpSpec>& ops() {
  using ref::SoftmaxMask;
  static const std::vector<OpSpec> kOps = {
      {"Linear", kCoupledTolerance,
       [](Size s, std::mt19937_64& r) { return linear_op(s, r, true); }},
      {"LinearNoBias", kCoupledTolerance,
       [](Size s, std::mt19937_64& r) { return linear_op(s, r, false); }},
      {"Relu", kElementwiseTolerance, elementwise(ref::relu_forward, ref::relu_backward)},
      {"Tanh", kElementwiseTolerance, elementwise(ref::tanh_forward, ref::tanh_backward)},
      {"Sigmoid", kElementwiseTolerance, elementwise(ref::sigmoid_forward, ref::sigmoid_backward)},
      {"Silu", kElementwiseTolerance, elementwise(ref::silu_forward, ref::silu_backward)},
      {"GeluTanh", kElementwiseTolerance,
       elementwise(ref::gelu_tanh_forward, ref::gelu_tanh_backward)},
      {"Elu", kElementwiseTolerance,
       elementwise([](std::span<const double> x) { return ref::elu_forward(x, 0.7); },
                   [](std::span<const double> x, std::span<const double> dy, std::span<double> dx,
                      GradMode mode) { ref::elu_backward(x, dy, dx, 0.7, mode); })},
      {"Softplus", kElementwiseTolerance,
       elementwise([](std::span<const double> x) { return ref::softplus_forward(x, 1.0, 20.0); },
                   [](std::span<const double> x, std::span<const double> dy, std::span<double> dx,
                      GradMode mode) { ref::softplus_backward(x, dy, dx, 1.0, 20.0, mode); })},
      // beta 2, threshold 3: inputs above 1.5 take the linear branch.
      {"SoftplusPastThreshold", kElementwiseTolerance,
       elementwise([](std::span<const double> x) { return ref::softplus_forward(x, 2.0, 3.0); },
                   [](std::span<const double> x, std::span<const double> dy, std::span<double> dx,
                      GradMode mode) { ref::softplus_backward(x, dy, dx, 2.0, 3.0, mode); })},
      {"Glu", kElementwiseTolerance, glu_op},
      {"Dropout", kElementwiseTolerance, dropout_op},
      {"LayerNorm", kCoupledTolerance, layer_norm_op},
      {"RmsNorm", kCoupledTolerance, rms_norm_op},
      {"Softmax", kCoupledTolerance,
       [](Size s, std::mt19937_64& r) { return softmax_op(s, r, SoftmaxMask::None, false); }},
      {"SoftmaxCausal", kCoupledTolerance,
       [](Size s, std::mt19937_64& r) { return softmax_op(s, r, SoftmaxMask::Causal, false); }},
      {"LogSoftmax", kCoupledTolerance,
       [](Size s, std::mt19937_64& r) { return softmax_op(s, r, SoftmaxMask::None, true); }},
      {"LogSoftmaxCausal", kCoupledTolerance,
       [](Size s, std::mt19937_64& r) { return softmax_op(s, r, SoftmaxMask::Causal, true); }},
      {"Mlp", kCoupledTolerance, mlp_op},
      {"Mse", kCoupledTolerance, mse_op},
      {"Huber", kCoupledTolerance,
       [](Size s, std::mt19937_64& r) { return huber_op(s, r, false); }},
      {"HuberWeighted", kCoupledTolerance,
       [](Size s, std::mt19937_64& r) { return huber_op(s, r, true); }},
      {"Pinball", kCoupledTolerance, pinball_op},
      {"CategoricalLogProb", kCoupledTolerance, categorical_log_prob_op},
      {"CategoricalEntropy", kCoupledTolerance, categorical_entropy_op},
  };
  return kOps;
}

const OpSpec& op_named(const std::string& name) {
  for (const OpSpec& spec : ops()) {
    if (name == spec.name) return spec;
  }
  throw std::invalid_argument("no op named " + name);
}

std::uint64_t seed_for(std::size_t op_index, Size size) {
  return 0x6e6e0000u + 1009 * op_index + 31 * size.rows + size.cols;
}

void print_comparison(const std::string& what, const ref::GradientComparison& c, double tolerance) {
  std::printf(
      "%-34s max abs %.2e  max rel %.2e (tolerance %.0e, %6.2f%% used)  worst element %zu: "
      "analytic %.9g, numeric %.9g\n",
      what.c_str(), c.max_abs_error, c.max_rel_error, tolerance,
      100.0 * c.max_rel_error / tolerance, c.worst_index, c.analytic_at_worst, c.numeric_at_worst);
}

// ---------------------------------------------------------------------------------------------
// Every op at every size.

class ReferenceBackward : public ::testing::TestWithParam<std::tuple<std::size_t, Size>> {
 protected:
  const OpSpec& spec() const { return ops()[std::get<0>(GetParam())]; }
  Size size() const { return std::get<1>(GetParam()); }
  std::string label() const {
    return std::string(spec().name) + " " + std::to_string(size().rows) + "x" +
           std::to_string(size().cols);
  }
  PackedOp make_op() const {
    std::mt19937_64 rng(seed_for(std::get<0>(GetParam()), size()));
    return spec().make(size(), rng);
  }
};

TEST_P(ReferenceBackward, MatchesCentralDifferences) {
  const PackedOp op = make_op();
  const auto comparison = ref::check_backward(op.forward, overwriting_vjp(op), op.input,
                                              seed_for(std::get<0>(GetParam()), size()) + 1);
  print_comparison(label(), comparison, spec().tolerance);
  EXPECT_LE(comparison.max_rel_error, spec().tolerance)
      << label() << ": worst element " << comparison.worst_index << " analytic "
      << comparison.analytic_at_worst << " numeric " << comparison.numeric_at_worst;
}

// Overwrite never reads the output (a NaN-poisoned and a garbage-filled buffer give the same
// finite result); accumulate adds exactly that result to what the buffer held.
TEST_P(ReferenceBackward, OverwriteReplacesAndAccumulateAdds) {
  const PackedOp op = make_op();
  std::mt19937_64 rng(seed_for(std::get<0>(GetParam()), size()) + 2);
  const auto upstream = uniform_values(op.forward(op.input).size(), -1.0, 1.0, rng);
  const std::size_t n = op.input.size();

  std::vector<double> from_nan(n, kNaN);
  op.backward(op.input, upstream, from_nan, GradMode::Overwrite);
  std::vector<double> from_garbage(n, 1e300);
  op.backward(op.input, upstream, from_garbage, GradMode::Overwrite);
  const auto prior = uniform_values(n, -5.0, 5.0, rng);
  std::vector<double> accumulated = prior;
  op.backward(op.input, upstream, accumulated, GradMode::Accumulate);

  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const bool ok = std::isfinite(from_nan[i]) && from_nan[i] == from_garbage[i] &&
                    accumulated[i] == prior[i] + from_nan[i];
    if (!ok && mismatches++ == 0) {
      ADD_FAILURE() << label() << " element " << i << ": overwrite over NaN " << from_nan[i]
                    << ", over garbage " << from_garbage[i] << "; accumulate " << accumulated[i]
                    << " != prior " << prior[i] << " + gradient";
    }
  }
  std::printf("%-34s %zu gradient elements, overwrite and accumulate exact: %s\n", label().c_str(),
              n, mismatches == 0 ? "yes" : "NO");
  EXPECT_EQ(mismatches, 0u);
}

std::string param_name(const ::testing::TestParamInfo<ReferenceBackward::ParamType>& info) {
  const Size size = std::get<1>(info.param);
  return std::string(ops()[std::get<0>(info.param)].name) + "_" + std::to_string(size.rows) + "x" +
         std::to_string(size.cols);
}

INSTANTIATE_TEST_SUITE_P(AllOps, ReferenceBackward,
                         ::testing::Combine(::testing::Range<std::size_t>(0, ops().size()),
                                            ::testing::ValuesIn(kSizes)),
                         param_name);

// ---------------------------------------------------------------------------------------------
// The checker.

// f(x) = sum_i sin(x_i) x_{i+1} (cyclic); df/dx_i = cos(x_i) x_{i+1} + sin(x_{i-1}).
TEST(FiniteDifferenceChecker, AcceptsAnExactGradient) {
  std::mt19937_64 rng(1);
  const auto x = uniform_values(9, -2.0, 2.0, rng);
  const std::size_t n = x.size();
  const ref::ScalarFunction f = [n](std::span<const double> v) {
    double sum = 0.0;
    for (std::size_t i = 0; i < n; ++i) sum += std::sin(v[i]) * v[(i + 1) % n];
    return sum;
  };
  std::vector<double> gradient(n);
  for (std::size_t i = 0; i < n; ++i)
    gradient[i] = std::cos(x[i]) * x[(i + 1) % n] + std::sin(x[(i + n - 1) % n]);
  const auto c = ref::check_gradient(f, x, gradient);
  print_comparison("sin(x_i) x_(i+1)", c, kCoupledTolerance);
  EXPECT_LE(c.max_rel_error, kCoupledTolerance);
}

TEST(FiniteDifferenceChecker, NamesTheWorstElement) {
  const std::vector<double> x = {0.5, -1.0, 2.0, 0.25, -0.75};
  const ref::ScalarFunction f = [](std::span<const double> v) {
    double sum = 0.0;
    for (const double e : v) sum += e * e * e / 3.0;
    return sum;
  };
  std::vector<double> gradient(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) gradient[i] = x[i] * x[i];
  gradient[3] += 1e-3;  // 0.0625 -> 0.0635
  const auto c = ref::check_gradient(f, x, gradient);
  EXPECT_EQ(c.worst_index, 3u);
  EXPECT_NEAR(c.max_abs_error, 1e-3, 1e-9);
  EXPECT_NEAR(c.max_rel_error, 1e-3 / 0.0635, 1e-8);
  EXPECT_EQ(c.analytic_at_worst, gradient[3]);
  EXPECT_NEAR(c.numeric_at_worst, 0.0625, 1e-9);
}

// At |x| = 1e12 an absolute step of 1e-6 is below half an ulp (1.2e-4): x + h == x, and the
// difference quotient would be 0 / 0. The step relative to |x| keeps the check exact.
TEST(FiniteDifferenceChecker, StepScalesWithTheArgument) {
  const std::vector<double> x = {1e12, -3e12, 2.5e12};
  const ref::ScalarFunction f = [](std::span<const double> v) {
    double sum = 0.0;
    for (const double e : v) sum += e * e * e / 3.0;
    return sum;
  };
  const std::vector<double> gradient = {1e24, 9e24, 6.25e24};
  const auto c = ref::check_gradient(f, x, gradient);
  print_comparison("x^3 / 3 at |x| ~ 1e12", c, kCoupledTolerance);
  EXPECT_LE(c.max_rel_error, kCoupledTolerance);
}

TEST(FiniteDifferenceChecker, ANonFiniteGradientIsTheWorstError) {
  const std::vector<double> analytic = {1.0, kNaN, 2.0};
  const std::vector<double> numeric = {1.0, 1.0, 2.5};
  const auto c = ref::compare_gradients(analytic, numeric, 1e-3);
  EXPECT_EQ(c.worst_index, 1u);
  EXPECT_EQ(c.max_rel_error, std::numeric_limits<double>::infinity());
  EXPECT_EQ(c.max_abs_error, std::numeric_limits<double>::infinity());
}

// Relative to max(|a|, |n|, floor): a near-zero derivative is judged against the floor.
TEST(FiniteDifferenceChecker, RelativeErrorHasAFloor) {
  EXPECT_DOUBLE_EQ(
      ref::compare_gradients(std::vector<double>{0.0}, std::vector<double>{1e-12}, 1e-3)
          .max_rel_error,
      1e-9);
  EXPECT_DOUBLE_EQ(ref::compare_gradients(std::vector<double>{2.0}, std::vector<double>{2.5}, 1e-3)
                       .max_rel_error,
                   0.2);
}

TEST(FiniteDifferenceChecker, RejectsMismatchedSizes) {
  EXPECT_THROW(
      ref::compare_gradients(std::vector<double>{1.0, 2.0}, std::vector<double>{1.0}, 1e-3),
      resident::Error);
}

// ---------------------------------------------------------------------------------------------
// Negative controls: a wrong backward, checked exactly as the ops above, must be rejected.

ref::GradientComparison check_at_7x13(const PackedOp& op, std::uint64_t seed) {
  return ref::check_backward(op.forward, overwriting_vjp(op), op.input, seed);
}

// tanh'(x) written as 1 - x instead of 1 - tanh(x)^2.
TEST(FiniteDifferenceNegativeControl, TanhDerivativeOneMinusXIsRejected) {
  std::mt19937_64 rng(71);
  PackedOp op = op_named("Tanh").make({7, 13}, rng);
  op.backward = [](std::span<const double> x, std::span<const double> dy, std::span<double> dx,
                   GradMode) {
    for (std::size_t i = 0; i < x.size(); ++i) dx[i] = dy[i] * (1.0 - x[i]);
  };
  const double tolerance = op_named("Tanh").tolerance;
  const auto c = check_at_7x13(op, 72);
  print_comparison("wrong tanh' = 1 - x", c, tolerance);
  EXPECT_GT(c.max_rel_error, tolerance);
}

// dW laid out [in, out] (dy^T x transposed) in the [out, in] slots.
TEST(FiniteDifferenceNegativeControl, TransposedLinearWeightGradientIsRejected) {
  const ref::LinearShape shape{7, 13, 7};  // in != out: a transposed dW fills the same slots
  const std::size_t x_size = shape.batch * shape.in_features;
  const std::size_t w_size = shape.out_features * shape.in_features;
  const Packing packing({x_size, w_size, shape.out_features});
  std::mt19937_64 rng(73);
  PackedOp op = op_named("Linear").make({7, 13}, rng);
  ASSERT_EQ(op.input.size(), packing.total());
  op.backward = [shape, packing](std::span<const double> p, std::span<const double> dy,
                                 std::span<double> grad, GradMode mode) {
    std::vector<double> dweight(shape.out_features * shape.in_features);
    ref::linear_backward(shape, packing.part(p, 0), packing.part(p, 1), dy,
                         {packing.part(grad, 0), dweight, packing.part(grad, 2)}, mode);
    const auto transposed = packing.part(grad, 1);
    for (std::size_t o = 0; o < shape.out_features; ++o) {
      for (std::size_t i = 0; i < shape.in_features; ++i)
        transposed[i * shape.out_features + o] = dweight[o * shape.in_features + i];
    }
  };
  const double tolerance = op_named("Linear").tolerance;
  const auto c = check_at_7x13(op, 74);
  print_comparison("transposed dW", c, tolerance);
  EXPECT_GT(c.max_rel_error, tolerance);
  EXPECT_GE(c.worst_index, x_size);  // the error is in dW
  EXPECT_LT(c.worst_index, x_size + w_size);
}

// LayerNorm dx without the variance path: rstd * (g - mean(g)), missing - xhat * mean(g * xhat).
TEST(FiniteDifferenceNegativeControl, LayerNormWithoutTheVarianceTermIsRejected) {
  const Size size{7, 13};
  const Packing packing({size.rows * size.cols, size.cols, size.cols});
  std::mt19937_64 rng(75);
  PackedOp op = op_named("LayerNorm").make(size, rng);
  op.backward = [size, packing](std::span<const double> p, std::span<const double> dy,
                                std::span<double> grad, GradMode mode) {
    const auto x = packing.part(p, 0);
    const auto gamma = packing.part(p, 1);
    ref::layer_norm_backward(size.rows, size.cols, x, gamma, dy, kNormEps,
                             {{}, packing.part(grad, 1), packing.part(grad, 2)}, mode);
    const auto dx = packing.part(grad, 0);
    const double n = static_cast<double>(size.cols);
    for (std::size_t r = 0; r < size.rows; ++r) {
      const auto row = x.subspan(r * size.cols, size.cols);
      const double mean = std::accumulate(row.begin(), row.end(), 0.0) / n;
      double var = 0.0;
      for (const double v : row) var += (v - mean) * (v - mean) / n;
      const double rstd = 1.0 / std::sqrt(var + kNormEps);
      double g_mean = 0.0;
      for (std::size_t c = 0; c < size.cols; ++c) g_mean += dy[r * size.cols + c] * gamma[c] / n;
      for (std::size_t c = 0; c < size.cols; ++c)
        dx[r * size.cols + c] = rstd * (dy[r * size.cols + c] * gamma[c] - g_mean);
    }
  };
  const double tolerance = op_named("LayerNorm").tolerance;
  const auto c = check_at_7x13(op, 76);
  print_comparison("LayerNorm dx without variance term", c, tolerance);
  EXPECT_GT(c.max_rel_error, tolerance);
}

// The resolution of the check: a GELU gradient off by ten times the tolerance (relative) fails.
TEST(FiniteDifferenceNegativeControl, GradientOffByTenTolerancesIsRejected) {
  const double tolerance = op_named("GeluTanh").tolerance;
  std::mt19937_64 rng(77);
  PackedOp op = op_named("GeluTanh").make({7, 13}, rng);
  op.backward = [tolerance](std::span<const double> x, std::span<const double> dy,
                            std::span<double> dx, GradMode mode) {
    ref::gelu_tanh_backward(x, dy, dx, mode);
    for (double& g : dx) g *= 1.0 + 10.0 * tolerance;
  };
  const auto c = check_at_7x13(op, 78);
  print_comparison("GELU gradient * (1 + 10 tol)", c, tolerance);
  EXPECT_GT(c.max_rel_error, tolerance);
}

}  // namespace
