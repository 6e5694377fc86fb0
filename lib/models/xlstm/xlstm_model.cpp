#include "lib/models/xlstm/xlstm_model.h"

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/xlstm/headwise_dense.h"
#include "kernels/models/xlstm/mlstm_cell.h"
#include "kernels/models/xlstm/slstm_recurrence.h"
#include "kernels/models/xlstm/xlstm_pointwise.h"
#include "kernels/nn/bias.h"
#include "kernels/nn/causal_conv1d.h"
#include "kernels/nn/layer_norm.h"
#include "lib/core/library_checks.h"
#include "lib/nn/linear.h"

namespace resident::models {

namespace {

namespace kx = kernels::xlstm;
constexpr float kNormEps = 1e-5f;
constexpr nn::GradMode kAcc = nn::GradMode::Accumulate;
constexpr nn::GradMode kOver = nn::GradMode::Overwrite;

const ModelShape& validated(const ModelShape& shape, const XlstmConfig& config) {
  validate_xlstm_config(config, shape);
  return shape;
}

int as_int(std::size_t n) { return static_cast<int>(n); }  // validated to fit

// Row-major GEMMs through cuBLAS' column-major view (a row-major [r, c] matrix with row stride ld
// is the column-major [c, r] with leading dimension ld). beta is 0 (overwrite) or 1 (add).
void gemm(const StreamContext& ctx, cublasOperation_t op_b, cublasOperation_t op_a,
          std::size_t n, std::size_t m, std::size_t k, const float* B, std::size_t ldb,
          const float* A, std::size_t lda, float beta, float* C, std::size_t ldc) {
  const float one = 1.0f;
  RESIDENT_CUBLAS_CHECK(cublasSetPointerMode(ctx.cublas(), CUBLAS_POINTER_MODE_HOST));
  RESIDENT_CUBLAS_CHECK(cublasSgemm(ctx.cublas(), op_b, op_a, as_int(n), as_int(m), as_int(k),
                                    &one, B, as_int(ldb), A, as_int(lda), &beta, C,
                                    as_int(ldc)));
}
// C [m, n] = A [m, k] W^T with W [n, k] (y = x W^T).
void gemm_nt(const StreamContext& ctx, std::size_t m, std::size_t n, std::size_t k,
             const float* A, std::size_t lda, const float* W, std::size_t ldw, float* C,
             std::size_t ldc, float beta = 0.0f) {
  gemm(ctx, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, W, ldw, A, lda, beta, C, ldc);
}
// C [m, n] = A [m, k] W with W [k, n] (dx = dy W).
void gemm_nn(const StreamContext& ctx, std::size_t m, std::size_t n, std::size_t k,
             const float* A, std::size_t lda, const float* W, std::size_t ldw, float* C,
             std::size_t ldc, float beta = 0.0f) {
  gemm(ctx, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, W, ldw, A, lda, beta, C, ldc);
}
// C [m, n] = A^T B with A [k, m], B [k, n] (dW = dy^T x).
void gemm_tn(const StreamContext& ctx, std::size_t m, std::size_t n, std::size_t k,
             const float* A, std::size_t lda, const float* B, std::size_t ldb, float* C,
             std::size_t ldc, float beta) {
  gemm(ctx, CUBLAS_OP_N, CUBLAS_OP_T, n, m, k, B, ldb, A, lda, beta, C, ldc);
}

struct Planner {
  ScratchPlan plan;
  float* operator()(std::size_t count) {
    plan.add<float>(count);
    return nullptr;
  }
};

// NaN-filled (0xFF bytes) at construction, so unwritten reads show.
struct Taker {
  ScratchArena* arena;
  float* operator()(std::size_t count) {
    float* p = arena->take<float>(count);
    if (p != nullptr) RESIDENT_CUDA_CHECK(cudaMemset(p, 0xFF, count * sizeof(float)));
    return p;
  }
};

}  // namespace

template <class Take>
void XlstmModel::take_buffers(Take& take) {
  const std::size_t R = shape_.window * shape_.max_batch, B = shape_.max_batch;
  const std::size_t D = config_.d_model, Di = config_.inner(), NH = config_.heads;
  const std::size_t Dff = config_.ffn(), K = config_.conv_kernel;
  stream_.assign(config_.blocks + 1, nullptr);
  for (float*& s : stream_) s = take(R * D);
  for (Block& b : blocks_) {
    b.ln = take(R * D);
    b.ln_mean = take(R);
    b.ln_rstd = take(R);
    b.gn_mean = take(R * NH);
    b.gn_rstd = take(R * NH);
    if (!b.slstm) {
      b.up = take(R * 2 * Di);
      b.xc = take(R * Di);
      b.qkv = take(R * 3 * Di);
      b.gates = take(R * 2 * NH);
      b.htil = take(R * Di);
      b.m = take(R * NH);
      b.n = take(R * NH);
      b.r = take(R * NH);
      b.hn = take(R * Di);
      b.out = take(R * Di);
      b.dense_a = take(2 * Di * Di);
      b.dense_b = take(Di * Di);
    } else {
      b.xc = take(R * D);
      b.wx = take(R * 4 * D);
      b.raw = take(R * 4 * D);
      b.c = take(R * D);
      b.n = take(R * D);
      b.m = take(R * D);
      b.h = take(R * D);
      b.hn = take(R * D);
      b.dense_a = take(2 * D * D);
      b.dense_b = take(2 * D * D);
      b.x_mid = take(R * D);
      b.ln2 = take(R * D);
      b.ln2_mean = take(R);
      b.ln2_rstd = take(R);
      b.fup = take(R * 2 * Dff);
      b.act = take(R * Dff);
    }
  }
  const std::size_t head_dim = std::max(config_.mlstm_head_dim(), config_.slstm_head_dim());
  ones_ = take(head_dim);
  y_ = take(R * D);
  last_ = take(B * D);
  post_ = take(B * D);
  post_mean_ = take(B);
  post_rstd_ = take(B);
  const std::size_t wide = std::max({Di, D, Dff});
  dX_ = take(R * D);
  dlast_ = take(B * D);
  dpost_ = take(B * D);
  d_out_ = take(R * wide);
  d_hn_ = take(R * wide);
  d_xc_ = take(R * wide);
  d_up_ = take(R * 2 * wide);
  d_prod1_ = take(R * wide);
  d_prod2_ = take(R * wide);
  d_wide_ = take(R * std::max(3 * Di, 4 * D));
  d_gates_ = take(R * 2 * NH);
  d_xn_ = take(R * D);
  d_dense_ = take(std::max(2 * Di * Di, 2 * D * D));
  ln_scratch_floats_ = std::max(kernels::layer_norm_backward_scratch_floats(R, D),
                                kernels::layer_norm_backward_scratch_floats(B, D));
  ln_scratch_ = take(ln_scratch_floats_);
  conv_scratch_floats_ =
      kernels::causal_conv1d_backward_scratch_floats(B, shape_.window, std::max(Di, D), K);
  conv_scratch_ = take(conv_scratch_floats_);
  const kx::SlstmShape s{as_int(B), as_int(shape_.window), as_int(NH),
                         as_int(config_.slstm_head_dim())};
  r_partials_ = take(config_.slstm_at >= 0 ? kx::slstm_backward_partial_floats(s) : 0);
}

XlstmModel::XlstmModel(const ModelShape& shape, const XlstmConfig& config, std::uint64_t seed)
    : shape_(validated(shape, config)), config_(config) {
  const std::vector<XlstmTensorSpec> specs = xlstm_tensor_specs(config_, shape_);
  for (const XlstmTensorSpec& t : specs) slab_.add(t.name, t.shape, t.decay);
  slab_.finalize();
  const std::vector<std::vector<float>> init = xlstm_initial_values(config_, shape_, seed);
  for (std::size_t i = 0; i < specs.size(); ++i)
    slab_.upload(nn::SlabPart::Params, specs[i].name, init[i], nullptr);

  for (std::size_t b = 0; b < config_.blocks; ++b) {
    Block block;
    block.slstm = static_cast<long>(b) == config_.slstm_at;
    block.prefix = "block" + std::to_string(b) + ".";
    blocks_.push_back(block);
  }
  Planner planner;
  take_buffers(planner);
  arena_.emplace(planner.plan.bytes());
  Taker taker{&*arena_};
  take_buffers(taker);
  const std::size_t head_dim = std::max(config_.mlstm_head_dim(), config_.slstm_head_dim());
  const std::vector<float> ones(head_dim, 1.0f);
  RESIDENT_CUDA_CHECK(
      cudaMemcpy(ones_, ones.data(), head_dim * sizeof(float), cudaMemcpyHostToDevice));
  kx::mlstm_cell_configure_shared_memory(as_int(shape_.window),
                                         as_int(config_.mlstm_head_dim()));
  RESIDENT_CUDA_CHECK(cudaDeviceSynchronize());  // setup: the poisoning memsets are done
}

void XlstmModel::forward_mlstm(const StreamContext& ctx, Block& b, const float* x_in,
                               float* x_out, std::size_t batch) {
  const cudaStream_t st = ctx.stream();
  const std::size_t L = shape_.window, R = batch * L, D = config_.d_model, Di = config_.inner();
  const std::size_t NH = config_.heads, DH = config_.mlstm_head_dim(), nb = Di / 4;
  const std::string& p = b.prefix;
  kernels::launch_layer_norm_forward(b.ln, b.ln_mean, b.ln_rstd, x_in,
                                     slab_.param(p + "norm.weight"), nullptr, R, D, kNormEps, st);
  kx::launch_headwise_to_dense(b.dense_a, Di, slab_.param(p + "q.weight"), nb, 4, 4, st);
  kx::launch_headwise_to_dense(b.dense_a + Di * Di, Di, slab_.param(p + "k.weight"), nb, 4, 4,
                               st);
  kx::launch_headwise_to_dense(b.dense_b, Di, slab_.param(p + "v.weight"), nb, 4, 4, st);
  gemm_nt(ctx, R, 2 * Di, D, b.ln, D, slab_.param(p + "up.weight"), D, b.up, 2 * Di);
  kernels::launch_causal_conv1d_forward(b.xc, Di, b.up, 2 * Di, slab_.param(p + "conv.weight"),
                                        slab_.param(p + "conv.bias"), batch, L, Di,
                                        config_.conv_kernel, true, st);
  gemm_nt(ctx, R, 2 * Di, Di, b.xc, Di, b.dense_a, Di, b.qkv, 3 * Di);
  gemm_nt(ctx, R, Di, Di, b.up, 2 * Di, b.dense_b, Di, b.qkv + 2 * Di, 3 * Di);
  nn::linear_forward(ctx, {R, 3 * Di, 2 * NH}, b.gates, b.qkv, slab_.param(p + "gate.weight"),
                     slab_.param(p + "gate.bias"));
  const kx::MlstmCellShape cs{as_int(batch), as_int(L), as_int(NH), as_int(DH),
                              config_.cell_eps};
  kx::launch_mlstm_cell_forward(b.htil, b.m, b.n, b.r, b.qkv, b.gates, cs, st);
  kernels::launch_layer_norm_forward(b.hn, b.gn_mean, b.gn_rstd, b.htil, ones_, nullptr, R * NH,
                                     DH, kNormEps, st);
  kx::launch_mlstm_output_forward(b.out, b.hn, b.xc, b.up + Di, 2 * Di,
                                  slab_.param(p + "outnorm.weight"), slab_.param(p + "skip"), R,
                                  Di, st);
  gemm_nt(ctx, R, D, Di, b.out, Di, slab_.param(p + "down.weight"), Di, y_, D);
  kx::launch_scaled_add(x_out, x_in, y_, nullptr, R, D, st);
}

void XlstmModel::forward_slstm(const StreamContext& ctx, Block& b, const float* x_in,
                               float* x_out, std::size_t batch) {
  const cudaStream_t st = ctx.stream();
  const std::size_t L = shape_.window, R = batch * L, D = config_.d_model, NH = config_.heads;
  const std::size_t DHs = config_.slstm_head_dim(), W1 = NH * DHs * DHs, Dff = config_.ffn();
  const std::string& p = b.prefix;
  kernels::launch_layer_norm_forward(b.ln, b.ln_mean, b.ln_rstd, x_in,
                                     slab_.param(p + "norm.weight"), nullptr, R, D, kNormEps, st);
  kernels::launch_causal_conv1d_forward(b.xc, D, b.ln, D, slab_.param(p + "conv.weight"),
                                        slab_.param(p + "conv.bias"), batch, L, D,
                                        config_.conv_kernel, true, st);
  const float* W = slab_.param(p + "w.weight");
  for (std::size_t g = 0; g < 4; ++g)
    kx::launch_headwise_to_dense((g < 2 ? b.dense_a : b.dense_b) + (g % 2) * D * D, D,
                                 W + g * W1, NH, DHs, DHs, st);
  gemm_nt(ctx, R, 2 * D, D, b.xc, D, b.dense_a, D, b.wx, 4 * D);
  gemm_nt(ctx, R, 2 * D, D, b.ln, D, b.dense_b, D, b.wx + 2 * D, 4 * D);
  const kx::SlstmShape ss{as_int(batch), as_int(L), as_int(NH), as_int(DHs)};
  kx::launch_slstm_forward(b.raw, b.c, b.n, b.m, b.h, b.wx, slab_.param(p + "bias"),
                           slab_.param(p + "r.weight"), ss, st);
  kernels::launch_layer_norm_forward(b.hn, b.gn_mean, b.gn_rstd, b.h, ones_, nullptr, R * NH, DHs,
                                     kNormEps, st);
  kx::launch_scaled_add(b.x_mid, x_in, b.hn, slab_.param(p + "outnorm.weight"), R, D, st);
  // FFN block.
  kernels::launch_layer_norm_forward(b.ln2, b.ln2_mean, b.ln2_rstd, b.x_mid,
                                     slab_.param(p + "ffn_norm.weight"), nullptr, R, D, kNormEps,
                                     st);
  gemm_nt(ctx, R, 2 * Dff, D, b.ln2, D, slab_.param(p + "ffn_up.weight"), D, b.fup, 2 * Dff);
  kx::launch_gated_gelu_forward(b.act, b.fup, R, Dff, st);
  gemm_nt(ctx, R, D, Dff, b.act, Dff, slab_.param(p + "ffn_down.weight"), Dff, y_, D);
  kx::launch_scaled_add(x_out, b.x_mid, y_, nullptr, R, D, st);
}

void XlstmModel::forward(const StreamContext& context, const float* x, std::size_t batch,
                         float* prediction) {
  if (batch < 1 || batch > shape_.max_batch)
    throw Error("XlstmModel::forward", "invalid argument",
                "batch = " + std::to_string(batch) + ", allowed [1, " +
                    std::to_string(shape_.max_batch) + "]",
                __FILE__, __LINE__);
  const NvtxRange range("xlstm/forward");
  const cudaStream_t st = context.stream();
  const std::size_t L = shape_.window, R = batch * L, D = config_.d_model;
  nn::linear_forward(context, {R, shape_.features, D}, stream_[0], x,
                     slab_.param("embed.weight"), slab_.param("embed.bias"));
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    if (blocks_[i].slstm)
      forward_slstm(context, blocks_[i], stream_[i], stream_[i + 1], batch);
    else
      forward_mlstm(context, blocks_[i], stream_[i], stream_[i + 1], batch);
  }
  kx::launch_last_step_gather(last_, stream_.back(), batch, L, D, st);
  kernels::launch_layer_norm_forward(post_, post_mean_, post_rstd_, last_,
                                     slab_.param("post_norm.weight"), nullptr, batch, D, kNormEps,
                                     st);
  nn::linear_forward(context, {batch, D, shape_.outputs}, prediction, post_,
                     slab_.param("readout.weight"), slab_.param("readout.bias"));
  last_batch_ = batch;
}

void XlstmModel::backward_mlstm(const StreamContext& ctx, Block& b, const float* x_in,
                                std::size_t batch) {
  const cudaStream_t st = ctx.stream();
  const std::size_t L = shape_.window, R = batch * L, D = config_.d_model, Di = config_.inner();
  const std::size_t NH = config_.heads, DH = config_.mlstm_head_dim(), nb = Di / 4;
  const std::string& p = b.prefix;
  // down projection: dout = dX Wdown, dWdown += dX^T out.
  gemm_nn(ctx, R, Di, D, dX_, D, slab_.param(p + "down.weight"), Di, d_out_, Di);
  gemm_tn(ctx, D, Di, R, dX_, D, b.out, Di, slab_.grad(p + "down.weight"), Di, 1.0f);
  float* d_up = d_up_;  // [R, 2 Di]: dx_m | dz
  kx::launch_mlstm_output_backward(d_hn_, d_xc_, d_up + Di, 2 * Di, d_prod1_, d_prod2_, d_out_,
                                   b.hn, b.xc, b.up + Di, 2 * Di,
                                   slab_.param(p + "outnorm.weight"), slab_.param(p + "skip"), R,
                                   Di, st);
  kernels::launch_bias_grad(slab_.grad(p + "outnorm.weight"), d_prod1_, R, Di, kAcc, st);
  kernels::launch_bias_grad(slab_.grad(p + "skip"), d_prod2_, R, Di, kAcc, st);
  // Per-head norm (no weight of its own): dh~ in place.
  kernels::launch_layer_norm_backward(d_hn_, nullptr, nullptr, nullptr, 0, b.htil, ones_,
                                      b.gn_mean, b.gn_rstd, d_hn_, R * NH, DH, kOver, st);
  const kx::MlstmCellShape cs{as_int(batch), as_int(L), as_int(NH), as_int(DH),
                              config_.cell_eps};
  float* dqkv = d_wide_;
  kx::launch_mlstm_cell_backward(dqkv, d_gates_, b.qkv, b.gates, b.htil, b.m, b.n, b.r, d_hn_,
                                 cs, st);
  // Gates: dqkv += dgates Wg, dWg += dgates^T qkv, dbg += column sums.
  gemm_nn(ctx, R, 3 * Di, 2 * NH, d_gates_, 2 * NH, slab_.param(p + "gate.weight"), 3 * Di, dqkv,
          3 * Di, 1.0f);
  gemm_tn(ctx, 2 * NH, 3 * Di, R, d_gates_, 2 * NH, b.qkv, 3 * Di, slab_.grad(p + "gate.weight"),
          3 * Di, 1.0f);
  kernels::launch_bias_grad(slab_.grad(p + "gate.bias"), d_gates_, R, 2 * NH, kAcc, st);
  // q | k from x_c.
  gemm_nn(ctx, R, Di, 2 * Di, dqkv, 3 * Di, b.dense_a, Di, d_xc_, Di, 1.0f);
  gemm_tn(ctx, 2 * Di, Di, R, dqkv, 3 * Di, b.xc, Di, d_dense_, Di, 0.0f);
  kx::launch_dense_to_headwise_add(slab_.grad(p + "q.weight"), d_dense_, Di, nb, 4, 4, st);
  kx::launch_dense_to_headwise_add(slab_.grad(p + "k.weight"), d_dense_ + Di * Di, Di, nb, 4, 4,
                                   st);
  // The conv (dx_m overwritten), then v's path added.
  kernels::launch_causal_conv1d_backward(
      d_up, 2 * Di, slab_.grad(p + "conv.weight"), slab_.grad(p + "conv.bias"), conv_scratch_,
      conv_scratch_floats_, d_xc_, Di, b.up, 2 * Di, slab_.param(p + "conv.weight"),
      slab_.param(p + "conv.bias"), batch, L, Di, config_.conv_kernel, true, kAcc, st);
  gemm_nn(ctx, R, Di, Di, dqkv + 2 * Di, 3 * Di, b.dense_b, Di, d_up, 2 * Di, 1.0f);
  gemm_tn(ctx, Di, Di, R, dqkv + 2 * Di, 3 * Di, b.up, 2 * Di, d_dense_, Di, 0.0f);
  kx::launch_dense_to_headwise_add(slab_.grad(p + "v.weight"), d_dense_, Di, nb, 4, 4, st);
  // up projection and the block's LayerNorm (dX += its input gradient).
  gemm_nn(ctx, R, D, 2 * Di, d_up, 2 * Di, slab_.param(p + "up.weight"), D, d_xn_, D);
  gemm_tn(ctx, 2 * Di, D, R, d_up, 2 * Di, b.ln, D, slab_.grad(p + "up.weight"), D, 1.0f);
  kernels::launch_layer_norm_backward(dX_, slab_.grad(p + "norm.weight"), nullptr, ln_scratch_,
                                      ln_scratch_floats_, x_in, slab_.param(p + "norm.weight"),
                                      b.ln_mean, b.ln_rstd, d_xn_, R, D, kAcc, st);
}

void XlstmModel::backward_slstm(const StreamContext& ctx, Block& b, const float* x_in,
                                std::size_t batch) {
  const cudaStream_t st = ctx.stream();
  const std::size_t L = shape_.window, R = batch * L, D = config_.d_model, NH = config_.heads;
  const std::size_t DHs = config_.slstm_head_dim(), W1 = NH * DHs * DHs, Dff = config_.ffn();
  const std::string& p = b.prefix;
  // FFN block (dX: the gradient of its output; becomes that of x_mid).
  gemm_nn(ctx, R, Dff, D, dX_, D, slab_.param(p + "ffn_down.weight"), Dff, d_out_, Dff);
  gemm_tn(ctx, D, Dff, R, dX_, D, b.act, Dff, slab_.grad(p + "ffn_down.weight"), Dff, 1.0f);
  kx::launch_gated_gelu_backward(d_up_, d_out_, b.fup, R, Dff, st);
  gemm_nn(ctx, R, D, 2 * Dff, d_up_, 2 * Dff, slab_.param(p + "ffn_up.weight"), D, d_xn_, D);
  gemm_tn(ctx, 2 * Dff, D, R, d_up_, 2 * Dff, b.ln2, D, slab_.grad(p + "ffn_up.weight"), D, 1.0f);
  kernels::launch_layer_norm_backward(dX_, slab_.grad(p + "ffn_norm.weight"), nullptr,
                                      ln_scratch_, ln_scratch_floats_, b.x_mid,
                                      slab_.param(p + "ffn_norm.weight"), b.ln2_mean, b.ln2_rstd,
                                      d_xn_, R, D, kAcc, st);
  // sLSTM block: weighted per-head norm, then the reverse-time recurrence.
  kx::launch_scaled_add_backward(d_hn_, d_prod1_, dX_, b.hn, slab_.param(p + "outnorm.weight"), R,
                                 D, st);
  kernels::launch_bias_grad(slab_.grad(p + "outnorm.weight"), d_prod1_, R, D, kAcc, st);
  kernels::launch_layer_norm_backward(d_hn_, nullptr, nullptr, nullptr, 0, b.h, ones_, b.gn_mean,
                                      b.gn_rstd, d_hn_, R * NH, DHs, kOver, st);
  const kx::SlstmShape ss{as_int(batch), as_int(L), as_int(NH), as_int(DHs)};
  float* draw = d_wide_;  // [R, 4 D]
  kx::launch_slstm_backward(draw, slab_.grad(p + "r.weight"), r_partials_, b.raw, b.c, b.n, b.m,
                            b.h, d_hn_, slab_.param(p + "r.weight"), ss, kAcc, st);
  kernels::launch_bias_grad(slab_.grad(p + "bias"), draw, R, 4 * D, kAcc, st);
  float* dW = slab_.grad(p + "w.weight");
  // i | f from x_c; the conv's input gradient (overwritten), then z | o from the normed input.
  gemm_nn(ctx, R, D, 2 * D, draw, 4 * D, b.dense_a, D, d_xc_, D);
  gemm_tn(ctx, 2 * D, D, R, draw, 4 * D, b.xc, D, d_dense_, D, 0.0f);
  kx::launch_dense_to_headwise_add(dW, d_dense_, D, NH, DHs, DHs, st);
  kx::launch_dense_to_headwise_add(dW + W1, d_dense_ + D * D, D, NH, DHs, DHs, st);
  kernels::launch_causal_conv1d_backward(
      d_xn_, D, slab_.grad(p + "conv.weight"), slab_.grad(p + "conv.bias"), conv_scratch_,
      conv_scratch_floats_, d_xc_, D, b.ln, D, slab_.param(p + "conv.weight"),
      slab_.param(p + "conv.bias"), batch, L, D, config_.conv_kernel, true, kAcc, st);
  gemm_nn(ctx, R, D, 2 * D, draw + 2 * D, 4 * D, b.dense_b, D, d_xn_, D, 1.0f);
  gemm_tn(ctx, 2 * D, D, R, draw + 2 * D, 4 * D, b.ln, D, d_dense_, D, 0.0f);
  kx::launch_dense_to_headwise_add(dW + 2 * W1, d_dense_, D, NH, DHs, DHs, st);
  kx::launch_dense_to_headwise_add(dW + 3 * W1, d_dense_ + D * D, D, NH, DHs, DHs, st);
  kernels::launch_layer_norm_backward(dX_, slab_.grad(p + "norm.weight"), nullptr, ln_scratch_,
                                      ln_scratch_floats_, x_in, slab_.param(p + "norm.weight"),
                                      b.ln_mean, b.ln_rstd, d_xn_, R, D, kAcc, st);
}

void XlstmModel::backward(const StreamContext& context, const float* x, const float* d_prediction,
                          std::size_t batch) {
  if (last_batch_ == 0 || batch != last_batch_)
    throw Error("XlstmModel::backward", "invalid argument",
                "batch = " + std::to_string(batch) + ", the last forward's batch is " +
                    (last_batch_ == 0 ? std::string("none (no forward ran)")
                                      : std::to_string(last_batch_)),
                __FILE__, __LINE__);
  const NvtxRange range("xlstm/backward");
  const cudaStream_t st = context.stream();
  const std::size_t L = shape_.window, R = batch * L, D = config_.d_model;
  // Readout and the final norm (dx overwritten, the parameter gradients added: two calls each).
  const nn::LinearShape readout{batch, D, shape_.outputs};
  nn::linear_backward(context, readout, {dpost_, nullptr, nullptr}, post_,
                      slab_.param("readout.weight"), d_prediction, kOver);
  nn::linear_backward(context, readout,
                      {nullptr, slab_.grad("readout.weight"), slab_.grad("readout.bias")}, post_,
                      slab_.param("readout.weight"), d_prediction, kAcc);
  kernels::launch_layer_norm_backward(dlast_, nullptr, nullptr, nullptr, 0, last_,
                                      slab_.param("post_norm.weight"), post_mean_, post_rstd_,
                                      dpost_, batch, D, kOver, st);
  kernels::launch_layer_norm_backward(nullptr, slab_.grad("post_norm.weight"), nullptr,
                                      ln_scratch_, ln_scratch_floats_, last_,
                                      slab_.param("post_norm.weight"), post_mean_, post_rstd_,
                                      dpost_, batch, D, kAcc, st);
  kx::launch_last_step_scatter(dX_, dlast_, batch, L, D, st);
  for (std::size_t i = blocks_.size(); i-- > 0;) {
    if (blocks_[i].slstm)
      backward_slstm(context, blocks_[i], stream_[i], batch);
    else
      backward_mlstm(context, blocks_[i], stream_[i], batch);
  }
  nn::linear_backward(context, {R, shape_.features, D},
                      {nullptr, slab_.grad("embed.weight"), slab_.grad("embed.bias")}, x,
                      slab_.param("embed.weight"), dX_, kAcc);
}

std::unique_ptr<SupervisedModel> make_xlstm_model(const ModelShape& shape, std::uint64_t seed) {
  return std::make_unique<XlstmModel>(shape, XlstmConfig{}, seed);
}

}  // namespace resident::models
