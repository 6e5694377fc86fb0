// Fused bias + activation against the double-precision reference and against the unfused GPU
// ops it replaces (add_bias + activation_forward; activation_backward + bias_grad), which it must
// equal bit for bit. Shapes hit the column-tile edges (1 column, odd widths, 32|33, a tall narrow
// matrix that narrows the tiles, 256x256 of the MLP bench). Fresh random z, bias, da; outputs
// poisoned with NaN (overwrite) or random (accumulate); dz also computed in place over da, as the
// MLP does.
// Tolerances |gpu - ref| <= atol + rtol |ref|:
//   z = z0 + bias       atol 1e-6, rtol 1e-6 (one fp32 add)
//   y = f(z), dz        atol 1e-6, rtol 2e-5 (the activation kernels' own tolerance, GELU's)
//   dbias               atol 1e-5 + 2e-7 * rows, rtol 1e-4 (fp32 column sums that may cancel)
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/core/error.h"
#include "kernels/nn/bias.h"
#include "kernels/nn/bias_activation.h"
#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "tests/nn/nn_test_support.h"
#include "tests/reference/nn_reference.h"
#include "tests/support/gpu.h"

namespace {

using namespace resident;
using kernels::Activation;
using kernels::ActivationKind;
using test::nn_support::expect_close;
using test::nn_support::nans;
using test::nn_support::random_floats;
using test::nn_support::to_double;
using test::nn_support::Tolerance;

using Kind = test::nn_support::HiddenActivation;
constexpr const auto& kKinds = test::nn_support::kHiddenActivations;

using Shape = std::tuple<std::size_t, std::size_t>;  // rows, cols

class BiasActivationTest : public ::testing::TestWithParam<std::tuple<std::size_t, Shape>> {};

TEST_P(BiasActivationTest, FusedMatchesTheReferenceAndTheUnfusedOps) {
  RESIDENT_REQUIRE_GPU();
  const auto [kind_index, shape] = GetParam();
  const auto [rows, cols] = shape;
  const Kind& kind = kKinds[kind_index];
  const Activation activation{kind.kind};
  reference::Activation ref;
  ref.kind = kind.reference_kind;
  const std::size_t n = rows * cols;
  std::printf("  %s, rows %zu, cols %zu\n", kind.name, rows, cols);
  std::mt19937_64 rng(rows * 7919 + cols * 31 + kind_index);
  Stream stream;
  const std::vector<float> z0 = random_floats(n, -3.0f, 3.0f, rng);
  const std::vector<float> bias = random_floats(cols, -1.0f, 1.0f, rng);
  const std::vector<float> da = random_floats(n, -1.0f, 1.0f, rng);
  DeviceBuffer<float> d_z(n), d_y(n), d_bias(cols), d_z_unfused(n), d_y_unfused(n);
  d_bias.upload(bias);

  // Forward.
  d_z.upload(z0);
  d_y.upload(nans(n));
  kernels::launch_bias_activation_forward(d_z.data(), d_y.data(), d_bias.data(), rows, cols,
                                          activation, stream.get());
  d_z_unfused.upload(z0);
  d_y_unfused.upload(nans(n));
  kernels::launch_add_bias(d_z_unfused.data(), d_bias.data(), rows, cols, stream.get());
  kernels::launch_activation_forward(d_y_unfused.data(), d_z_unfused.data(), n, activation,
                                     stream.get());
  stream.synchronize();
  std::vector<double> z_ref(n);
  for (std::size_t i = 0; i < n; ++i) z_ref[i] = static_cast<double>(z0[i]) + bias[i % cols];
  const std::vector<float> z = d_z.download(), y = d_y.download();
  expect_close(z, z_ref, {1e-6, 1e-6}, "z");
  expect_close(y, reference::activation_forward(ref, z_ref), {1e-6, 2e-5}, "y");
  EXPECT_EQ(z, d_z_unfused.download()) << "fused z differs from add_bias";
  EXPECT_EQ(y, d_y_unfused.download()) << "fused y differs from add_bias + activation";

  // Backward, both grad modes, out of place and in place (dz over da).
  DeviceBuffer<float> d_da(n), d_dz(n), d_db(cols), d_dz_unfused(n), d_db_unfused(cols);
  std::vector<double> dz_ref(n);
  reference::activation_backward(ref, to_double(z), to_double(da), dz_ref,
                                 reference::GradMode::Overwrite);
  const Tolerance db_tolerance{1e-5 + 2e-7 * static_cast<double>(rows), 1e-4};
  for (const nn::GradMode mode : {nn::GradMode::Overwrite, nn::GradMode::Accumulate}) {
    const bool acc = mode == nn::GradMode::Accumulate;
    const std::vector<float> db0 = acc ? random_floats(cols, -1.0f, 1.0f, rng) : nans(cols);
    for (const bool in_place : {false, true}) {
      d_da.upload(da);
      d_dz.upload(nans(n));
      d_db.upload(db0);
      float* dz = in_place ? d_da.data() : d_dz.data();
      kernels::launch_activation_backward_bias_grad(dz, d_db.data(), d_z.data(), d_da.data(), rows,
                                                    cols, activation, mode, stream.get());
      stream.synchronize();
      const std::string what = std::string(acc ? "acc" : "overwrite") + (in_place ? " in place" : "");
      const std::vector<float> got_dz = in_place ? d_da.download() : d_dz.download();
      std::vector<double> db_ref = to_double(db0);
      for (std::size_t c = 0; c < cols; ++c) {
        double sum = 0.0;
        for (std::size_t r = 0; r < rows; ++r) sum += dz_ref[r * cols + c];
        db_ref[c] = acc ? db_ref[c] + sum : sum;
      }
      expect_close(got_dz, dz_ref, {1e-6, 2e-5}, "dz " + what);
      expect_close(d_db.download(), db_ref, db_tolerance, "db " + what);
      if (!in_place) {  // the unfused ops on the same inputs (da is intact out of place)
        d_dz_unfused.upload(nans(n));
        d_db_unfused.upload(db0);
        kernels::launch_activation_backward(d_dz_unfused.data(), d_z.data(), d_da.data(), n,
                                            activation, nn::GradMode::Overwrite, stream.get());
        kernels::launch_bias_grad(d_db_unfused.data(), d_dz_unfused.data(), rows, cols, mode,
                                  stream.get());
        stream.synchronize();
        EXPECT_EQ(got_dz, d_dz_unfused.download()) << "fused dz differs from activation_backward";
        EXPECT_EQ(d_db.download(), d_db_unfused.download()) << "fused db differs from bias_grad";
      }
      if (kernels::derivative_from_output_exact(kind.kind)) {
        // f' from the saved output y (the fused MLP forward keeps only y): the same bits, in
        // place over a fresh copy of da as the MLP runs it.
        DeviceBuffer<float> d_da_copy(n), d_db_from_y(cols);
        d_da_copy.upload(da);
        d_db_from_y.upload(db0);
        kernels::launch_activation_backward_bias_grad(
            d_da_copy.data(), d_db_from_y.data(), d_y.data(), d_da_copy.data(), rows, cols,
            activation, mode, stream.get(), kernels::SavedActivation::Output);
        stream.synchronize();
        EXPECT_EQ(got_dz, d_da_copy.download()) << "dz from y differs from dz from z, " << what;
        EXPECT_EQ(d_db.download(), d_db_from_y.download())
            << "db from y differs from db from z, " << what;
      }
    }
  }
}

std::string case_name(const ::testing::TestParamInfo<BiasActivationTest::ParamType>& info) {
  const auto [rows, cols] = std::get<1>(info.param);
  return std::string(kKinds[std::get<0>(info.param)].name) + "_" + std::to_string(rows) + "x" +
         std::to_string(cols);
}

INSTANTIATE_TEST_SUITE_P(
    TileEdges, BiasActivationTest,
    ::testing::Combine(::testing::Range<std::size_t>(0, std::size(kKinds)),
                       ::testing::Values(Shape{1, 1}, Shape{3, 5}, Shape{31, 32}, Shape{65, 33},
                                         Shape{256, 256}, Shape{4096, 64}, Shape{4096, 2},
                                         Shape{40000, 3}, Shape{7, 1025},
                                         Shape{131072, 64}, Shape{100003, 1})),
    case_name);

TEST(BiasActivationArguments, OutputDerivativeOnlyForReluAndTanh) {
  // Refused before any launch (CPU test).
  try {
    kernels::launch_activation_backward_bias_grad(nullptr, nullptr, nullptr, nullptr, 4, 4,
                                                  Activation{ActivationKind::GeluTanh},
                                                  nn::GradMode::Overwrite, nullptr,
                                                  kernels::SavedActivation::Output);
    ADD_FAILURE() << "GELU with the saved output was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("saved = Output needs a ReLU or tanh"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(kernels::derivative_from_output_exact(ActivationKind::Relu));
  EXPECT_TRUE(kernels::derivative_from_output_exact(ActivationKind::Tanh));
  EXPECT_FALSE(kernels::derivative_from_output_exact(ActivationKind::Sigmoid));
  EXPECT_FALSE(kernels::derivative_from_output_exact(ActivationKind::GeluTanh));
}

}  // namespace
