// DiffusionConfig: the configuration of the DDPM diffusion forecaster
// (diffusion_model.h, MODELS.md section 6) and its validation, a host function
// that needs no GPU. The defaults are the small reference configuration: T =
// 200 diffusion steps on the linear schedule, a residual MLP denoiser of width
// 256 with 3 blocks, a 64-wide sinusoidal time embedding, the posterior
// variance ("fixedsmall") in the sampler, and 8 samples per window for the mean
// forecast.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "lib/models/supervised_model.h"

namespace resident::models {

enum class DiffusionSchedule {
  Linear,  // beta = linspace(1e-4, 0.02, T) * 1000 / T (lucidrains' T scaling), <= 0.999
  Cosine,  // alpha_bar(t) = cos^2((t / T + s) / (1 + s) pi / 2) / alpha_bar(0), s = 0.008
};

enum class DiffusionVariance {
  FixedSmall,  // sigma_t^2 = beta~_t, the posterior variance
  FixedLarge,  // sigma_t^2 = beta_t
};

// "linear" / "cosine", "fixedsmall" / "fixedlarge"; anything else throws
// resident::Error naming the allowed names.
DiffusionSchedule diffusion_schedule_from_name(std::string_view name);
std::string_view diffusion_schedule_name(DiffusionSchedule schedule) noexcept;
DiffusionVariance diffusion_variance_from_name(std::string_view name);
std::string_view diffusion_variance_name(DiffusionVariance variance) noexcept;

// Limits: the summary kernel sorts a window's samples in registers; the
// sampler's input kernel keeps a row's x_t in registers; cuBLAS takes int
// dimensions.
inline constexpr std::size_t kDiffusionMaxSamples = 64;
inline constexpr std::size_t kDiffusionMaxOutputs = 64;
inline constexpr std::size_t kDiffusionMaxQuantiles = 16;
inline constexpr std::size_t kDiffusionMaxSteps = 10000;
inline constexpr std::size_t kDiffusionMaxWidth = 4096;
inline constexpr std::size_t kDiffusionMaxBlocks = 16;
inline constexpr std::size_t kDiffusionFusedMaxWidth = 1024;  // fused_sampler_blocks' widest D

struct DiffusionConfig {
  std::size_t steps = 200;    // T, diffusion steps, [2, kDiffusionMaxSteps]
  std::size_t width = 256;    // D, the denoiser's width, [1, kDiffusionMaxWidth]
  std::size_t blocks = 3;     // residual blocks, [1, kDiffusionMaxBlocks]
  std::size_t time_dim = 64;  // sinusoid width (sin and cos halves), even, [4, kDiffusionMaxWidth]
  // Linear by default: the cosine schedule's last beta is clipped to 0.999, so the sampler's
  // first step multiplies the error of eps_hat by 1 / sqrt(alpha) ~ 32; lucidrains' cosine
  // default relies on clipping x0_hat to [-1, 1], which z-scored data cannot use.
  DiffusionSchedule schedule = DiffusionSchedule::Linear;
  DiffusionVariance variance = DiffusionVariance::FixedSmall;
  // Samples per window behind forward()'s prediction (their mean) and the
  // sampler's capacity per window: the sampler holds shape.max_batch * samples
  // rows. [1, kDiffusionMaxSamples].
  std::size_t samples = 8;
  // Quantile levels the sampler can summarize besides the mean, each in [0, 1],
  // at most kDiffusionMaxQuantiles; which of them a call returns is the
  // caller's choice.
  std::vector<double> quantiles{0.1, 0.5, 0.9};
  // The sampler's residual blocks as one fused kernel each per step
  // (kernels/models/diffusion/diffusion_fused_block.h: LayerNorm, fc1, bias + temb + SiLU, fc2
  // and the residual in one launch, 1 + blocks + 2 launches a step instead of 1 + 5 blocks + 2);
  // inference only, training unchanged; width at most kDiffusionFusedMaxWidth. Off by default.
  // describe() names it when on.
  bool fused_sampler_blocks = false;
};

// Throws resident::Error naming the field, its value and the allowed range when
// `config` (width at most kDiffusionFusedMaxWidth when fused_sampler_blocks) or `shape`
// (window, features, outputs in [1, kDiffusionMaxOutputs], max_batch >= 1; every GEMM
// dimension, max_batch * samples rows included, within cuBLAS' int range) is out of range.
void validate_diffusion_config(const DiffusionConfig& config, const ModelShape& shape);

// "diffusion T=200 linear fixedsmall, denoiser [x_t 1 | history 2048 -> 256 | time 64 -> 256]
// -> 256 x 3 blocks -> 1, 8 samples per window", with ", fused sampler blocks" appended when
// config.fused_sampler_blocks (a checkpoint's fingerprint holds describe()).
std::string describe_diffusion(const DiffusionConfig& config, const ModelShape& shape);

}  // namespace resident::models
