// TlobModel: the TLOB supervised classifier (MODELS.md section 7; Berti & Kasneci 2025) entirely
// on the GPU. The double-precision oracle is tests/reference/tlob_reference.h, which states the
// model; outputs = shape.outputs class logits (the registry builds kTrendClasses = 3), loss
// LossKind::CrossEntropy (the trainer's trend labels).
//
// Forward of a batch [B, L, F]: BiN (one kernel; saves both z-scores), the embedding Linear and
// the positional term, then per layer k (tokens T, width d, output o, nh heads, W = d nh):
//   qkv = X Wqkv^T + b               one GEMM [B T, 3W]
//   S_h = Q_h K_h^T / sqrt(d)        one strided-batched GEMM per head (batch B), into P
//   P = softmax(S)                   the nn kit's row softmax, in place
//   A_h = P_h V_h                    one strided-batched GEMM per head
//   R = A Wo^T + bo + X              GEMM, then one addition (R saved: LayerNorm's input)
//   Y = LayerNorm(R)                 the nn kit (mean, rstd saved)
//   U = Y W1^T + b1, G = gelu(U), M = G W2^T + b2
//   next X = (M + X)^T or M^T        one tiled transpose with the residual folded in
// and the head (Linears, tanh-GELU between) on the last layer's M flattened. Backward runs the
// same ops in reverse (softmax backward of the kit; dQ, dK, dV as strided-batched GEMMs written
// into the columns of one dqkv; weight gradients by the nn kit's Linear backward, added).
//
// Parameters: the slab tensors tlob_init.h lists. Scratch (every saved activation for
// shape.max_batch rows and the backward's buffers) is allocated once and filled with NaN at
// construction, so a read of anything a step did not write shows. forward/backward follow
// supervised_model.h's hot-path contract: the context's stream only, no allocation, no copy, no
// sync; deterministic (fixed-order reductions, no float atomics; cuBLAS in its default mode).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lib/core/scratch_arena.h"
#include "lib/models/supervised_model.h"
#include "lib/models/tlob/tlob_config.h"
#include "lib/models/tlob/tlob_init.h"

namespace resident::models {

class TlobModel final : public SupervisedModel {
 public:
  // Validates (validate_tlob_config), builds and initializes the slab from `seed` (blocking).
  TlobModel(const ModelShape& shape, const TlobConfig& config, std::uint64_t seed);

  std::string_view name() const noexcept override { return "tlob"; }
  const ModelShape& shape() const noexcept override { return shape_; }
  LossKind loss_kind() const noexcept override { return LossKind::CrossEntropy; }
  std::string describe() const override { return describe_tlob(config_, shape_); }
  nn::ParamSlab& slab() noexcept override { return slab_; }
  using SupervisedModel::slab;
  const TlobConfig& config() const noexcept { return config_; }

  void forward(const StreamContext& context, const float* x, std::size_t batch,
               float* prediction) override;
  // Throws resident::Error when batch differs from the last forward's (or no forward ran).
  void backward(const StreamContext& context, const float* x, const float* d_prediction,
                std::size_t batch) override;

 private:
  struct Layer {
    TlobLayerDims dims;
    std::string prefix;                       // "layer<k>."
    float *x, *qkv, *p, *a, *r, *mean, *rstd, *y, *u, *g, *m;  // saved, for max_batch rows
  };
  struct HeadLayer {
    std::size_t in = 0, out = 0;
    std::string prefix;                       // "head<j>."
    float *input, *pre;                       // input [B, in]; pre-activation [B, out] (hidden)
  };

  ModelShape shape_;
  TlobConfig config_;
  nn::ParamSlab slab_;
  std::unique_ptr<ScratchArena> arena_;  // sized by a planning walk over the buffers
  std::vector<Layer> layers_;
  std::vector<HeadLayer> head_;
  float *pos_ = nullptr;                      // [L, H], fixed
  float *xb_ = nullptr, *z1_ = nullptr, *z2_ = nullptr;  // [B, L, F]
  // Backward buffers, sized for the largest layer.
  float *dm_ = nullptr, *dg_ = nullptr, *dy_ = nullptr, *dr_ = nullptr, *da_ = nullptr;
  float *dp_ = nullptr, *dqkv_ = nullptr, *dx_ = nullptr, *dhead_[2] = {nullptr, nullptr};
  float *dxb_ = nullptr, *ln_scratch_ = nullptr, *bin_partials_ = nullptr;
  std::size_t ln_scratch_floats_ = 0;
  std::size_t last_batch_ = 0;                // of the last forward; 0 before the first
};

// The registry's factory: the default TlobConfig (H 64, 4 pairs, 1 head) for `shape` with
// outputs = kTrendClasses (a classifier's outputs are its classes, whatever the dataset's
// regression outputs are).
std::unique_ptr<SupervisedModel> make_tlob_model(const ModelShape& shape, std::uint64_t seed);

}  // namespace resident::models
