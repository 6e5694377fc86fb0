// The learning tests' common setup (tests/models/trainer/supervised_learning_test.cu,
// tests/models/tlob/tlob_learning_test.cu, tests/models/tft/tft_learning_test.cu). Contracts:
//   - learning_config(seed, lr): the trainer config every learning test trains with: batch 64,
//     12 epochs, patience 4, AdamW lr `lr`, window 32, horizon 1, validation fraction 0.2, `seed`;
//   - learning_series(seed): the synthetic series they learn (lib/data/series_source.h: 8000
//     steps, 6 features, `seed`).
// A test that needs other values changes the returned config (e.g. lr 0 for a negative control).
#pragma once

#include <cstdint>

#include "lib/data/series_source.h"
#include "lib/models/supervised_trainer.h"

namespace resident::test {

inline models::SupervisedTrainerConfig learning_config(std::uint64_t seed, double lr) {
  models::SupervisedTrainerConfig c;
  c.batch = 64;
  c.epochs = 12;
  c.patience = 4;
  c.adamw.lr = lr;
  c.seed = seed;
  c.window = 32;
  c.horizon = 1;
  c.validation_fraction = 0.2;
  return c;
}

inline data::HostSeries learning_series(std::uint64_t seed) {
  data::SyntheticSeriesConfig s;
  s.seed = seed;
  s.steps = 8000;
  s.features = 6;
  return data::make_synthetic_series(s);
}

}  // namespace resident::test
