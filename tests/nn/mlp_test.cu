// The MLP composite on the GPU: forward, backward and parameter gradients against the
// double-precision reference (tests/reference mlp_forward/mlp_backward) on fresh random
// parameters and inputs; then a whole regression train step (forward, MSE, backward, clip,
// AdamW), on the cuBLAS and the cuBLASLt backend, captured into a CUDA graph: replays equal
// eager steps bit for bit, a loop of replays moves no byte between host and device (audit
// contract), and the model learns: its loss falls
// below a threshold that the double-precision reference, trained from the same initial
// parameters on the same data, also reaches.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "audit/testing.h"
#include "audit/tracer.h"
#include "lib/core/scalar_readback.h"
#include "lib/nn/mlp.h"
#include "lib/nn/regression_step.h"
#include "tests/nn/mlp_reference_support.h"
#include "tests/nn/nn_test_support.h"
#include "tests/reference/nn_reference.h"
#include "tests/support/gpu.h"
#include "tests/support/param_name.h"

namespace {

using namespace resident;
using test::nn_support::expect_close;
using test::nn_support::random_floats;
using test::nn_support::to_double;
using test::mlp_reference::reference_layers;
using test::mlp_reference::reference_training;
using test::mlp_reference::MlpRig;
using test::mlp_reference::RegressionData;

// A slab part, downloaded, in the reference's flat layout.
std::vector<double> flat(const nn::Mlp& mlp, const nn::ParamSlab& slab, nn::SlabPart part,
                         cudaStream_t stream) {
  return test::mlp_reference::flat(mlp, slab.download(part, stream), slab);
}


class MlpTest : public ::testing::TestWithParam<std::tuple<std::vector<std::size_t>, std::size_t>> {};

TEST_P(MlpTest, ForwardBackwardMatchTheReference) {
  RESIDENT_REQUIRE_GPU();
  const auto& [widths, batch] = GetParam();
  MlpRig rig(widths, batch, 17);
  std::mt19937_64 rng(batch * 31 + widths.size());
  const std::size_t in = widths.front(), out = widths.back();
  const std::vector<float> x = random_floats(batch * in, -1.0f, 1.0f, rng);
  const std::vector<float> dy = random_floats(batch * out, -1.0f, 1.0f, rng);
  DeviceBuffer<float> d_x(x.size()), d_dy(dy.size()), d_dx(x.size());
  d_x.upload(x);
  d_dy.upload(dy);
  d_dx.upload(test::nn_support::nans(x.size()));
  rig.slab.zero_grads(rig.context.stream());
  const float* y = rig.mlp.forward(rig.context, d_x.data(), batch);
  rig.mlp.backward(rig.context, d_x.data(), d_dy.data(), d_dx.data(), batch);
  rig.context.synchronize();
  std::vector<float> got_y(batch * out);
  ASSERT_EQ(cudaMemcpy(got_y.data(), y, got_y.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);

  const auto layers = reference_layers(rig.mlp);
  const std::vector<double> params = flat(rig.mlp, rig.slab, nn::SlabPart::Params, rig.context.stream());
  std::vector<double> ref_dx(x.size()), ref_dparams(params.size());
  reference::mlp_backward(layers, batch, params, to_double(x), to_double(dy), {ref_dx, ref_dparams},
                          reference::GradMode::Overwrite);
  // fp32 GEMMs over up to 256 terms per layer, three layers deep.
  const test::nn_support::Tolerance tolerance{1e-4, 1e-3};
  expect_close(got_y, reference::mlp_forward(layers, batch, params, to_double(x)), tolerance, "y");
  expect_close(d_dx.download(), ref_dx, tolerance, "dx");
  const std::vector<double> grads = flat(rig.mlp, rig.slab, nn::SlabPart::Grads, rig.context.stream());
  std::vector<float> grads_f(grads.begin(), grads.end());
  expect_close(grads_f, ref_dparams, tolerance, "dparams");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MlpTest,
    ::testing::Values(std::make_tuple(std::vector<std::size_t>{1, 1}, 1),
                      std::make_tuple(std::vector<std::size_t>{5, 7, 3}, 33),
                      std::make_tuple(std::vector<std::size_t>{64, 256, 256, 3}, 256),
                      std::make_tuple(std::vector<std::size_t>{4, 64, 64, 2}, 4096)),
    [](const auto& test_case) {
      const auto& p = test_case.param;
      return test::param_name("widths", test::dims(std::get<0>(p)), "batch", std::get<1>(p));
    });

// A backward may take the first rows of a larger forward: DQN evaluates [states; next_states]
// in one forward and back-propagates the states half. dx (when asked for) and the parameter
// gradients must match the reference of a forward over those rows alone. Cases: the DQN
// Q-network on the GEMM path (256 of 512 rows, with and without dx), and the narrow nets of
// DQN's CartPole configs, whose forward is fused and whose backward without dx is the fused
// one (100 of 200 rows: a partial tile at the prefix boundary, real rows past it).
struct PrefixCase {
  std::vector<std::size_t> widths;
  std::size_t batch;
  bool with_dx;
  bool fused;  // the forward (and, without dx, the backward) is the fused kernel
};

class MlpPrefixBackward : public ::testing::TestWithParam<PrefixCase> {};

TEST_P(MlpPrefixBackward, FirstRowsOfALargerForwardMatchTheReference) {
  RESIDENT_REQUIRE_GPU();
  const PrefixCase& c = GetParam();
  const std::size_t batch = c.batch, in = c.widths.front(), out = c.widths.back();
  MlpRig rig(c.widths, 2 * batch, 29);
  ASSERT_EQ(rig.mlp.fused_view(2 * batch) != nullptr, c.fused);
  std::mt19937_64 rng(4242 + batch);
  const std::vector<float> x = random_floats(2 * batch * in, -1.0f, 1.0f, rng);
  const std::vector<float> dy = random_floats(batch * out, -1.0f, 1.0f, rng);
  DeviceBuffer<float> d_x(x.size()), d_dy(dy.size()), d_dx(batch * in);
  d_x.upload(x);
  d_dy.upload(dy);
  d_dx.upload(test::nn_support::nans(batch * in));
  std::vector<float> poison(rig.slab.total_elements(), std::nanf(""));
  ASSERT_EQ(cudaMemcpy(rig.slab.grads(), poison.data(), poison.size() * sizeof(float),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  rig.mlp.forward(rig.context, d_x.data(), 2 * batch);
  rig.mlp.backward(rig.context, d_x.data(), d_dy.data(), c.with_dx ? d_dx.data() : nullptr,
                   batch, nn::GradMode::Overwrite);
  rig.context.synchronize();
  const auto layers = reference_layers(rig.mlp);
  const std::vector<double> params =
      flat(rig.mlp, rig.slab, nn::SlabPart::Params, rig.context.stream());
  const std::vector<float> first_rows(x.begin(), x.begin() + batch * in);
  std::vector<double> ref_dx(first_rows.size()), ref_dparams(params.size());
  reference::mlp_backward(layers, batch, params, to_double(first_rows), to_double(dy),
                          {ref_dx, ref_dparams}, reference::GradMode::Overwrite);
  const test::nn_support::Tolerance tolerance{1e-4, 1e-3};
  if (c.with_dx) expect_close(d_dx.download(), ref_dx, tolerance, "dx");
  const std::vector<double> grads =
      flat(rig.mlp, rig.slab, nn::SlabPart::Grads, rig.context.stream());
  expect_close(std::vector<float>(grads.begin(), grads.end()), ref_dparams, tolerance, "dparams");
}

INSTANTIATE_TEST_SUITE_P(Shapes, MlpPrefixBackward,
                         ::testing::Values(PrefixCase{{64, 128, 128, 3}, 256, true, false},
                                           PrefixCase{{64, 128, 128, 3}, 256, false, false},
                                           PrefixCase{{4, 64, 64, 2}, 100, false, true},
                                           PrefixCase{{4, 64, 64, 3}, 100, false, true},
                                           PrefixCase{{4, 64, 64, 2}, 100, true, true}),
                         [](const auto& test_case) {
                           const PrefixCase& c = test_case.param;
                           return test::param_name("widths", test::dims(c.widths), "batch", c.batch,
                                                   test::flag(c.with_dx, "with_dx", "without_dx"),
                                                   test::flag(c.fused, "fused", "gemm"));
                         });

// A backward without dx takes the fused narrow-MLP backward where it applies (4-64-64-2 with
// ReLU or tanh; kernels/nn/mlp_backward_fused.h); with dx, the GEMM path. Both parameter
// gradients must match the reference (overwrite mode, grads poisoned first), at the tolerance
// above.
class MlpBackwardWithoutDx : public ::testing::TestWithParam<kernels::ActivationKind> {};

TEST_P(MlpBackwardWithoutDx, FusedAndGemmGradientsMatchTheReference) {
  RESIDENT_REQUIRE_GPU();
  const std::vector<std::size_t> widths{4, 64, 64, 2};
  const std::size_t batch = 4096;
  MlpRig rig(nn::MlpConfig{.widths = widths, .hidden_activation = {GetParam()}}, batch, 23);
  std::mt19937_64 rng(batch + static_cast<unsigned>(GetParam()));
  const std::vector<float> x = random_floats(batch * widths.front(), -1.0f, 1.0f, rng);
  const std::vector<float> dy = random_floats(batch * widths.back(), -1.0f, 1.0f, rng);
  DeviceBuffer<float> d_x(x.size()), d_dy(dy.size()), d_dx(x.size());
  d_x.upload(x);
  d_dy.upload(dy);
  const auto layers = reference_layers(rig.mlp);
  const std::vector<double> params =
      flat(rig.mlp, rig.slab, nn::SlabPart::Params, rig.context.stream());
  std::vector<double> ref_dx(x.size()), ref_dparams(params.size());
  reference::mlp_backward(layers, batch, params, to_double(x), to_double(dy),
                          {ref_dx, ref_dparams}, reference::GradMode::Overwrite);
  const test::nn_support::Tolerance tolerance{1e-4, 1e-3};
  for (const bool with_dx : {false, true}) {
    std::vector<float> poison(rig.slab.total_elements(), std::nanf(""));
    ASSERT_EQ(cudaMemcpy(rig.slab.grads(), poison.data(), poison.size() * sizeof(float),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
    rig.mlp.forward(rig.context, d_x.data(), batch);
    rig.mlp.backward(rig.context, d_x.data(), d_dy.data(), with_dx ? d_dx.data() : nullptr,
                     batch, nn::GradMode::Overwrite);
    rig.context.synchronize();
    const std::vector<double> grads =
        flat(rig.mlp, rig.slab, nn::SlabPart::Grads, rig.context.stream());
    expect_close(std::vector<float>(grads.begin(), grads.end()), ref_dparams, tolerance,
                 with_dx ? "dparams (GEMM path, with dx)" : "dparams (fused, without dx)");
  }
}

INSTANTIATE_TEST_SUITE_P(Activations, MlpBackwardWithoutDx,
                         ::testing::Values(kernels::ActivationKind::Relu,
                                           kernels::ActivationKind::Tanh),
                         [](const auto& test_case) { return test::param_name(test_case.param); });

// The default step (cuBLAS backend: the whole step is the one fused kernel,
// kernels/nn/mlp_train_step_fused.h), the cuBLAS GEMM path it replaces (unfused MSE, grads
// overwritten) and the opt-in cuBLASLt backend (fused MSE; its slab holds the Mlp alone, so
// grads are overwritten).
struct TrainingCase {
  nn::GemmBackend backend;
  bool fused_step;
  const char* name;
};

class MlpTraining : public ::testing::TestWithParam<TrainingCase> {};

TEST_P(MlpTraining, GraphReplayedStepLearnsMovesNothingAndMatchesEager) {
  RESIDENT_REQUIRE_GPU();
  const nn::GemmBackend backend = GetParam().backend;
  const bool lt = backend == nn::GemmBackend::CublasLt;
  const std::size_t batch = 512;
  const int steps = 300;
  std::mt19937_64 rng(2026);
  const RegressionData data(batch, rng);
  DeviceBuffer<float> d_x(data.x.size()), d_target(data.target.size());
  d_x.upload(data.x);
  d_target.upload(data.target);
  nn::RegressionStepConfig config;
  config.adamw.lr = 3e-3;
  config.max_grad_norm = 1.0f;
  config.fused_mse_loss = lt;
  config.fused_step = GetParam().fused_step;
  const nn::MlpConfig mlp_config{.widths = {4, 64, 64, 2}, .backend = backend};

  MlpRig graphed(mlp_config, batch, 7), eager(mlp_config, batch, 7);
  for (const std::string& line : graphed.mlp.describe_lt_plans(batch))
    std::printf("    %s\n", line.c_str());  // cuBLASLt's plans; none for cuBLAS
  const std::vector<double> initial = flat(graphed.mlp, graphed.slab, nn::SlabPart::Params,
                                           graphed.context.stream());
  nn::RegressionStep graph_step(graphed.mlp, graphed.slab, config, d_x.data(), d_target.data(), batch);
  nn::RegressionStep eager_step(eager.mlp, eager.slab, config, d_x.data(), d_target.data(), batch);
  EXPECT_TRUE(graph_step.overwrites_grads()) << "the slab holds the Mlp alone";
  EXPECT_EQ(graph_step.fused(), GetParam().fused_step) << "which step runs";
  ScalarReadback<float> readback;
  graph_step.run(graphed.context);  // the first step eagerly: its loss is the initial loss
  readback.enqueue(graph_step.loss(), graphed.context.stream());
  const float first_loss = readback.wait();
  eager_step.run(eager.context);
  graph_step.capture(graphed.context);
  graphed.context.synchronize();

  auto& tracer = audit::Tracer::instance();
  tracer.start();
  tracer.reset();
  {
    const audit::Phase phase("mlp/train_loop");
    for (int s = 1; s < steps; ++s) graph_step.replay(graphed.context);
  }
  const audit::AuditReport report = tracer.snapshot();
  RESIDENT_EXPECT_WITHIN_CONTRACT(report, (std::vector<audit::TransferContract>{
                                              {.phase = "mlp/train_loop", .max_d2h_scalar = 0,
                                               .max_d2h_bulk = 0, .max_h2d = 0, .max_syncs = 0}}));
  for (int s = 1; s < steps; ++s) eager_step.run(eager.context);
  readback.enqueue(graph_step.loss(), graphed.context.stream());
  const float last_loss = readback.wait();
  eager.context.synchronize();

  EXPECT_EQ(graphed.slab.download(nn::SlabPart::Params, graphed.context.stream()),
            eager.slab.download(nn::SlabPart::Params, eager.context.stream()))
      << "graph replays and eager steps diverged";
  const double reference_loss = reference_training(graphed.mlp, initial, data, batch, config, steps);
  const double threshold = first_loss / 20.0;
  std::printf("  loss (%s): first %.5f, GPU after %d steps %.6f, double reference %.6f, "
              "threshold %.6f\n",
              GetParam().name, first_loss, steps, last_loss, reference_loss, threshold);
  EXPECT_LT(reference_loss, threshold) << "the reference does not learn: the threshold is wrong";
  EXPECT_LT(last_loss, threshold);
  EXPECT_LT(last_loss, 2.0 * reference_loss + 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Steps, MlpTraining,
                         ::testing::Values(TrainingCase{nn::GemmBackend::Cublas, true, "fused_step"},
                                           TrainingCase{nn::GemmBackend::Cublas, false, "cublas"},
                                           TrainingCase{nn::GemmBackend::CublasLt, false, "cublas_lt"}),
                         [](const ::testing::TestParamInfo<TrainingCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
