// Mamba2Model: the Mamba2 (SSD) supervised model on the GPU (MODELS.md section 1), a
// SupervisedModel. Embed Linear F -> D, n_layers pre-norm residual blocks x + Mixer(RMSNorm(x)),
// a final RMSNorm and a Linear head D -> outputs on the last time step. The mixer: in_proj (no
// bias) -> z | xBC | dt_raw; causal depthwise conv + SiLU over xBC; chunked SSD (ssd.h);
// y <- RMSNorm(y * SiLU(z)) * w (gate before the norm); out_proj (no bias). Every norm is an
// RMSNorm with eps 1e-5. tests/reference/mamba2_reference.h is the double-precision definition.
//
// Per train step: forward = 2 + 6 per layer launches (cuBLAS GEMMs for the projections; fused
// row-norm, conv, per-(sequence, head) SSD kernels), backward = 3 + 10 per layer. Parameter
// gradients of the norms, the SSD scalars and the head are per-block partials summed in a fixed
// order by one kernel at the end; projections' weight gradients are cuBLAS GEMMs with beta = 1.
// Deterministic, graph-capturable, no allocation after construction.
//
// Init (seeded, one std::mt19937_64 in declaration order): Linear and conv weights and biases
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (PyTorch's default); norms 1; A = U(1, 16), A_log = log A;
// dt = exp(U(log 1e-3, log 0.1)) clamped >= 1e-4, dt_bias = dt + log(-expm1(-dt)); D = 1. Weight
// decay only on the Linear and conv weights (never A_log, dt_bias, D, norms, biases). Mamba's
// out_proj rescaling by 1/sqrt(n_layers) is not applied.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "lib/core/device_buffer.h"
#include "lib/models/mamba2/mamba2_config.h"
#include "lib/models/mamba2/mamba2_pipeline.h"
#include "lib/models/supervised_model.h"

namespace resident::models {

class Mamba2Model final : public SupervisedModel {
 public:
  // Validates (throws resident::Error naming the field), allocates, initializes from `seed`.
  Mamba2Model(const Mamba2Config& config, const ModelShape& shape, std::uint64_t seed);

  std::string_view name() const noexcept override { return "mamba2"; }
  const ModelShape& shape() const noexcept override { return shape_; }
  std::string describe() const override;
  nn::ParamSlab& slab() noexcept override { return slab_; }
  using SupervisedModel::slab;  // the const overload
  const Mamba2Config& config() const noexcept { return config_; }

  void forward(const StreamContext& context, const float* x, std::size_t batch,
               float* prediction) override;
  void backward(const StreamContext& context, const float* x, const float* d_prediction,
                std::size_t batch) override;

 private:
  void check_batch(const char* call, std::size_t batch) const;

  Mamba2Config config_;
  ModelShape shape_;
  mamba2::Mamba2Dims dims_;
  nn::ParamSlab slab_;
  mamba2::Params params_;
  DeviceBuffer<float> arena_;
  mamba2::Buffers buffers_;
};

// The registry's factory: the small config (Mamba2Config defaults) for `shape`.
std::unique_ptr<SupervisedModel> make_mamba2(const ModelShape& shape, std::uint64_t seed);

}  // namespace resident::models
