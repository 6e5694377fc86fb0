// Mlp: Linear layers, each but the last followed by the hidden activation, over one ParamSlab.
//
//   ParamSlab slab;
//   Mlp mlp({.widths = {64, 256, 256, 3}}, /*max_batch=*/256, slab);  // declares its tensors
//   slab.finalize();
//   ScratchPlan plan;  mlp.plan(plan);  ScratchArena arena(plan.bytes());  mlp.bind(arena);
//   mlp.init_parameters(seed, stream);                                    // setup: uploads
//   const float* y = mlp.forward(context, x, batch);                      // hot path
//   mlp.backward(context, x, dy, /*dx=*/nullptr, batch);                  // accumulates grads
//
// Tensors "<name>.<l>.weight" [out, in] (weight decay) and "<name>.<l>.bias" [out] (no decay).
// Forward saves each layer's pre-activation z_l and activation a_l [batch, width] in the arena
// (overwritten by every forward); the backward reads them, so it must follow the forward of the
// same x (with the Cublas backend, its first `batch` rows: a forward over more rows, e.g. DQN's
// [states; next_states], may be back-propagated for its first part; see backward()).
// Parameter gradients accumulate into the slab's grads (zero them once per step) or, with
// GradMode::Overwrite, replace them (no zeroing needed); dx, when asked for, is overwritten.
// All work on the context's stream; no allocation, no host synchronization: forward and
// backward are graph-capturable.
//
// Backends (MlpConfig::backend): Cublas (default) runs cublasSgemm plus the kit's bias and
// activation kernels; a narrow MLP (biases, every width <= 128, at most 4 layers, weights and
// tiles within 48 KiB of shared memory: the PPO actor and critic) runs its whole forward as one
// fused kernel instead (sums in a fixed order of its own, so results equal the GEMM path to
// rounding, not bit for bit); with a ReLU or tanh hidden activation it saves only a_l, and the
// backward forms f' from a_l (the same bits as from z_l). If moreover every width is <= 64 and
// the hidden widths are multiples of 4, a backward without dx is one fused kernel and a finish
// (kernels/nn/mlp_backward_fused.h: the gradients to rounding of the GEMM path, in a fixed order).
// CublasLt runs every GEMM as one cublasLtMatmul planned at bind() for
// max_batch (prepare_batch() adds other batch sizes, before any capture): a hidden ReLU or GELU
// (tanh) is fused into its layer's GEMM (RELU_AUX_BIAS / GELU_AUX_BIAS forward, the aux holding
// the ReLU bit mask or the GELU input; DRELU_BGRAD / DGELU_BGRAD in the next layer's input
// gradient, which also yields the bias gradient), the top layer's bias gradient into its weight
// gradient (BGRADB); other activations use the kit's kernels after a BIAS-epilogue GEMM. An
// epilogue that cuBLASLt has no split-K-free algorithm for falls back, at plan time, to a plainer
// one plus the kit's kernel (describe_lt_plans() lists what was chosen). With GradMode::Accumulate
// the bias gradients come from the kit's bias kernel (cuBLASLt's bias-gradient epilogues only
// overwrite). Deterministic: fixed algorithms, no split-K, no atomics.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/nn/activation.h"
#include "kernels/nn/mlp_backward_fused.h"
#include "kernels/nn/mlp_forward_fused.h"
#include "lib/core/scratch_arena.h"
#include "lib/core/stream.h"
#include "lib/nn/initializers.h"
#include "lib/nn/param_slab.h"

namespace resident::nn {

enum class GemmBackend { Cublas, CublasLt };

const char* to_string(GemmBackend backend) noexcept;

struct MlpConfig {
  std::vector<std::size_t> widths;  // {in, hidden..., out}, at least two, each >= 1
  kernels::Activation hidden_activation{};  // after every layer but the last (default ReLU)
  bool bias = true;
  std::string name = "mlp";
  // Fill of every weight [out, in] by init_parameters (biases start at 0). The default is
  // Kaiming uniform with the ReLU gain sqrt(2): U[-sqrt(6/in), sqrt(6/in)].
  Initializer weight_init = Initializer::kaiming_uniform(relu_gain);
  GemmBackend backend = GemmBackend::Cublas;
};

class Mlp {
 public:
  // Validates the config (throws resident::Error naming the field) and declares the tensors.
  Mlp(MlpConfig config, std::size_t max_batch, ParamSlab& slab);

  // Adds the arena regions of the saved tensors and gradient scratch for max_batch rows.
  void plan(ScratchPlan& plan) const;
  // Takes those regions (after slab.finalize()); call once, in plan()'s order. CublasLt: also
  // creates the cuBLASLt handle and the plans for max_batch (needs the device).
  void bind(ScratchArena& arena);
  // CublasLt: builds the plans for another batch size in [1, max_batch] (setup: host work only,
  // no device work; not during a capture). forward/backward at a batch without plans throw.
  // Cublas: checks the batch, nothing else.
  void prepare_batch(std::size_t batch);
  // CublasLt: one line per GEMM plan of `batch` (product, shape, epilogue, algorithm) plus the
  // fallbacks taken; empty for Cublas. Throws when the batch has no plans.
  std::vector<std::string> describe_lt_plans(std::size_t batch) const;
  // Setup: config().weight_init fills the weights, layer by layer from one std::mt19937_64
  // seeded with `seed`; zero biases; uploads (blocking).
  void init_parameters(std::uint64_t seed, cudaStream_t stream);

  // y [batch, out], in the arena, valid until the next forward. batch <= max_batch.
  const float* forward(const StreamContext& context, const float* x, std::size_t batch);
  // When the forward is one fused launch: the kernel's view of this MLP (weights, biases and the
  // arena outputs forward() writes), for ops that run that kernel with their own per-tile
  // epilogue (kernels/rl/ppo/policy_forward_sample.h); their outputs are forward()'s. nullptr
  // otherwise. batch is checked as by forward().
  const kernels::FusedMlp* fused_view(std::size_t batch) const;
  // dy [batch, out] -> parameter grads (accumulated or overwritten as `mode` says) and dx
  // [batch, in] (overwritten; null: skip). x and the saved tensors are those of the last forward,
  // whose batch may be larger: its first `batch` rows are back-propagated (rows past them are
  // ignored), with the results of a forward over those rows alone up to that forward's rounding
  // (the Cublas backend, fused paths included).
  void backward(const StreamContext& context, const float* x, const float* dy, float* dx,
                std::size_t batch, GradMode mode = GradMode::Accumulate);

  std::size_t layers() const noexcept { return config_.widths.size() - 1; }
  std::size_t in_features() const noexcept { return config_.widths.front(); }
  std::size_t out_features() const noexcept { return config_.widths.back(); }
  const MlpConfig& config() const noexcept { return config_; }
  std::string weight_name(std::size_t layer) const;
  std::string bias_name(std::size_t layer) const;
  // FLOPs of one forward + backward at `batch` (2 per multiply-add: forward, dx, dW GEMMs).
  double train_flops(std::size_t batch) const;

 private:
  void check_batch(const char* call, std::size_t batch) const;
  struct LtState;
  struct LtPlans;
  const LtPlans& lt_plans(const char* call, std::size_t batch) const;
  void forward_lt(const StreamContext& context, const float* x, std::size_t batch);
  void backward_lt(const StreamContext& context, const float* x, const float* dy, float* dx,
                   std::size_t batch, GradMode mode);

  MlpConfig config_;
  std::size_t max_batch_;
  ParamSlab* slab_;
  std::size_t max_width_ = 0;
  std::vector<float*> pre_activation_;  // z_l [max_batch, widths[l+1]]
  std::vector<float*> activation_;      // a_l [max_batch, widths[l+1]] (hidden layers)
  float* gradient_a_ = nullptr;         // [max_batch, max_width] ping
  float* gradient_b_ = nullptr;         // [max_batch, max_width] pong
  // Slab views per layer, looked up once in bind() (biases null without bias).
  std::vector<float*> weights_, weight_grads_, biases_, bias_grads_;
  // CublasLt: per hidden layer with a ReLU/GELU epilogue, the aux region (arena); then the
  // handle and the plans per batch (shared by copies, which share the arena and the slab).
  std::vector<void*> aux_;
  std::shared_ptr<LtState> lt_;
  // Cublas backend with biases, every width <= 128 (at most 4 layers) and weights plus tiles
  // within 48 KiB of shared memory (the PPO nets, not the DQN Q-network): the whole forward is
  // one fused launch (kernels/nn/mlp_forward_fused.h).
  bool fused_forward_ = false;
  kernels::FusedMlp fused_;
  // Fused forward with ReLU / tanh: hidden z_l are not written; the backward reads a_l instead.
  bool backward_from_output_ = false;
  // Fused forward with ReLU / tanh and widths the fused backward takes
  // (kernels/nn/mlp_backward_fused.h): backward without dx is that kernel and its finish (2
  // launches), its block sums in an arena region sized by plan().
  bool fused_backward_ = false;
  kernels::FusedMlpGrads fused_grads_;
  float* fused_backward_scratch_ = nullptr;
  std::size_t fused_backward_scratch_floats_ = 0;
  // Whether the configuration alone allows the fused backward (plan() reserves its scratch).
  bool fused_backward_configured() const noexcept;
};

}  // namespace resident::nn
