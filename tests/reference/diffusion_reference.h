// Plain C++ double-precision forward and backward of the DDPM diffusion forecaster's denoiser and
// training loss (MODELS.md section 6), its ancestral sampler step and its sample summary: the
// oracle of the GPU model (lib/models/diffusion) and its kernels. Written for clarity, not speed;
// the backward is checked against central finite differences
// (tests/models/diffusion/diffusion_reference_test.cpp).
//
// Denoiser eps_hat(x_t, t, window), per row (D = width, O = outputs, Ts = time_dim):
//   s       = [sin(t w_k), cos(t w_k)], w_k = exp(-k ln(1e4) / (Ts/2 - 1)), k < Ts/2    [Ts]
//   temb    = time.fc2(gelu_tanh(time.fc1(s)))                                          [D]
//   cond    = cond.fc2(silu(cond.fc1(flat(window))))                                    [D]
//   h_0     = input([x_t | cond | temb])                                  (K = O + 2D)  [D]
//   block k (k < blocks): z = fc1(LN(h_{k-1})) + temb; h_k = h_{k-1} + fc2(silu(z))
//   eps_hat = output(h_blocks)                                                          [O]
// LayerNorm eps 1e-5. Training loss on a target y [O] with drawn t and eps:
//   x_t = sqrt(alpha_bar_t) y + sqrt(1 - alpha_bar_t) eps
//   loss = mean over batch * O of (eps_hat(x_t, t, window) - eps)^2
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace resident::reference {

inline constexpr double kDiffusionLayerNormEps = 1e-5;

struct DiffusionDims {
  std::size_t window = 3;    // L >= 1
  std::size_t features = 2;  // F >= 1
  std::size_t outputs = 2;   // O >= 1
  std::size_t width = 5;     // D >= 1
  std::size_t blocks = 2;    // >= 1
  std::size_t time_dim = 4;  // Ts, even, >= 4
};

struct DiffusionBlockParams {
  std::vector<double> norm_gamma, norm_beta;  // [D]
  std::vector<double> fc1_weight, fc1_bias;   // [D, D], [D]
  std::vector<double> fc2_weight, fc2_bias;   // [D, D], [D]
};

struct DiffusionParams {
  std::vector<double> time_fc1_weight, time_fc1_bias;  // [D, Ts], [D]
  std::vector<double> time_fc2_weight, time_fc2_bias;  // [D, D], [D]
  std::vector<double> cond_fc1_weight, cond_fc1_bias;  // [D, L*F], [D]
  std::vector<double> cond_fc2_weight, cond_fc2_bias;  // [D, D], [D]
  std::vector<double> input_weight, input_bias;        // [D, O + 2D], [D]
  std::vector<DiffusionBlockParams> blocks;
  std::vector<double> output_weight, output_bias;  // [O, D], [O]
};

// Throws resident::Error naming the field when `dims` is out of the ranges
// above.
void validate_diffusion_dims(const DiffusionDims& dims);

DiffusionParams diffusion_zero_params(const DiffusionDims& dims);

// The tensors by their slab names, in the slab's order: "time.fc1.weight",
// "time.fc1.bias", "time.fc2.weight", "time.fc2.bias", "cond.fc1.weight",
// "cond.fc1.bias", "cond.fc2.weight", "cond.fc2.bias", "input.weight",
// "input.bias", per block k "block<k>.norm.gamma", "block<k>.norm.beta",
// "block<k>.fc1.weight", "block<k>.fc1.bias", "block<k>.fc2.weight",
// "block<k>.fc2.bias", then "output.weight", "output.bias".
std::vector<std::pair<std::string, std::vector<double>*>> diffusion_named_tensors(
    DiffusionParams& params);

// The sinusoid s(t) [time_dim].
std::vector<double> diffusion_time_sinusoid(std::size_t time_dim, double t);

// eps_hat [batch, O] from x_t [batch, O], t [batch] and window [batch, L*F].
std::vector<double> diffusion_denoiser_forward(const DiffusionDims& dims,
                                               const DiffusionParams& params,
                                               std::span<const double> x_t,
                                               std::span<const std::size_t> t,
                                               std::span<const double> window, std::size_t batch);

struct DiffusionGradients {
  DiffusionParams params;       // dLoss/dparams, every tensor (overwritten)
  std::vector<double> dx_t;     // [batch, O]
  std::vector<double> dwindow;  // [batch, L*F]
};

// The vector-Jacobian product of diffusion_denoiser_forward for d_eps_hat
// [batch, O].
DiffusionGradients diffusion_denoiser_backward(const DiffusionDims& dims,
                                               const DiffusionParams& params,
                                               std::span<const double> x_t,
                                               std::span<const std::size_t> t,
                                               std::span<const double> window, std::size_t batch,
                                               std::span<const double> d_eps_hat);

// The schedule values the loss reads: sqrt(alpha_bar_t) and sqrt(1 -
// alpha_bar_t), [T] each.
struct DiffusionQSample {
  std::span<const double> sqrt_alpha_bar, sqrt_one_minus_alpha_bar;
};

// x_t [batch, O] = sqrt_alpha_bar[t_b] y + sqrt_one_minus_alpha_bar[t_b] eps.
std::vector<double> diffusion_q_sample(const DiffusionQSample& q, std::span<const double> y,
                                       std::span<const std::size_t> t, std::span<const double> eps,
                                       std::size_t batch, std::size_t outputs);

// The training loss on targets y [batch, O] with t [batch] and eps [batch, O].
double diffusion_training_loss(const DiffusionDims& dims, const DiffusionParams& params,
                               const DiffusionQSample& q, std::span<const double> window,
                               std::span<const double> y, std::span<const std::size_t> t,
                               std::span<const double> eps, std::size_t batch);

// Its gradient: params, dwindow and (in dx_t) dLoss/dy [batch, O].
DiffusionGradients diffusion_training_loss_backward(
    const DiffusionDims& dims, const DiffusionParams& params, const DiffusionQSample& q,
    std::span<const double> window, std::span<const double> y, std::span<const std::size_t> t,
    std::span<const double> eps, std::size_t batch);

// One ancestral step at t: x0_hat = sqrt_recip_ab x_t - sqrt_recipm1_ab
// eps_hat; x_prev = c1 x0_hat + c2 x_t + [t > 0] sigma z (element-wise over
// equal-sized spans).
struct DiffusionStepCoefficients {
  double sqrt_recip_alpha_bar, sqrt_recip_alpha_bar_minus_one, c1, c2, sigma;
  bool add_noise;  // t > 0
};
std::vector<double> diffusion_sampler_step(const DiffusionStepCoefficients& c,
                                           std::span<const double> x_t,
                                           std::span<const double> eps_hat,
                                           std::span<const double> z);

// samples [windows * S, O] (row w * S + s); mean [windows, O] and quantiles
// [windows, O, Q] (quantile fastest) by linear interpolation between order
// statistics at position q (S - 1).
struct DiffusionSummary {
  std::vector<double> mean, quantiles;
};
DiffusionSummary diffusion_sample_summary(std::span<const double> samples, std::size_t windows,
                                          std::size_t samples_per_window, std::size_t outputs,
                                          std::span<const double> levels);

// The normal a GPU kernel forms from two 32-bit Philox draws a, b (Box-Muller,
// cosine branch): sqrt(-2 ln u1) cos(2 pi u2), u1 = (a + 0.5) 2^-32, u2 = b
// 2^-32.
double diffusion_normal_from_bits(unsigned a, unsigned b);
// The timestep floor(a T / 2^32) a draw a picks among T.
std::size_t diffusion_timestep_from_bits(unsigned a, std::size_t steps);

}  // namespace resident::reference
