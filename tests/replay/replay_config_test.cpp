// ReplayConfig validation (every invalid field named with its value and allowed range),
// validate_batch, and the linear beta schedule.
#include "lib/replay/replay_config.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "kernels/core/error.h"

namespace {

using resident::beta_at;
using resident::Error;
using resident::ReplayConfig;
using resident::ReplayPriorityMode;
using resident::ReplaySampling;
using resident::validate;
using resident::validate_batch;

ReplayConfig valid_config() {
  ReplayConfig config;
  config.capacity = 1000;
  config.state_dim = 4;
  return config;
}

// The message of the Error that validate(config) throws; fails the test if it does not throw.
std::string validation_message(const ReplayConfig& config) {
  try {
    validate(config);
  } catch (const Error& e) {
    EXPECT_EQ(e.file(), "lib/replay/replay_config.cpp");
    return e.what();
  }
  ADD_FAILURE() << "validate did not throw";
  return {};
}

TEST(ReplayConfig, DefaultsAreValidOnceCapacityAndStateDimAreSet) {
  EXPECT_NO_THROW(validate(valid_config()));
  EXPECT_NE(validation_message(ReplayConfig{}).find("capacity = 0"), std::string::npos);
}

TEST(ReplayConfig, EachInvalidFieldIsNamedWithValueAndRange) {
  struct Case {
    const char* what;
    std::function<void(ReplayConfig&)> break_it;
    std::vector<std::string> expected;  // substrings of the message
  };
  const double nan = NAN;
  const double inf = INFINITY;
  const std::vector<Case> cases = {
      {"capacity 0", [](ReplayConfig& c) { c.capacity = 0; }, {"capacity = 0", "[1, 2147483647]"}},
      {"capacity 2^31",
       [](ReplayConfig& c) { c.capacity = 2147483648u; },
       {"capacity = 2147483648", "[1, 2147483647]"}},
      {"state_dim 0", [](ReplayConfig& c) { c.state_dim = 0; }, {"state_dim = 0", "[1, "}},
      {"alpha < 0", [](ReplayConfig& c) { c.alpha = -0.5; }, {"alpha = -0.5", "[0, inf)"}},
      {"alpha NaN", [nan](ReplayConfig& c) { c.alpha = nan; }, {"alpha = nan", "finite"}},
      {"alpha inf", [inf](ReplayConfig& c) { c.alpha = inf; }, {"alpha = inf", "[0, inf), finite"}},
      {"beta_start < 0",
       [](ReplayConfig& c) { c.beta_start = -0.1; },
       {"beta_start = -0.1", "[0, 1]"}},
      {"beta_max > 1", [](ReplayConfig& c) { c.beta_max = 1.01; }, {"beta_max = 1.01", "[0, 1]"}},
      {"beta_max NaN", [nan](ReplayConfig& c) { c.beta_max = nan; }, {"beta_max = nan", "[0, 1]"}},
      {"beta_start > beta_max",
       [](ReplayConfig& c) {
         c.beta_start = 0.9;
         c.beta_max = 0.5;
       },
       {"beta_start = 0.9 > beta_max = 0.5", "beta_start <= beta_max"}},
      {"epsilon 0", [](ReplayConfig& c) { c.epsilon = 0.0; }, {"epsilon = 0", "(0, inf)"}},
      {"epsilon < 0", [](ReplayConfig& c) { c.epsilon = -1e-6; }, {"epsilon = -1e-06", "(0, inf)"}},
      {"epsilon inf", [inf](ReplayConfig& c) { c.epsilon = inf; }, {"epsilon = inf", "finite"}},
      {"epsilon NaN", [nan](ReplayConfig& c) { c.epsilon = nan; }, {"epsilon = nan"}},
      {"sampling out of enum",
       [](ReplayConfig& c) { c.sampling = static_cast<ReplaySampling>(7); },
       {"sampling = 7", "Stratified or Independent"}},
      {"mode out of enum",
       [](ReplayConfig& c) { c.mode = static_cast<ReplayPriorityMode>(-1); },
       {"mode = -1", "Proportional or Rank"}},
  };
  for (const Case& c : cases) {
    ReplayConfig config = valid_config();
    c.break_it(config);
    const std::string message = validation_message(config);
    for (const std::string& part : c.expected)
      EXPECT_NE(message.find(part), std::string::npos)
          << c.what << ": \"" << part << "\" not in: " << message;
    // Only the broken field is reported.
    const std::size_t problems =
        static_cast<std::size_t>(std::count(message.begin(), message.end(), ';'));
    EXPECT_EQ(problems, 0u) << c.what << ": " << message;
  }
}

TEST(ReplayConfig, EveryInvalidFieldIsListedInOneError) {
  ReplayConfig config;  // capacity 0, state_dim 0
  config.alpha = -1.0;
  config.epsilon = 0.0;
  config.beta_start = 2.0;
  const std::string message = validation_message(config);
  std::printf("%s\n", message.c_str());
  for (const char* part : {"capacity = 0", "state_dim = 0", "alpha = -1", "epsilon = 0",
                           "beta_start = 2", "beta_start = 2 > beta_max = 1"})
    EXPECT_NE(message.find(part), std::string::npos) << part << " not in: " << message;
}

TEST(ReplayConfig, BoundaryValuesAreValid) {
  ReplayConfig config = valid_config();
  config.capacity = 1;
  config.state_dim = 1;
  config.alpha = 0.0;
  config.beta_start = 0.0;
  config.beta_max = 0.0;
  config.epsilon = 1e-300;
  config.beta_annealing_steps = 0;
  EXPECT_NO_THROW(validate(config));
  config.capacity = resident::kMaxReplayCapacity;
  config.beta_start = 1.0;
  config.beta_max = 1.0;
  config.sampling = ReplaySampling::Independent;
  config.mode = ReplayPriorityMode::Rank;
  EXPECT_NO_THROW(validate(config));
}

TEST(ReplayConfig, ValidateBatch) {
  EXPECT_NO_THROW(validate_batch(1, 1));
  EXPECT_NO_THROW(validate_batch(10, 10));
  EXPECT_NO_THROW(validate_batch(1, 10));
  for (auto [batch, size] : {std::pair<std::size_t, std::size_t>{0, 10}, {11, 10}, {1, 0}}) {
    try {
      validate_batch(batch, size);
      ADD_FAILURE() << "no throw for batch " << batch << " size " << size;
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("batch = " + std::to_string(batch)), std::string::npos) << message;
      EXPECT_NE(message.find("[1, size = " + std::to_string(size) + "]"), std::string::npos)
          << message;
    }
  }
}

TEST(ReplayConfig, BetaAnnealsLinearlyAndClamps) {
  ReplayConfig config = valid_config();
  config.beta_start = 0.4;
  config.beta_max = 1.0;
  config.beta_annealing_steps = 100;
  EXPECT_EQ(beta_at(config, 0), 0.4);
  EXPECT_NEAR(beta_at(config, 25), 0.55, 1e-15);
  EXPECT_NEAR(beta_at(config, 50), 0.7, 1e-15);
  EXPECT_NEAR(beta_at(config, 99), 0.994, 1e-15);
  EXPECT_EQ(beta_at(config, 100), 1.0);
  EXPECT_EQ(beta_at(config, 1000000), 1.0);
  double previous = 0.0;
  for (std::uint64_t step = 0; step <= 120; ++step) {
    const double beta = beta_at(config, step);
    EXPECT_GE(beta, previous);
    EXPECT_GE(beta, 0.4);
    EXPECT_LE(beta, 1.0);
    previous = beta;
  }
  config.beta_annealing_steps = 0;
  EXPECT_EQ(beta_at(config, 0), 1.0);
  config.beta_annealing_steps = 10;
  config.beta_start = config.beta_max = 0.3;
  EXPECT_EQ(beta_at(config, 5), 0.3);
}

}  // namespace
