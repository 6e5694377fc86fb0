// TLOB learns the trend (on a GPU; skips without one): on the synthetic series (its "lead" column
// reveals the next shock of the target one step early, so the next step's trend is predictable
// from the window), the trainer's classification path with balanced trend labels (horizon 1) for
// seeds 1, 2, 3: the best validation macro F1 over the epochs is at least the majority-class
// baseline's macro F1 on the same validation labels plus kMargin = 0.25 (the baseline predicts
// the most frequent validation class for every window: macro F1 = 2p / (1 + p) / 3, about 0.17
// for balanced classes; a uniformly random guesser scores about 0.33). Negative control: the
// same trainer with lr = 0 misses the bar. The labels of the baseline are computed on the host
// (lib/data/trend_threshold.h) with the trainer's threshold; the resident epoch's accuracy and
// macro F1 are the device's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "lib/core/stream.h"
#include "lib/data/series_dataset.h"
#include "lib/data/trend_threshold.h"
#include "lib/models/supervised_trainer.h"
#include "tests/models/support/learning_setup.h"
#include "tests/support/gpu.h"

namespace {

using namespace resident;
using namespace resident::models;

constexpr double kMargin = 0.25;

// The learning tests' config (tests/models/support/learning_setup.h) at lr 1e-3.
SupervisedTrainerConfig learning_config(std::uint64_t seed) {
  return test::learning_config(seed, 1e-3);
}

using test::learning_series;

// Macro F1 of predicting the most frequent validation class everywhere.
double majority_macro_f1(const SupervisedTrainer& trainer) {
  const data::SeriesDataset& d = trainer.dataset();
  const std::size_t n = d.split().validation_windows;
  std::vector<std::size_t> starts(n);
  for (std::size_t w = 0; w < n; ++w) starts[w] = d.validation_start(w);
  std::vector<std::int32_t> labels(n);
  data::host_trend_labels(labels.data(), d, starts.data(), n, d.target_columns()[0],
                          trainer.config().horizon, trainer.trend_threshold());
  std::size_t counts[3] = {0, 0, 0};
  for (const std::int32_t l : labels) ++counts[l];
  const double p = static_cast<double>(*std::max_element(counts, counts + 3)) /
                   static_cast<double>(n);
  std::printf("validation labels: down %zu, stationary %zu, up %zu (theta %.4f)\n", counts[0],
              counts[1], counts[2], trainer.trend_threshold());
  return 2.0 * p / (1.0 + p) / 3.0;
}

class TlobLearning : public testing::TestWithParam<std::uint64_t> {};

TEST_P(TlobLearning, MacroF1BeatsTheMajorityBaseline) {
  RESIDENT_REQUIRE_GPU();
  const std::uint64_t seed = GetParam();
  const SupervisedTrainerConfig config = learning_config(seed);
  Stream stream;
  data::SeriesDataset dataset(learning_series(seed), window_spec(config), stream.get());
  auto trainer = make_supervised_trainer("tlob", config, dataset);
  ASSERT_TRUE(trainer->classifies());
  const double baseline = majority_macro_f1(*trainer);
  double best = 0.0;
  trainer->fit([&](const EpochResult& r) {
    best = std::max(best, r.validation_macro_f1);
    std::printf("tlob seed %llu epoch %zu: train CE %.4f, validation CE %.4f, accuracy %.3f, "
                "macro F1 %.3f%s\n",
                static_cast<unsigned long long>(seed), r.epoch, r.train_loss, r.validation_loss,
                r.validation_accuracy, r.validation_macro_f1, r.improved ? " best" : "");
  });
  std::printf("tlob seed %llu: best macro F1 %.3f, majority baseline %.3f, bar %.3f\n",
              static_cast<unsigned long long>(seed), best, baseline, baseline + kMargin);
  EXPECT_GE(best, baseline + kMargin);
}

TEST(TlobLearningControl, UntrainedModelMissesTheBar) {
  RESIDENT_REQUIRE_GPU();
  SupervisedTrainerConfig config = learning_config(1);
  config.adamw.lr = 0.0;
  config.epochs = 1;
  Stream stream;
  data::SeriesDataset dataset(learning_series(1), window_spec(config), stream.get());
  auto trainer = make_supervised_trainer("tlob", config, dataset);
  const double baseline = majority_macro_f1(*trainer);
  const EpochResult r = trainer->train_epoch();
  std::printf("tlob untrained: macro F1 %.3f, accuracy %.3f, bar %.3f\n", r.validation_macro_f1,
              r.validation_accuracy, baseline + kMargin);
  EXPECT_LT(r.validation_macro_f1, baseline + kMargin);
}

INSTANTIATE_TEST_SUITE_P(Seeds, TlobLearning, testing::Values(1u, 2u, 3u),
                         [](const testing::TestParamInfo<std::uint64_t>& param_info) {
                           return "seed" + std::to_string(param_info.param);
                         });

}  // namespace
