// TftModel: the Temporal Fusion Transformer supervised model with a quantile head (MODELS.md
// section 3), entirely on the GPU. The double-precision definition is
// tests/reference/tft_reference.h; init: tft_init.h. Loss LossKind::Pinball: shape().outputs =
// the trainer's outputs (horizon * target columns) times the quantile count, quantile fastest;
// quantiles() lists the levels.
//
// Forward of a batch x [B, L, F] (N = B L rows, batch-major n = b L + t):
//   1. e [N, F, dc] = the prescalers (one kernel).
//   2. variable selection: the flat GRN on e viewed as [N, F dc] (nn-kit Linears, ELU, a fused
//      GLU + skip add, LayerNorm), softmax -> v [N, F]; the F per-variable GRNs as cuBLAS
//      strided-batched GEMMs (batch F, M = N, operands read in place from e and written as
//      [N, F, H]: lda F dc, stride dc), their LayerNorms without affine over N F rows; one
//      combine kernel applies the per-variable gamma, beta and the weights v -> xi [N, H].
//   3. LSTM: xproj = xi Wih^T + b, one GEMM over N rows; the recurrence kernel
//      (kernels/models/tft/tft_lstm.h, one block per sample, Whh in shared memory).
//   4. post-LSTM gate phi = LN(xi + GLU(h)); enrichment GRN theta over N rows.
//   5. K, V over N rows, q from the last step; the attention kernel (tft_attention.h); the
//      output Linear.
//   6. the attention gate, the position-wise GRN and the output gate over B rows; the head.
// Backward runs the same ops in reverse: the LSTM's reverse-time kernel writes dz for every
// step, then dWih, db, dxi and dWhh are GEMMs over all N rows; the per-variable GRNs' weight
// gradients are strided-batched GEMMs over N rows, their biases and the combine's gamma and beta
// fixed-order column sums (kernels/nn/bias.h). With TftConfig::fused_variable_grns the
// per-variable GRNs run instead as one fused kernel forward (xhat only) and one backward that
// recomputes the chain, plus a fixed-order reduction of its per-chunk parameter gradients
// (kernels/models/tft/tft_variable_grn.h); the combine and everything else are unchanged.
//
// Scratch (every saved activation for shape.max_batch rows, the backward's buffers) is allocated
// once and filled with NaN at construction, so a read of anything a step did not write shows.
// forward/backward follow supervised_model.h's hot-path contract: the context's stream only, no
// allocation, no copy, no sync; deterministic (fixed-order reductions, no float atomics; cuBLAS
// in its default mode).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/models/tft/tft_variable_grn.h"
#include "lib/core/scratch_arena.h"
#include "lib/models/supervised_model.h"
#include "lib/models/tft/tft_config.h"

namespace resident::models {

class TftModel final : public SupervisedModel {
 public:
  // shape: the trainer's (outputs = horizon * target columns, before the quantiles). Validates
  // (validate_tft_config), builds and initializes the slab from `seed` (blocking).
  TftModel(const ModelShape& shape, const TftConfig& config, std::uint64_t seed);

  std::string_view name() const noexcept override { return "tft"; }
  const ModelShape& shape() const noexcept override { return shape_; }
  LossKind loss_kind() const noexcept override { return LossKind::Pinball; }
  std::vector<float> quantiles() const override { return config_.quantiles; }
  std::string describe() const override { return describe_tft(config_, trainer_shape_); }
  nn::ParamSlab& slab() noexcept override { return slab_; }
  using SupervisedModel::slab;
  const TftConfig& config() const noexcept { return config_; }

  void forward(const StreamContext& context, const float* x, std::size_t batch,
               float* prediction) override;
  // Throws resident::Error when batch differs from the last forward's (or no forward ran).
  void backward(const StreamContext& context, const float* x, const float* d_prediction,
                std::size_t batch) override;

  // ----- what the tests read after a forward (device pointers, max_batch rows)
  const float* selection_weights() const noexcept { return v_; }  // [B, L, F]
  const float* attention_weights() const noexcept { return abar_; }  // [B, L]

 private:
  // LayerNorm(resid + GLU(a)): a [rows, in], the glu Linear [2 out, in]; rows = batch * per_sample.
  struct Gan {
    std::string prefix;
    std::size_t per_sample = 1, in = 0, out = 0;
    float *pre = nullptr, *r = nullptr, *mean = nullptr, *rstd = nullptr, *y = nullptr;
  };
  // GAN(fc2(ELU(fc1(a))), skip(a)); skip the identity when in == out, else a Linear (into gan.r).
  struct Grn {
    std::string prefix;
    std::size_t per_sample = 1, in = 0, hidden = 0, out = 0;
    float *z1 = nullptr, *eta2 = nullptr, *eta1 = nullptr;
    Gan gan;
  };

  void gan_forward(const StreamContext& c, Gan& g, std::size_t batch, const float* a,
                   const float* resid);
  void grn_forward(const StreamContext& c, Grn& g, std::size_t batch, const float* a);
  // d_in (as d_in_mode says) from dy; parameter gradients added; returns dLoss/dresid (scratch).
  const float* gan_backward(const StreamContext& c, Gan& g, std::size_t batch, const float* a,
                            const float* dy, float* d_in, bool accumulate_in);
  void grn_backward(const StreamContext& c, Grn& g, std::size_t batch, const float* a,
                    const float* dy, float* d_a, bool accumulate_a);
  kernels::tft::VgrnWeights variable_grn_weights() const;
  void variable_grns_forward(const StreamContext& c, std::size_t batch);
  void variable_grns_backward(const StreamContext& c, std::size_t batch);

  ModelShape trainer_shape_, shape_;
  TftConfig config_;
  nn::ParamSlab slab_;
  std::unique_ptr<ScratchArena> arena_;
  Grn flat_, enrich_, ff_;
  Gan lstm_gate_, attn_gate_, out_gate_;
  float *ones_ = nullptr, *e_ = nullptr, *v_ = nullptr;
  float *z1v_ = nullptr, *eta2v_ = nullptr, *eta1v_ = nullptr, *glv_ = nullptr, *rv_ = nullptr;
  float *meanv_ = nullptr, *rstdv_ = nullptr, *xhatv_ = nullptr, *xi_ = nullptr;
  float *xproj_ = nullptr, *gates_ = nullptr, *cell_ = nullptr, *hs_ = nullptr, *hprev_ = nullptr;
  float *keys_ = nullptr, *values_ = nullptr, *theta_q_ = nullptr, *q_ = nullptr;
  float *probs_ = nullptr, *abar_ = nullptr, *mixed_ = nullptr, *attn_ = nullptr;
  float *phi_q_ = nullptr;
  // backward
  float *du_ = nullptr, *dpsi_ = nullptr, *ddelta_ = nullptr, *dattn_ = nullptr;
  float *dtheta_q_ = nullptr, *dphi_q_ = nullptr, *dmixed_ = nullptr, *dq_ = nullptr;
  float *dkeys_ = nullptr, *dvalues_ = nullptr, *dtheta_ = nullptr, *dphi_ = nullptr;
  float *dh_above_ = nullptr, *dxi_ = nullptr, *dz_ = nullptr, *dsel_ = nullptr;
  float *dlogits_ = nullptr, *dxhatv_ = nullptr, *dbeta_terms_ = nullptr;
  float *dgamma_terms_ = nullptr, *dglv_ = nullptr, *de_ = nullptr, *pterms_ = nullptr;
  float *dr_ = nullptr, *dpre_ = nullptr, *deta1_ = nullptr, *deta2_ = nullptr;
  float *ln_scratch_ = nullptr;
  std::size_t ln_scratch_floats_ = 0;
  float* vgrn_partials_ = nullptr;  // the fused variable GRNs' per-chunk gradients (when on)
  std::size_t vgrn_partials_floats_ = 0;
  std::size_t last_batch_ = 0;  // of the last forward; 0 before the first
};

// The registry's factory: the default TftConfig (H 32, 4 heads, d_c 8, quantiles [0.1, 0.5,
// 0.9]) for `shape` (the trainer's outputs; the model's are 3 times as many).
std::unique_ptr<SupervisedModel> make_tft_model(const ModelShape& shape, std::uint64_t seed);

}  // namespace resident::models
