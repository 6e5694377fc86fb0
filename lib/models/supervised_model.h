// SupervisedModel: the interface every supervised time-series model implements (Mamba2, KAN,
// TFT, xLSTM, Liquid CfC, diffusion, TLOB), so the trainer, the benches, the CLI and the tests
// are written once.
//
// A sample is a window x [L, F] of normalized features (time-major: x[t * F + f]) and a batch
// is [batch, L, F] row-major on the device. The model maps a batch to predictions
// [batch, outputs] (outputs = horizon * target columns, times the quantile count for a
// quantile head). The loss is the trainer's (ModelShape::loss); the model sees only
// dLoss/dprediction.
//
// Contract of the hot-path calls (forward, backward): they enqueue work on the context's stream
// only; no allocation, no host<->device copy, no host synchronization, so a whole train step is
// capturable into a CUDA graph. Scratch (saved activations) is allocated at construction for
// shape().max_batch rows. Results are deterministic: the same inputs and parameters give the
// same bits on the same GPU and binary (no order-dependent float atomics).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/core/error.h"
#include "lib/core/stream.h"
#include "lib/nn/param_slab.h"

namespace resident::models {

// The loss the trainer applies to a model's predictions.
enum class LossKind {
  Mse,      // mean over batch * outputs of (prediction - target)^2
  Pinball,  // quantile head: outputs = horizon * targets * quantiles (quantile fastest)
  // Classifier: outputs = kTrendClasses logits per window; cross-entropy against the trend label
  // the trainer computes on the device from the series (supervised_trainer.h, classification).
  CrossEntropy,
};

// The trend classes of a classifier: 0 down, 1 stationary, 2 up.
inline constexpr std::size_t kTrendClasses = 3;

// What a model is built for. Validated by each model's factory (errors name field, value and
// the allowed range).
struct ModelShape {
  std::size_t window = 64;      // L, time steps per sample, >= 1
  std::size_t features = 32;    // F, input columns, >= 1
  std::size_t outputs = 1;      // prediction values per sample, >= 1
  std::size_t max_batch = 256;  // largest batch forward/backward accept, >= 1
};

class SupervisedModel {
 public:
  virtual ~SupervisedModel() = default;
  SupervisedModel() = default;
  SupervisedModel(const SupervisedModel&) = delete;
  SupervisedModel& operator=(const SupervisedModel&) = delete;

  // The registry name ("mamba2", "kan", ...).
  virtual std::string_view name() const noexcept = 0;
  virtual const ModelShape& shape() const noexcept = 0;
  virtual LossKind loss_kind() const noexcept { return LossKind::Mse; }
  // LossKind::Pinball only: the quantile levels of the head, ascending in (0, 1), one of them 0.5
  // (the median the trainer validates with MSE); outputs = trainer outputs * quantiles().size(),
  // quantile fastest. Empty for other losses.
  virtual std::vector<float> quantiles() const { return {}; }
  // A one-line description of the configuration (widths, layers), for logs and reports.
  virtual std::string describe() const = 0;

  // Parameters, gradients and AdamW state: one slab, finalized and initialized by the factory
  // (seeded: the same seed gives the same parameters).
  virtual nn::ParamSlab& slab() noexcept = 0;
  const nn::ParamSlab& slab() const noexcept {
    return const_cast<SupervisedModel*>(this)->slab();
  }

  // prediction [batch, outputs] (overwritten) from x [batch, L, F]; saves what backward needs.
  // 1 <= batch <= shape().max_batch, else resident::Error before anything is enqueued.
  virtual void forward(const StreamContext& context, const float* x, std::size_t batch,
                       float* prediction) = 0;

  // The backward of the last forward (same x and batch): dLoss/dparams ADDED into
  // slab().grad(...) views (GradMode::Accumulate semantics; the trainer zeroes the grads before
  // the step). d_prediction [batch, outputs] is read only.
  virtual void backward(const StreamContext& context, const float* x, const float* d_prediction,
                        std::size_t batch) = 0;

  // ----- models whose training loss is their own (a diffusion model trains on the epsilon-MSE
  // of noised targets at drawn timesteps, which forward()'s prediction does not determine)
  // True: a train step calls train_loss_and_backward() in place of forward, the trainer's loss
  // and backward; validation still scores forward()'s prediction with the trainer's loss.
  virtual bool owns_training_loss() const noexcept { return false; }
  // loss (1 float on the device, overwritten) = the model's training loss on x [batch, L, F] and
  // the targets y [batch, outputs]; dLoss/dparams ADDED into the grads as backward() adds them.
  // Random draws are keyed by device state (so a captured step draws afresh on every replay).
  // The hot-path contract of forward(). Only called when owns_training_loss() is true; the
  // default throws resident::Error.
  virtual void train_loss_and_backward(const StreamContext& context, const float* x,
                                       const float* y, std::size_t batch, float* loss) {
    (void)context, (void)x, (void)y, (void)batch, (void)loss;
    throw Error("SupervisedModel::train_loss_and_backward", "not supported",
                "model \"" + std::string(name()) + "\" uses the trainer's loss " +
                    "(owns_training_loss() is false)",
                __FILE__, __LINE__);
  }
};

}  // namespace resident::models
