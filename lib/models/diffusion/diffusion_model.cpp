#include "lib/models/diffusion/diffusion_model.h"

#include <cuda_runtime_api.h>

#include <array>
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/diffusion/diffusion_block_activation.h"
#include "kernels/models/diffusion/diffusion_concat.h"
#include "kernels/models/diffusion/diffusion_draw.h"
#include "kernels/models/diffusion/diffusion_fused_block.h"
#include "kernels/models/diffusion/diffusion_input_grad.h"
#include "kernels/models/diffusion/diffusion_residual.h"
#include "kernels/models/diffusion/diffusion_sampler_input.h"
#include "kernels/models/diffusion/diffusion_time_table.h"
#include "kernels/nn/activation.h"
#include "kernels/nn/bias_activation.h"
#include "kernels/nn/layer_norm.h"
#include "kernels/nn/mse_loss_fused.h"
#include "lib/core/library_checks.h"
#include "lib/models/diffusion/diffusion_init.h"
#include "lib/nn/linear.h"

namespace resident::models {

namespace kd = kernels::diffusion;

static_assert(kDiffusionMaxSamples == static_cast<std::size_t>(kd::kMaxSummarySamples));
static_assert(kDiffusionMaxQuantiles == static_cast<std::size_t>(kd::kMaxSummaryLevels));
static_assert(kDiffusionFusedMaxWidth == kd::kFusedBlockMaxWidth);
static_assert(2 * kDiffusionMaxBlocks == kd::kFusedBlockMaxMatrices);

namespace {

constexpr std::uint64_t kTrainStream = 0x4446'5452ull;   // "DFTR": the training draws
constexpr std::uint64_t kSampleStream = 0x4446'534dull;  // "DFSM": the sampler's noise
constexpr float kLayerNormEps = 1e-5f;

const kernels::Activation kSilu{kernels::ActivationKind::Silu};
const kernels::Activation kGelu{kernels::ActivationKind::GeluTanh};

const ModelShape& validated(const ModelShape& shape, const DiffusionConfig& config) {
  validate_diffusion_config(config, shape);
  return shape;
}

// Floats of every scratch region, in the order the constructor takes them.
struct ScratchSizes {
  std::vector<std::size_t> floats;
};

ScratchSizes scratch_sizes(const DiffusionConfig& c, const ModelShape& s) {
  const std::size_t B = s.max_batch, D = c.width, O = s.outputs, K = O + 2 * D;
  const std::size_t nb = c.blocks, R = s.max_batch * c.samples, T = c.steps;
  const std::size_t ln_scratch = kernels::layer_norm_backward_scratch_floats(B, D);
  const std::size_t partials = kernels::mse_loss_fused_partials_count(B * O);
  return {{B * O, B * O, B * c.time_dim, B * D, B * D, B * D, B * D, B * D, B * D, B * K,
           (nb + 1) * B * D, nb * B * D, nb * B, nb * B, nb * B * D, nb * B * D, B * O, B * O,
           B * D, B * D, nb * B * D, B * D, B * K, B * D, B * D, ln_scratch, partials,
           // sampler
           R * O, R * D, R * D, R * D, R * D, R * D, R * O, B * D, B * D, B * D, B * D,
           T * c.time_dim, T * D, T * D, T * D, T * D,
           // the fused sampler blocks' transposed weights [2 * blocks, D, D] (none when off)
           c.fused_sampler_blocks ? 2 * nb * D * D : 0}};
}

std::size_t scratch_bytes(const DiffusionConfig& c, const ModelShape& s) {
  ScratchPlan plan;
  for (const std::size_t n : scratch_sizes(c, s).floats) plan.add<float>(n);
  return plan.bytes();
}

// A poisoned scratch region: every float NaN (all bits set), so unwritten reads show.
float* take_poisoned(ScratchArena& arena, std::size_t count) {
  float* p = arena.take<float>(count);
  if (p != nullptr) RESIDENT_CUDA_CHECK(cudaMemset(p, 0xFF, count * sizeof(float)));
  return p;
}

std::vector<float> to_float(const std::vector<double>& v) { return {v.begin(), v.end()}; }

nn::LinearShape shape_of(std::size_t rows, std::size_t in, std::size_t out) {
  return {rows, in, out};
}

}  // namespace

DiffusionModel::DiffusionModel(const ModelShape& shape, const DiffusionConfig& config,
                               std::uint64_t seed)
    : shape_(validated(shape, config)),
      config_(config),
      schedule_(make_diffusion_schedule(config.schedule, config.steps, config.variance)),
      arena_(scratch_bytes(config, shape)) {
  width_ = config_.width;
  outputs_ = shape_.outputs;
  flat_ = shape_.window * shape_.features;
  k_width_ = outputs_ + 2 * width_;
  steps_ = config_.steps;
  time_dim_ = config_.time_dim;
  sampler_rows_ = shape_.max_batch * config_.samples;
  training_key_ = PhiloxKey{mix_seed(seed, kTrainStream), 0};
  sample_seed_ = mix_seed(seed, kSampleStream);

  for (std::size_t t = 0; t < steps_; ++t) {
    kd::SamplerStepCoefficients c;
    c.sqrt_recip_alpha_bar = static_cast<float>(schedule_.sqrt_recip_alpha_bar[t]);
    c.sqrt_recip_alpha_bar_minus_one =
        static_cast<float>(schedule_.sqrt_recip_alpha_bar_minus_one[t]);
    c.c1 = static_cast<float>(schedule_.c1[t]);
    c.c2 = static_cast<float>(schedule_.c2[t]);
    c.sigma = static_cast<float>(schedule_.sigma[t]);
    c.add_noise = t > 0;
    c.noise_block = steps_ - t;
    coefficients_.push_back(c);
  }
  levels_.count = static_cast<int>(config_.quantiles.size());
  for (std::size_t k = 0; k < config_.quantiles.size(); ++k)
    levels_.level[k] = static_cast<float>(config_.quantiles[k]);

  const std::vector<DiffusionTensorSpec> specs = diffusion_tensor_specs(config_, shape_);
  for (const DiffusionTensorSpec& s : specs) slab_.add(s.name, s.shape, s.decay);
  slab_.finalize();
  const std::vector<std::vector<float>> init = diffusion_initial_values(config_, shape_, seed);
  for (std::size_t i = 0; i < specs.size(); ++i)
    slab_.upload(nn::SlabPart::Params, specs[i].name, init[i], nullptr);
  time_fc1_ = linear("time.fc1");
  time_fc2_ = linear("time.fc2");
  cond_fc1_ = linear("cond.fc1");
  cond_fc2_ = linear("cond.fc2");
  input_ = linear("input");
  output_ = linear("output");
  for (std::size_t k = 0; k < config_.blocks; ++k) {
    const std::string b = "block" + std::to_string(k) + ".";
    blocks_.push_back({slab_.param(b + "norm.gamma"), slab_.param(b + "norm.beta"),
                       slab_.grad(b + "norm.gamma"), slab_.grad(b + "norm.beta"), linear(b + "fc1"),
                       linear(b + "fc2")});
  }

  sqrt_alpha_bar_ = DeviceBuffer<float>(steps_);
  sqrt_one_minus_alpha_bar_ = DeviceBuffer<float>(steps_);
  sqrt_alpha_bar_.upload(to_float(schedule_.sqrt_alpha_bar));
  sqrt_one_minus_alpha_bar_.upload(to_float(schedule_.sqrt_one_minus_alpha_bar));
  timesteps_ = DeviceBuffer<int>(shape_.max_batch);
  t_ = timesteps_.data();
  ticket_ = DeviceBuffer<unsigned int>(1);
  RESIDENT_CUDA_CHECK(cudaMemset(ticket_.data(), 0, ticket_.bytes()));
  sampler_window_ = DeviceBuffer<float>(shape_.max_batch * flat_);
  RESIDENT_CUDA_CHECK(cudaMemset(sampler_window_.data(), 0, sampler_window_.bytes()));

  const std::vector<std::size_t> n = scratch_sizes(config_, shape_).floats;
  std::size_t i = 0;
  for (float** p :
       {&eps_,     &x_t_,        &sinusoid_, &e1_,   &e1a_,   &temb_,       &c1_,   &c1a_,
        &cond_,    &u_,          &h_,        &ln_,   &mean_,  &rstd_,       &z_,    &a_,
        &eps_hat_, &d_eps_hat_,  &dh_,       &da_,   &dz_,    &dln_,        &du_,   &dcond_,
        &dtemb_,   &ln_scratch_, &partials_, &sx_,   &sh_,    &sln_,        &sz_,   &sa_,
        &sy_,      &seps_,       &sc1_,      &sc1a_, &scond_, &scond_proj_, &tsin_, &te1_,
        &te1a_,    &ttemb_,      &tproj_,    &swt_})
    *p = take_poisoned(arena_, n[i++]);
  ln_scratch_floats_ = n[25];
  partials_count_ = n[26];
  if (config_.fused_sampler_blocks) kd::prepare_diffusion_fused_block_kernel();
  RESIDENT_CUDA_CHECK(cudaDeviceSynchronize());  // setup: uploads and poisoning are done
}

DiffusionModel::Linear DiffusionModel::linear(const std::string& name) {
  return {slab_.param(name + ".weight"), slab_.param(name + ".bias"), slab_.grad(name + ".weight"),
          slab_.grad(name + ".bias")};
}

PhiloxKey DiffusionModel::sample_key(std::uint64_t draw) const noexcept {
  return PhiloxKey{mix_seed(sample_seed_, draw), 0};
}

void DiffusionModel::check_batch(const char* call, std::size_t batch) const {
  if (batch < 1 || batch > shape_.max_batch)
    throw Error(call, "invalid argument",
                "batch = " + std::to_string(batch) + ", allowed [1, " +
                    std::to_string(shape_.max_batch) + "]",
                __FILE__, __LINE__);
}

void DiffusionModel::forward(const StreamContext& context, const float* x, std::size_t batch,
                             float* prediction) {
  DiffusionSampleRequest request;
  request.mean = prediction;
  sample(context, x, batch, config_.samples, 0, request);
}

void DiffusionModel::backward(const StreamContext& context, const float* x,
                              const float* d_prediction, std::size_t batch) {
  (void)context, (void)x, (void)d_prediction, (void)batch;
  throw Error("DiffusionModel::backward", "not supported",
              "the prediction is a sampled mean; the model trains through "
              "train_loss_and_backward (owns_training_loss() is true)",
              __FILE__, __LINE__);
}

void DiffusionModel::train_loss_and_backward(const StreamContext& context, const float* x,
                                             const float* y, std::size_t batch, float* loss) {
  check_batch("DiffusionModel::train_loss_and_backward", batch);
  const NvtxRange range("diffusion/train_loss_and_backward");
  const cudaStream_t s = context.stream();
  const std::size_t B = batch, D = width_, O = outputs_, K = k_width_, Bmax = shape_.max_batch;
  const std::size_t nb = blocks_.size();
  const auto h = [&](std::size_t k) { return h_ + k * Bmax * D; };
  const auto at = [&](float* base, std::size_t k) { return base + k * Bmax * D; };
  const auto accumulate = nn::GradMode::Accumulate, overwrite = nn::GradMode::Overwrite;

  // ----- forward
  kd::launch_diffusion_draw(t_, eps_, x_t_, sinusoid_, y, sqrt_alpha_bar_.data(),
                            sqrt_one_minus_alpha_bar_.data(), training_key_, slab_.step_counter(),
                            B, O, steps_, time_dim_, s);
  nn::linear_forward(context, shape_of(B, time_dim_, D), e1_, sinusoid_, time_fc1_.w, nullptr);
  kernels::launch_bias_activation_forward(e1_, e1a_, time_fc1_.b, B, D, kGelu, s);
  nn::linear_forward(context, shape_of(B, D, D), temb_, e1a_, time_fc2_.w, time_fc2_.b);
  nn::linear_forward(context, shape_of(B, flat_, D), c1_, x, cond_fc1_.w, nullptr);
  kernels::launch_bias_activation_forward(c1_, c1a_, cond_fc1_.b, B, D, kSilu, s);
  nn::linear_forward(context, shape_of(B, D, D), cond_, c1a_, cond_fc2_.w, cond_fc2_.b);
  kd::launch_diffusion_concat(u_, x_t_, cond_, temb_, B, O, D, s);
  nn::linear_forward(context, shape_of(B, K, D), h(0), u_, input_.w, input_.b);
  for (std::size_t k = 0; k < nb; ++k) {
    const Block& bk = blocks_[k];
    kernels::launch_layer_norm_forward(at(ln_, k), mean_ + k * Bmax, rstd_ + k * Bmax, h(k),
                                       bk.gamma, bk.beta, B, D, kLayerNormEps, s);
    nn::linear_forward(context, shape_of(B, D, D), at(z_, k), at(ln_, k), bk.fc1.w, nullptr);
    kd::launch_diffusion_block_activation(at(z_, k), at(a_, k), bk.fc1.b, temb_, D, B, D, s);
    nn::linear_forward(context, shape_of(B, D, D), h(k + 1), at(a_, k), bk.fc2.w, nullptr);
    kd::launch_diffusion_residual(h(k + 1), h(k), h(k + 1), bk.fc2.b, B, D, s);
  }
  nn::linear_forward(context, shape_of(B, D, O), eps_hat_, h(nb), output_.w, output_.b);
  kernels::launch_mse_loss_fused(loss, d_eps_hat_, partials_, partials_count_, ticket_.data(),
                                 eps_hat_, eps_, B * O, 1.0f, overwrite, s);

  // ----- backward: input gradients overwrite scratch, parameter gradients accumulate
  nn::linear_backward(context, shape_of(B, D, O), {dh_, nullptr, nullptr}, h(nb), output_.w,
                      d_eps_hat_, overwrite);
  nn::linear_backward(context, shape_of(B, D, O), {nullptr, output_.dw, output_.db}, h(nb),
                      output_.w, d_eps_hat_, accumulate);
  for (std::size_t k = nb; k-- > 0;) {
    const Block& bk = blocks_[k];
    nn::linear_backward(context, shape_of(B, D, D), {da_, nullptr, nullptr}, at(a_, k), bk.fc2.w,
                        dh_, overwrite);
    nn::linear_backward(context, shape_of(B, D, D), {nullptr, bk.fc2.dw, bk.fc2.db}, at(a_, k),
                        bk.fc2.w, dh_, accumulate);
    kernels::launch_activation_backward_bias_grad(at(dz_, k), bk.fc1.db, at(z_, k), da_, B, D,
                                                  kSilu, accumulate, s);
    nn::linear_backward(context, shape_of(B, D, D), {dln_, nullptr, nullptr}, at(ln_, k), bk.fc1.w,
                        at(dz_, k), overwrite);
    nn::linear_backward(context, shape_of(B, D, D), {nullptr, bk.fc1.dw, nullptr}, at(ln_, k),
                        bk.fc1.w, at(dz_, k), accumulate);
    // dh += LN backward: the residual stream's gradient gains the block's branch.
    kernels::launch_layer_norm_backward(dh_, bk.dgamma, bk.dbeta, ln_scratch_, ln_scratch_floats_,
                                        h(k), bk.gamma, mean_ + k * Bmax, rstd_ + k * Bmax, dln_, B,
                                        D, accumulate, s);
  }
  nn::linear_backward(context, shape_of(B, K, D), {du_, nullptr, nullptr}, u_, input_.w, dh_,
                      overwrite);
  nn::linear_backward(context, shape_of(B, K, D), {nullptr, input_.dw, input_.db}, u_, input_.w,
                      dh_, accumulate);
  kd::launch_diffusion_input_grad(dcond_, dtemb_, du_, dz_, Bmax * D, nb, B, O, D, s);
  // history MLP (the window itself needs no gradient)
  nn::linear_backward(context, shape_of(B, D, D), {da_, nullptr, nullptr}, c1a_, cond_fc2_.w,
                      dcond_, overwrite);
  nn::linear_backward(context, shape_of(B, D, D), {nullptr, cond_fc2_.dw, cond_fc2_.db}, c1a_,
                      cond_fc2_.w, dcond_, accumulate);
  kernels::launch_activation_backward_bias_grad(dln_, cond_fc1_.db, c1_, da_, B, D, kSilu,
                                                accumulate, s);
  nn::linear_backward(context, shape_of(B, flat_, D), {nullptr, cond_fc1_.dw, nullptr}, x,
                      cond_fc1_.w, dln_, accumulate);
  // time MLP
  nn::linear_backward(context, shape_of(B, D, D), {da_, nullptr, nullptr}, e1a_, time_fc2_.w,
                      dtemb_, overwrite);
  nn::linear_backward(context, shape_of(B, D, D), {nullptr, time_fc2_.dw, time_fc2_.db}, e1a_,
                      time_fc2_.w, dtemb_, accumulate);
  kernels::launch_activation_backward_bias_grad(dln_, time_fc1_.db, e1_, da_, B, D, kGelu,
                                                accumulate, s);
  nn::linear_backward(context, shape_of(B, time_dim_, D), {nullptr, time_fc1_.dw, nullptr},
                      sinusoid_, time_fc1_.w, dln_, accumulate);
}

void DiffusionModel::sample(const StreamContext& context, const float* x, std::size_t batch,
                            std::size_t samples_per_window, std::uint64_t draw,
                            const DiffusionSampleRequest& request) {
  check_batch("DiffusionModel::sample", batch);
  if (samples_per_window < 1 || samples_per_window > config_.samples)
    throw Error("DiffusionModel::sample", "invalid argument",
                "samples_per_window = " + std::to_string(samples_per_window) + ", allowed [1, " +
                    std::to_string(config_.samples) + "] (config.samples)",
                __FILE__, __LINE__);
  const NvtxRange range("diffusion/sample");
  const cudaStream_t s = context.stream();
  const std::size_t D = width_, O = outputs_, K = k_width_, T = steps_;
  const std::size_t R = batch * samples_per_window;
  const PhiloxKey key = sample_key(draw);
  const float one = 1.0f, zero = 0.0f;
  const auto dim = [](std::size_t n) { return static_cast<int>(n); };  // validated to fit

  // The time MLP of every step and its input projection tproj [T, D] = temb W_in[:, O+D:]^T.
  kd::launch_diffusion_time_table(tsin_, T, time_dim_, s);
  nn::linear_forward(context, shape_of(T, time_dim_, D), te1_, tsin_, time_fc1_.w, nullptr);
  kernels::launch_bias_activation_forward(te1_, te1a_, time_fc1_.b, T, D, kGelu, s);
  nn::linear_forward(context, shape_of(T, D, D), ttemb_, te1a_, time_fc2_.w, time_fc2_.b);
  RESIDENT_CUBLAS_CHECK(cublasSetPointerMode(context.cublas(), CUBLAS_POINTER_MODE_HOST));
  RESIDENT_CUBLAS_CHECK(cublasSgemm(context.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, dim(D), dim(T),
                                    dim(D), &one, input_.w + O + D, dim(K), ttemb_, dim(D), &zero,
                                    tproj_, dim(D)));
  // Each window's history embedding and its projection cond_proj [batch, D].
  nn::linear_forward(context, shape_of(batch, flat_, D), sc1_, x, cond_fc1_.w, nullptr);
  kernels::launch_bias_activation_forward(sc1_, sc1a_, cond_fc1_.b, batch, D, kSilu, s);
  nn::linear_forward(context, shape_of(batch, D, D), scond_, sc1a_, cond_fc2_.w, cond_fc2_.b);
  RESIDENT_CUBLAS_CHECK(cublasSgemm(context.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, dim(D), dim(batch),
                                    dim(D), &one, input_.w + O, dim(K), scond_, dim(D), &zero,
                                    scond_proj_, dim(D)));

  // The fused blocks read each block's fc1 and fc2 weights transposed (this call's parameters).
  const bool fused = config_.fused_sampler_blocks;
  if (fused) {
    std::array<const float*, kd::kFusedBlockMaxMatrices> w{};
    for (std::size_t k = 0; k < blocks_.size(); ++k) {
      w[2 * k] = blocks_[k].fc1.w;
      w[2 * k + 1] = blocks_[k].fc2.w;
    }
    kd::launch_diffusion_fused_weights(swt_, w.data(), 2 * blocks_.size(), D, s);
  }

  kd::launch_diffusion_sampler_noise(sx_, key, R, O, s);
  for (std::size_t t = T; t-- > 0;) {
    kd::launch_diffusion_sampler_input(sh_, sx_, input_.w, scond_proj_, tproj_ + t * D, input_.b, R,
                                       samples_per_window, O, D, s);
    if (fused) {
      for (std::size_t k = 0; k < blocks_.size(); ++k) {
        const Block& bk = blocks_[k];
        kd::launch_diffusion_fused_block(sh_, bk.gamma, bk.beta, swt_ + 2 * k * D * D, bk.fc1.b,
                                         ttemb_ + t * D, swt_ + (2 * k + 1) * D * D, bk.fc2.b, R,
                                         D, kLayerNormEps, s);
      }
    } else {
      for (const Block& bk : blocks_) {
        kernels::launch_layer_norm_forward(sln_, nullptr, nullptr, sh_, bk.gamma, bk.beta, R, D,
                                           kLayerNormEps, s);
        nn::linear_forward(context, shape_of(R, D, D), sz_, sln_, bk.fc1.w, nullptr);
        kd::launch_diffusion_block_activation(sz_, sa_, bk.fc1.b, ttemb_ + t * D, 0, R, D, s);
        nn::linear_forward(context, shape_of(R, D, D), sy_, sa_, bk.fc2.w, nullptr);
        kd::launch_diffusion_residual(sh_, sh_, sy_, bk.fc2.b, R, D, s);
      }
    }
    nn::linear_forward(context, shape_of(R, D, O), seps_, sh_, output_.w, nullptr);
    kd::launch_diffusion_sampler_step(sx_, seps_, output_.b, coefficients_[t], key, R, O, s);
  }
  kd::launch_diffusion_sample_summary(request.mean, request.quantiles, sx_, batch,
                                      samples_per_window, O, levels_, s);
  if (request.samples != nullptr)
    RESIDENT_CUDA_CHECK(
        cudaMemcpyAsync(request.samples, sx_, R * O * sizeof(float), cudaMemcpyDeviceToDevice, s));
}

void DiffusionModel::capture_sampler(const StreamContext& context, std::size_t batch,
                                     std::size_t samples_per_window, std::uint64_t draw,
                                     const DiffusionSampleRequest& request) {
  check_batch("DiffusionModel::capture_sampler", batch);
  sampler_graph_.capture(context.stream(), [&] {
    sample(context, sampler_window_.data(), batch, samples_per_window, draw, request);
  });
}

void DiffusionModel::launch_sampler(cudaStream_t stream) const {
  if (!sampler_graph_.captured())
    throw Error("DiffusionModel::launch_sampler", "invalid state",
                "no sampler was captured (call capture_sampler first)", __FILE__, __LINE__);
  sampler_graph_.launch(stream);
}

std::unique_ptr<SupervisedModel> make_diffusion_model(const ModelShape& shape, std::uint64_t seed) {
  return std::make_unique<DiffusionModel>(shape, DiffusionConfig{}, seed);
}

}  // namespace resident::models
