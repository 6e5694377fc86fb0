// TFT trained through the supervised trainer's pinball path (on a GPU; skips without one), on the
// synthetic series of the MSE learning test (tests/models/trainer/supervised_learning_test.cu,
// which also holds TFT's median to 0.8x the naive predictor's validation MSE):
//   - the quantiles come out ordered on held-out data: after fit() (seed 1, 2, 3), over every
//     validation window q0.1 <= q0.5 <= q0.9 for at least 99% of the windows, and the empirical
//     coverage is roughly right (the share of targets below q0.1 in [0.02, 0.25], below q0.9 in
//     [0.75, 0.98]); negative control: the same check rejects the columns swapped;
//   - the resident epoch keeps SupervisedEpochContract under the CUPTI audit (2 scalar D2H, no
//     bulk D2H, no H2D, 2 waits per epoch), the median's strided copy included.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "audit/testing.h"
#include "audit/tracer.h"
#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "lib/data/series_dataset.h"
#include "lib/models/supervised_trainer.h"
#include "tests/models/support/learning_setup.h"
#include "tests/support/gpu.h"

namespace {

using namespace resident;
using namespace resident::models;

// The learning tests' config (tests/models/support/learning_setup.h) at lr 2e-3.
SupervisedTrainerConfig learning_config(std::uint64_t seed) {
  return test::learning_config(seed, 2e-3);
}

using test::learning_series;

struct HeldOut {
  std::vector<float> predictions;  // [windows * outputs, quantiles]
  std::vector<float> targets;      // [windows * outputs]
};

// Every validation window's predictions, in batches of the trainer's batch.
HeldOut predict_validation(SupervisedTrainer& trainer) {
  const data::SeriesDataset& d = trainer.dataset();
  SupervisedModel& model = trainer.model();
  const std::size_t batch = trainer.config().batch, n = d.split().validation_windows;
  const std::size_t x_count = batch * d.window() * d.features(), outputs = d.outputs();
  const std::size_t k = model.shape().outputs / outputs;
  std::vector<float> x(x_count), y(batch * outputs);
  DeviceBuffer<float> dx(x_count), dpred(batch * model.shape().outputs);
  HeldOut out;
  for (std::size_t first = 0; first < n; first += batch) {
    const std::size_t rows = std::min(batch, n - first);
    std::vector<std::size_t> starts(rows);
    for (std::size_t i = 0; i < rows; ++i) starts[i] = d.validation_start(first + i);
    d.gather_host(x.data(), y.data(), starts.data(), rows);
    dx.upload(x);
    model.forward(trainer.context(), dx.data(), rows, dpred.data());
    trainer.context().synchronize();
    const std::vector<float> p = dpred.download();
    out.predictions.insert(out.predictions.end(), p.begin(),
                           p.begin() + static_cast<std::ptrdiff_t>(rows * outputs * k));
    out.targets.insert(out.targets.end(), y.begin(),
                       y.begin() + static_cast<std::ptrdiff_t>(rows * outputs));
  }
  return out;
}

struct QuantileCheck {
  double ordered = 0.0, below_low = 0.0, below_high = 0.0;
};
// Columns low, mid, high of [rows, k].
QuantileCheck check_quantiles(const HeldOut& h, std::size_t k, std::size_t low, std::size_t mid,
                              std::size_t high) {
  QuantileCheck c;
  const std::size_t rows = h.targets.size();
  for (std::size_t r = 0; r < rows; ++r) {
    const float* p = &h.predictions[r * k];
    c.ordered += (p[low] <= p[mid] && p[mid] <= p[high]) ? 1.0 : 0.0;
    c.below_low += h.targets[r] < p[low] ? 1.0 : 0.0;
    c.below_high += h.targets[r] < p[high] ? 1.0 : 0.0;
  }
  c.ordered /= static_cast<double>(rows);
  c.below_low /= static_cast<double>(rows);
  c.below_high /= static_cast<double>(rows);
  return c;
}

class TftQuantiles : public testing::TestWithParam<std::uint64_t> {};

TEST_P(TftQuantiles, OrderedOnHeldOutData) {
  RESIDENT_REQUIRE_GPU();
  const std::uint64_t seed = GetParam();
  const SupervisedTrainerConfig config = learning_config(seed);
  Stream stream;
  data::SeriesDataset dataset(learning_series(seed), window_spec(config), stream.get());
  auto trainer = make_supervised_trainer("tft", config, dataset);
  const std::vector<float> levels = trainer->model().quantiles();
  ASSERT_EQ(levels, (std::vector<float>{0.1f, 0.5f, 0.9f}));
  for (const EpochResult& r : trainer->fit())
    std::printf("tft seed %llu epoch %zu: train pinball %.4f, validation median MSE %.4f%s\n",
                static_cast<unsigned long long>(seed), r.epoch, r.train_loss, r.validation_loss,
                r.improved ? " best" : "");
  const HeldOut held = predict_validation(*trainer);
  const QuantileCheck c = check_quantiles(held, 3, 0, 1, 2);
  std::printf("tft seed %llu: %zu held-out windows, ordered %.4f, below q0.1 %.3f, below q0.9 "
              "%.3f\n",
              static_cast<unsigned long long>(seed), held.targets.size(), c.ordered, c.below_low,
              c.below_high);
  EXPECT_GE(c.ordered, 0.99);
  EXPECT_GE(c.below_low, 0.02);
  EXPECT_LE(c.below_low, 0.25);
  EXPECT_GE(c.below_high, 0.75);
  EXPECT_LE(c.below_high, 0.98);
  // Negative control: the check can fail (q0.9 and q0.1 swapped).
  EXPECT_LT(check_quantiles(held, 3, 2, 1, 0).ordered, 0.5);
}

INSTANTIATE_TEST_SUITE_P(Seeds, TftQuantiles, testing::Values(1u, 2u, 3u),
                         [](const testing::TestParamInfo<std::uint64_t>& param_info) {
                           return "seed" + std::to_string(param_info.param);
                         });

TEST(TftTrainer, ResidentEpochKeepsItsContract) {
  RESIDENT_REQUIRE_GPU();
  SupervisedTrainerConfig config = learning_config(1);
  config.epochs = 100;
  Stream stream;
  data::SeriesDataset dataset(learning_series(1), window_spec(config), stream.get());
  auto trainer = make_supervised_trainer("tft", config, dataset);
  trainer->train_epoch();  // warm-up (lazy module loading, cuBLAS)
  auto& tracer = audit::Tracer::instance();
  tracer.start();
  tracer.reset();
  {
    const audit::Phase phase("supervised/epoch");
    for (int e = 0; e < 2; ++e) trainer->train_epoch();
  }
  const audit::AuditReport report = tracer.snapshot();
  tracer.stop();
  RESIDENT_EXPECT_WITHIN_CONTRACT(
      report, (std::vector<audit::TransferContract>{
                  {.phase = "supervised/epoch",
                   .max_d2h_scalar = 2 * SupervisedEpochContract::max_d2h_scalar,
                   .max_d2h_bulk = SupervisedEpochContract::max_d2h_bulk,
                   .max_h2d = SupervisedEpochContract::max_h2d,
                   .max_syncs = 2 * SupervisedEpochContract::max_syncs}}));
}

}  // namespace
