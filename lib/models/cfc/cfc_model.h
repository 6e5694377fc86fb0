// CfcModel: the Liquid CfC supervised model (MODELS.md section 5; ncps' CfC with a one-layer
// backbone, "default" cell or "pure"), entirely on the GPU. The double-precision definition is
// tests/reference/cfc_reference.h; init: cfc_init.h.
//
// Forward (the window x [B, L, F]):
//   1. xt [L, B, F] = x time-major (one kernel), so each step's rows are contiguous and the
//      weight-gradient GEMMs run over L * B rows; Wh^T and Wheads^T are formed (two kernels).
//   2. p_in [L * B, U] = xt Wu^T: the backbone's input projection hoisted out of the time loop
//      (one cuBLAS GEMM).
//   3. the recurrence (kernels/models/cfc/cfc_forward_steps.h): per step, fused, p_in + h Wh^T +
//      b, the LeCun tanh, the stacked head GEMM and the cell; it saves z, the cell's activations
//      and every state. A block carries its batch rows through all steps of a launch
//      (CfcConfig::steps_per_launch; default the whole window in one launch).
//   4. prediction = h_{L-1} Wo^T + bo (cuBLAS + bias kernel).
// Backward: dh_{L-1} = dpred Wo, the readout's gradients; the reverse-time recurrence
// (cfc_backward_steps.h) writes dg (the heads' pre-activation gradients) and dp (the backbone's)
// for every step; then the weight gradients are one GEMM each over all L * B rows, with the
// biases' fixed-order column sums: dWheads += dg^T z, dWu += dp^T xt, dWh += dp^T h_prev (the
// states entering each step), and in pure mode dA, dw_tau as column sums of the per-step terms.
// Launches per train step: forward 6 + ceil(L / steps_per_launch), backward 8 (+ 2 pure) +
// ceil(L / steps_per_launch).
//
// Elapsed time: CfcConfig::time_column names the input column holding each step's ts (irregular
// sampling); -1 gives ts = 1. The column is also an input of the backbone. x receives no gradient
// (the interface has none).
//
// Parameters (slab tensors): "backbone.input_weight" [U, F], "backbone.recurrent_weight" [U, H],
// "backbone.bias" [U], "heads.weight" [heads * H, U] (row blocks ff1, ff2, time_a, time_b; pure:
// ff1 only), "heads.bias" [heads * H], pure only "w_tau" [H], "A" [H], "readout.weight"
// [outputs, H], "readout.bias" [outputs]; weight decay on the 2-D weights only.
//
// Scratch is allocated once for shape.max_batch rows and filled with NaN at construction, so a
// read of anything a step did not write shows. forward/backward follow supervised_model.h's
// hot-path contract: the context's stream only, no allocation, no copy, no sync; deterministic
// (fixed-order sums, no atomics; cuBLAS in its default, deterministic mode).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/models/cfc/cfc_step_shape.h"
#include "lib/core/scratch_arena.h"
#include "lib/models/cfc/cfc_config.h"
#include "lib/models/supervised_model.h"

namespace resident::models {

class CfcModel final : public SupervisedModel {
 public:
  // Validates (validate_cfc_config), builds and initializes the slab from `seed` (blocking).
  CfcModel(const ModelShape& shape, const CfcConfig& config, std::uint64_t seed);

  std::string_view name() const noexcept override { return "cfc"; }
  const ModelShape& shape() const noexcept override { return shape_; }
  std::string describe() const override { return describe_cfc(config_, shape_); }
  nn::ParamSlab& slab() noexcept override { return slab_; }
  using SupervisedModel::slab;
  const CfcConfig& config() const noexcept { return config_; }

  void forward(const StreamContext& context, const float* x, std::size_t batch,
               float* prediction) override;
  // Throws resident::Error when batch differs from the last forward's (or no forward ran).
  void backward(const StreamContext& context, const float* x, const float* d_prediction,
                std::size_t batch) override;

 private:
  kernels::cfc::CfcStepShape step_shape(std::size_t batch) const;
  std::size_t steps_per_launch() const;

  ModelShape shape_;
  CfcConfig config_;
  nn::ParamSlab slab_;
  ScratchArena arena_;
  float* xt_ = nullptr;           // [L, B, F]
  float* recurrent_t_ = nullptr;  // [H, U]
  float* heads_t_ = nullptr;      // [U, heads * H]
  float* p_in_ = nullptr;         // [L, B, U]
  float* z_ = nullptr;            // [L, B, U]
  float* cell_ = nullptr;         // [L, B, cell_width]
  float* hs_ = nullptr;           // [L + 1, B, H]
  float* dg_ = nullptr;           // [L, B, heads * H]
  float* dp_ = nullptr;           // [L, B, U]
  float* qa_ = nullptr;           // [L, B, H], pure only
  float* qw_ = nullptr;           // [L, B, H], pure only
  float* dh_ = nullptr;           // [B, H]
  std::size_t last_batch_ = 0;    // of the last forward; 0 before the first
};

// The registry's factory: the default CfcConfig (the small reference configuration) for `shape`.
std::unique_ptr<SupervisedModel> make_cfc_model(const ModelShape& shape, std::uint64_t seed);

}  // namespace resident::models
