#include "lib/models/tlob/tlob_model.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/tlob/bin_norm.h"
#include "kernels/models/tlob/tlob_elementwise.h"
#include "kernels/nn/activation.h"
#include "kernels/nn/layer_norm.h"
#include "kernels/nn/softmax.h"
#include "lib/core/library_checks.h"
#include "lib/core/scratch_carver.h"
#include "lib/nn/linear.h"

namespace resident::models {

namespace {

namespace kt = kernels::tlob;
constexpr float kNormEps = 1e-5f;
const kernels::Activation kGelu{kernels::ActivationKind::GeluTanh};

const ModelShape& validated(const ModelShape& shape, const TlobConfig& config) {
  validate_tlob_config(config, shape);
  return shape;
}

// Row-major C[M, N] = alpha op(A)[M, K] op(B)[K, N] + beta C for `count` matrices at the given
// strides (cuBLAS is column-major: it computes C^T = op(B)^T op(A)^T).
void gemm_rm(const StreamContext& context, bool ta, bool tb, std::size_t M, std::size_t N,
             std::size_t K, float alpha, const float* A, std::size_t lda, std::size_t sa,
             const float* B, std::size_t ldb, std::size_t sb, float beta, float* C,
             std::size_t ldc, std::size_t sc, std::size_t count) {
  const auto i = [](std::size_t v) { return static_cast<int>(v); };
  const auto l = [](std::size_t v) { return static_cast<long long>(v); };
  RESIDENT_CUBLAS_CHECK(cublasSgemmStridedBatched(
      context.cublas(), tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, i(N), i(M),
      i(K), &alpha, B, i(ldb), l(sb), A, i(lda), l(sa), &beta, C, i(ldc), l(sc), i(count)));
}

}  // namespace

TlobModel::TlobModel(const ModelShape& shape, const TlobConfig& config, std::uint64_t seed)
    : shape_(validated(shape, config)), config_(config) {
  const std::vector<TlobTensorSpec> specs = tlob_tensor_specs(config_, shape_);
  for (const TlobTensorSpec& t : specs) slab_.add(t.name, t.shape, t.decay);
  slab_.finalize();
  const std::vector<std::vector<float>> init = tlob_initial_values(config_, shape_, seed);
  for (std::size_t i = 0; i < specs.size(); ++i)
    slab_.upload(nn::SlabPart::Params, specs[i].name, init[i], nullptr);

  const std::size_t B = shape_.max_batch, L = shape_.window, F = shape_.features;
  const std::size_t H = config_.hidden, nh = config_.heads;
  const std::vector<TlobLayerDims> dims = tlob_layer_dims(config_, shape_);
  const std::vector<std::size_t> widths = tlob_head_widths(config_, shape_);
  // One walk over every buffer: planned with a null arena, then taken in the same order.
  const auto carve = [&](ScratchCarver& take) {
    pos_ = take(L * H);
    xb_ = take(B * L * F);
    z1_ = take(B * L * F);
    z2_ = take(B * L * F);
    layers_.assign(dims.size(), {});
    std::size_t max_td = 0, max_t4d = 0, max_to = 0, max_tw = 0, max_p = 0, max_qkv = 0;
    ln_scratch_floats_ = 0;
    for (std::size_t k = 0; k < dims.size(); ++k) {
      Layer& y = layers_[k];
      const std::size_t T = dims[k].tokens, D = dims[k].width, O = dims[k].out, W = D * nh;
      y.dims = dims[k];
      y.prefix = "layer" + std::to_string(k) + ".";
      y.x = take(B * T * D);
      y.qkv = take(B * T * 3 * W);
      y.p = take(B * nh * T * T);
      y.a = take(B * T * W);
      y.r = take(B * T * D);
      y.mean = take(B * T);
      y.rstd = take(B * T);
      y.y = take(B * T * D);
      y.u = take(B * T * 4 * D);
      y.g = take(B * T * 4 * D);
      y.m = take(B * T * O);
      max_td = std::max(max_td, B * T * D);
      max_t4d = std::max(max_t4d, B * T * 4 * D);
      max_to = std::max(max_to, B * T * O);
      max_tw = std::max(max_tw, B * T * W);
      max_p = std::max(max_p, B * nh * T * T);
      max_qkv = std::max(max_qkv, B * T * 3 * W);
      ln_scratch_floats_ =
          std::max(ln_scratch_floats_, kernels::layer_norm_backward_scratch_floats(B * T, D));
    }
    head_.assign(widths.size() - 1, {});
    std::size_t max_head = 0;
    for (std::size_t j = 0; j + 1 < widths.size(); ++j) {
      HeadLayer& h = head_[j];
      h.in = widths[j];
      h.out = widths[j + 1];
      h.prefix = "head" + std::to_string(j) + ".";
      h.input = j == 0 ? layers_.back().m : take(B * h.in);
      h.pre = j + 2 < widths.size() ? take(B * h.out) : nullptr;
      max_head = std::max(max_head, B * h.in);
    }
    dm_ = take(std::max(max_to, max_td));
    dg_ = take(max_t4d);
    dy_ = take(max_td);
    dr_ = take(max_td);
    da_ = take(max_tw);
    dp_ = take(max_p);
    dqkv_ = take(max_qkv);
    dx_ = take(max_td);
    dhead_[0] = take(max_head);
    dhead_[1] = take(max_head);
    dxb_ = take(B * L * F);
    ln_scratch_ = take(ln_scratch_floats_);
    bin_partials_ = take(kt::bin_partials_floats(B, L, F));
  };
  ScratchCarver plan(nullptr);
  carve(plan);
  arena_ = std::make_unique<ScratchArena>(plan.bytes());
  ScratchCarver take(arena_.get());
  carve(take);

  std::vector<float> pos(L * H, 0.0f);
  for (std::size_t t = 0; t < L; ++t)
    for (std::size_t i = 0; 2 * i < H; ++i) {
      const double angle = static_cast<double>(t) /
                           std::pow(10000.0, static_cast<double>(2 * i) / static_cast<double>(H));
      pos[t * H + 2 * i] = static_cast<float>(std::sin(angle));
      if (2 * i + 1 < H) pos[t * H + 2 * i + 1] = static_cast<float>(std::cos(angle));
    }
  RESIDENT_CUDA_CHECK(cudaMemcpy(pos_, pos.data(), pos.size() * sizeof(float),
                                 cudaMemcpyHostToDevice));
  RESIDENT_CUDA_CHECK(cudaDeviceSynchronize());  // setup: the poisoning memsets are done
}

void TlobModel::forward(const StreamContext& context, const float* x, std::size_t batch,
                        float* prediction) {
  if (batch < 1 || batch > shape_.max_batch)
    throw Error("TlobModel::forward", "invalid argument",
                "batch = " + std::to_string(batch) + ", allowed [1, " +
                    std::to_string(shape_.max_batch) + "]",
                __FILE__, __LINE__);
  const NvtxRange range("tlob/forward");
  const cudaStream_t s = context.stream();
  const std::size_t L = shape_.window, F = shape_.features, H = config_.hidden;
  const std::size_t nh = config_.heads;
  const kt::BinParams bin{slab_.param("bin.l1"), slab_.param("bin.b1"), slab_.param("bin.l2"),
                          slab_.param("bin.b2"), slab_.param("bin.y1"), slab_.param("bin.y2")};
  kt::launch_bin_forward(xb_, z1_, z2_, x, bin, batch, L, F, s);
  nn::linear_forward(context, {batch * L, F, H}, layers_[0].x, xb_, slab_.param("embed.weight"),
                     slab_.param("embed.bias"));
  kt::launch_add_periodic(layers_[0].x, layers_[0].x, pos_, batch * L * H, L * H, s);

  for (std::size_t k = 0; k < layers_.size(); ++k) {
    Layer& y = layers_[k];
    const std::size_t T = y.dims.tokens, D = y.dims.width, O = y.dims.out, W = D * nh;
    const std::size_t rows = batch * T;
    const auto P = [&](const char* what) { return slab_.param(y.prefix + what); };
    nn::linear_forward(context, {rows, D, 3 * W}, y.qkv, y.x, P("qkv.weight"), P("qkv.bias"));
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    for (std::size_t h = 0; h < nh; ++h)
      gemm_rm(context, false, true, T, T, D, scale, y.qkv + h * D, 3 * W, T * 3 * W,
              y.qkv + W + h * D, 3 * W, T * 3 * W, 0.0f, y.p + h * T * T, T, nh * T * T, batch);
    kernels::launch_softmax_forward(y.p, y.p, batch * nh * T, T, nn::SoftmaxMask::None, s);
    for (std::size_t h = 0; h < nh; ++h)
      gemm_rm(context, false, false, T, D, T, 1.0f, y.p + h * T * T, T, nh * T * T,
              y.qkv + 2 * W + h * D, 3 * W, T * 3 * W, 0.0f, y.a + h * D, W, T * W, batch);
    nn::linear_forward(context, {rows, W, D}, y.r, y.a, P("out.weight"), P("out.bias"));
    kt::launch_add_periodic(y.r, y.r, y.x, rows * D, rows * D, s);
    kernels::launch_layer_norm_forward(y.y, y.mean, y.rstd, y.r, P("norm.gamma"),
                                       P("norm.beta"), rows, D, kNormEps, s);
    nn::linear_forward(context, {rows, D, 4 * D}, y.u, y.y, P("fc1.weight"), P("fc1.bias"));
    kernels::launch_activation_forward(y.g, y.u, rows * 4 * D, kGelu, s);
    nn::linear_forward(context, {rows, 4 * D, O}, y.m, y.g, P("fc2.weight"), P("fc2.bias"));
    if (k + 1 < layers_.size())
      kt::launch_transpose_add(layers_[k + 1].x, y.m, O == D ? y.x : nullptr, batch, T, O, s);
  }

  for (std::size_t j = 0; j < head_.size(); ++j) {
    HeadLayer& h = head_[j];
    const bool last = j + 1 == head_.size();
    nn::linear_forward(context, {batch, h.in, h.out}, last ? prediction : h.pre, h.input,
                       slab_.param(h.prefix + "weight"), slab_.param(h.prefix + "bias"));
    if (!last)
      kernels::launch_activation_forward(head_[j + 1].input, h.pre, batch * h.out, kGelu, s);
  }
  last_batch_ = batch;
}

void TlobModel::backward(const StreamContext& context, const float* x, const float* d_prediction,
                         std::size_t batch) {
  (void)x;  // the forward saved BiN's z-scores
  if (last_batch_ == 0 || batch != last_batch_)
    throw Error("TlobModel::backward", "invalid argument",
                "batch = " + std::to_string(batch) + ", the last forward's batch is " +
                    (last_batch_ == 0 ? std::string("none (no forward ran)")
                                      : std::to_string(last_batch_)),
                __FILE__, __LINE__);
  const NvtxRange range("tlob/backward");
  const cudaStream_t s = context.stream();
  const std::size_t L = shape_.window, F = shape_.features, H = config_.hidden;
  const std::size_t nh = config_.heads;
  using nn::GradMode;

  // Head, last layer first; the gradient of head layer 0's input lands in dm_ (the last
  // transformer layer's output gradient).
  const float* dout = d_prediction;
  for (std::size_t j = head_.size(); j-- > 0;) {
    HeadLayer& h = head_[j];
    float* din = j == 0 ? dm_ : dhead_[j % 2];
    const nn::LinearShape shape{batch, h.in, h.out};
    const float* w = slab_.param(h.prefix + "weight");
    nn::linear_backward(context, shape, {din, nullptr, nullptr}, h.input, w, dout,
                        GradMode::Overwrite);
    nn::linear_backward(context, shape,
                        {nullptr, slab_.grad(h.prefix + "weight"), slab_.grad(h.prefix + "bias")},
                        h.input, w, dout, GradMode::Accumulate);
    if (j > 0)
      kernels::launch_activation_backward(din, head_[j - 1].pre, din, batch * h.in, kGelu,
                                          GradMode::Overwrite, s);
    dout = din;
  }

  for (std::size_t k = layers_.size(); k-- > 0;) {
    Layer& y = layers_[k];
    const std::size_t T = y.dims.tokens, D = y.dims.width, O = y.dims.out, W = D * nh;
    const std::size_t rows = batch * T;
    const auto P = [&](const char* what) { return slab_.param(y.prefix + what); };
    const auto G = [&](const char* what) { return slab_.grad(y.prefix + what); };
    // dm_ holds dLoss/d(out) [B, T, O].
    const nn::LinearShape fc2{rows, 4 * D, O}, fc1{rows, D, 4 * D}, out{rows, W, D};
    nn::linear_backward(context, fc2, {dg_, nullptr, nullptr}, y.g, P("fc2.weight"), dm_,
                        GradMode::Overwrite);
    nn::linear_backward(context, fc2, {nullptr, G("fc2.weight"), G("fc2.bias")}, y.g,
                        P("fc2.weight"), dm_, GradMode::Accumulate);
    kernels::launch_activation_backward(dg_, y.u, dg_, rows * 4 * D, kGelu, GradMode::Overwrite,
                                        s);
    nn::linear_backward(context, fc1, {dy_, nullptr, nullptr}, y.y, P("fc1.weight"), dg_,
                        GradMode::Overwrite);
    nn::linear_backward(context, fc1, {nullptr, G("fc1.weight"), G("fc1.bias")}, y.y,
                        P("fc1.weight"), dg_, GradMode::Accumulate);
    // LayerNorm: its parameter gradients are added, so dR is added into a zeroed buffer.
    RESIDENT_CUDA_CHECK(cudaMemsetAsync(dr_, 0, rows * D * sizeof(float), s));
    kernels::launch_layer_norm_backward(dr_, G("norm.gamma"), G("norm.beta"), ln_scratch_,
                                        ln_scratch_floats_, y.r, P("norm.gamma"), y.mean, y.rstd,
                                        dy_, rows, D, GradMode::Accumulate, s);
    // dX collects the residual paths: dR (post-norm residual), dM when out == d, then the qkv
    // projection's input gradient.
    float* dx = dr_;
    if (O == D) {
      kt::launch_add_periodic(dx_, dr_, dm_, rows * D, rows * D, s);
      dx = dx_;
    }
    nn::linear_backward(context, out, {da_, nullptr, nullptr}, y.a, P("out.weight"), dr_,
                        GradMode::Overwrite);
    nn::linear_backward(context, out, {nullptr, G("out.weight"), G("out.bias")}, y.a,
                        P("out.weight"), dr_, GradMode::Accumulate);
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    for (std::size_t h = 0; h < nh; ++h) {
      const float* v = y.qkv + 2 * W + h * D;
      const float* p = y.p + h * T * T;
      // dP_h = dA_h V_h^T; dV_h = P_h^T dA_h.
      gemm_rm(context, false, true, T, T, D, 1.0f, da_ + h * D, W, T * W, v, 3 * W, T * 3 * W,
              0.0f, dp_ + h * T * T, T, nh * T * T, batch);
      gemm_rm(context, true, false, T, D, T, 1.0f, p, T, nh * T * T, da_ + h * D, W, T * W, 0.0f,
              dqkv_ + 2 * W + h * D, 3 * W, T * 3 * W, batch);
    }
    kernels::launch_softmax_backward(dp_, y.p, dp_, batch * nh * T, T, nn::SoftmaxMask::None,
                                     GradMode::Overwrite, s);
    for (std::size_t h = 0; h < nh; ++h) {
      // dQ_h = scale dS_h K_h; dK_h = scale dS_h^T Q_h.
      gemm_rm(context, false, false, T, D, T, scale, dp_ + h * T * T, T, nh * T * T,
              y.qkv + W + h * D, 3 * W, T * 3 * W, 0.0f, dqkv_ + h * D, 3 * W, T * 3 * W, batch);
      gemm_rm(context, true, false, T, D, T, scale, dp_ + h * T * T, T, nh * T * T, y.qkv + h * D,
              3 * W, T * 3 * W, 0.0f, dqkv_ + W + h * D, 3 * W, T * 3 * W, batch);
    }
    nn::linear_backward(context, {rows, D, 3 * W}, {dx, G("qkv.weight"), G("qkv.bias")}, y.x,
                        P("qkv.weight"), dqkv_, GradMode::Accumulate);
    if (k > 0) {
      // dx [B, T, D] is the gradient of the previous layer's transposed output: dm_ [B, D, T].
      kt::launch_transpose_add(dm_, dx, nullptr, batch, T, D, s);
    } else {
      const nn::LinearShape embed{batch * L, F, H};
      nn::linear_backward(context, embed, {dxb_, nullptr, nullptr}, xb_,
                          slab_.param("embed.weight"), dx, GradMode::Overwrite);
      nn::linear_backward(context, embed,
                          {nullptr, slab_.grad("embed.weight"), slab_.grad("embed.bias")}, xb_,
                          slab_.param("embed.weight"), dx, GradMode::Accumulate);
    }
  }
  const kt::BinParams bin{slab_.param("bin.l1"), slab_.param("bin.b1"), slab_.param("bin.l2"),
                          slab_.param("bin.b2"), slab_.param("bin.y1"), slab_.param("bin.y2")};
  const kt::BinGrads grads{slab_.grad("bin.l1"), slab_.grad("bin.b1"), slab_.grad("bin.l2"),
                           slab_.grad("bin.b2"), slab_.grad("bin.y1"), slab_.grad("bin.y2")};
  kt::launch_bin_backward(grads, bin_partials_, dxb_, z1_, z2_, bin, batch, L, F,
                          GradMode::Accumulate, s);
}

std::unique_ptr<SupervisedModel> make_tlob_model(const ModelShape& shape, std::uint64_t seed) {
  ModelShape classifier = shape;
  classifier.outputs = kTrendClasses;
  return std::make_unique<TlobModel>(classifier, TlobConfig{}, seed);
}

}  // namespace resident::models
