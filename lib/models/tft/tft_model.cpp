#include "lib/models/tft/tft_model.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/tft/tft_attention.h"
#include "kernels/models/tft/tft_elementwise.h"
#include "kernels/models/tft/tft_lstm.h"
#include "kernels/models/tft/tft_variable_grn.h"
#include "kernels/models/tft/tft_vsn_combine.h"
#include "kernels/nn/activation.h"
#include "kernels/nn/bias.h"
#include "kernels/nn/glu.h"
#include "kernels/nn/layer_norm.h"
#include "kernels/nn/softmax.h"
#include "lib/core/library_checks.h"
#include "lib/core/scratch_carver.h"
#include "lib/models/tft/tft_init.h"
#include "lib/nn/linear.h"

namespace resident::models {

namespace {

namespace kt = kernels::tft;
using nn::GradMode;
constexpr float kNormEps = 1e-5f;
// The fused per-variable GRNs take every size validate_tft_config allows.
static_assert(kTftMaxHidden <= kt::kVariableGrnMaxHidden &&
              kTftMaxPrescale <= kt::kVariableGrnMaxPrescale);
const kernels::Activation kElu{kernels::ActivationKind::Elu};

ModelShape with_quantiles(const ModelShape& shape, const TftConfig& config) {
  validate_tft_config(config, shape);
  ModelShape s = shape;
  s.outputs = shape.outputs * config.quantiles.size();
  return s;
}

// Row-major C[M, N] = alpha op(A)[M, K] op(B)[K, N] + beta C for `count` matrices at the given
// strides (cuBLAS is column-major: it computes C^T = op(B)^T op(A)^T).
void gemm_rm(const StreamContext& context, bool ta, bool tb, std::size_t M, std::size_t N,
             std::size_t K, const float* A, std::size_t lda, std::size_t sa, const float* B,
             std::size_t ldb, std::size_t sb, float beta, float* C, std::size_t ldc,
             std::size_t sc, std::size_t count) {
  const auto i = [](std::size_t v) { return static_cast<int>(v); };
  const auto l = [](std::size_t v) { return static_cast<long long>(v); };
  const float alpha = 1.0f;
  RESIDENT_CUBLAS_CHECK(cublasSgemmStridedBatched(
      context.cublas(), tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, i(N), i(M),
      i(K), &alpha, B, i(ldb), l(sb), A, i(lda), l(sa), &beta, C, i(ldc), l(sc), i(count)));
}

// dx (overwritten or accumulated) = dy W; dW, db accumulated; null ones skipped.
void linear_back(const StreamContext& c, std::size_t rows, std::size_t in, std::size_t out,
                 const float* x, const float* w, const float* dy, float* dx, bool accumulate_dx,
                 float* dw, float* db) {
  const nn::LinearShape shape{rows, in, out};
  if (dx != nullptr)
    nn::linear_backward(c, shape, {dx, nullptr, nullptr}, x, w, dy,
                        accumulate_dx ? GradMode::Accumulate : GradMode::Overwrite);
  if (dw != nullptr || db != nullptr)
    nn::linear_backward(c, shape, {nullptr, dw, db}, x, w, dy, GradMode::Accumulate);
}

}  // namespace

TftModel::TftModel(const ModelShape& shape, const TftConfig& config, std::uint64_t seed)
    : trainer_shape_(shape), shape_(with_quantiles(shape, config)), config_(config) {
  const std::vector<TftTensorSpec> specs = tft_tensor_specs(config_, trainer_shape_);
  for (const TftTensorSpec& t : specs) slab_.add(t.name, t.shape, t.decay);
  slab_.finalize();
  const std::vector<std::vector<float>> init = tft_initial_values(config_, trainer_shape_, seed);
  for (std::size_t i = 0; i < specs.size(); ++i)
    slab_.upload(nn::SlabPart::Params, specs[i].name, init[i], nullptr);
  kt::prepare_lstm_kernels();
  if (config_.fused_variable_grns) kt::prepare_variable_grn_kernels();

  const std::size_t B = shape_.max_batch, L = shape_.window, F = shape_.features;
  const std::size_t H = config_.hidden, dc = config_.prescale, dv = H / config_.heads;
  const std::size_t N = B * L, nh = config_.heads, wide = std::max(H, F);
  flat_ = {"vsn_flat", L, F * dc, H, F, {}};
  enrich_ = {"enrich", L, H, H, H, {}};
  ff_ = {"ff", 1, H, H, H, {}};
  lstm_gate_ = {"lstm_gate", L, H, H};
  attn_gate_ = {"attn_gate", 1, H, H};
  out_gate_ = {"out_gate", 1, H, H};
  const auto carve = [&](ScratchCarver& take) {
    const auto gan = [&](Gan& g) {
      const std::size_t rows = B * g.per_sample;
      g.pre = take(rows * 2 * g.out);
      g.r = take(rows * g.out);
      g.mean = take(rows);
      g.rstd = take(rows);
      g.y = take(rows * g.out);
    };
    const auto grn = [&](Grn& g) {
      const std::size_t rows = B * g.per_sample;
      g.gan.prefix = g.prefix;
      g.gan.per_sample = g.per_sample;
      g.gan.in = g.hidden;
      g.gan.out = g.out;
      g.z1 = take(rows * g.hidden);
      g.eta2 = take(rows * g.hidden);
      g.eta1 = take(rows * g.hidden);
      gan(g.gan);
    };
    ones_ = take(H);
    e_ = take(N * F * dc);
    grn(flat_);
    v_ = take(N * F);
    z1v_ = take(N * F * H);
    eta2v_ = take(N * F * H);
    eta1v_ = take(N * F * H);
    glv_ = take(N * F * 2 * H);
    rv_ = take(N * F * H);
    meanv_ = take(N * F);
    rstdv_ = take(N * F);
    xhatv_ = take(N * F * H);
    xi_ = take(N * H);
    xproj_ = take(N * 4 * H);
    gates_ = take(N * 4 * H);
    cell_ = take(N * H);
    hs_ = take(N * H);
    hprev_ = take(N * H);
    gan(lstm_gate_);
    grn(enrich_);
    keys_ = take(N * H);
    values_ = take(N * dv);
    theta_q_ = take(B * H);
    q_ = take(B * H);
    probs_ = take(B * nh * L);
    abar_ = take(B * L);
    mixed_ = take(B * dv);
    attn_ = take(B * H);
    gan(attn_gate_);
    grn(ff_);
    phi_q_ = take(B * H);
    gan(out_gate_);
    du_ = take(B * H);
    dpsi_ = take(B * H);
    ddelta_ = take(B * H);
    dattn_ = take(B * H);
    dtheta_q_ = take(B * H);
    dphi_q_ = take(B * H);
    dmixed_ = take(B * dv);
    dq_ = take(B * H);
    dkeys_ = take(N * H);
    dvalues_ = take(N * dv);
    dtheta_ = take(N * H);
    dphi_ = take(N * H);
    dh_above_ = take(N * H);
    dxi_ = take(N * H);
    dz_ = take(N * 4 * H);
    dsel_ = take(N * F);
    dlogits_ = take(N * F);
    dxhatv_ = take(N * F * H);
    dbeta_terms_ = take(N * F * H);
    dgamma_terms_ = take(N * F * H);
    dglv_ = take(N * F * 2 * H);
    de_ = take(N * F * dc);
    pterms_ = take(N * F * dc);
    dr_ = take(N * wide);
    dpre_ = take(N * 2 * wide);
    deta1_ = take(N * H);
    deta2_ = take(N * H);
    ln_scratch_floats_ = std::max({kernels::layer_norm_backward_scratch_floats(N, wide),
                                   kernels::layer_norm_backward_scratch_floats(N * F, H)});
    ln_scratch_ = take(ln_scratch_floats_);
    if (config_.fused_variable_grns) {
      vgrn_partials_floats_ = kt::variable_grn_partials_floats(N, F, H, dc);
      vgrn_partials_ = take(vgrn_partials_floats_);
    }
  };
  ScratchCarver plan(nullptr);
  carve(plan);
  arena_ = std::make_unique<ScratchArena>(plan.bytes());
  ScratchCarver take(arena_.get());
  carve(take);
  const std::vector<float> ones(H, 1.0f);
  RESIDENT_CUDA_CHECK(cudaMemcpy(ones_, ones.data(), H * sizeof(float), cudaMemcpyHostToDevice));
  RESIDENT_CUDA_CHECK(cudaDeviceSynchronize());
}

// ----- building blocks

void TftModel::gan_forward(const StreamContext& c, Gan& g, std::size_t batch, const float* a,
                           const float* resid) {
  const std::size_t rows = batch * g.per_sample;
  nn::linear_forward(c, {rows, g.in, 2 * g.out}, g.pre, a, slab_.param(g.prefix + ".glu.weight"),
                     slab_.param(g.prefix + ".glu.bias"));
  kt::launch_glu_add(g.r, g.pre, resid, rows, g.out, c.stream());
  kernels::launch_layer_norm_forward(g.y, g.mean, g.rstd, g.r,
                                     slab_.param(g.prefix + ".norm.gamma"),
                                     slab_.param(g.prefix + ".norm.beta"), rows, g.out, kNormEps,
                                     c.stream());
}

void TftModel::grn_forward(const StreamContext& c, Grn& g, std::size_t batch, const float* a) {
  const std::size_t rows = batch * g.per_sample;
  const std::string& p = g.prefix;
  nn::linear_forward(c, {rows, g.in, g.hidden}, g.z1, a, slab_.param(p + ".fc1.weight"),
                     slab_.param(p + ".fc1.bias"));
  kernels::launch_activation_forward(g.eta2, g.z1, rows * g.hidden, kElu, c.stream());
  nn::linear_forward(c, {rows, g.hidden, g.hidden}, g.eta1, g.eta2,
                     slab_.param(p + ".fc2.weight"), slab_.param(p + ".fc2.bias"));
  const float* resid = a;
  if (g.in != g.out) {
    nn::linear_forward(c, {rows, g.in, g.out}, g.gan.r, a, slab_.param(p + ".skip.weight"),
                       slab_.param(p + ".skip.bias"));
    resid = g.gan.r;
  }
  gan_forward(c, g.gan, batch, g.eta1, resid);
}

const float* TftModel::gan_backward(const StreamContext& c, Gan& g, std::size_t batch,
                                    const float* a, const float* dy, float* d_in,
                                    bool accumulate_in) {
  const std::size_t rows = batch * g.per_sample;
  const cudaStream_t s = c.stream();
  const float* gamma = slab_.param(g.prefix + ".norm.gamma");
  kernels::launch_layer_norm_backward(dr_, nullptr, nullptr, nullptr, 0, g.r, gamma, g.mean,
                                      g.rstd, dy, rows, g.out, GradMode::Overwrite, s);
  kernels::launch_layer_norm_backward(nullptr, slab_.grad(g.prefix + ".norm.gamma"),
                                      slab_.grad(g.prefix + ".norm.beta"), ln_scratch_,
                                      ln_scratch_floats_, g.r, gamma, g.mean, g.rstd, dy, rows,
                                      g.out, GradMode::Accumulate, s);
  kernels::launch_glu_backward(dpre_, g.pre, dr_, rows, g.out, GradMode::Overwrite, s);
  linear_back(c, rows, g.in, 2 * g.out, a, slab_.param(g.prefix + ".glu.weight"), dpre_, d_in,
              accumulate_in, slab_.grad(g.prefix + ".glu.weight"),
              slab_.grad(g.prefix + ".glu.bias"));
  return dr_;
}

void TftModel::grn_backward(const StreamContext& c, Grn& g, std::size_t batch, const float* a,
                            const float* dy, float* d_a, bool accumulate_a) {
  const std::size_t rows = batch * g.per_sample;
  const std::string& p = g.prefix;
  const cudaStream_t s = c.stream();
  const float* dresid = gan_backward(c, g.gan, batch, g.eta1, dy, deta1_, false);
  linear_back(c, rows, g.hidden, g.hidden, g.eta2, slab_.param(p + ".fc2.weight"), deta1_,
              deta2_, false, slab_.grad(p + ".fc2.weight"), slab_.grad(p + ".fc2.bias"));
  kernels::launch_activation_backward(deta2_, g.z1, deta2_, rows * g.hidden, kElu,
                                      GradMode::Overwrite, s);
  linear_back(c, rows, g.in, g.hidden, a, slab_.param(p + ".fc1.weight"), deta2_, d_a,
              accumulate_a, slab_.grad(p + ".fc1.weight"), slab_.grad(p + ".fc1.bias"));
  if (g.in != g.out)
    linear_back(c, rows, g.in, g.out, a, slab_.param(p + ".skip.weight"), dresid, d_a, true,
                slab_.grad(p + ".skip.weight"), slab_.grad(p + ".skip.bias"));
  else
    kt::launch_add_into(d_a, dresid, rows * g.out, GradMode::Accumulate, s);
}

// The per-variable GRN parameters in the slab, as the fused kernels take them.
kernels::tft::VgrnWeights TftModel::variable_grn_weights() const {
  const auto p = [&](const char* name) { return slab_.param(std::string("vsn_var.") + name); };
  return {p("fc1.weight"), p("fc1.bias"),  p("fc2.weight"),  p("fc2.bias"),
          p("glu.weight"), p("glu.bias"),  p("skip.weight"), p("skip.bias")};
}

// The F per-variable GRNs: every GEMM strided-batched over the variables, reading e [N, F, dc]
// and writing [N, F, width] in place (row stride F * width, batch stride width). With
// config_.fused_variable_grns, one fused kernel writes xhatv_ alone (its backward recomputes).
void TftModel::variable_grns_forward(const StreamContext& c, std::size_t batch) {
  const cudaStream_t s = c.stream();
  const std::size_t N = batch * shape_.window, F = shape_.features, H = config_.hidden;
  const std::size_t dc = config_.prescale;
  const auto p = [&](const char* name) { return slab_.param(std::string("vsn_var.") + name); };
  if (config_.fused_variable_grns) {
    kt::launch_variable_grn_forward(xhatv_, e_, variable_grn_weights(), N, F, H, dc, kNormEps, s);
    return;
  }
  gemm_rm(c, false, true, N, H, dc, e_, F * dc, dc, p("fc1.weight"), dc, H * dc, 0.0f, z1v_, F * H,
          H, F);
  kernels::launch_add_bias(z1v_, p("fc1.bias"), N, F * H, s);
  kernels::launch_activation_forward(eta2v_, z1v_, N * F * H, kElu, s);
  gemm_rm(c, false, true, N, H, H, eta2v_, F * H, H, p("fc2.weight"), H, H * H, 0.0f, eta1v_,
          F * H, H, F);
  kernels::launch_add_bias(eta1v_, p("fc2.bias"), N, F * H, s);
  gemm_rm(c, false, true, N, 2 * H, H, eta1v_, F * H, H, p("glu.weight"), H, 2 * H * H, 0.0f,
          glv_, F * 2 * H, 2 * H, F);
  kernels::launch_add_bias(glv_, p("glu.bias"), N, F * 2 * H, s);
  gemm_rm(c, false, true, N, H, dc, e_, F * dc, dc, p("skip.weight"), dc, H * dc, 0.0f, rv_, F * H,
          H, F);
  kernels::launch_add_bias(rv_, p("skip.bias"), N, F * H, s);
  kt::launch_glu_add(rv_, glv_, rv_, N * F, H, s);
  kernels::launch_layer_norm_forward(xhatv_, meanv_, rstdv_, rv_, ones_, nullptr, N * F, H,
                                     kNormEps, s);
}

// From dxhatv_ (the combine's backward) to de_ (accumulated) and the per-variable gradients.
void TftModel::variable_grns_backward(const StreamContext& c, std::size_t batch) {
  const cudaStream_t s = c.stream();
  const std::size_t N = batch * shape_.window, F = shape_.features, H = config_.hidden;
  const std::size_t dc = config_.prescale;
  const auto p = [&](const char* name) { return slab_.param(std::string("vsn_var.") + name); };
  const auto g = [&](const char* name) { return slab_.grad(std::string("vsn_var.") + name); };
  if (config_.fused_variable_grns) {
    const kt::VgrnGrads gw{g("fc1.weight"), g("fc1.bias"),  g("fc2.weight"),  g("fc2.bias"),
                           g("glu.weight"), g("glu.bias"),  g("skip.weight"), g("skip.bias")};
    kt::launch_variable_grn_backward(de_, gw, vgrn_partials_, vgrn_partials_floats_, dxhatv_, e_,
                                     variable_grn_weights(), N, F, H, dc, kNormEps, s);
    return;
  }
  float* drv = dxhatv_;  // in place
  kernels::launch_layer_norm_backward(drv, nullptr, nullptr, nullptr, 0, rv_, ones_, meanv_,
                                      rstdv_, dxhatv_, N * F, H, GradMode::Overwrite, s);
  // skip
  gemm_rm(c, false, false, N, dc, H, drv, F * H, H, p("skip.weight"), dc, H * dc, 1.0f, de_,
          F * dc, dc, F);
  gemm_rm(c, true, false, H, dc, N, drv, F * H, H, e_, F * dc, dc, 1.0f, g("skip.weight"), dc,
          H * dc, F);
  kernels::launch_bias_grad(g("skip.bias"), drv, N, F * H, GradMode::Accumulate, s);
  // GLU and its Linear
  kernels::launch_glu_backward(dglv_, glv_, drv, N * F, H, GradMode::Overwrite, s);
  float* deta1 = dbeta_terms_;   // free after the combine's column sums
  float* deta2 = dgamma_terms_;
  gemm_rm(c, true, false, 2 * H, H, N, dglv_, F * 2 * H, 2 * H, eta1v_, F * H, H, 1.0f,
          g("glu.weight"), H, 2 * H * H, F);
  kernels::launch_bias_grad(g("glu.bias"), dglv_, N, F * 2 * H, GradMode::Accumulate, s);
  gemm_rm(c, false, false, N, H, 2 * H, dglv_, F * 2 * H, 2 * H, p("glu.weight"), H, 2 * H * H,
          0.0f, deta1, F * H, H, F);
  // fc2
  gemm_rm(c, true, false, H, H, N, deta1, F * H, H, eta2v_, F * H, H, 1.0f, g("fc2.weight"), H,
          H * H, F);
  kernels::launch_bias_grad(g("fc2.bias"), deta1, N, F * H, GradMode::Accumulate, s);
  gemm_rm(c, false, false, N, H, H, deta1, F * H, H, p("fc2.weight"), H, H * H, 0.0f, deta2, F * H,
          H, F);
  kernels::launch_activation_backward(deta2, z1v_, deta2, N * F * H, kElu, GradMode::Overwrite, s);
  // fc1
  gemm_rm(c, true, false, H, dc, N, deta2, F * H, H, e_, F * dc, dc, 1.0f, g("fc1.weight"), dc,
          H * dc, F);
  kernels::launch_bias_grad(g("fc1.bias"), deta2, N, F * H, GradMode::Accumulate, s);
  gemm_rm(c, false, false, N, dc, H, deta2, F * H, H, p("fc1.weight"), dc, H * dc, 1.0f, de_,
          F * dc, dc, F);
}

// ----- forward and backward

void TftModel::forward(const StreamContext& c, const float* x, std::size_t batch,
                       float* prediction) {
  if (batch == 0 || batch > shape_.max_batch)
    throw Error("TftModel::forward", "invalid argument",
                "batch = " + std::to_string(batch) + ", allowed [1, max_batch = " +
                    std::to_string(shape_.max_batch) + "]",
                __FILE__, __LINE__);
  const NvtxRange range("tft/forward");
  const cudaStream_t s = c.stream();
  const std::size_t L = shape_.window, F = shape_.features, N = batch * L;
  const std::size_t H = config_.hidden, dc = config_.prescale, dv = H / config_.heads;
  kt::launch_prescale_forward(e_, x, slab_.param("prescale.weight"), slab_.param("prescale.bias"),
                              N, F, dc, s);
  grn_forward(c, flat_, batch, e_);
  kernels::launch_softmax_forward(v_, flat_.gan.y, N, F, nn::SoftmaxMask::None, s);
  variable_grns_forward(c, batch);
  kt::launch_vsn_combine_forward(xi_, v_, xhatv_, slab_.param("vsn_var.norm.gamma"),
                                 slab_.param("vsn_var.norm.beta"), N, F, H, s);
  nn::linear_forward(c, {N, H, 4 * H}, xproj_, xi_, slab_.param("lstm.input_weight"),
                     slab_.param("lstm.bias"));
  kt::launch_lstm_forward({gates_, cell_, hs_, hprev_}, xproj_,
                          slab_.param("lstm.recurrent_weight"), batch, L, H, s);
  gan_forward(c, lstm_gate_, batch, hs_, xi_);
  grn_forward(c, enrich_, batch, lstm_gate_.y);
  const float* theta = enrich_.gan.y;
  nn::linear_forward(c, {N, H, H}, keys_, theta, slab_.param("attn.key.weight"),
                     slab_.param("attn.key.bias"));
  nn::linear_forward(c, {N, H, dv}, values_, theta, slab_.param("attn.value.weight"),
                     slab_.param("attn.value.bias"));
  kt::launch_last_step_gather(theta_q_, theta, batch, L, H, s);
  nn::linear_forward(c, {batch, H, H}, q_, theta_q_, slab_.param("attn.query.weight"),
                     slab_.param("attn.query.bias"));
  const kt::AttentionShape attention{batch, L, H, config_.heads, L - 1};
  kt::launch_attention_forward(probs_, abar_, mixed_, q_, keys_, values_, attention, s);
  nn::linear_forward(c, {batch, dv, H}, attn_, mixed_, slab_.param("attn.out.weight"), nullptr);
  gan_forward(c, attn_gate_, batch, attn_, theta_q_);
  grn_forward(c, ff_, batch, attn_gate_.y);
  kt::launch_last_step_gather(phi_q_, lstm_gate_.y, batch, L, H, s);
  gan_forward(c, out_gate_, batch, ff_.gan.y, phi_q_);
  nn::linear_forward(c, {batch, H, shape_.outputs}, prediction, out_gate_.y,
                     slab_.param("head.weight"), slab_.param("head.bias"));
  last_batch_ = batch;
}

void TftModel::backward(const StreamContext& c, const float* x, const float* d_prediction,
                        std::size_t batch) {
  if (batch == 0 || batch != last_batch_)
    throw Error("TftModel::backward", "invalid argument",
                "batch = " + std::to_string(batch) + ", allowed the last forward's batch = " +
                    std::to_string(last_batch_) + " (backward follows its forward)",
                __FILE__, __LINE__);
  const NvtxRange range("tft/backward");
  const cudaStream_t s = c.stream();
  const std::size_t L = shape_.window, F = shape_.features, N = batch * L;
  const std::size_t H = config_.hidden, dc = config_.prescale, dv = H / config_.heads;
  // head, output gate, position-wise GRN, attention gate
  linear_back(c, batch, H, shape_.outputs, out_gate_.y, slab_.param("head.weight"), d_prediction,
              du_, false, slab_.grad("head.weight"), slab_.grad("head.bias"));
  const float* d_phi_q = gan_backward(c, out_gate_, batch, ff_.gan.y, du_, dpsi_, false);
  kt::launch_add_into(dphi_q_, d_phi_q, batch * H, GradMode::Overwrite, s);
  grn_backward(c, ff_, batch, attn_gate_.y, dpsi_, ddelta_, false);
  const float* d_theta_q = gan_backward(c, attn_gate_, batch, attn_, ddelta_, dattn_, false);
  kt::launch_add_into(dtheta_q_, d_theta_q, batch * H, GradMode::Overwrite, s);
  // attention
  linear_back(c, batch, dv, H, mixed_, slab_.param("attn.out.weight"), dattn_, dmixed_, false,
              slab_.grad("attn.out.weight"), nullptr);
  const kt::AttentionShape attention{batch, L, H, config_.heads, L - 1};
  kt::launch_attention_backward(dq_, dkeys_, dvalues_, dmixed_, q_, keys_, values_, probs_, abar_,
                                attention, s);
  const float* theta = enrich_.gan.y;
  linear_back(c, batch, H, H, theta_q_, slab_.param("attn.query.weight"), dq_, dtheta_q_, true,
              slab_.grad("attn.query.weight"), slab_.grad("attn.query.bias"));
  linear_back(c, N, H, H, theta, slab_.param("attn.key.weight"), dkeys_, dtheta_, false,
              slab_.grad("attn.key.weight"), slab_.grad("attn.key.bias"));
  linear_back(c, N, H, dv, theta, slab_.param("attn.value.weight"), dvalues_, dtheta_, true,
              slab_.grad("attn.value.weight"), slab_.grad("attn.value.bias"));
  kt::launch_last_step_add(dtheta_, dtheta_q_, batch, L, H, s);
  // enrichment, post-LSTM gate
  grn_backward(c, enrich_, batch, lstm_gate_.y, dtheta_, dphi_, false);
  kt::launch_last_step_add(dphi_, dphi_q_, batch, L, H, s);
  const float* d_xi = gan_backward(c, lstm_gate_, batch, hs_, dphi_, dh_above_, false);
  kt::launch_add_into(dxi_, d_xi, N * H, GradMode::Overwrite, s);
  // LSTM: the reverse-time kernel, then the weight gradients as GEMMs over all N rows
  kt::launch_lstm_backward(dz_, dh_above_, gates_, cell_, slab_.param("lstm.recurrent_weight"),
                           batch, L, H, s);
  linear_back(c, N, H, 4 * H, xi_, slab_.param("lstm.input_weight"), dz_, dxi_, true,
              slab_.grad("lstm.input_weight"), slab_.grad("lstm.bias"));
  linear_back(c, N, H, 4 * H, hprev_, slab_.param("lstm.recurrent_weight"), dz_, nullptr, false,
              slab_.grad("lstm.recurrent_weight"), nullptr);
  // variable selection
  kt::launch_vsn_combine_backward({dsel_, dxhatv_, dbeta_terms_, dgamma_terms_}, dxi_, v_, xhatv_,
                                  slab_.param("vsn_var.norm.gamma"),
                                  slab_.param("vsn_var.norm.beta"), N, F, H, s);
  kernels::launch_bias_grad(slab_.grad("vsn_var.norm.beta"), dbeta_terms_, N, F * H,
                            GradMode::Accumulate, s);
  kernels::launch_bias_grad(slab_.grad("vsn_var.norm.gamma"), dgamma_terms_, N, F * H,
                            GradMode::Accumulate, s);
  kernels::launch_softmax_backward(dlogits_, v_, dsel_, N, F, nn::SoftmaxMask::None,
                                   GradMode::Overwrite, s);
  grn_backward(c, flat_, batch, e_, dlogits_, de_, false);
  variable_grns_backward(c, batch);
  // prescalers
  kernels::launch_bias_grad(slab_.grad("prescale.bias"), de_, N, F * dc, GradMode::Accumulate, s);
  kt::launch_prescale_weight_terms(pterms_, de_, x, N, F, dc, s);
  kernels::launch_bias_grad(slab_.grad("prescale.weight"), pterms_, N, F * dc,
                            GradMode::Accumulate, s);
}

std::unique_ptr<SupervisedModel> make_tft_model(const ModelShape& shape, std::uint64_t seed) {
  return std::make_unique<TftModel>(shape, TftConfig{}, seed);
}

}  // namespace resident::models
