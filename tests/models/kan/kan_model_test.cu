// The KAN model on the GPU (lib/models/kan/kan_model.h):
//  1. forward, MSE loss and backward against the double reference (tests/reference/
//     kan_reference.h) for every parameter tensor, the prediction and the loss, at a tiny config,
//     edge batches (1, and 37 / 33 / 5: not multiples of 32), a K-split first layer, another grid
//     and order 5; fresh random parameters, inputs and targets;
//  2. a CUDA graph of the whole train step (forward, MSE, backward, clip + AdamW) equals eager
//     steps bit for bit after 3 steps; capturing it (cudaStreamCaptureModeGlobal) fails on any
//     host interaction (sync, copy, allocation);
//  3. the benchmark shape (256 x 64 x 32, default config, built through the registry) runs a
//     train step with a finite loss, and prints the graph-replayed step time.
//
// Tolerance (test 1): |gpu - ref| <= atol + rtol |ref| with rtol = 1e-3 and atol = 1e-4 times the
// largest |ref| of the compared tensor: fp32 GEMMs over K <= 2304 terms and the batch, fp32
// tanh/exp/bases. Poisoning: prediction and dLoss/dprediction are NaN before the run, the
// model's scratch is NaN from construction; the grads, which the backward ADDS into by contract,
// are pre-filled with random values of the reference gradient's size (a skipped element or an
// overwrite shows), and the expectation is prefill + reference.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/nn/mse_loss_fused.h"
#include "lib/core/device_buffer.h"
#include "lib/core/scalar_readback.h"
#include "lib/core/stream.h"
#include "lib/models/kan/kan_model.h"
#include "lib/models/model_registry.h"
#include "tests/models/support/graph_step.h"
#include "tests/models/support/harness_values.h"
#include "tests/reference/kan_reference.h"
#include "tests/reference/nn_reference.h"
#include "tests/support/bitwise.h"
#include "tests/support/gpu.h"

namespace {

using namespace resident;
using models::KanConfig;
using models::KanModel;
using models::KanTensor;
using models::ModelShape;

constexpr double kRtol = 1e-3;
constexpr double kAtolShare = 1e-4;  // of the tensor's largest |reference| value
constexpr KanTensor kTensors[] = {KanTensor::BaseWeight, KanTensor::SplineWeight,
                                  KanTensor::SplineScaler};

// n draws U(low, high) in double, rounded to float (the shared draw sequence).
std::vector<float> random_floats(std::size_t n, double low, double high, std::mt19937_64& rng) {
  return test::to_float(test::random_values(n, low, high, rng));
}

using test::to_double;

reference::KanSpec spec_of(const KanModel& model) {
  return {model.widths(), model.config().grid_size, model.config().spline_order,
          model.config().grid_min, model.config().grid_max};
}

// A slab part, downloaded, in the reference's flat layout.
std::vector<double> flat(const KanModel& model, nn::SlabPart part, cudaStream_t stream) {
  const std::vector<float> slab = model.slab().download(part, stream);
  const auto offsets = reference::kan_parameter_offsets(spec_of(model));
  std::vector<double> out(reference::kan_parameter_count(spec_of(model)));
  for (std::size_t l = 0; l < model.layer_count(); ++l)
    for (const KanTensor t : kTensors) {
      const nn::SlabTensor& st = model.slab().layout().tensor(KanModel::tensor_name(l, t));
      const std::size_t at = t == KanTensor::BaseWeight     ? offsets[l].base_weight
                             : t == KanTensor::SplineWeight ? offsets[l].spline_weight
                                                            : offsets[l].spline_scaler;
      std::copy(slab.begin() + st.offset, slab.begin() + st.offset + st.size, out.begin() + at);
    }
  return out;
}

// Every element within atol + rtol |want|; prints the worst share of the tolerance used.
void expect_close(const std::vector<float>& got, const std::vector<double>& want, double atol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0.0, worst_error = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double allowed = atol + kRtol * std::fabs(want[i]);
    const double error = std::fabs(static_cast<double>(got[i]) - want[i]);
    ASSERT_TRUE(error <= allowed) << what << "[" << i << "]: gpu " << got[i] << ", ref " << want[i]
                                  << ", error " << error << " > " << allowed;
    worst_error = std::max(worst_error, error);
    if (allowed > 0.0) worst = std::max(worst, error / allowed);
  }
  std::printf("    %-24s %8zu values, max error %.3e, worst %5.1f%% of tolerance\n", what.c_str(),
              got.size(), worst_error, 100.0 * worst);
}

double max_abs(const std::vector<double>& v) {
  double m = 0.0;
  for (const double x : v) m = std::max(m, std::fabs(x));
  return m;
}

// The trainer's loss on the device: MSE and its gradient in one launch.
struct DeviceMse {
  explicit DeviceMse(std::size_t n)
      : n(n), loss(1), partials(kernels::mse_loss_fused_partials_count(n)), counter(1) {
    counter.upload(std::vector<unsigned int>{0u});
  }
  void run(const float* prediction, const float* target, float* d_prediction, cudaStream_t stream) {
    kernels::launch_mse_loss_fused(loss.data(), d_prediction, partials.data(), partials.size(),
                                   counter.data(), prediction, target, n, 1.0f,
                                   nn::GradMode::Overwrite, stream);
  }
  std::size_t n;
  DeviceBuffer<float> loss, partials;
  DeviceBuffer<unsigned int> counter;
};

struct GradientCase {
  const char* name;
  std::size_t window, features, outputs, batch, max_batch;
  std::vector<std::size_t> hidden;
  std::size_t grid_size = 5, order = 3;
  double grid_min = -1.0, grid_max = 1.0;
  bool expect_split = false;  // the first layer's GEMM is K-split
};

class KanGradients : public ::testing::TestWithParam<GradientCase> {};

TEST_P(KanGradients, ForwardLossAndEveryParameterGradientMatchTheReference) {
  RESIDENT_REQUIRE_GPU();
  const GradientCase& c = GetParam();
  KanConfig config;
  config.hidden_widths = c.hidden;
  config.grid_size = c.grid_size;
  config.spline_order = c.order;
  config.grid_min = c.grid_min;
  config.grid_max = c.grid_max;
  const ModelShape shape{c.window, c.features, c.outputs, c.max_batch};
  KanModel model(shape, config, 41);
  std::printf("    %s: %s\n", c.name, model.describe().c_str());
  ASSERT_EQ(model.k_splits(0) > 1, c.expect_split);
  StreamContext context;
  const cudaStream_t stream = context.stream();
  std::mt19937_64 rng(1000 + c.batch);

  // Fresh random parameters, the spline weights as large as the base weights (so the spline
  // branch weighs as much as the base branch), scaled by 2 / sqrt(in) for wide layers so that the
  // next layer's squash is not saturated everywhere.
  for (std::size_t l = 0; l < model.layer_count(); ++l)
    for (const KanTensor t : kTensors) {
      const std::string name = KanModel::tensor_name(l, t);
      const double scale = std::min(1.0, 2.0 / std::sqrt(static_cast<double>(model.widths()[l])));
      const double low = t == KanTensor::SplineScaler ? 0.5 : -0.6 * scale;
      const double high = t == KanTensor::SplineScaler ? 1.5 : 0.6 * scale;
      model.slab().upload(nn::SlabPart::Params, name,
                          random_floats(model.slab().size(name), low, high, rng), stream);
    }
  const std::size_t in = c.window * c.features, n = c.batch * c.outputs;
  const std::vector<float> x = random_floats(c.batch * in, -2.0, 2.0, rng);
  const std::vector<float> target = random_floats(n, -1.0, 1.0, rng);

  // The reference: forward, MSE, dLoss/dprediction, backward.
  const reference::KanSpec spec = spec_of(model);
  const std::vector<double> params = flat(model, nn::SlabPart::Params, stream);
  const std::vector<double> ref_prediction =
      reference::kan_forward(spec, c.batch, params, to_double(x));
  const double ref_loss = reference::mse_loss(ref_prediction, to_double(target));
  std::vector<double> ref_dprediction(n), ref_dparams(params.size());
  reference::mse_loss_backward(ref_prediction, to_double(target), 1.0, ref_dprediction,
                               reference::GradMode::Overwrite);
  reference::kan_backward(spec, c.batch, params, to_double(x), ref_dprediction, {{}, ref_dparams},
                          reference::GradMode::Overwrite);

  // Grads pre-filled with random values of each tensor's gradient size.
  const auto offsets = reference::kan_parameter_offsets(spec);
  std::vector<float> prefill_slab(model.slab().total_elements(), 0.0f);
  std::vector<double> expected = ref_dparams;
  const std::vector<double> prefill_flat = [&] {
    std::vector<double> prefill(params.size());
    for (std::size_t l = 0; l < model.layer_count(); ++l)
      for (const KanTensor t : kTensors) {
        const nn::SlabTensor& st = model.slab().layout().tensor(KanModel::tensor_name(l, t));
        const std::size_t at = t == KanTensor::BaseWeight     ? offsets[l].base_weight
                               : t == KanTensor::SplineWeight ? offsets[l].spline_weight
                                                              : offsets[l].spline_scaler;
        const double scale =
            std::max(1e-6, max_abs({ref_dparams.begin() + at, ref_dparams.begin() + at + st.size}));
        const std::vector<float> values = random_floats(st.size, -scale, scale, rng);
        std::copy(values.begin(), values.end(), prefill_slab.begin() + st.offset);
        std::copy(values.begin(), values.end(), prefill.begin() + at);
      }
    return prefill;
  }();
  for (std::size_t i = 0; i < expected.size(); ++i) expected[i] += prefill_flat[i];
  model.slab().upload(nn::SlabPart::Grads, prefill_slab, stream);

  DeviceBuffer<float> d_x(x.size()), d_target(n), prediction(n), d_prediction(n);
  d_x.upload(x);
  d_target.upload(target);
  const std::vector<float> nans(n, std::numeric_limits<float>::quiet_NaN());
  prediction.upload(nans);
  d_prediction.upload(nans);
  DeviceMse mse(n);
  mse.loss.upload(std::vector<float>{std::numeric_limits<float>::quiet_NaN()});

  model.forward(context, d_x.data(), c.batch, prediction.data());
  mse.run(prediction.data(), d_target.data(), d_prediction.data(), stream);
  model.backward(context, d_x.data(), d_prediction.data(), c.batch);
  context.synchronize();

  expect_close(prediction.download(), ref_prediction, kAtolShare * max_abs(ref_prediction),
               "prediction");
  expect_close(mse.loss.download(), {ref_loss}, 0.0, "loss");
  const std::vector<double> grads = flat(model, nn::SlabPart::Grads, stream);
  for (std::size_t l = 0; l < model.layer_count(); ++l)
    for (const KanTensor t : kTensors) {
      const std::string name = KanModel::tensor_name(l, t);
      const std::size_t size = model.slab().size(name);
      const std::size_t at = t == KanTensor::BaseWeight     ? offsets[l].base_weight
                             : t == KanTensor::SplineWeight ? offsets[l].spline_weight
                                                            : offsets[l].spline_scaler;
      const std::vector<double> want(expected.begin() + at, expected.begin() + at + size);
      const std::vector<float> got(grads.begin() + at, grads.begin() + at + size);
      const double scale = max_abs({ref_dparams.begin() + at, ref_dparams.begin() + at + size});
      expect_close(got, want, kAtolShare * scale, "d " + name);
    }
}

INSTANTIATE_TEST_SUITE_P(
    Configs, KanGradients,
    ::testing::Values(GradientCase{"tiny", 3, 2, 2, 3, 3, {4, 3}},
                      GradientCase{"tiny_batch1", 3, 2, 2, 1, 4, {4, 3}},
                      GradientCase{
                          "split_batch37", 16, 16, 3, 37, 40, {8, 5}, 5, 3, -1.0, 1.0, true},
                      GradientCase{"grid7_order2_batch33", 4, 3, 2, 33, 33, {7}, 7, 2, -2.0, 1.5},
                      GradientCase{"order5_batch5", 2, 5, 1, 5, 8, {6, 4}, 3, 5, -1.0, 1.0}),
    [](const ::testing::TestParamInfo<GradientCase>& info) {
      return std::string(info.param.name);
    });

// One train step as the trainer runs it: zero grads, forward, MSE, backward, clip + AdamW.
struct StepRig {
  StepRig(const ModelShape& shape, std::size_t batch, const std::vector<float>& x,
          const std::vector<float>& target)
      : model(shape, KanConfig{}, 77),
        batch(batch),
        d_x(x.size()),
        d_target(target.size()),
        prediction(target.size()),
        d_prediction(target.size()),
        mse(target.size()) {
    d_x.upload(x);
    d_target.upload(target);
    adamw.lr = 1e-3;
    adamw.weight_decay = 1e-2;
  }
  void step(const StreamContext& context) {
    model.slab().zero_grads(context.stream());
    model.forward(context, d_x.data(), batch, prediction.data());
    mse.run(prediction.data(), d_target.data(), d_prediction.data(), context.stream());
    model.backward(context, d_x.data(), d_prediction.data(), batch);
    model.slab().clip_and_adamw_step(1.0f, adamw, context.stream());
  }
  KanModel model;
  std::size_t batch;
  DeviceBuffer<float> d_x, d_target, prediction, d_prediction;
  DeviceMse mse;
  nn::AdamWConfig adamw;
};

TEST(KanTrainStep, GraphReplayEqualsEagerBitForBit) {
  RESIDENT_REQUIRE_GPU();
  // K-split first layer (512 inputs: K = 4608, 9 chunks), batch not a multiple of 32.
  const ModelShape shape{16, 32, 2, 96};
  const std::size_t batch = 90;
  std::mt19937_64 rng(3);
  const std::vector<float> x = random_floats(batch * 16 * 32, -2.0, 2.0, rng);
  const std::vector<float> target = random_floats(batch * 2, -1.0, 1.0, rng);
  StreamContext eager_context, graph_context;
  StepRig eager(shape, batch, x, target), graphed(shape, batch, x, target);
  std::printf("    %s\n", eager.model.describe().c_str());
  ASSERT_GT(eager.model.k_splits(0), 1u);

  {
    // Global capture mode: any host interaction (sync, copy, allocation) fails the capture.
    const test::StepGraph graph(graph_context.stream(), cudaStreamCaptureModeGlobal,
                                [&] { graphed.step(graph_context); });
    for (int s = 0; s < 3; ++s) {
      eager.step(eager_context);
      graph.launch(graph_context.stream());
    }
    eager_context.synchronize();
    graph_context.synchronize();
  }

  for (const nn::SlabPart part : {nn::SlabPart::Params, nn::SlabPart::AdamM, nn::SlabPart::AdamV}) {
    const std::vector<float> a = eager.model.slab().download(part, eager_context.stream());
    const std::vector<float> b = graphed.model.slab().download(part, graph_context.stream());
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
        << "slab part " << static_cast<int>(part) << " differs between eager and graph steps";
  }
  EXPECT_TRUE(test::same_bits(eager.mse.loss.download(), graphed.mse.loss.download(), "loss"));
  EXPECT_EQ(graphed.model.slab().read_step(graph_context.stream()), 3u);
  const std::vector<float> initial = StepRig(shape, batch, x, target)
                                         .model.slab()
                                         .download(nn::SlabPart::Params, graph_context.stream());
  EXPECT_NE(std::memcmp(
                initial.data(),
                graphed.model.slab().download(nn::SlabPart::Params, graph_context.stream()).data(),
                initial.size() * sizeof(float)),
            0)
      << "three steps must move the parameters";
}

TEST(KanTrainStep, BenchmarkShapeStepGivesAFiniteLoss) {
  RESIDENT_REQUIRE_GPU();
  const ModelShape shape{64, 32, 1, 256};
  const std::size_t batch = 256;
  auto model = models::make_supervised_model("kan", shape, 5);
  ASSERT_EQ(model->name(), "kan");
  std::printf("    %s, %zu parameters\n", model->describe().c_str(),
              model->slab().layout().parameter_count());
  std::mt19937_64 rng(4);
  const std::vector<float> x = random_floats(batch * 64 * 32, -3.0, 3.0, rng);
  const std::vector<float> target = random_floats(batch, -1.0, 1.0, rng);
  StreamContext context;
  DeviceBuffer<float> d_x(x.size()), d_target(batch), prediction(batch), d_prediction(batch);
  d_x.upload(x);
  d_target.upload(target);
  DeviceMse mse(batch);
  nn::AdamWConfig adamw;
  auto step = [&] {
    model->slab().zero_grads(context.stream());
    model->forward(context, d_x.data(), batch, prediction.data());
    mse.run(prediction.data(), d_target.data(), d_prediction.data(), context.stream());
    model->backward(context, d_x.data(), d_prediction.data(), batch);
    model->slab().clip_and_adamw_step(1.0f, adamw, context.stream());
  };
  step();
  ScalarReadback<float> readback;
  readback.enqueue(mse.loss.data(), context.stream());
  const float first_loss = readback.wait();
  readback.enqueue(model->slab().grad_norm(), context.stream());
  const float norm = readback.wait();
  std::printf("    first loss %.6f, grad norm %.6f\n", first_loss, norm);
  EXPECT_TRUE(std::isfinite(first_loss));
  EXPECT_TRUE(std::isfinite(norm));
  EXPECT_GT(norm, 0.0f);

  // Informational: the graph-replayed step time (the lead's bench measures it properly).
  constexpr int kReplays = 50;
  {
    const test::StepGraph graph(context.stream(), cudaStreamCaptureModeGlobal, step);
    for (int i = 0; i < 5; ++i) graph.launch(context.stream());
    const float ms =
        test::mean_event_ms(context.stream(), kReplays, [&] { graph.launch(context.stream()); });
    std::printf("    graph-replayed train step: %.3f ms (mean of %d; target 0.4 ms)\n", ms,
                kReplays);
  }
  readback.enqueue(mse.loss.data(), context.stream());
  const float last_loss = readback.wait();
  std::printf("    loss after %d steps %.6f\n", 1 + 5 + kReplays, last_loss);
  EXPECT_TRUE(std::isfinite(last_loss));
  EXPECT_LT(last_loss, first_loss) << "56 AdamW steps on one fixed batch lower its loss";
}

}  // namespace
