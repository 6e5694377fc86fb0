// XlstmModel: the xLSTM supervised model (MODELS.md section 2; NX-AI/xlstm's mLSTM and sLSTM
// blocks), entirely on the GPU. The double-precision definition is
// tests/reference/xlstm_reference.h; config and init: xlstm_config.h.
//
// Rows are (sample, step), [batch * L, width] row-major: every projection is one cuBLAS GEMM
// over all batch * L rows. Forward: embed (GEMM + bias); per mLSTM block: LayerNorm, up
// projection, causal conv + SiLU (the nn kit's), q | k and v (headwise weights expanded to dense
// matrices: a documented deviation, see headwise_dense.h), gates (GEMM + bias), the cell
// (kernels/models/xlstm/mlstm_cell.h: the parallel stabilized form, one block per (sample,
// head)), the per-head norm (the kit's LayerNorm over DH-wide rows), the output combine, down
// projection and the residual add. The sLSTM block: LayerNorm, conv + SiLU, the four gate
// projections (two GEMMs), the recurrence (one launch for the whole window, one block per
// (sample, head), R in shared memory), per-head norm, weighted residual add; then the gated-GeLU
// FFN block. Head: the last step's row, LayerNorm, readout.
// Backward: the same in reverse; the sLSTM's reverse-time loop is one launch writing the raw
// gates' gradient for every step, after which its weight gradients are GEMMs over all rows and
// the recurrent weights' a fixed-order sum of per-sample partials.
//
// Parameters: the tensors of xlstm_tensor_specs (xlstm_config.h). Scratch is allocated once for
// shape.max_batch rows and filled with NaN at construction, so a read of anything a step did not
// write shows. forward/backward follow supervised_model.h's hot-path contract: the context's
// stream only, no allocation, no copy, no sync; deterministic (fixed-order sums, no atomics;
// cuBLAS in its default, deterministic mode).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lib/core/scratch_arena.h"
#include "lib/models/supervised_model.h"
#include "lib/models/xlstm/xlstm_config.h"

namespace resident::models {

class XlstmModel final : public SupervisedModel {
 public:
  // Validates (validate_xlstm_config), builds and initializes the slab from `seed` (blocking),
  // and raises the mLSTM cell kernels' shared-memory limits (setup).
  XlstmModel(const ModelShape& shape, const XlstmConfig& config, std::uint64_t seed);

  std::string_view name() const noexcept override { return "xlstm"; }
  const ModelShape& shape() const noexcept override { return shape_; }
  std::string describe() const override { return describe_xlstm(config_); }
  nn::ParamSlab& slab() noexcept override { return slab_; }
  using SupervisedModel::slab;
  const XlstmConfig& config() const noexcept { return config_; }

  void forward(const StreamContext& context, const float* x, std::size_t batch,
               float* prediction) override;
  // Throws resident::Error when batch differs from the last forward's (or no forward ran).
  void backward(const StreamContext& context, const float* x, const float* d_prediction,
                std::size_t batch) override;

  // Saved activations of one block (the pointers a block uses; the rest stay null).
  struct Block {
    bool slstm = false;
    std::string prefix;  // "block<b>."
    float *ln = nullptr, *ln_mean = nullptr, *ln_rstd = nullptr;
    float *up = nullptr, *xc = nullptr, *qkv = nullptr, *gates = nullptr, *htil = nullptr;
    float *m = nullptr, *n = nullptr, *r = nullptr, *gn_mean = nullptr, *gn_rstd = nullptr;
    float *hn = nullptr, *out = nullptr, *dense_a = nullptr, *dense_b = nullptr;
    float *wx = nullptr, *raw = nullptr, *c = nullptr, *h = nullptr;
    float *ln2 = nullptr, *ln2_mean = nullptr, *ln2_rstd = nullptr, *fup = nullptr,
          *act = nullptr;
    float* x_mid = nullptr;  // sLSTM: the stream between the sLSTM and the FFN
  };

 private:
  // Hands every scratch pointer its region: `take(count)` returns the next region (planning
  // pass: null, only counting).
  template <class Take>
  void take_buffers(Take& take);
  void forward_mlstm(const StreamContext& context, Block& b, const float* x_in, float* x_out,
                     std::size_t batch);
  void forward_slstm(const StreamContext& context, Block& b, const float* x_in, float* x_out,
                     std::size_t batch);
  void backward_mlstm(const StreamContext& context, Block& b, const float* x_in,
                      std::size_t batch);
  void backward_slstm(const StreamContext& context, Block& b, const float* x_in,
                      std::size_t batch);

  ModelShape shape_;
  XlstmConfig config_;
  nn::ParamSlab slab_;
  std::optional<ScratchArena> arena_;  // sized by a planning pass of take_buffers
  std::vector<Block> blocks_;
  std::vector<float*> stream_;  // residual stream entering block b; [blocks] is the last
  float *ones_ = nullptr, *y_ = nullptr, *last_ = nullptr, *post_ = nullptr;
  float *post_mean_ = nullptr, *post_rstd_ = nullptr;
  // Backward buffers, shared by the blocks.
  float *dX_ = nullptr, *dlast_ = nullptr, *dpost_ = nullptr, *d_out_ = nullptr, *d_hn_ = nullptr;
  float *d_xc_ = nullptr, *d_up_ = nullptr, *d_prod1_ = nullptr, *d_prod2_ = nullptr;
  float *d_wide_ = nullptr, *d_gates_ = nullptr, *d_xn_ = nullptr, *d_dense_ = nullptr;
  float *ln_scratch_ = nullptr, *conv_scratch_ = nullptr, *r_partials_ = nullptr;
  std::size_t ln_scratch_floats_ = 0, conv_scratch_floats_ = 0;
  std::size_t last_batch_ = 0;  // of the last forward; 0 before the first
};

// The registry's factory: the default XlstmConfig (the small reference configuration).
std::unique_ptr<SupervisedModel> make_xlstm_model(const ModelShape& shape, std::uint64_t seed);

}  // namespace resident::models
