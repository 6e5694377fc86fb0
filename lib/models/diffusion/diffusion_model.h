// DiffusionModel: the DDPM diffusion forecaster (MODELS.md section 6), entirely on the GPU. The
// double-precision oracle is tests/reference/diffusion_reference.h, whose header states the
// denoiser: eps_hat(x_t, t, window) from [x_t | cond(window) | temb(t)] through an input Linear,
// `blocks` residual blocks (LN -> Linear -> + temb -> SiLU -> Linear, added to the stream) and an
// output Linear; cond = Linear(SiLU(Linear(flat window))), temb = Linear(GELU(Linear(sinusoid))).
// The forecast target x_0 is the sample's next `outputs` values (horizon * target columns).
//
// Training (owns_training_loss(): the trainer calls train_loss_and_backward): per row one drawn
// t ~ U{0..T-1} and eps ~ N(0, I) from Philox keyed by (seed, the slab's device AdamW step), so a
// captured step draws afresh on every replay and equals the eager step of the same counter; one
// kernel draws, forms x_t (q_sample) and the time sinusoid; the epsilon-MSE and its gradient are
// one fused launch (kernels/nn/mse_loss_fused.h); backward is plain MLP backprop (cuBLAS for every
// Linear, the kit's LayerNorm and activation backward with bias gradients, one kernel splitting
// the input gradient and summing the time embedding's gradient over its uses).
//
// Sampling (sample()): the ancestral sampler of diffusion_schedule.h from x_T ~ N(0, I), T steps,
// no clipping (the data are z-scored); per call the time MLP of all T steps and each window's
// cond and its input projection are formed once, so a step is 1 + 5 * blocks + 2 launches
// (input, per block LN / GEMM / bias + temb + SiLU / GEMM / residual, output GEMM, update with
// the noise); with config.fused_sampler_blocks 1 + blocks + 2 (each block one
// kernels/models/diffusion/diffusion_fused_block.h launch, reading the blocks' weights transposed
// once per call). samples_per_window rows per window; the result is summarized on the device (mean,
// the config's quantile levels) and only what the request names is written. capture_sampler()
// captures the whole call as one CUDA graph reading sampler_window().
// forward() (the validation prediction) is the mean of config.samples samples at draw 0: the
// same noise on every call (common random numbers: epochs' validation losses differ by the
// parameters, not by the draw). backward() is not defined for a sampled prediction and throws.
//
// Parameters: diffusion_init.h (slab names = the reference's). Scratch is allocated once (training
// activations for max_batch rows, the sampler's for max_batch * samples rows and T table rows) and
// filled with NaN at construction. Hot-path calls: the context's stream only, no allocation, no
// copy (but the request's samples copy, device to device), no sync; deterministic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/core/philox.h"
#include "kernels/models/diffusion/diffusion_sample_summary.h"
#include "kernels/models/diffusion/diffusion_sampler_step.h"
#include "lib/core/captured_graph.h"
#include "lib/core/device_buffer.h"
#include "lib/core/scratch_arena.h"
#include "lib/models/diffusion/diffusion_config.h"
#include "lib/models/diffusion/diffusion_schedule.h"
#include "lib/models/supervised_model.h"

namespace resident::models {

// What a sample() call writes (each null pointer is skipped).
struct DiffusionSampleRequest {
  float* mean = nullptr;       // [batch, outputs]
  float* quantiles = nullptr;  // [batch, outputs, config().quantiles.size()], level fastest
  float* samples = nullptr;    // [batch * samples_per_window, outputs], row w * S + s
};

class DiffusionModel final : public SupervisedModel {
 public:
  // Validates (validate_diffusion_config), computes the schedule, builds and initializes the slab
  // from `seed` (blocking).
  DiffusionModel(const ModelShape& shape, const DiffusionConfig& config, std::uint64_t seed);

  std::string_view name() const noexcept override { return "diffusion"; }
  const ModelShape& shape() const noexcept override { return shape_; }
  std::string describe() const override { return describe_diffusion(config_, shape_); }
  nn::ParamSlab& slab() noexcept override { return slab_; }
  using SupervisedModel::slab;

  // prediction = the mean forecast of config().samples samples per window (draw 0).
  void forward(const StreamContext& context, const float* x, std::size_t batch,
               float* prediction) override;
  // Throws resident::Error: the model trains through train_loss_and_backward.
  void backward(const StreamContext& context, const float* x, const float* d_prediction,
                std::size_t batch) override;

  bool owns_training_loss() const noexcept override { return true; }
  // loss = epsilon-MSE over batch * outputs at the drawn (t, eps); grads added.
  void train_loss_and_backward(const StreamContext& context, const float* x, const float* y,
                               std::size_t batch, float* loss) override;

  // The ancestral sampler for windows x [batch, L, F], samples_per_window in
  // [1, config().samples], with the noise of draw `draw` (PhiloxKey sample_key(draw)). Throws
  // resident::Error before anything is enqueued for batch outside [1, max_batch].
  void sample(const StreamContext& context, const float* x, std::size_t batch,
              std::size_t samples_per_window, std::uint64_t draw,
              const DiffusionSampleRequest& request);
  // The window input of the captured sampler [max_batch, L, F] (fill it before launching).
  float* sampler_window() noexcept { return sampler_window_.data(); }
  // Captures sample(context, sampler_window(), batch, ...) as one CUDA graph (setup).
  void capture_sampler(const StreamContext& context, std::size_t batch,
                       std::size_t samples_per_window, std::uint64_t draw,
                       const DiffusionSampleRequest& request);
  // One replay of the captured sampler (throws when none was captured).
  void launch_sampler(cudaStream_t stream) const;

  const DiffusionConfig& config() const noexcept { return config_; }
  const DiffusionScheduleTable& schedule() const noexcept { return schedule_; }
  PhiloxKey training_key() const noexcept { return training_key_; }
  PhiloxKey sample_key(std::uint64_t draw) const noexcept;
  // The last training call's draws: t [max_batch] and eps [max_batch, outputs] (for tests).
  const int* drawn_timesteps() const noexcept { return t_; }
  const float* drawn_noise() const noexcept { return eps_; }

 private:
  struct Linear {
    const float* w;
    const float* b;
    float* dw;
    float* db;
  };
  struct Block {
    const float* gamma;
    const float* beta;
    float* dgamma;
    float* dbeta;
    Linear fc1, fc2;
  };
  Linear linear(const std::string& name);
  void check_batch(const char* call, std::size_t batch) const;

  ModelShape shape_;
  DiffusionConfig config_;
  DiffusionScheduleTable schedule_;
  std::vector<kernels::diffusion::SamplerStepCoefficients> coefficients_;
  kernels::diffusion::QuantileLevels levels_;
  nn::ParamSlab slab_;
  std::size_t width_ = 0, outputs_ = 0, flat_ = 0, k_width_ = 0, steps_ = 0, time_dim_ = 0;
  std::size_t sampler_rows_ = 0;
  PhiloxKey training_key_{};
  std::uint64_t sample_seed_ = 0;
  Linear time_fc1_{}, time_fc2_{}, cond_fc1_{}, cond_fc2_{}, input_{}, output_{};
  std::vector<Block> blocks_;

  DeviceBuffer<float> sqrt_alpha_bar_, sqrt_one_minus_alpha_bar_;  // [T]
  DeviceBuffer<int> timesteps_;
  DeviceBuffer<unsigned int> ticket_;
  DeviceBuffer<float> sampler_window_;
  ScratchArena arena_;
  // training (max_batch rows)
  int* t_ = nullptr;
  float *eps_ = nullptr, *x_t_ = nullptr, *sinusoid_ = nullptr, *e1_ = nullptr, *e1a_ = nullptr;
  float *temb_ = nullptr, *c1_ = nullptr, *c1a_ = nullptr, *cond_ = nullptr, *u_ = nullptr;
  float *h_ = nullptr, *ln_ = nullptr, *mean_ = nullptr, *rstd_ = nullptr, *z_ = nullptr;
  float *a_ = nullptr, *eps_hat_ = nullptr, *d_eps_hat_ = nullptr, *dh_ = nullptr;
  float *da_ = nullptr, *dz_ = nullptr, *dln_ = nullptr, *du_ = nullptr, *dcond_ = nullptr;
  float *dtemb_ = nullptr, *ln_scratch_ = nullptr, *partials_ = nullptr;
  std::size_t ln_scratch_floats_ = 0, partials_count_ = 0;
  // sampler (sampler_rows_ rows, max_batch windows, T table rows)
  float *sx_ = nullptr, *sh_ = nullptr, *sln_ = nullptr, *sz_ = nullptr, *sa_ = nullptr;
  float *sy_ = nullptr, *seps_ = nullptr, *sc1_ = nullptr, *sc1a_ = nullptr, *scond_ = nullptr;
  float *scond_proj_ = nullptr, *tsin_ = nullptr, *te1_ = nullptr, *te1a_ = nullptr;
  float *ttemb_ = nullptr, *tproj_ = nullptr;
  float* swt_ = nullptr;  // fused_sampler_blocks: [2 * blocks, D, D] transposed fc1, fc2 weights
  CapturedGraph sampler_graph_;
};

// The registry's factory: the default DiffusionConfig (the small reference configuration).
std::unique_ptr<SupervisedModel> make_diffusion_model(const ModelShape& shape, std::uint64_t seed);

}  // namespace resident::models
