// Host-side stand-ins for the views of a fused train step (kernels/nn/mlp_train_step_fused.h) for
// the tests of the launchers' argument checks, which throw before any device work: non-null,
// aligned pointers into host arrays, an MLP 4-8-2, a 4-element slab. Shared by
// mlp_train_step_fused_test and dqn_train_step_fused_test.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/nn/mlp_train_step_fused.h"
#include "kernels/core/error.h"

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

}  // namespace resident::test::fused_step_support
