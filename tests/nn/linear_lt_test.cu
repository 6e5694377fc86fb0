// The cuBLASLt GEMM backend of the nn kit (lib/nn/linear_lt.h, MlpConfig::backend = CublasLt).
// CPU (run everywhere): the epilogue facts (aux ld and bytes, which epilogue belongs to which
// product, the activation -> epilogue mapping), spec validation naming the field and value, and
// the arena plan of an Lt Mlp. GPU: the Lt Mlp's forward, dx and parameter gradients against the
// double reference (tests/reference mlp_forward/mlp_backward) for ReLU and GELU (tanh) hidden
// layers (fused epilogues) and tanh (the kit's kernels after a BIAS-epilogue GEMM), with and
// without bias, in Overwrite and Accumulate modes, at edge sizes (1, odd, 128/129/130 around the
// ReLU mask's 128-bit ld, 256, 4096); the fused-epilogue plans chosen are printed. The whole
// RegressionStep on the Lt backend (graph == eager, audit contract, learning) is mlp_test's
// MlpTraining/cublas_lt case.
//
// Tolerance |gpu - ref| <= atol + rtol |ref|: {1e-4, 1e-3}, mlp_test.cu's (fp32 GEMMs over up to
// 256 terms per layer, three layers deep).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "lib/nn/linear_lt.h"
#include "lib/nn/mlp.h"
#include "tests/nn/mlp_reference_support.h"
#include "tests/nn/nn_test_support.h"
#include "tests/reference/nn_reference.h"
#include "tests/support/gpu.h"
#include "tests/support/param_name.h"

namespace {

using namespace resident;
using nn::LinearLtProduct;
using nn::LtEpilogue;
using test::nn_support::expect_close;
using test::nn_support::random_floats;
using test::nn_support::to_double;
using test::mlp_reference::flat;
using test::mlp_reference::reference_layers;

constexpr test::nn_support::Tolerance kTolerance{1e-4, 1e-3};

// ----------------------------------------------------------------------------- CPU

TEST(LinearLtHost, AuxLeadingDimensionsAndBytes) {
  // ReLU: a bit mask, ld in bits, a multiple of 128.
  EXPECT_EQ(nn::lt_aux_ld(LtEpilogue::ReluAuxBias, 1), 128u);
  EXPECT_EQ(nn::lt_aux_ld(LtEpilogue::ReluAux, 128), 128u);
  EXPECT_EQ(nn::lt_aux_ld(LtEpilogue::DReluBGrad, 129), 256u);
  EXPECT_EQ(nn::lt_aux_ld(LtEpilogue::DRelu, 256), 256u);
  EXPECT_EQ(nn::lt_aux_bytes(LtEpilogue::ReluAuxBias, 129, 17), 256u / 8 * 17);
  // GELU: the pre-activation in fp32, ld in floats, a multiple of 8.
  EXPECT_EQ(nn::lt_aux_ld(LtEpilogue::GeluAuxBias, 3), 8u);
  EXPECT_EQ(nn::lt_aux_ld(LtEpilogue::DGeluBGrad, 8), 8u);
  EXPECT_EQ(nn::lt_aux_ld(LtEpilogue::GeluAux, 130), 136u);
  EXPECT_EQ(nn::lt_aux_bytes(LtEpilogue::GeluAuxBias, 130, 17), 136u * 17 * sizeof(float));
  // No aux.
  for (const LtEpilogue e : {LtEpilogue::Default, LtEpilogue::Bias, LtEpilogue::BGradB}) {
    EXPECT_EQ(nn::lt_aux_ld(e, 100), 0u) << nn::to_string(e);
    EXPECT_EQ(nn::lt_aux_bytes(e, 100, 10), 0u) << nn::to_string(e);
  }
}

TEST(LinearLtHost, EpiloguesBelongToTheirProducts) {
  const std::vector<std::tuple<LtEpilogue, cublasLtEpilogue_t, LinearLtProduct>> table = {
      {LtEpilogue::Bias, CUBLASLT_EPILOGUE_BIAS, LinearLtProduct::Forward},
      {LtEpilogue::ReluAux, CUBLASLT_EPILOGUE_RELU_AUX, LinearLtProduct::Forward},
      {LtEpilogue::ReluAuxBias, CUBLASLT_EPILOGUE_RELU_AUX_BIAS, LinearLtProduct::Forward},
      {LtEpilogue::GeluAux, CUBLASLT_EPILOGUE_GELU_AUX, LinearLtProduct::Forward},
      {LtEpilogue::GeluAuxBias, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, LinearLtProduct::Forward},
      {LtEpilogue::DRelu, CUBLASLT_EPILOGUE_DRELU, LinearLtProduct::InputGrad},
      {LtEpilogue::DReluBGrad, CUBLASLT_EPILOGUE_DRELU_BGRAD, LinearLtProduct::InputGrad},
      {LtEpilogue::DGelu, CUBLASLT_EPILOGUE_DGELU, LinearLtProduct::InputGrad},
      {LtEpilogue::DGeluBGrad, CUBLASLT_EPILOGUE_DGELU_BGRAD, LinearLtProduct::InputGrad},
      {LtEpilogue::BGradB, CUBLASLT_EPILOGUE_BGRADB, LinearLtProduct::WeightGrad},
  };
  for (const auto& [e, cublaslt, product] : table) {
    EXPECT_EQ(nn::to_cublaslt(e), cublaslt) << nn::to_string(e);
    for (const LinearLtProduct p :
         {LinearLtProduct::Forward, LinearLtProduct::InputGrad, LinearLtProduct::WeightGrad})
      EXPECT_EQ(nn::lt_allowed(p, e), p == product) << nn::to_string(e) << " / " << nn::to_string(p);
  }
  for (const LinearLtProduct p :
       {LinearLtProduct::Forward, LinearLtProduct::InputGrad, LinearLtProduct::WeightGrad})
    EXPECT_TRUE(nn::lt_allowed(p, LtEpilogue::Default));
  EXPECT_EQ(nn::to_cublaslt(LtEpilogue::Default), CUBLASLT_EPILOGUE_DEFAULT);
}

TEST(LinearLtHost, ActivationsMapToEpiloguesOrToTheKernels) {
  using kernels::ActivationKind;
  EXPECT_EQ(nn::lt_activation_forward(ActivationKind::Relu, true), LtEpilogue::ReluAuxBias);
  EXPECT_EQ(nn::lt_activation_forward(ActivationKind::Relu, false), LtEpilogue::ReluAux);
  EXPECT_EQ(nn::lt_activation_forward(ActivationKind::GeluTanh, true), LtEpilogue::GeluAuxBias);
  EXPECT_EQ(nn::lt_activation_forward(ActivationKind::GeluTanh, false), LtEpilogue::GeluAux);
  EXPECT_EQ(nn::lt_activation_backward(ActivationKind::Relu, true), LtEpilogue::DReluBGrad);
  EXPECT_EQ(nn::lt_activation_backward(ActivationKind::Relu, false), LtEpilogue::DRelu);
  EXPECT_EQ(nn::lt_activation_backward(ActivationKind::GeluTanh, true), LtEpilogue::DGeluBGrad);
  EXPECT_EQ(nn::lt_activation_backward(ActivationKind::GeluTanh, false), LtEpilogue::DGelu);
  for (const ActivationKind kind : {ActivationKind::Tanh, ActivationKind::Sigmoid, ActivationKind::Silu,
                                    ActivationKind::Elu, ActivationKind::Softplus}) {
    EXPECT_FALSE(nn::lt_activation_forward(kind, true).has_value());
    EXPECT_FALSE(nn::lt_activation_backward(kind, true).has_value());
  }
}

void expect_invalid(const nn::LinearLtSpec& spec, std::initializer_list<const char*> names) {
  try {
    nn::validate(spec);
    ADD_FAILURE() << "no error; expected one naming " << *names.begin();
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const char* name : names)
      EXPECT_NE(message.find(name), std::string::npos) << "'" << name << "' not in: " << message;
  }
}

TEST(LinearLtHost, InvalidSpecsAreRejectedNamingTheFieldAndValue) {
  // Fake device addresses: validate() only looks at them.
  auto* bias = reinterpret_cast<float*>(std::uintptr_t{1} << 20);
  void* aux = reinterpret_cast<void*>(std::uintptr_t{1} << 21);
  nn::LinearLtSpec good;
  good.product = LinearLtProduct::Forward;
  good.shape = {256, 64, 130};
  good.epilogue = LtEpilogue::ReluAuxBias;
  good.bias = bias;
  good.aux = aux;
  good.aux_ld = 256;
  EXPECT_NO_THROW(nn::validate(good));

  nn::LinearLtSpec s = good;
  s.shape.batch = 0;
  expect_invalid(s, {"shape.batch = 0", "allowed [1, 2147483647]"});
  s = good;
  s.shape.in_features = std::size_t{1} << 31;
  expect_invalid(s, {"shape.in_features = 2147483648"});
  s = good;
  s.epilogue = LtEpilogue::BGradB;
  expect_invalid(s, {"BGradB", "does not apply to product Forward"});
  s = good;
  s.bias = nullptr;
  expect_invalid(s, {"ReluAuxBias", "bias missing"});
  s = good;
  s.epilogue = LtEpilogue::ReluAux;
  expect_invalid(s, {"bias given but not read"});
  s = good;
  s.aux_ld = 200;
  expect_invalid(s, {"aux_ld = 200 bits", "multiple of 128", ">= 130"});
  s = good;
  s.aux_ld = 128;
  expect_invalid(s, {"aux_ld = 128 bits", ">= 130 (rows of D)"});
  s = good;
  s.aux = nullptr;
  expect_invalid(s, {"aux missing"});
  s = good;
  s.aux = static_cast<char*>(aux) + 4;
  expect_invalid(s, {"aux not 16-byte aligned"});
  s = good;
  s.epilogue = LtEpilogue::GeluAuxBias;
  s.aux_ld = 132;
  expect_invalid(s, {"aux_ld = 132 floats", "multiple of 8"});
  // Backward products: the rows of D are the input features.
  s = good;
  s.product = LinearLtProduct::InputGrad;
  s.epilogue = LtEpilogue::DReluBGrad;
  s.bias = nullptr;
  s.bias_grad = bias;
  s.aux_ld = 128;  // in_features 64 rows: 128 bits suffice
  EXPECT_NO_THROW(nn::validate(s));
  s.bias_grad = nullptr;
  expect_invalid(s, {"DReluBGrad", "bias_grad missing"});
  s = good;
  s.product = LinearLtProduct::WeightGrad;
  s.epilogue = LtEpilogue::Default;
  s.bias = nullptr;
  expect_invalid(s, {"aux given (ld 256) but not used"});
  s.aux = nullptr;
  s.aux_ld = 0;
  s.bias_grad = bias;
  expect_invalid(s, {"bias_grad given but not written"});
}

TEST(LinearLtHost, MlpPlansTheAuxRegionsOfItsFusedActivations) {
  const auto arena_bytes = [](nn::MlpConfig config, std::size_t max_batch) {
    nn::ParamSlab slab;
    nn::Mlp mlp(std::move(config), max_batch, slab);  // no device work before finalize()
    ScratchPlan plan;
    mlp.plan(plan);
    return plan.bytes();
  };
  const std::vector<std::size_t> widths = {3, 129, 130, 1};
  const std::size_t batch = 17;
  EXPECT_EQ(nn::MlpConfig{}.backend, nn::GemmBackend::Cublas) << "the default backend changed";
  EXPECT_STREQ(nn::to_string(nn::GemmBackend::CublasLt), "CublasLt");
  const std::size_t base = arena_bytes({.widths = widths}, batch);
  nn::MlpConfig relu{.widths = widths, .backend = nn::GemmBackend::CublasLt};
  EXPECT_EQ(arena_bytes(relu, batch),
            base + align_up(256 / 8 * batch) + align_up(256 / 8 * batch));  // 129, 130 -> 256 bits
  nn::MlpConfig gelu = relu;
  gelu.hidden_activation.kind = kernels::ActivationKind::GeluTanh;
  EXPECT_EQ(arena_bytes(gelu, batch),
            base + align_up(136 * 4 * batch) + align_up(136 * 4 * batch));  // 129, 130 -> 136 floats
  nn::MlpConfig tanh_config = relu;
  tanh_config.hidden_activation.kind = kernels::ActivationKind::Tanh;
  EXPECT_EQ(arena_bytes(tanh_config, batch), base) << "tanh has no epilogue: no aux";
}

// ----------------------------------------------------------------------------- GPU

using LtRig = test::mlp_reference::MlpRig;

void print_plans(const nn::Mlp& mlp, std::size_t batch) {
  for (const std::string& line : mlp.describe_lt_plans(batch)) std::printf("    %s\n", line.c_str());
}

using LtCase = std::tuple<std::vector<std::size_t>, std::size_t, kernels::ActivationKind, bool>;

class MlpLtTest : public ::testing::TestWithParam<LtCase> {};

TEST_P(MlpLtTest, ForwardBackwardMatchTheReferenceInBothGradModes) {
  RESIDENT_REQUIRE_GPU();
  const auto& [widths, batch, kind, bias] = GetParam();
  nn::MlpConfig config{.widths = widths, .bias = bias, .backend = nn::GemmBackend::CublasLt};
  config.hidden_activation.kind = kind;
  LtRig rig(config, batch, 23);
  print_plans(rig.mlp, batch);
  const cudaStream_t stream = rig.context.stream();
  std::mt19937_64 rng(batch * 131 + widths.size() * 7 + static_cast<std::uint64_t>(kind));
  const std::size_t in = widths.front(), out = widths.back();
  const std::vector<float> x = random_floats(batch * in, -1.0f, 1.0f, rng);
  const std::vector<float> dy = random_floats(batch * out, -1.0f, 1.0f, rng);
  DeviceBuffer<float> d_x(x.size()), d_dy(dy.size()), d_dx(x.size());
  d_x.upload(x);
  d_dy.upload(dy);

  const auto layers = reference_layers(rig.mlp);
  const std::vector<double> params =
      flat(rig.mlp, rig.slab.download(nn::SlabPart::Params, stream), rig.slab);
  std::vector<double> ref_dx(x.size()), ref_dparams(params.size());
  reference::mlp_backward(layers, batch, params, to_double(x), to_double(dy), {ref_dx, ref_dparams},
                          reference::GradMode::Overwrite);
  const std::vector<double> ref_y = reference::mlp_forward(layers, batch, params, to_double(x));

  for (const nn::GradMode mode : {nn::GradMode::Overwrite, nn::GradMode::Accumulate}) {
    const bool accumulate = mode == nn::GradMode::Accumulate;
    SCOPED_TRACE(accumulate ? "Accumulate" : "Overwrite");
    // Overwrite: grads poisoned with NaN (never read); accumulate: random start values.
    std::vector<float> start(rig.slab.total_elements(), 0.0f);
    for (const nn::SlabTensor& t : rig.slab.layout().tensors()) {
      const std::vector<float> values =
          accumulate ? random_floats(t.size, -1.0f, 1.0f, rng)
                     : test::nn_support::nans(t.size);
      std::copy(values.begin(), values.end(), start.begin() + static_cast<std::ptrdiff_t>(t.offset));
    }
    rig.slab.upload(nn::SlabPart::Grads, start, stream);
    d_dx.upload(test::nn_support::nans(x.size()));
    const float* y = rig.mlp.forward(rig.context, d_x.data(), batch);
    rig.mlp.backward(rig.context, d_x.data(), d_dy.data(), d_dx.data(), batch, mode);
    rig.context.synchronize();
    std::vector<float> got_y(batch * out);
    ASSERT_EQ(cudaMemcpy(got_y.data(), y, got_y.size() * sizeof(float), cudaMemcpyDeviceToHost),
              cudaSuccess);
    expect_close(got_y, ref_y, kTolerance, "y");
    expect_close(d_dx.download(), ref_dx, kTolerance, "dx");
    std::vector<double> want = ref_dparams;
    if (accumulate) {
      const std::vector<double> initial = flat(rig.mlp, start, rig.slab);
      for (std::size_t i = 0; i < want.size(); ++i) want[i] += initial[i];
    }
    const std::vector<double> grads = flat(rig.mlp, rig.slab.download(nn::SlabPart::Grads, stream), rig.slab);
    expect_close(std::vector<float>(grads.begin(), grads.end()), want, kTolerance, "dparams");
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MlpLtTest,
    ::testing::Values(LtCase{{1, 1}, 1, kernels::ActivationKind::Relu, true},
                      LtCase{{5, 7, 3}, 33, kernels::ActivationKind::Relu, true},
                      LtCase{{5, 7, 3}, 33, kernels::ActivationKind::GeluTanh, true},
                      LtCase{{3, 129, 130, 1}, 17, kernels::ActivationKind::Relu, true},
                      LtCase{{3, 129, 130, 1}, 17, kernels::ActivationKind::GeluTanh, true},
                      LtCase{{3, 129, 130, 1}, 17, kernels::ActivationKind::Relu, false},
                      LtCase{{3, 129, 130, 1}, 17, kernels::ActivationKind::GeluTanh, false},
                      LtCase{{6, 128, 2}, 129, kernels::ActivationKind::Tanh, true},
                      LtCase{{64, 256, 256, 3}, 256, kernels::ActivationKind::Relu, true},
                      LtCase{{64, 256, 256, 3}, 256, kernels::ActivationKind::GeluTanh, true},
                      LtCase{{4, 64, 64, 2}, 4096, kernels::ActivationKind::Relu, true}),
    [](const auto& test_case) {
      const auto& p = test_case.param;
      return test::param_name("widths", test::dims(std::get<0>(p)), "batch", std::get<1>(p),
                              std::get<2>(p), test::flag(std::get<3>(p), "bias", "no_bias"));
    });

TEST(MlpLt, BatchesArePlannedAtSetupOnly) {
  RESIDENT_REQUIRE_GPU();
  LtRig rig({.widths = {4, 8, 2}, .backend = nn::GemmBackend::CublasLt}, 64, 3);
  DeviceBuffer<float> x(64 * 4);
  try {
    rig.mlp.forward(rig.context, x.data(), 10);
    ADD_FAILURE() << "a batch without plans ran";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("batch = 10"), std::string::npos) << message;
    EXPECT_NE(message.find("prepared: 64"), std::string::npos) << message;
    EXPECT_NE(message.find("prepare_batch(10)"), std::string::npos) << message;
  }
  rig.mlp.prepare_batch(10);
  EXPECT_NO_THROW(rig.mlp.forward(rig.context, x.data(), 10));
  EXPECT_FALSE(rig.mlp.describe_lt_plans(10).empty());
  EXPECT_THROW(rig.mlp.prepare_batch(65), Error);
  rig.context.synchronize();
}

}  // namespace
