// SupervisedTrainer: trains any SupervisedModel (supervised_model.h) on a SeriesDataset
// (lib/data/series_dataset.h) with MSE, AdamW and early stopping -- the one trainer of the seven
// time-series models.
//
//   data::SeriesDataset dataset(data::make_synthetic_series({.seed = 1}), window_spec(config), s);
//   auto trainer = make_supervised_trainer("kan", config, dataset);   // model at its small config
//   for (const EpochResult& r : trainer->fit()) ...                  // or train_epoch() by hand
//
// Resident epoch (config.pipeline == Resident; contract: SupervisedEpochContract):
//   1. the training windows' order: a device permutation keyed by (seed, epoch) -- Philox with
//      the device epoch counter as the draw (kernels/data/random_permutation.h);
//   2. steps_per_epoch() = floor(train_windows / batch) train steps, the last partial batch
//      DROPPED (its windows come back in later epochs' orders); each step is one replay of a CUDA
//      graph captured at construction: zero grads, gather of the batch through the permutation
//      (the batch index is a device counter the step advances, so the graph is fixed), forward,
//      MSE loss (a device scalar) and dLoss/dprediction in one launch, backward, global-norm clip
//      and AdamW, the loss added to a device fp64 sum (a model that owns its training loss,
//      SupervisedModel::owns_training_loss, computes loss and gradients in one call instead);
//   3. the validation loss over ALL validation windows in order, in batches of `batch` (the last
//      one partial), one more captured graph;
//   4. one kernel forms the train mean and the validation loss (fp64, fixed order), then the
//      epoch's only host interaction: two 8-byte ScalarReadbacks;
//   5. early stopping on the host: a strictly lower validation loss saves the parameters to the
//      device's best copy (one device-to-device copy) and resets the patience; otherwise the
//      patience drops by one and at 0 the trainer stops. fit() restores the best parameters at
//      the end (restore_best(): device-to-device).
// Quantile heads (a model whose loss_kind() is LossKind::Pinball, SupervisedModel::quantiles()
// levels, one of them 0.5): outputs = the dataset's outputs times the level count, quantile
// fastest; the train loss is the pinball loss, mean over batch * outputs * levels
// (kernels/nn/losses.h); the validation loss is the MSE of the median column, so that it compares
// with an MSE model's (the median column is a strided device-to-device copy; the contract is
// unchanged).
// Classification (a model whose loss_kind() is LossKind::CrossEntropy, kTrendClasses outputs):
// each step's labels come from the series on the device (kernels/data/trend_labels.h: the target
// column's mean over the next `horizon` rows against the window's last `horizon` rows, up /
// stationary / down against theta = config.trend_threshold, or when that is negative the
// balanced threshold of the training split, computed once at setup on the host copy); the loss is
// cross-entropy (one launch with its gradient); validation also counts a confusion matrix on the
// device. The epoch's two 8-byte readbacks then carry {train loss, validation loss} and
// {validation macro F1, accuracy} as float pairs (kernels/data/class_metrics.h), so the
// SupervisedEpochContract is unchanged. The host-fed pipeline computes the same labels on the
// host (lib/data/trend_threshold.h) and uploads them with the batch, and reads the metrics back
// once after its validation pass.
// Host-fed epoch (the "before"): the same model, kernels and math, eagerly launched; the same
// permutation computed on the host (lib/data/host_permutation.h); each batch assembled on the
// host from the dataset's host copy into pinned memory (the next batch while the GPU runs the
// current step), uploaded with cudaMemcpyAsync, the loss read back after every step (and every
// validation batch) and averaged on the host with the device's formulas. Its losses equal the
// resident ones (same windows, same kernels; the sums in the same order): the GPU test holds
// them to 1e-6 relative.
//
// Checkpoints (save_checkpoint / load_checkpoint; lib/core/checkpoint_file.h, kind
// "supervised-trainer"): sections "fingerprint" (model name, describe(), shape, loss, dataset
// columns, slab layout), "slab" (AdamW step, params, m, v), "best" (best params), "trainer"
// (epochs done, best loss and epoch, patience left, stop flag, shuffle seed and the Philox draw
// counter) and "normalization" (the training statistics). Loading validates the whole file and
// the fingerprint (a checkpoint of another model, shape or dataset layout throws resident::Error
// "checkpoint mismatch" naming the field, both values) before it changes anything; a trainer
// that loads the file continues bit-identically.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <string_view>
#include <vector>

#include "kernels/data/class_metrics.h"
#include "kernels/data/epoch_metrics.h"
#include "lib/core/captured_graph.h"
#include "lib/core/device_buffer.h"
#include "lib/core/scalar_readback.h"
#include "lib/core/stream.h"
#include "lib/data/series_dataset.h"
#include "lib/models/supervised_config.h"
#include "lib/models/supervised_model.h"

namespace resident::models {

struct EpochResult {
  std::size_t epoch = 0;           // epochs done, this one included (1-based)
  double train_loss = 0.0;         // mean of this epoch's step losses (normalized units)
  double validation_loss = 0.0;    // MSE over every validation window and output
  bool improved = false;           // a new best validation loss: its parameters were kept
  bool stop = false;               // patience spent (early stop) or config.epochs reached
  std::size_t steps = 0;           // train steps in this epoch
  double seconds = 0.0;            // host wall time of the whole epoch (validation included)
  double windows_per_second = 0.0; // training windows (steps * batch) per second
  // Classifiers only (NaN otherwise): over every validation window, argmax against the label.
  double validation_accuracy = std::numeric_limits<double>::quiet_NaN();
  double validation_macro_f1 = std::numeric_limits<double>::quiet_NaN();
};

// The transfer contract of one resident epoch (tests and benches build an
// audit::TransferContract from it): no bulk D2H, no H2D, two scalar (<= 8 B) D2H (train and
// validation loss) and the two event waits of their readback. Checkpoints are outside it.
struct SupervisedEpochContract {
  static constexpr std::uint64_t max_d2h_scalar = 2;
  static constexpr std::uint64_t max_d2h_bulk = 0;
  static constexpr std::uint64_t max_h2d = 0;
  static constexpr std::uint64_t max_syncs = 2;
};

// The shape a model needs for `config` on `dataset`: window, features, outputs, and max_batch =
// config.batch.
ModelShape model_shape_for(const SupervisedTrainerConfig& config,
                           const data::SeriesDataset& dataset);

class SupervisedTrainer {
 public:
  // Validates the config and the model against the dataset (window, features, outputs (times the
  // quantile levels for a pinball model), max_batch >= batch, the dataset's split equal to the
  // config's, batch <= training windows), allocates everything, captures the two graphs. The
  // dataset must outlive the trainer. Throws resident::Error naming the field, the value and the limit.
  SupervisedTrainer(const SupervisedTrainerConfig& config, const data::SeriesDataset& dataset,
                    std::unique_ptr<SupervisedModel> model);
  ~SupervisedTrainer();
  SupervisedTrainer(const SupervisedTrainer&) = delete;
  SupervisedTrainer& operator=(const SupervisedTrainer&) = delete;

  // One epoch in config().pipeline, then the early-stopping bookkeeping. A non-finite train or
  // validation loss throws resident::Error naming the epoch.
  EpochResult train_epoch();
  // Epochs until config().epochs are done or the patience is spent (on_epoch after each), then
  // restore_best(). Returns this call's epochs.
  std::vector<EpochResult> fit(const std::function<void(const EpochResult&)>& on_epoch = {});
  // params = the best validation epoch's parameters (device-to-device; no-op before any epoch).
  void restore_best();

  // ----- single steps, for benches (enqueue only; time them with CUDA events)
  // One resident train step: one graph replay (the batch counter wraps inside the current
  // epoch's permutation, so any number of calls stay in range; the next train_epoch() starts its
  // counters afresh). Works in either pipeline (the graphs are captured at construction).
  void resident_step();
  // One host-fed train step on training batch `index % steps_per_epoch()` of the host order for
  // the current epoch: host assembly, upload, eager kernels and the per-step loss readback
  // (blocking); returns the loss.
  float host_fed_step(std::size_t index);

  // ----- checkpoint phase (blocking)
  void save_checkpoint(const std::filesystem::path& path);
  void load_checkpoint(const std::filesystem::path& path);

  const SupervisedTrainerConfig& config() const noexcept { return config_; }
  const data::SeriesDataset& dataset() const noexcept { return dataset_; }
  SupervisedModel& model() noexcept { return *model_; }
  const SupervisedModel& model() const noexcept { return *model_; }
  const StreamContext& context() const noexcept { return context_; }
  std::size_t steps_per_epoch() const noexcept { return steps_per_epoch_; }
  std::size_t validation_batches() const noexcept { return validation_batches_; }
  std::size_t epochs_done() const noexcept { return epochs_done_; }
  bool has_best() const noexcept { return has_best_; }
  double best_validation_loss() const noexcept { return best_loss_; }
  std::size_t best_epoch() const noexcept { return best_epoch_; }
  std::size_t patience_left() const noexcept { return patience_left_; }
  bool stopped() const noexcept { return stopped_; }
  // The best parameters' device copy [slab().total_elements()].
  const float* best_params() const noexcept { return best_params_.data(); }
  // Classification: whether the model is a classifier, and theta of its trend labels.
  bool classifies() const noexcept { return classifier_; }
  double trend_threshold() const noexcept { return trend_theta_; }

 private:
  struct HostStaging;

  void enqueue_train_step();        // the captured body
  void enqueue_validation();        // the captured body
  void run_resident_epoch(double* train_loss, double* validation_loss);
  void run_host_fed_epoch(double* train_loss, double* validation_loss);
  void upload_batch(std::size_t slot, std::size_t batch);
  // Classification: the labels of the windows `selection` names into labels_ (one launch).
  void enqueue_labels(const kernels::data::WindowSelection& selection, std::size_t rows);
  // What validation scores with MSE against y: the prediction, or for a quantile head its median
  // column (copied into median_ for `rows` windows).
  const float* validated_prediction(std::size_t rows);
  // Classification: one validation batch's labels, loss into *loss and confusion counts.
  void enqueue_class_validation(float* loss, std::size_t rows);
  // Classification, host-fed: the labels of staging_->starts[0 .. rows) into staging slot `slot`.
  void assemble_labels(std::size_t slot, std::size_t rows);
  std::vector<std::uint32_t> host_order(std::uint64_t epoch) const;

  SupervisedTrainerConfig config_;
  const data::SeriesDataset& dataset_;
  std::unique_ptr<SupervisedModel> model_;
  StreamContext context_;
  std::size_t batch_ = 0, outputs_ = 0, train_windows_ = 0, steps_per_epoch_ = 0;
  std::size_t validation_batches_ = 0;
  std::uint64_t shuffle_seed_ = 0;

  DeviceBuffer<float> x_, y_, prediction_, d_prediction_, loss_, loss_partials_;
  DeviceBuffer<unsigned int> loss_ticket_;
  DeviceBuffer<float> validation_losses_;  // [validation_batches]
  DeviceBuffer<std::uint32_t> permutation_, keys_in_, keys_out_, values_in_;
  DeviceBuffer<std::byte> sort_temp_;
  DeviceBuffer<kernels::data::EpochCounters> counters_;
  DeviceBuffer<float> best_params_;
  ScalarReadback<double> train_readback_, validation_readback_;
  ScalarReadback<float> step_readback_;
  CapturedGraph step_graph_, validation_graph_;
  std::unique_ptr<HostStaging> staging_;
  // Classification (LossKind::CrossEntropy) state; empty buffers otherwise.
  bool classifier_ = false;
  double trend_theta_ = 0.0;
  DeviceBuffer<std::int32_t> labels_;                // [batch]
  DeviceBuffer<unsigned long long> confusion_;       // [classes, classes], validation
  DeviceBuffer<kernels::data::FloatPair> class_summary_;  // [2]
  ScalarReadback<kernels::data::FloatPair> class_losses_readback_, class_scores_readback_;
  double last_accuracy_ = 0.0, last_macro_f1_ = 0.0;  // of the last epoch's validation
  // Quantile head (LossKind::Pinball) state; empty otherwise.
  bool pinball_ = false;
  std::vector<float> taus_host_;
  std::size_t median_index_ = 0;
  DeviceBuffer<float> taus_, median_;  // [quantiles], [batch * outputs]

  std::size_t epochs_done_ = 0;
  bool has_best_ = false;
  double best_loss_ = 0.0;
  std::size_t best_epoch_ = 0;
  std::size_t patience_left_ = 0;
  bool stopped_ = false;
};

// make_supervised_model(name, model_shape_for(config, dataset), config.seed) and a trainer of it.
std::unique_ptr<SupervisedTrainer> make_supervised_trainer(std::string_view model_name,
                                                           const SupervisedTrainerConfig& config,
                                                           const data::SeriesDataset& dataset);

}  // namespace resident::models
