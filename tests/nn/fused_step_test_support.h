// Host-side stand-ins for the views of a fused train step (kernels/nn/mlp_train_step_fused.h) for
// the tests of the launchers' argument checks, which throw before any device work: non-null,
// aligned pointers into host arrays, an MLP 4-8-2, a 4-element slab. Shared by
// mlp_train_step_fused_test and dqn_train_step_fused_test.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/nn/mlp_train_step_fused.h"
#include "lib/core/error.h"

namespace resident::test::fused_step_support {

struct DummyViews {
  float dummy[4] = {};
  double partial = 0.0;
  std::uint64_t counter = 0;
  std::uint8_t mask[4] = {};
  alignas(16) float state[5][4] = {};  // params, m, v, grads, and a target slab
  kernels::FusedStepMlp mlp;
  kernels::FusedStepScratch scratch;
  kernels::FusedStepOptimizer optimizer;

  DummyViews() {
    mlp.layers = 2;
    mlp.widths[0] = 4;
    mlp.widths[1] = 8;
    mlp.widths[2] = 2;
    for (std::size_t l = 0; l < 2; ++l) {
      mlp.weights[l] = mlp.biases[l] = dummy;
      mlp.weight_grads[l] = mlp.bias_grads[l] = dummy;
      scratch.d_pre_activations[l] = dummy;
    }
    scratch.pre_activations[0] = scratch.activations[0] = dummy;
    scratch.loss_partials = dummy;
    scratch.norm_partials = &partial;
    optimizer.params = state[0];
    optimizer.m = state[1];
    optimizer.v = state[2];
    optimizer.grads = state[3];
    optimizer.decay_mask = mask;
    optimizer.n = 4;
    optimizer.step = &counter;
    optimizer.norm = dummy;
  }
  DummyViews(const DummyViews&) = delete;  // the views point into this object
  DummyViews& operator=(const DummyViews&) = delete;
};

// launch() must throw resident::Error whose message contains `needle`.
template <typename Launch>
void expect_refused(Launch&& launch, const std::string& needle) {
  try {
    launch();
    ADD_FAILURE() << "accepted; expected an error naming '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// Appends one step's phase durations (us) from the phase clock's readings `t` (FusedStepScratch::
// phase_times, durations.size() + 1 of them) to `durations`; returns "" when the readings rise,
// else which one does not.
inline std::string add_phase_durations(const std::vector<std::uint64_t>& t,
                                       std::vector<std::vector<double>>& durations) {
  if (t.size() != durations.size() + 1) return "expected " + std::to_string(durations.size() + 1) +
                                                 " readings, got " + std::to_string(t.size());
  for (std::size_t i = 1; i < t.size(); ++i)
    if (t[i] < t[i - 1]) return "reading " + std::to_string(i) + " precedes the one before it";
  if (t.back() <= t.front()) return "no time passed";
  for (std::size_t i = 1; i < t.size(); ++i)
    durations[i - 1].push_back(static_cast<double>(t[i] - t[i - 1]) * 1e-3);
  return "";
}

// Prints the median of each phase's durations (us; the phase clock's differences) under its name,
// then the medians' total: the in-kernel time from block 0's first reading to its last.
inline void print_phase_medians(std::vector<std::vector<double>> durations,
                                const std::vector<std::string>& names) {
  double total = 0.0;
  for (std::size_t i = 0; i < durations.size() && i < names.size(); ++i) {
    std::vector<double>& d = durations[i];
    if (d.empty()) continue;
    std::sort(d.begin(), d.end());
    const double median = d[d.size() / 2];
    total += median;
    std::printf("  phase %-34s median %6.2f us\n", names[i].c_str(), median);
  }
  std::printf("  in-kernel total (block 0, start to end) %.2f us\n", total);
}

}  // namespace resident::test::fused_step_support
