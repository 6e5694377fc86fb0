// KanModel: the KAN supervised model (MODELS.md section 4; efficient-kan's KANLinear stacked),
// entirely on the GPU. The double-precision oracle is tests/reference/kan_reference.h.
//
// Model. The window x [batch, L, F] is flattened to L*F features; layers
// [L*F -> hidden... -> outputs] (default [L*F -> 64 -> 32 -> outputs]); every layer maps its
// input a [batch, in] to
//   u = mid + half * tanh(a)     squash into the grid (mid, half of [grid_min, grid_max]), so the
//                                spline branch never silently vanishes outside the knots; tanh,
//                                not LayerNorm, both on the raw window and between layers
//   y = silu(u) W_b^T + flat(B(u)) (W_s * spline_scaler[..., None])^T
// with the order-k B-spline bases of G intervals on the grid (G + k per input; defaults G = 5,
// k = 3 on [-1, 1]). No bias (efficient-kan has none). The last layer's y is the prediction.
//
// Each layer is ONE GEMM over the concatenated operand [silu(u) | B(u)] (K = in * (1 + G + k),
// layout in kernels/models/kan/kan_layout.h) against the combined weight [W_b | W_s * s], which
// one kernel forms for all layers at the start of each forward (so the parameters stay three
// slab tensors per layer). A layer that feeds another may split its GEMM along K
// (KanConfig::max_k_splits); the next layer's operand kernel adds the partial products in a fixed
// order. Backward per layer: dW~ = dy^T [silu|B] (one GEMM), and, except for the first layer
// (the input needs no gradient), d[silu|B] = dy W~ (one GEMM) and one kernel applying silu', B'
// and the squash's derivative; finally one kernel splits every dW~ into dW_b, dW_s = dW~ * s and
// ds = sum_m dW~ * W_s, adding into the slab's grads. Launches per step at the default config:
// forward 1 + 3 operand kernels + 3 GEMMs, backward 5 GEMMs + 2 input-grad kernels + 1 split.
//
// Parameters (slab tensors, per layer l): "layer<l>.base_weight" [out, in] (weight decay),
// "layer<l>.spline_weight" [out, in, G + k] (weight decay), "layer<l>.spline_scaler" [out, in]
// (no weight decay). Initialization: kan_init.h (seeded).
// Grid update (pykan/efficient-kan update_grid: refit the knots to batch quantiles) is not
// implemented: the grid is fixed; it is off the hot path and MODELS.md skips it in the benchmark.
//
// Scratch (operands, saved layer inputs, partial products, combined weights and their gradients)
// is allocated once for shape.max_batch rows and filled with NaN at construction, so a read of
// anything a step did not write shows. forward/backward follow supervised_model.h's hot-path
// contract: the context's stream only, no allocation, no copy, no sync; deterministic (fixed-order
// sums, no atomics; cuBLAS in its default, deterministic mode).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/models/kan/kan_layout.h"
#include "lib/core/scratch_arena.h"
#include "lib/models/kan/kan_config.h"
#include "lib/models/supervised_model.h"

namespace resident::models {

enum class KanTensor { BaseWeight, SplineWeight, SplineScaler };

class KanModel final : public SupervisedModel {
 public:
  // Validates (validate_kan_config), builds and initializes the slab from `seed` (blocking).
  KanModel(const ModelShape& shape, const KanConfig& config, std::uint64_t seed);

  std::string_view name() const noexcept override { return "kan"; }
  const ModelShape& shape() const noexcept override { return shape_; }
  std::string describe() const override { return describe_kan(config_, shape_); }
  nn::ParamSlab& slab() noexcept override { return slab_; }
  using SupervisedModel::slab;

  void forward(const StreamContext& context, const float* x, std::size_t batch,
               float* prediction) override;
  // Throws resident::Error when batch differs from the last forward's (or no forward ran).
  void backward(const StreamContext& context, const float* x, const float* d_prediction,
                std::size_t batch) override;

  const KanConfig& config() const noexcept { return config_; }
  // [L*F, hidden..., outputs].
  const std::vector<std::size_t>& widths() const noexcept { return widths_; }
  std::size_t layer_count() const noexcept { return layers_.size(); }
  // The K split of layer l's forward GEMM.
  std::size_t k_splits(std::size_t layer) const { return layers_.at(layer).splits; }

  // "layer<l>.base_weight", "layer<l>.spline_weight", "layer<l>.spline_scaler".
  static std::string tensor_name(std::size_t layer, KanTensor tensor);

 private:
  struct Layer {
    std::size_t in = 0, out = 0, k_width = 0, splits = 1;
    float* operand = nullptr;     // [max_batch, K]
    float* saved_input = nullptr;  // [max_batch, in], layers > 0 (their input gradient needs it)
    float* partials = nullptr;    // [splits, max_batch, out], layers that feed another
    float* combined = nullptr;    // [out, K]
    float* d_combined = nullptr;  // [out, K]
    float* d_operand = nullptr;   // [max_batch, K], layers > 0
    float* d_input = nullptr;     // [max_batch, in], layers > 0: the previous layer's dy
  };

  ModelShape shape_;
  KanConfig config_;
  std::vector<std::size_t> widths_;
  kernels::kan::Grid grid_;
  nn::ParamSlab slab_;
  std::vector<Layer> layers_;
  ScratchArena arena_;
  kernels::kan::LayerTable table_;  // params, grads and combined views of every layer
  std::size_t last_batch_ = 0;      // of the last forward; 0 before the first
};

// The registry's factory: the default KanConfig (the small reference configuration) for `shape`.
std::unique_ptr<SupervisedModel> make_kan_model(const ModelShape& shape, std::uint64_t seed);

}  // namespace resident::models
