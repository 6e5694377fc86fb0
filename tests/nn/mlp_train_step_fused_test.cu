// The fused MLP train step (kernels/nn/mlp_train_step_fused.h, run by RegressionStep) against
// the double-precision reference, on fresh random parameters, inputs and targets, its outputs
// poisoned (NaN) first, at edge shapes: the bench's 256 x (64-256-256-3), odd widths and batches
// (1, 33, 65, 300, 1024), 2 and 4 layers, 32 outputs (the most it takes), several activations, with and
// without clipping, weight decay on the weights only. Checked per step, at steps 1 and 4:
//   - the loss and every weight and bias gradient against the reference forward/backward from
//     the parameters the step started from (tolerance of the GEMM path's tests);
//   - the norm against sqrt(sum g^2) of the GPU's gradients; params, m, v against the
//     reference's clip + AdamW applied to the GPU's gradients from the state the step started
//     from (the optimizer alone, so the tolerance is tight); the step counter and clip scale.
// The graph-replay/eager bit equality, the audit contract and the learning test of the fused
// step are mlp_test's MlpTraining (its cuBLAS case runs this kernel). Argument checks run
// without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "kernels/nn/mlp_train_step_fused.h"
#include "lib/core/scalar_readback.h"
#include "lib/nn/mlp.h"
#include "lib/nn/regression_step.h"
#include "tests/nn/fused_step_test_support.h"
#include "tests/nn/mlp_reference_support.h"
#include "tests/nn/nn_test_support.h"
#include "tests/reference/nn_reference.h"
#include "tests/support/gpu.h"
#include "tests/support/phase_clock.h"

namespace {

using namespace resident;
using test::nn_support::expect_close;
using test::nn_support::random_floats;
using test::nn_support::to_double;

struct FusedCase {
  std::vector<std::size_t> widths;
  std::size_t batch;
  kernels::ActivationKind activation;
  float max_grad_norm;  // small: the step clips
  const char* name;
};

class FusedStep : public ::testing::TestWithParam<FusedCase> {};

// The state the reference needs, downloaded in its flat layout (per layer weight, then bias).
struct SlabState {
  std::vector<double> params, grads, m, v;
};

SlabState download_state(const nn::Mlp& mlp, const nn::ParamSlab& slab, cudaStream_t stream) {
  using test::mlp_reference::flat;
  return {flat(mlp, slab.download(nn::SlabPart::Params, stream), slab),
          flat(mlp, slab.download(nn::SlabPart::Grads, stream), slab),
          flat(mlp, slab.download(nn::SlabPart::AdamM, stream), slab),
          flat(mlp, slab.download(nn::SlabPart::AdamV, stream), slab)};
}

template <typename T>
T read_scalar(const T* device_value, cudaStream_t stream) {
  ScalarReadback<T> readback;
  readback.enqueue(device_value, stream);
  return readback.wait();
}

TEST_P(FusedStep, StepsMatchTheReference) {
  RESIDENT_REQUIRE_GPU();
  const FusedCase& c = GetParam();
  const std::size_t batch = c.batch, in = c.widths.front(), out = c.widths.back();
  test::mlp_reference::MlpRig rig(
      nn::MlpConfig{.widths = c.widths, .hidden_activation = {c.activation}}, batch,
      batch * 7 + c.widths.size());
  StreamContext& context = rig.context;
  nn::ParamSlab& slab = rig.slab;
  nn::Mlp& mlp = rig.mlp;
  const cudaStream_t stream = context.stream();
  // Non-zero biases: init_parameters leaves them 0, which would hide a bias that is not added.
  std::mt19937_64 rng(batch * 131 + in * 7 + out);
  for (std::size_t l = 0; l < mlp.layers(); ++l)
    slab.upload(nn::SlabPart::Params, mlp.bias_name(l),
                random_floats(c.widths[l + 1], -0.2f, 0.2f, rng), stream);
  const std::vector<float> x = random_floats(batch * in, -1.0f, 1.0f, rng);
  const std::vector<float> target = random_floats(batch * out, -1.0f, 1.0f, rng);
  DeviceBuffer<float> d_x(x.size()), d_target(target.size());
  d_x.upload(x);
  d_target.upload(target);

  nn::RegressionStepConfig config;
  config.adamw.lr = 1e-3;
  config.adamw.weight_decay = 0.01;
  config.max_grad_norm = c.max_grad_norm;
  nn::RegressionStep step(mlp, slab, config, d_x.data(), d_target.data(), batch);
  ASSERT_TRUE(step.fused()) << "the case must take the fused step";

  const auto layers = test::mlp_reference::reference_layers(mlp);
  std::vector<std::uint8_t> decay;  // the reference's flat mask: weights 1, biases 0
  for (std::size_t l = 0; l < mlp.layers(); ++l) {
    decay.insert(decay.end(), c.widths[l] * c.widths[l + 1], 1);
    decay.insert(decay.end(), c.widths[l + 1], 0);
  }
  const reference::AdamWConfig adamw{config.adamw.lr, config.adamw.beta1, config.adamw.beta2,
                                     config.adamw.eps, config.adamw.weight_decay};
  const std::vector<double> xd = to_double(x), targetd = to_double(target);
  const test::nn_support::Tolerance gemm_tolerance{1e-4, 1e-3};  // as the GEMM path's tests
  const test::nn_support::Tolerance optimizer_tolerance{1e-6, 1e-5};

  for (int s = 1; s <= 4; ++s) {
    const bool checked = s == 1 || s == 4;
    SlabState before;
    if (checked) {
      before = download_state(mlp, slab, stream);
      for (std::size_t l = 0; l < mlp.layers(); ++l)  // poison every gradient the step writes
        for (const std::string& name : {mlp.weight_name(l), mlp.bias_name(l)})
          slab.upload(nn::SlabPart::Grads, name, test::nn_support::nans(slab.size(name)), stream);
      ASSERT_EQ(cudaMemset(const_cast<float*>(step.loss()), 0xff, sizeof(float)), cudaSuccess);
      ASSERT_EQ(cudaMemset(const_cast<float*>(slab.grad_norm()), 0xff, sizeof(float)), cudaSuccess);
    }
    step.run(context);
    context.synchronize();
    if (!checked) continue;
    const std::string at = std::string(c.name) + ", step " + std::to_string(s);

    // Forward, loss and backward from the parameters the step started from.
    const std::vector<double> y = reference::mlp_forward(layers, batch, before.params, xd);
    const double ref_loss = reference::mse_loss(y, targetd);
    std::vector<double> dy(y.size()), unused_dx(xd.size()), ref_grads(before.params.size());
    reference::mse_loss_backward(y, targetd, 1.0, dy, reference::GradMode::Overwrite);
    reference::mlp_backward(layers, batch, before.params, xd, dy, {unused_dx, ref_grads},
                            reference::GradMode::Overwrite);
    const SlabState after = download_state(mlp, slab, stream);
    expect_close({read_scalar(step.loss(), stream)}, {ref_loss}, {1e-7, 1e-4}, "loss, " + at);
    expect_close(std::vector<float>(after.grads.begin(), after.grads.end()), ref_grads,
                 gemm_tolerance, "gradients, " + at);

    // The optimizer on the GPU's own gradients.
    std::vector<double> grads = after.grads, params = before.params, m = before.m, v = before.v;
    const double norm = reference::global_norm(grads);
    reference::clip_global_norm(grads, c.max_grad_norm);
    reference::adamw_step(adamw, static_cast<std::uint64_t>(s), params, grads, m, v, decay);
    expect_close({read_scalar(slab.grad_norm(), stream)}, {norm}, {0.0, 1e-6}, "norm, " + at);
    expect_close(std::vector<float>(after.params.begin(), after.params.end()), params,
                 optimizer_tolerance, "params, " + at);
    expect_close(std::vector<float>(after.m.begin(), after.m.end()), m, optimizer_tolerance,
                 "m, " + at);
    expect_close(std::vector<float>(after.v.begin(), after.v.end()), v, {1e-12, 1e-5}, "v, " + at);
    EXPECT_EQ(slab.read_step(stream), static_cast<std::uint64_t>(s)) << at;
    EXPECT_EQ(read_scalar(slab.clip_scale(), stream), 1.0f) << at;
    if (c.max_grad_norm < 1.0f) EXPECT_GT(norm, c.max_grad_norm) << at << ": the case must clip";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, FusedStep,
    ::testing::Values(
        FusedCase{{64, 256, 256, 3}, 256, kernels::ActivationKind::Relu, 1.0f, "bench_shape"},
        FusedCase{{64, 256, 256, 3}, 256, kernels::ActivationKind::Relu, 0.05f, "bench_shape_clipped"},
        FusedCase{{5, 37, 29, 3}, 33, kernels::ActivationKind::Tanh, 0.05f, "odd_tanh"},
        FusedCase{{7, 40, 1}, 1, kernels::ActivationKind::GeluTanh, 1e9f, "two_layers_one_row"},
        FusedCase{{4, 64, 64, 64, 2}, 300, kernels::ActivationKind::Silu, 0.1f, "four_layers_silu"},
        FusedCase{{3, 33, 32}, 65, kernels::ActivationKind::Relu, 1.0f, "32_outputs"},
        FusedCase{{130, 70, 2}, 1024, kernels::ActivationKind::Elu, 0.1f, "largest_batch_elu"}),
    [](const ::testing::TestParamInfo<FusedCase>& info) { return std::string(info.param.name); });

// The diagnostic phase clock of the bench's shape: 2 * layers + 1 readings per step, in order;
// prints the median duration of each phase (with the barrier ending it) over 50 steps.
TEST(FusedStepPhases, ClockReadingsAreOrderedAndPrinted) {
  RESIDENT_REQUIRE_GPU();
  const std::vector<std::size_t> widths{64, 256, 256, 3};
  const std::size_t batch = 256;
  test::mlp_reference::MlpRig rig(widths, batch, 5);
  StreamContext& context = rig.context;
  std::mt19937_64 rng(11);
  DeviceBuffer<float> d_x(batch * widths.front()), d_target(batch * widths.back());
  d_x.upload(random_floats(d_x.size(), -1.0f, 1.0f, rng));
  d_target.upload(random_floats(d_target.size(), -1.0f, 1.0f, rng));
  nn::RegressionStep step(rig.mlp, rig.slab, nn::RegressionStepConfig{}, d_x.data(),
                          d_target.data(), batch);
  ASSERT_TRUE(step.fused());
  const std::size_t slots = 2 * rig.mlp.layers() + 1;
  DeviceBuffer<std::uint64_t> times(slots);
  step.record_phase_times(times.data());
  step.capture(context);
  std::vector<std::vector<double>> durations(slots - 1);
  for (int s = 0; s < 50; ++s) {
    step.replay(context);
    context.synchronize();
    ASSERT_EQ(test::phase_clock::add_phase_durations(times.download(), durations), "")
        << "step " << s;
  }
  test::phase_clock::print_phase_medians(
      durations, {"forward 1", "forward 2", "head", "backward 2", "backward 1 + norm partials",
                  "optimizer"});
}

// Invalid arguments are refused on the host, before any device work, naming the value and the
// limit (no GPU needed).
TEST(FusedStepArguments, InvalidArgumentsNameTheValueAndTheLimit) {
  test::fused_step_support::DummyViews views;
  float* dummy = views.dummy;
  const auto expect_refused = [&](const kernels::FusedStepMlp& m, std::size_t batch,
                                  const kernels::FusedStepOptimizer& o, const std::string& needle) {
    test::fused_step_support::expect_refused(
        [&] {
          kernels::launch_mlp_train_step_fused(dummy, m, views.scratch, o, dummy, dummy, batch, 1,
                                               nullptr);
        },
        needle);
  };
  const kernels::FusedStepMlp& mlp = views.mlp;
  const kernels::FusedStepOptimizer& optimizer = views.optimizer;
  kernels::FusedStepMlp one_layer = mlp;
  one_layer.layers = 1;
  expect_refused(one_layer, 8, optimizer, "layers = 1, allowed 2 to 4");
  kernels::FusedStepMlp wide_out = mlp;
  wide_out.widths[2] = 33;
  expect_refused(wide_out, 8, optimizer, "output width = 33, allowed 1 to 32");
  expect_refused(mlp, 0, optimizer, "batch = 0, allowed 1");
  kernels::FusedStepOptimizer no_norm = optimizer;
  no_norm.max_norm = 0.0f;
  expect_refused(mlp, 8, no_norm, "max_norm = 0.000000, must be > 0");
  kernels::FusedStepOptimizer misaligned = optimizer;
  misaligned.m = views.state[1] + 1;
  expect_refused(mlp, 8, misaligned, "16-byte aligned");
  EXPECT_FALSE(kernels::fused_step_supports(std::vector<std::size_t>{4, 2}));
  EXPECT_FALSE(kernels::fused_step_supports(std::vector<std::size_t>{4, 8, 8, 8, 8, 2}));
  EXPECT_FALSE(kernels::fused_step_supports(std::vector<std::size_t>{4, 0, 2}));
  EXPECT_TRUE(kernels::fused_step_supports(std::vector<std::size_t>{64, 256, 256, 3}));
}

}  // namespace
