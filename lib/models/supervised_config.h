// SupervisedTrainerConfig: what the supervised trainer (supervised_trainer.h) is run with, and its
// validation (errors name every invalid field, its value and the allowed range).
#pragma once

#include <cstddef>
#include <cstdint>

#include "lib/data/series_dataset.h"
#include "lib/nn/param_slab.h"

namespace resident::models {

enum class TrainerPipeline {
  // Everything on the device: per-epoch device shuffle, the train step replayed as one CUDA
  // graph, device loss averages, two scalar readbacks per epoch.
  Resident,
  // The classic loop (the "before"): windows assembled on the host from a host copy of the
  // normalized series, uploaded from pinned memory every step, the loss read back every step.
  HostFed,
};

struct SupervisedTrainerConfig {
  std::size_t batch = 64;              // windows per train step, [1, 65536]
  std::size_t epochs = 20;             // at most this many epochs (fit), [1, 1000000]
  std::size_t patience = 5;            // epochs without a better validation loss before stopping,
                                       // [1, 1000000]
  nn::AdamWConfig adamw{};             // lr, betas, eps, weight decay, schedule (ParamSlab rules)
  float max_grad_norm = 1.0f;          // global-norm clip, > 0 (+inf: never clip)
  std::uint64_t seed = 0;              // model init and shuffle
  double validation_fraction = 0.2;    // share of the rows after the training range, (0, 1)
  std::size_t window = 64;             // L, rows per window, [1, 65536]
  std::size_t horizon = 1;             // h, future rows predicted, [1, 4096]
  double normalization_epsilon = 1e-8; // added to each column's variance, finite, > 0
  TrainerPipeline pipeline = TrainerPipeline::Resident;
  // Classifiers only (LossKind::CrossEntropy): theta of the trend labels, in the target column's
  // normalized units (the change of its mean over the next `horizon` rows against the window's
  // last `horizon` rows). Negative (the default): set on the training split so that the three
  // classes are about equally frequent. Finite.
  double trend_threshold = -1.0;
};

// Throws resident::Error "invalid SupervisedTrainerConfig" listing every invalid field as
// "<field> = <value>, allowed <range>".
void validate(const SupervisedTrainerConfig& config);

// The dataset's window spec for this config (window, horizon, validation fraction, epsilon).
data::WindowSpec window_spec(const SupervisedTrainerConfig& config);

const char* pipeline_name(TrainerPipeline pipeline) noexcept;

}  // namespace resident::models
