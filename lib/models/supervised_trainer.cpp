#include "lib/models/supervised_trainer.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <utility>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/core/philox.h"
#include "kernels/data/class_confusion.h"
#include "kernels/data/cross_entropy_loss.h"
#include "kernels/data/random_permutation.h"
#include "kernels/data/trend_labels.h"
#include "kernels/nn/losses.h"
#include "kernels/nn/mse_loss_fused.h"
#include "lib/core/checkpoint_file.h"
#include "lib/data/host_permutation.h"
#include "lib/data/trend_threshold.h"
#include "lib/models/model_registry.h"

namespace resident::models {

namespace kd = kernels::data;

namespace {

constexpr std::uint64_t kShuffleStream = 0x5348'5546ull;  // "SHUF": the shuffle's Philox stream
constexpr const char* kCheckpointKind = "supervised-trainer";

template <class T>
std::string text(T value) {
  std::ostringstream out;
  out.precision(17);
  out << value;
  return out.str();
}

[[noreturn]] void fail(const std::string& call, const char* error_name, const std::string& detail,
                       int line) {
  throw Error(call, error_name, detail, __FILE__, line);
}

// A pinned (page-locked, not mapped) host array: the staging of the host-fed pipeline.
template <class T>
class PinnedArray {
 public:
  explicit PinnedArray(std::size_t count) : count_(count) {
    void* p = nullptr;
    RESIDENT_CUDA_CHECK(
        cudaHostAlloc(&p, std::max<std::size_t>(count, 1) * sizeof(T), cudaHostAllocDefault));
    data_ = static_cast<T*>(p);
  }
  ~PinnedArray() {
    if (data_ != nullptr) (void)cudaFreeHost(data_);
  }
  PinnedArray(const PinnedArray&) = delete;
  PinnedArray& operator=(const PinnedArray&) = delete;
  T* data() noexcept { return data_; }
  std::size_t size() const noexcept { return count_; }

 private:
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

// The validation mean of launch_finish_epoch (kernels/data/epoch_metrics.h) on the host: the same
// two separately rounded fp64 operations per batch, in the same order.
double validation_mean_host(const std::vector<float>& batch_losses, std::size_t batch,
                            std::size_t validation_windows) {
  if (batch_losses.empty()) return std::numeric_limits<double>::quiet_NaN();
  double sum = 0.0;
  for (std::size_t b = 0; b < batch_losses.size(); ++b) {
    const std::size_t n = b + 1 < batch_losses.size() ? batch : validation_windows - b * batch;
    const volatile double product =
        static_cast<double>(batch_losses[b]) * static_cast<double>(n);  // no FMA contraction
    sum = sum + product;
  }
  return sum / static_cast<double>(validation_windows);
}

// The device address of one field of the device counters (no host dereference of the pointer).
template <class T>
T* field(DeviceBuffer<kd::EpochCounters>& counters, std::size_t offset) {
  return reinterpret_cast<T*>(reinterpret_cast<std::byte*>(counters.data()) + offset);
}

// What a checkpoint must match: (field, value) pairs in a fixed order.
using Fingerprint = std::vector<std::pair<std::string, std::string>>;

Fingerprint fingerprint_of(const SupervisedModel& model, const data::SeriesDataset& dataset) {
  const ModelShape& s = model.shape();
  std::string columns, targets, layout;
  for (const std::string& name : dataset.column_names())
    columns += (columns.empty() ? "" : ", ") + name;
  for (const std::size_t c : dataset.target_columns())
    targets += (targets.empty() ? "" : ", ") + dataset.column_names()[c];
  for (const nn::SlabTensor& t : model.slab().layout().tensors())
    layout += (layout.empty() ? "" : ", ") + t.name + nn::format_shape(t.shape);
  layout += " (" + std::to_string(model.slab().total_elements()) + " elements)";
  return {{"model", std::string(model.name())},
          {"describe()", model.describe()},
          {"window", std::to_string(s.window)},
          {"features", std::to_string(s.features)},
          {"outputs", std::to_string(s.outputs)},
          {"loss", model.loss_kind() == LossKind::Mse            ? "mse"
                   : model.loss_kind() == LossKind::CrossEntropy ? "cross-entropy"
                                                                 : "pinball"},
          {"horizon", std::to_string(dataset.horizon())},
          {"dataset columns", columns},
          {"input columns", std::to_string(dataset.features())},
          {"target columns", targets},
          {"slab layout", layout}};
}

// Zero grads, then the model's loss (device scalar) and dLoss/dparams for one batch: the model's
// own training loss when it owns one (SupervisedModel::owns_training_loss), else forward, the
// fused MSE and its gradient, and backward.
struct StepBuffers {
  const float* x;
  const float* y;
  float* prediction;
  float* d_prediction;
  float* loss;
  float* partials;
  std::size_t partials_count;
  unsigned int* ticket;
  // Quantile head (LossKind::Pinball): the levels on the device and their count; null/0 otherwise.
  const float* taus = nullptr;
  std::size_t quantiles = 0;
};

// labels non-null: a classifier's step, cross-entropy against them over its kTrendClasses logits.
void enqueue_loss_and_backward(SupervisedModel& model, const StreamContext& context,
                               const StepBuffers& b, std::size_t batch, std::size_t outputs,
                               const std::int32_t* labels = nullptr) {
  const cudaStream_t s = context.stream();
  model.slab().zero_grads(s);
  if (model.owns_training_loss()) {
    model.train_loss_and_backward(context, b.x, b.y, batch, b.loss);
    return;
  }
  model.forward(context, b.x, batch, b.prediction);
  if (labels != nullptr) {
    kernels::data::launch_cross_entropy_loss(b.loss, b.d_prediction, b.prediction, labels, batch,
                                             kTrendClasses, 1.0f, s);
  } else if (b.taus != nullptr) {
    // Pinball: mean over batch * outputs * quantiles; the target of prediction row r (one
    // quantile per column) is y[r].
    kernels::launch_pinball_loss(b.loss, b.partials, b.partials_count, b.prediction, b.y, b.taus,
                                 batch * outputs, b.quantiles, s);
    kernels::launch_pinball_loss_backward(b.d_prediction, b.prediction, b.y, b.taus,
                                          batch * outputs, b.quantiles, 1.0f,
                                          nn::GradMode::Overwrite, s);
  } else {
    kernels::launch_mse_loss_fused(b.loss, b.d_prediction, b.partials, b.partials_count, b.ticket,
                                   b.prediction, b.y, batch * outputs, 1.0f,
                                   nn::GradMode::Overwrite, s);
  }
  model.backward(context, b.x, b.d_prediction, batch);
}

}  // namespace

// ---------------------------------------------------------------------------------------------

struct SupervisedTrainer::HostStaging {
  HostStaging(std::size_t x_count, std::size_t y_count, std::size_t batch)
      : x{PinnedArray<float>(x_count), PinnedArray<float>(x_count)},
        y{PinnedArray<float>(y_count), PinnedArray<float>(y_count)},
        labels{PinnedArray<std::int32_t>(batch), PinnedArray<std::int32_t>(batch)},
        starts(batch) {}
  PinnedArray<float> x[2];
  PinnedArray<float> y[2];
  PinnedArray<std::int32_t> labels[2];  // classification: the batch's trend labels
  std::vector<std::size_t> starts;
  std::vector<std::uint32_t> order;  // the host order of epoch `order_epoch`
  std::uint64_t order_epoch = ~std::uint64_t{0};
  std::vector<float> validation_losses;  // per validation batch, read back
};

ModelShape model_shape_for(const SupervisedTrainerConfig& config,
                           const data::SeriesDataset& dataset) {
  ModelShape shape;
  shape.window = dataset.window();
  shape.features = dataset.features();
  shape.outputs = dataset.outputs();
  shape.max_batch = config.batch;
  return shape;
}

SupervisedTrainer::SupervisedTrainer(const SupervisedTrainerConfig& config,
                                     const data::SeriesDataset& dataset,
                                     std::unique_ptr<SupervisedModel> model)
    : config_(config), dataset_(dataset), model_(std::move(model)) {
  const NvtxRange range("models/trainer_setup");
  constexpr const char* kCall = "SupervisedTrainer";
  validate(config_);
  (void)nn::adamw_constants(config_.adamw, kCall);  // the slab's own checks, before any work
  if (model_ == nullptr) fail(kCall, "invalid argument", "no model", __LINE__);
  const data::WindowSpec& spec = dataset_.spec();
  if (spec.window != config_.window || spec.horizon != config_.horizon ||
      spec.validation_fraction != config_.validation_fraction ||
      spec.epsilon != config_.normalization_epsilon)
    fail(kCall, "dataset mismatch",
         "the dataset has window " + std::to_string(spec.window) + ", horizon " +
             std::to_string(spec.horizon) + ", validation_fraction " +
             text(spec.validation_fraction) + ", epsilon " + text(spec.epsilon) +
             "; the config window " + std::to_string(config_.window) + ", horizon " +
             std::to_string(config_.horizon) + ", validation_fraction " +
             text(config_.validation_fraction) + ", normalization_epsilon " +
             text(config_.normalization_epsilon) + " (build it with window_spec(config))",
         __LINE__);
  const ModelShape& shape = model_->shape();
  const ModelShape want = model_shape_for(config_, dataset_);
  const auto shape_field = [&](const char* field, std::size_t got, std::size_t needed,
                               bool at_least) {
    if (at_least ? got >= needed : got == needed) return;
    fail(kCall, "model mismatch",
         std::string("model \"") + std::string(model_->name()) + "\" has shape()." + field + " = " +
             std::to_string(got) + ", the dataset and config need " + (at_least ? ">= " : "") +
             std::to_string(needed),
         __LINE__);
  };
  shape_field("window", shape.window, want.window, false);
  shape_field("features", shape.features, want.features, false);
  classifier_ = model_->loss_kind() == LossKind::CrossEntropy;
  pinball_ = model_->loss_kind() == LossKind::Pinball;
  if (pinball_) {
    taus_host_ = model_->quantiles();
    bool ordered = !taus_host_.empty();
    median_index_ = taus_host_.size();
    for (std::size_t k = 0; k < taus_host_.size(); ++k) {
      ordered = ordered && taus_host_[k] > 0.0f && taus_host_[k] < 1.0f &&
                (k == 0 || taus_host_[k] > taus_host_[k - 1]);
      if (taus_host_[k] == 0.5f) median_index_ = k;
    }
    if (!ordered || median_index_ == taus_host_.size())
      fail(kCall, "model mismatch",
           std::string("model \"") + std::string(model_->name()) + "\" has " +
               std::to_string(taus_host_.size()) +
               " quantile levels; a pinball model needs ascending levels in (0, 1), one of them "
               "0.5 (validated as the median's MSE)",
           __LINE__);
  }
  const std::size_t quantiles = pinball_ ? taus_host_.size() : 1;
  shape_field("outputs", shape.outputs,
              classifier_ ? kTrendClasses : want.outputs * quantiles, false);
  shape_field("max_batch", shape.max_batch, want.max_batch, true);
  if (!model_->slab().finalized())
    fail(kCall, "model mismatch", "the model's slab is not finalized", __LINE__);

  batch_ = config_.batch;
  outputs_ = dataset_.outputs();
  train_windows_ = dataset_.split().train_windows;
  if (batch_ > train_windows_)
    fail(kCall, "invalid config",
         "batch = " + std::to_string(batch_) + ", allowed <= " + std::to_string(train_windows_) +
             " (the training windows of " + dataset_.source() + ")",
         __LINE__);
  steps_per_epoch_ = train_windows_ / batch_;
  const std::size_t validation_windows = dataset_.split().validation_windows;
  validation_batches_ = (validation_windows + batch_ - 1) / batch_;
  shuffle_seed_ = mix_seed(config_.seed, kShuffleStream);
  if (classifier_) {
    if (config_.horizon > config_.window)
      fail(kCall, "invalid config",
           "horizon = " + std::to_string(config_.horizon) + ", allowed [1, window = " +
               std::to_string(config_.window) +
               "] for a classifier (its trend labels compare the window's last horizon rows with "
               "the next horizon rows)",
           __LINE__);
    trend_theta_ = config_.trend_threshold >= 0.0
                       ? config_.trend_threshold
                       : data::balanced_trend_threshold(dataset_, dataset_.target_columns()[0],
                                                        config_.horizon);
  }

  const std::size_t n = batch_ * outputs_;
  x_ = DeviceBuffer<float>(batch_ * dataset_.window() * dataset_.features());
  y_ = DeviceBuffer<float>(n);
  const std::size_t logits = classifier_ ? batch_ * kTrendClasses : 0;  // a classifier's outputs
  const std::size_t quantile_values = pinball_ ? n * taus_host_.size() : 0;
  prediction_ = DeviceBuffer<float>(std::max({n, logits, quantile_values}));
  d_prediction_ = DeviceBuffer<float>(std::max({n, logits, quantile_values}));
  if (pinball_) {
    taus_ = DeviceBuffer<float>(taus_host_.size());
    median_ = DeviceBuffer<float>(n);
    RESIDENT_CUDA_CHECK(cudaMemcpyAsync(taus_.data(), taus_host_.data(),
                                        taus_host_.size() * sizeof(float),
                                        cudaMemcpyHostToDevice, context_.stream()));
  }
  if (classifier_) {
    labels_ = DeviceBuffer<std::int32_t>(batch_);
    confusion_ = DeviceBuffer<unsigned long long>(kTrendClasses * kTrendClasses);
    class_summary_ = DeviceBuffer<kd::FloatPair>(2);
  }
  loss_ = DeviceBuffer<float>(1);
  loss_partials_ = DeviceBuffer<float>(
      std::max({kernels::loss_partials_count(n), kernels::mse_loss_fused_partials_count(n),
                kernels::loss_partials_count(std::max<std::size_t>(quantile_values, 1))}));
  loss_ticket_ = DeviceBuffer<unsigned int>(1);
  validation_losses_ = DeviceBuffer<float>(validation_batches_);
  permutation_ = DeviceBuffer<std::uint32_t>(train_windows_);
  keys_in_ = DeviceBuffer<std::uint32_t>(train_windows_);
  keys_out_ = DeviceBuffer<std::uint32_t>(train_windows_);
  values_in_ = DeviceBuffer<std::uint32_t>(train_windows_);
  sort_temp_ =
      DeviceBuffer<std::byte>(std::max<std::size_t>(kd::permutation_temp_bytes(train_windows_), 1));
  counters_ = DeviceBuffer<kd::EpochCounters>(1);
  best_params_ = DeviceBuffer<float>(model_->slab().total_elements());
  RESIDENT_CUDA_CHECK(
      cudaMemsetAsync(loss_ticket_.data(), 0, loss_ticket_.bytes(), context_.stream()));
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(counters_.data(), 0, counters_.bytes(), context_.stream()));
  RESIDENT_CUDA_CHECK(
      cudaMemsetAsync(permutation_.data(), 0, permutation_.bytes(), context_.stream()));
  RESIDENT_CUDA_CHECK(cudaMemcpyAsync(best_params_.data(), model_->slab().params(),
                                      best_params_.bytes(), cudaMemcpyDeviceToDevice,
                                      context_.stream()));
  context_.synchronize();
  staging_ = std::make_unique<HostStaging>(x_.size(), y_.size(), batch_);
  best_loss_ = std::numeric_limits<double>::infinity();
  patience_left_ = config_.patience;

  // Captured for either pipeline, so that a bench can time both kinds of step on one trainer.
  step_graph_.capture(context_.stream(), [this] { enqueue_train_step(); });
  validation_graph_.capture(context_.stream(), [this] { enqueue_validation(); });
}

SupervisedTrainer::~SupervisedTrainer() = default;

// ----- resident pipeline

void SupervisedTrainer::enqueue_train_step() {
  const cudaStream_t s = context_.stream();
  nn::ParamSlab& slab = model_->slab();
  kd::WindowSelection selection;
  selection.order = permutation_.data();
  selection.counter = field<std::uint64_t>(counters_, offsetof(kd::EpochCounters, steps));
  selection.counter_modulo = steps_per_epoch_;
  selection.first_start = 0;  // training window w starts at row w
  dataset_.gather(x_.data(), y_.data(), selection, batch_, s);
  if (classifier_) enqueue_labels(selection, batch_);
  enqueue_loss_and_backward(
      *model_, context_,
      {x_.data(), y_.data(), prediction_.data(), d_prediction_.data(), loss_.data(),
       loss_partials_.data(), loss_partials_.size(), loss_ticket_.data(), taus_.data(),
       pinball_ ? taus_host_.size() : 0},
      batch_, outputs_, classifier_ ? labels_.data() : nullptr);
  slab.clip_and_adamw_step(config_.max_grad_norm, config_.adamw, s);
  kd::launch_accumulate_step_loss(counters_.data(), loss_.data(), s);
}

void SupervisedTrainer::enqueue_validation() {
  const cudaStream_t s = context_.stream();
  const std::size_t windows = dataset_.split().validation_windows;
  if (classifier_)
    RESIDENT_CUDA_CHECK(cudaMemsetAsync(confusion_.data(), 0, confusion_.bytes(), s));
  for (std::size_t b = 0; b < validation_batches_; ++b) {
    const std::size_t first = b * batch_;
    const std::size_t rows = std::min(batch_, windows - first);
    kd::WindowSelection selection;
    selection.offset = first;
    selection.first_start = dataset_.split().validation_first;
    dataset_.gather(x_.data(), y_.data(), selection, rows, s);
    if (classifier_) enqueue_labels(selection, rows);
    model_->forward(context_, x_.data(), rows, prediction_.data());
    if (classifier_)
      enqueue_class_validation(validation_losses_.data() + b, rows);
    else
      kernels::launch_mse_loss(validation_losses_.data() + b, loss_partials_.data(),
                               loss_partials_.size(), validated_prediction(rows), y_.data(),
                               rows * outputs_, s);
  }
}

const float* SupervisedTrainer::validated_prediction(std::size_t rows) {
  if (!pinball_) return prediction_.data();
  // The median column of [rows * outputs, quantiles] into median_ (a strided device copy).
  const std::size_t k = taus_host_.size();
  RESIDENT_CUDA_CHECK(cudaMemcpy2DAsync(median_.data(), sizeof(float),
                                        prediction_.data() + median_index_, k * sizeof(float),
                                        sizeof(float), rows * outputs_, cudaMemcpyDeviceToDevice,
                                        context_.stream()));
  return median_.data();
}

void SupervisedTrainer::enqueue_labels(const kd::WindowSelection& selection, std::size_t rows) {
  kd::TrendRule rule;
  rule.column = dataset_.target_columns()[0];
  rule.smoothing = config_.horizon;
  rule.theta = trend_theta_;
  kd::launch_trend_labels(labels_.data(), dataset_.layout(), selection, rule, rows,
                          context_.stream());
}

void SupervisedTrainer::enqueue_class_validation(float* loss, std::size_t rows) {
  const cudaStream_t s = context_.stream();
  kd::launch_cross_entropy_loss(loss, nullptr, prediction_.data(), labels_.data(), rows,
                                kTrendClasses, 1.0f, s);
  kd::launch_class_confusion(confusion_.data(), prediction_.data(), labels_.data(), rows,
                             kTrendClasses, s);
}

void SupervisedTrainer::run_resident_epoch(double* train_loss, double* validation_loss) {
  const cudaStream_t s = context_.stream();
  const kd::PermutationScratch scratch{keys_in_.data(), keys_out_.data(), values_in_.data(),
                                       sort_temp_.data(), sort_temp_.size()};
  // The step counter and the loss sum start at 0 (resident_step() calls may have moved them).
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(counters_.data(), 0, offsetof(kd::EpochCounters, epoch), s));
  kd::launch_random_permutation(permutation_.data(), scratch, train_windows_, shuffle_seed_,
                                field<std::uint64_t>(counters_, offsetof(kd::EpochCounters, epoch)),
                                1, s);
  {
    const NvtxRange steps("models/train_steps");
    for (std::size_t k = 0; k < steps_per_epoch_; ++k) step_graph_.launch(s);
  }
  validation_graph_.launch(s);
  kd::launch_finish_epoch(counters_.data(), validation_losses_.data(), validation_batches_, batch_,
                          dataset_.split().validation_windows, s);
  if (classifier_) {
    kd::launch_class_epoch_summary(class_summary_.data(), counters_.data(), confusion_.data(),
                                   kTrendClasses, s);
    class_losses_readback_.enqueue(class_summary_.data(), s);
    class_scores_readback_.enqueue(class_summary_.data() + 1, s);
    const kd::FloatPair losses = class_losses_readback_.wait();
    const kd::FloatPair scores = class_scores_readback_.wait();
    *train_loss = losses.first;
    *validation_loss = losses.second;
    last_macro_f1_ = scores.first;
    last_accuracy_ = scores.second;
    return;
  }
  train_readback_.enqueue(field<double>(counters_, offsetof(kd::EpochCounters, train_mean)), s);
  validation_readback_.enqueue(
      field<double>(counters_, offsetof(kd::EpochCounters, validation_mean)), s);
  *train_loss = train_readback_.wait();
  *validation_loss = validation_readback_.wait();
}

void SupervisedTrainer::resident_step() { step_graph_.launch(context_.stream()); }

// ----- host-fed pipeline

std::vector<std::uint32_t> SupervisedTrainer::host_order(std::uint64_t epoch) const {
  return data::host_random_permutation(train_windows_, shuffle_seed_, epoch);
}

void SupervisedTrainer::upload_batch(std::size_t slot, std::size_t batch) {
  const cudaStream_t s = context_.stream();
  const std::size_t x_count = batch * dataset_.window() * dataset_.features();
  RESIDENT_CUDA_CHECK(cudaMemcpyAsync(x_.data(), staging_->x[slot].data(), x_count * sizeof(float),
                                      cudaMemcpyHostToDevice, s));
  RESIDENT_CUDA_CHECK(cudaMemcpyAsync(y_.data(), staging_->y[slot].data(),
                                      batch * outputs_ * sizeof(float), cudaMemcpyHostToDevice, s));
  if (classifier_)
    RESIDENT_CUDA_CHECK(cudaMemcpyAsync(labels_.data(), staging_->labels[slot].data(),
                                        batch * sizeof(std::int32_t), cudaMemcpyHostToDevice, s));
}

void SupervisedTrainer::run_host_fed_epoch(double* train_loss, double* validation_loss) {
  const cudaStream_t s = context_.stream();
  HostStaging& h = *staging_;
  if (h.order_epoch != epochs_done_) {
    h.order = host_order(epochs_done_);  // the shuffle, on the host like a data loader's
    h.order_epoch = epochs_done_;
  }
  const auto assemble_train = [&](std::size_t slot, std::size_t k) {
    for (std::size_t i = 0; i < batch_; ++i)
      h.starts[i] = dataset_.train_start(h.order[k * batch_ + i]);
    dataset_.gather_host(h.x[slot].data(), h.y[slot].data(), h.starts.data(), batch_);
    if (classifier_) assemble_labels(slot, batch_);
  };
  nn::ParamSlab& slab = model_->slab();
  double sum = 0.0;
  assemble_train(0, 0);
  for (std::size_t k = 0; k < steps_per_epoch_; ++k) {
    const std::size_t slot = k % 2;
    upload_batch(slot, batch_);
    enqueue_loss_and_backward(
        *model_, context_,
        {x_.data(), y_.data(), prediction_.data(), d_prediction_.data(), loss_.data(),
         loss_partials_.data(), loss_partials_.size(), loss_ticket_.data(), taus_.data(),
         pinball_ ? taus_host_.size() : 0},
        batch_, outputs_, classifier_ ? labels_.data() : nullptr);
    slab.clip_and_adamw_step(config_.max_grad_norm, config_.adamw, s);
    step_readback_.enqueue(loss_.data(), s);
    // The next batch is assembled while the GPU runs this step; its slot's last upload (step
    // k - 1) finished before that step's loss arrived.
    if (k + 1 < steps_per_epoch_) assemble_train(1 - slot, k + 1);
    sum = sum + static_cast<double>(step_readback_.wait());  // loss.item()
  }
  *train_loss = steps_per_epoch_ == 0 ? std::numeric_limits<double>::quiet_NaN()
                                      : sum / static_cast<double>(steps_per_epoch_);

  const std::size_t windows = dataset_.split().validation_windows;
  const auto assemble_validation = [&](std::size_t slot, std::size_t b) {
    const std::size_t first = b * batch_, rows = std::min(batch_, windows - first);
    for (std::size_t i = 0; i < rows; ++i) h.starts[i] = dataset_.validation_start(first + i);
    dataset_.gather_host(h.x[slot].data(), h.y[slot].data(), h.starts.data(), rows);
    if (classifier_) assemble_labels(slot, rows);
    return rows;
  };
  h.validation_losses.assign(validation_batches_, 0.0f);
  if (classifier_)
    RESIDENT_CUDA_CHECK(cudaMemsetAsync(confusion_.data(), 0, confusion_.bytes(), s));
  std::size_t rows = assemble_validation(0, 0);
  for (std::size_t b = 0; b < validation_batches_; ++b) {
    const std::size_t slot = b % 2;
    upload_batch(slot, rows);
    model_->forward(context_, x_.data(), rows, prediction_.data());
    if (classifier_)
      enqueue_class_validation(loss_.data(), rows);
    else
      kernels::launch_mse_loss(loss_.data(), loss_partials_.data(), loss_partials_.size(),
                               validated_prediction(rows), y_.data(), rows * outputs_, s);
    step_readback_.enqueue(loss_.data(), s);
    if (b + 1 < validation_batches_) rows = assemble_validation(1 - slot, b + 1);
    h.validation_losses[b] = step_readback_.wait();
  }
  *validation_loss = validation_mean_host(h.validation_losses, batch_, windows);
  if (classifier_) {
    // The resident epoch's float pairs: the same values rounded the same way.
    *train_loss = static_cast<float>(*train_loss);
    *validation_loss = static_cast<float>(*validation_loss);
    kd::launch_class_epoch_summary(class_summary_.data(), nullptr, confusion_.data(),
                                   kTrendClasses, s);
    class_scores_readback_.enqueue(class_summary_.data() + 1, s);
    const kd::FloatPair scores = class_scores_readback_.wait();
    last_macro_f1_ = scores.first;
    last_accuracy_ = scores.second;
  }
}

void SupervisedTrainer::assemble_labels(std::size_t slot, std::size_t rows) {
  data::host_trend_labels(staging_->labels[slot].data(), dataset_, staging_->starts.data(), rows,
                          dataset_.target_columns()[0], config_.horizon, trend_theta_);
}

float SupervisedTrainer::host_fed_step(std::size_t index) {
  const cudaStream_t s = context_.stream();
  HostStaging& h = *staging_;
  if (h.order_epoch != epochs_done_) {
    h.order = host_order(epochs_done_);
    h.order_epoch = epochs_done_;
  }
  const std::size_t k = index % steps_per_epoch_;
  for (std::size_t i = 0; i < batch_; ++i)
    h.starts[i] = dataset_.train_start(h.order[k * batch_ + i]);
  dataset_.gather_host(h.x[0].data(), h.y[0].data(), h.starts.data(), batch_);
  if (classifier_) assemble_labels(0, batch_);
  upload_batch(0, batch_);
  nn::ParamSlab& slab = model_->slab();
  enqueue_loss_and_backward(
      *model_, context_,
      {x_.data(), y_.data(), prediction_.data(), d_prediction_.data(), loss_.data(),
       loss_partials_.data(), loss_partials_.size(), loss_ticket_.data(), taus_.data(),
       pinball_ ? taus_host_.size() : 0},
      batch_, outputs_, classifier_ ? labels_.data() : nullptr);
  slab.clip_and_adamw_step(config_.max_grad_norm, config_.adamw, s);
  step_readback_.enqueue(loss_.data(), s);
  return step_readback_.wait();
}

// ----- epochs

EpochResult SupervisedTrainer::train_epoch() {
  const NvtxRange range("models/train_epoch");
  const auto start = std::chrono::steady_clock::now();
  EpochResult r;
  if (config_.pipeline == TrainerPipeline::Resident)
    run_resident_epoch(&r.train_loss, &r.validation_loss);
  else
    run_host_fed_epoch(&r.train_loss, &r.validation_loss);
  if (classifier_) {
    r.validation_accuracy = last_accuracy_;
    r.validation_macro_f1 = last_macro_f1_;
  }
  ++epochs_done_;
  r.epoch = epochs_done_;
  r.steps = steps_per_epoch_;
  if (!std::isfinite(r.train_loss) || !std::isfinite(r.validation_loss))
    fail("SupervisedTrainer::train_epoch", "non-finite loss",
         "epoch " + std::to_string(r.epoch) + " of model \"" + std::string(model_->name()) +
             "\": train loss " + text(r.train_loss) + ", validation loss " +
             text(r.validation_loss) + "; lower adamw.lr = " + text(config_.adamw.lr) +
             " or max_grad_norm = " + text(config_.max_grad_norm),
         __LINE__);
  if (r.validation_loss < best_loss_) {
    r.improved = true;
    has_best_ = true;
    best_loss_ = r.validation_loss;
    best_epoch_ = r.epoch;
    patience_left_ = config_.patience;
    RESIDENT_CUDA_CHECK(cudaMemcpyAsync(best_params_.data(), model_->slab().params(),
                                        best_params_.bytes(), cudaMemcpyDeviceToDevice,
                                        context_.stream()));
  } else {
    patience_left_ -= std::min<std::size_t>(patience_left_, 1);
    if (patience_left_ == 0) stopped_ = true;
  }
  r.stop = stopped_ || epochs_done_ >= config_.epochs;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.windows_per_second = r.seconds > 0.0 ? static_cast<double>(r.steps * batch_) / r.seconds : 0.0;
  return r;
}

std::vector<EpochResult> SupervisedTrainer::fit(
    const std::function<void(const EpochResult&)>& on_epoch) {
  std::vector<EpochResult> results;
  while (!stopped_ && epochs_done_ < config_.epochs) {
    results.push_back(train_epoch());
    if (on_epoch) on_epoch(results.back());
  }
  restore_best();
  return results;
}

void SupervisedTrainer::restore_best() {
  if (!has_best_) return;
  RESIDENT_CUDA_CHECK(cudaMemcpyAsync(model_->slab().params(), best_params_.data(),
                                      best_params_.bytes(), cudaMemcpyDeviceToDevice,
                                      context_.stream()));
  context_.synchronize();
}

// ----- checkpoints

void SupervisedTrainer::save_checkpoint(const std::filesystem::path& path) {
  const NvtxRange range("models/trainer_save");
  const cudaStream_t s = context_.stream();
  nn::ParamSlab& slab = model_->slab();
  context_.synchronize();

  SectionWriter fingerprint;
  const Fingerprint fields = fingerprint_of(*model_, dataset_);
  fingerprint.put<std::uint64_t>(fields.size());
  for (const auto& [field, value] : fields) fingerprint.put_string(field).put_string(value);

  const std::vector<float> params = slab.download(nn::SlabPart::Params, s);
  const std::vector<float> m = slab.download(nn::SlabPart::AdamM, s);
  const std::vector<float> v = slab.download(nn::SlabPart::AdamV, s);
  SectionWriter slab_section;
  slab_section.put<std::uint64_t>(slab.read_step(s))
      .put_array<float>(params)
      .put_array<float>(m)
      .put_array<float>(v);

  const std::vector<float> best = best_params_.download();
  SectionWriter best_section;
  best_section.put_array<float>(best);

  SectionWriter trainer;
  trainer.put<std::uint64_t>(epochs_done_)
      .put<std::uint8_t>(has_best_ ? 1 : 0)
      .put<double>(best_loss_)
      .put<std::uint64_t>(best_epoch_)
      .put<std::uint64_t>(patience_left_)
      .put<std::uint8_t>(stopped_ ? 1 : 0)
      .put<std::uint64_t>(shuffle_seed_)
      .put<std::uint64_t>(epochs_done_);  // the shuffle's Philox draw counter (device epoch)

  SectionWriter normalization;
  normalization.put_array<double>(dataset_.host_mean()).put_array<double>(dataset_.host_stddev());

  CheckpointWriter out(kCheckpointKind);
  out.add("fingerprint", fingerprint.take());
  out.add("slab", slab_section.take());
  out.add("best", best_section.take());
  out.add("trainer", trainer.take());
  out.add("normalization", normalization.take());
  out.write(path);
}

void SupervisedTrainer::load_checkpoint(const std::filesystem::path& path) {
  const NvtxRange range("models/trainer_load");
  const std::string call = "SupervisedTrainer::load_checkpoint(\"" + path.string() + "\")";
  const CheckpointFile file = CheckpointFile::read(path, kCheckpointKind);

  // Everything is read and checked on the host before the device changes.
  SectionReader f = file.reader("fingerprint");
  const Fingerprint mine = fingerprint_of(*model_, dataset_);
  const auto count = f.get<std::uint64_t>("field count");
  Fingerprint theirs;
  for (std::uint64_t i = 0; i < count; ++i) {
    std::string field = f.get_string("field");
    std::string value = f.get_string("value");
    theirs.emplace_back(std::move(field), std::move(value));
  }
  f.finish();
  for (const auto& [field, value] : mine) {
    const auto found =
        std::find_if(theirs.begin(), theirs.end(), [&](const auto& p) { return p.first == field; });
    if (found == theirs.end())
      fail(call, "checkpoint mismatch",
           "the checkpoint's fingerprint has no field \"" + field + "\"", __LINE__);
    if (found->second != value)
      fail(call, "checkpoint mismatch",
           field + ": the checkpoint holds \"" + found->second + "\", this trainer has \"" + value +
               "\"",
           __LINE__);
  }

  nn::ParamSlab& slab = model_->slab();
  const std::size_t total = slab.total_elements();
  SectionReader sr = file.reader("slab");
  const auto step = sr.get<std::uint64_t>("step");
  const std::vector<float> params = sr.get_array<float>("params", total);
  const std::vector<float> m = sr.get_array<float>("m", total);
  const std::vector<float> v = sr.get_array<float>("v", total);
  sr.finish();
  SectionReader br = file.reader("best");
  const std::vector<float> best = br.get_array<float>("best params", total);
  br.finish();
  SectionReader tr = file.reader("trainer");
  const auto epochs = tr.get<std::uint64_t>("epochs done");
  const auto has_best = tr.get<std::uint8_t>("has best");
  const auto best_loss = tr.get<double>("best loss");
  const auto best_epoch = tr.get<std::uint64_t>("best epoch");
  const auto patience_left = tr.get<std::uint64_t>("patience left");
  const auto stopped = tr.get<std::uint8_t>("stopped");
  const auto shuffle_seed = tr.get<std::uint64_t>("shuffle seed");
  const auto draw_counter = tr.get<std::uint64_t>("shuffle draw counter");
  tr.finish();
  if (shuffle_seed != shuffle_seed_)
    fail(call, "checkpoint mismatch",
         "seed: the checkpoint's shuffle seed differs from this trainer's (config.seed = " +
             std::to_string(config_.seed) + ")",
         __LINE__);
  (void)file.section("normalization");  // informational (present in every checkpoint)

  const cudaStream_t s = context_.stream();
  slab.upload(nn::SlabPart::Params, params, s);
  slab.upload(nn::SlabPart::AdamM, m, s);
  slab.upload(nn::SlabPart::AdamV, v, s);
  const nn::ParamSlab::OptimizerViews views = slab.optimizer_views();
  const float one = 1.0f;
  RESIDENT_CUDA_CHECK(cudaMemcpyAsync(views.step, &step, sizeof step, cudaMemcpyHostToDevice, s));
  RESIDENT_CUDA_CHECK(
      cudaMemcpyAsync(views.clip_scale, &one, sizeof one, cudaMemcpyHostToDevice, s));
  RESIDENT_CUDA_CHECK(cudaMemcpyAsync(best_params_.data(), best.data(), best_params_.bytes(),
                                      cudaMemcpyHostToDevice, s));
  kd::EpochCounters counters{};
  counters.epoch = draw_counter;
  RESIDENT_CUDA_CHECK(
      cudaMemcpyAsync(counters_.data(), &counters, sizeof counters, cudaMemcpyHostToDevice, s));
  context_.synchronize();  // the host sources must outlive the copies
  epochs_done_ = static_cast<std::size_t>(epochs);
  has_best_ = has_best != 0;
  best_loss_ = best_loss;
  best_epoch_ = static_cast<std::size_t>(best_epoch);
  patience_left_ = static_cast<std::size_t>(patience_left);
  stopped_ = stopped != 0;
  staging_->order_epoch = ~std::uint64_t{0};
}

std::unique_ptr<SupervisedTrainer> make_supervised_trainer(std::string_view model_name,
                                                           const SupervisedTrainerConfig& config,
                                                           const data::SeriesDataset& dataset) {
  validate(config);
  return std::make_unique<SupervisedTrainer>(
      config, dataset,
      make_supervised_model(model_name, model_shape_for(config, dataset), config.seed));
}

}  // namespace resident::models
