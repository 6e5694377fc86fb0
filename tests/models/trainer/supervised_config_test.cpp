// SupervisedTrainerConfig validation (CPU, runs in CI): every invalid field is named with its
// value and allowed range in one error; the defaults are valid; window_spec carries the fields.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "kernels/core/error.h"
#include "lib/models/supervised_config.h"

namespace {

using namespace resident;
using namespace resident::models;

TEST(SupervisedTrainerConfig, DefaultsAreValid) {
  EXPECT_NO_THROW(validate(SupervisedTrainerConfig{}));
  SupervisedTrainerConfig c;
  c.window = 32;
  c.horizon = 4;
  c.validation_fraction = 0.3;
  c.normalization_epsilon = 1e-6;
  const data::WindowSpec spec = window_spec(c);
  EXPECT_EQ(spec.window, 32u);
  EXPECT_EQ(spec.horizon, 4u);
  EXPECT_EQ(spec.validation_fraction, 0.3);
  EXPECT_EQ(spec.epsilon, 1e-6);
  EXPECT_STREQ(pipeline_name(TrainerPipeline::HostFed), "host-fed");
}

TEST(SupervisedTrainerConfig, EveryInvalidFieldIsNamed) {
  SupervisedTrainerConfig c;
  c.batch = 0;
  c.epochs = 0;
  c.patience = 0;
  c.adamw.lr = std::nan("");
  c.adamw.beta1 = 1.0;
  c.adamw.beta2 = -0.5;
  c.adamw.eps = 0.0;
  c.adamw.weight_decay = -1.0;
  c.max_grad_norm = 0.0f;
  c.validation_fraction = 0.0;
  c.window = 0;
  c.horizon = 5000;
  c.normalization_epsilon = -1.0;
  try {
    validate(c);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.error_name(), "invalid SupervisedTrainerConfig");
    const std::string what = e.what();
    for (const char* part :
         {"batch = 0, allowed [1, 65536]", "epochs = 0, allowed [1, 1000000]",
          "patience = 0, allowed [1, 1000000]", "adamw.lr = nan, allowed [0, inf), finite",
          "adamw.beta1 = 1, allowed [0, 1)", "adamw.beta2 = -0.5, allowed [0, 1)",
          "adamw.eps = 0, allowed (0, inf), finite",
          "adamw.weight_decay = -1, allowed [0, inf), finite",
          "max_grad_norm = 0, allowed (0, inf]", "validation_fraction = 0, allowed (0, 1)",
          "window = 0, allowed [1, 65536]", "horizon = 5000, allowed [1, 4096]",
          "normalization_epsilon = -1, allowed (0, inf), finite"})
      EXPECT_NE(what.find(part), std::string::npos) << "missing \"" << part << "\" in " << what;
  }
}

}  // namespace
