// Softmax and log-softmax kernels against the double-precision reference: forward and backward
// (both grad modes), no mask and causal mask, at row lengths that hit every row group and its
// edges (1, 4|5, 8|9, 16|17, 31, 32, 33, 1024|1025, 4097) and at many rows. Fresh random logits
// in [-4, 4]; row 0 is shifted by +100, where e^x overflows fp32 unless the row maximum is
// subtracted. Outputs are poisoned with NaN (forward, overwrite) or random values (accumulate).
// Masked outputs must be exactly 0 / -infinity and masked gradients exactly 0 (or untouched).
//
// Tolerances |gpu - ref| <= atol + rtol |ref| (fp32 exp and division ~1 ulp each; a row's sum of
// exponentials has relative error ~(per-thread terms + tree depth) * 6e-8, <= ~2e-6 at 4097):
//   softmax y       atol 1e-8, rtol 1e-5
//   log-softmax y   atol 1e-5, rtol 1e-5  (|y| up to ~16: ulp(16) / 2 ~ 1e-6, plus log(sum))
//   softmax dx      atol 2e-6, rtol 1e-4  (dy - sum y dy cancels; its error scales with y <= 1)
//   log-softmax dx  atol 2e-6, rtol 1e-4  (e^y carries y's error; sum dy over up to 4097 terms)
// Determinism: the same launches twice give bit-identical outputs, and in-place (y = x) forward
// equals out-of-place bit for bit.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/core/error.h"
#include "kernels/nn/softmax.h"
#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "tests/nn/nn_test_support.h"
#include "tests/reference/nn_reference.h"
#include "tests/support/gpu.h"
#include "tests/support/param_name.h"

namespace {

using namespace resident;
using test::nn_support::expect_close;
using test::nn_support::Tolerance;

constexpr Tolerance kSoftmaxY{1e-8, 1e-5};
constexpr Tolerance kLogSoftmaxY{1e-5, 1e-5};
constexpr Tolerance kSoftmaxDx{2e-6, 1e-4};
constexpr Tolerance kLogSoftmaxDx{2e-6, 1e-4};
constexpr float kShift = 100.0f;  // row 0: e^(x) would overflow fp32 without max-subtraction

struct Case {
  std::size_t rows;
  std::size_t cols;
  nn::SoftmaxMask mask;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.rows << "x" << c.cols << (c.mask == nn::SoftmaxMask::Causal ? " causal" : "");
}

reference::SoftmaxMask reference_mask(nn::SoftmaxMask mask) {
  return mask == nn::SoftmaxMask::Causal ? reference::SoftmaxMask::Causal
                                         : reference::SoftmaxMask::None;
}

reference::GradMode reference_mode(nn::GradMode mode) {
  return mode == nn::GradMode::Accumulate ? reference::GradMode::Accumulate
                                          : reference::GradMode::Overwrite;
}

std::size_t visible_columns(std::size_t r, const Case& c) {
  return c.mask == nn::SoftmaxMask::Causal ? r % c.cols + 1 : c.cols;
}

// Masked entries hold exactly `value` (bitwise, so -0 is not 0 and NaN never passes).
void expect_masked_exact(const std::vector<float>& got, const Case& c,
                         const std::vector<float>& value, const char* what) {
  for (std::size_t r = 0; r < c.rows; ++r)
    for (std::size_t col = visible_columns(r, c); col < c.cols; ++col) {
      const std::size_t i = r * c.cols + col;
      ASSERT_EQ(std::memcmp(&got[i], &value[i], sizeof(float)), 0)
          << what << " masked [" << r << ", " << col << "]: " << got[i] << ", expected "
          << value[i];
    }
}

struct Kind {
  bool log;
  const char* name;
};
constexpr Kind kKinds[] = {{false, "softmax"}, {true, "log_softmax"}};

void forward(const Kind& kind, float* y, const float* x, const Case& c, cudaStream_t stream) {
  if (kind.log)
    kernels::launch_log_softmax_forward(y, x, c.rows, c.cols, c.mask, stream);
  else
    kernels::launch_softmax_forward(y, x, c.rows, c.cols, c.mask, stream);
}

void backward(const Kind& kind, float* dx, const float* y, const float* dy, const Case& c,
              nn::GradMode mode, cudaStream_t stream) {
  if (kind.log)
    kernels::launch_log_softmax_backward(dx, y, dy, c.rows, c.cols, c.mask, mode, stream);
  else
    kernels::launch_softmax_backward(dx, y, dy, c.rows, c.cols, c.mask, mode, stream);
}

std::vector<float> random_logits(const Case& c, std::mt19937_64& rng) {
  std::vector<float> x = test::nn_support::random_floats(c.rows * c.cols, -4.0f, 4.0f, rng);
  for (std::size_t col = 0; col < c.cols; ++col) x[col] += kShift;
  return x;
}

class SoftmaxTest : public ::testing::TestWithParam<Case> {};

TEST_P(SoftmaxTest, ForwardAndBackwardMatchTheReference) {
  RESIDENT_REQUIRE_GPU();
  const Case c = GetParam();
  const std::size_t n = c.rows * c.cols;
  std::printf("  rows %zu, cols %zu, %s\n", c.rows, c.cols,
              c.mask == nn::SoftmaxMask::Causal ? "causal" : "no mask");
  std::mt19937_64 rng(c.rows * 1000003 + c.cols * 7 + (c.mask == nn::SoftmaxMask::Causal));
  Stream stream;
  const std::vector<float> x = random_logits(c, rng);
  const std::vector<float> dy = test::nn_support::random_floats(n, -1.0f, 1.0f, rng);
  const std::vector<double> xd = test::nn_support::to_double(x), dyd = test::nn_support::to_double(dy);
  DeviceBuffer<float> d_x(n), d_y(n), d_dy(n), d_dx(n);
  d_x.upload(x);
  d_dy.upload(dy);

  for (const Kind& kind : kKinds) {
    const std::string name = kind.name;
    d_y.upload(test::nn_support::nans(n));
    forward(kind, d_y.data(), d_x.data(), c, stream.get());
    stream.synchronize();
    const std::vector<float> y = d_y.download();
    const std::vector<double> want_y =
        kind.log ? reference::log_softmax_forward(c.rows, c.cols, xd, reference_mask(c.mask))
                 : reference::softmax_forward(c.rows, c.cols, xd, reference_mask(c.mask));
    ASSERT_NO_FATAL_FAILURE(
        expect_close(y, want_y, kind.log ? kLogSoftmaxY : kSoftmaxY, name + " y"));
    ASSERT_NO_FATAL_FAILURE(expect_masked_exact(
        y, c, std::vector<float>(n, kind.log ? -std::numeric_limits<float>::infinity() : 0.0f),
        kind.name));

    for (const nn::GradMode mode : {nn::GradMode::Overwrite, nn::GradMode::Accumulate}) {
      const bool acc = mode == nn::GradMode::Accumulate;
      const std::vector<float> dx0 =
          acc ? test::nn_support::random_floats(n, -1.0f, 1.0f, rng) : test::nn_support::nans(n);
      d_dx.upload(dx0);
      backward(kind, d_dx.data(), d_y.data(), d_dy.data(), c, mode, stream.get());
      stream.synchronize();
      const std::vector<float> dx = d_dx.download();
      std::vector<double> want_dx = test::nn_support::to_double(dx0);
      if (kind.log)
        reference::log_softmax_backward(c.rows, c.cols, xd, dyd, reference_mask(c.mask), want_dx,
                                        reference_mode(mode));
      else
        reference::softmax_backward(c.rows, c.cols, xd, dyd, reference_mask(c.mask), want_dx,
                                    reference_mode(mode));
      ASSERT_NO_FATAL_FAILURE(expect_close(dx, want_dx, kind.log ? kLogSoftmaxDx : kSoftmaxDx,
                                           name + (acc ? " dx acc" : " dx")));
      ASSERT_NO_FATAL_FAILURE(
          expect_masked_exact(dx, c, acc ? dx0 : std::vector<float>(n, 0.0f), "dx"));
    }
  }
}

TEST_P(SoftmaxTest, DeterministicAndInPlace) {
  RESIDENT_REQUIRE_GPU();
  const Case c = GetParam();
  const std::size_t n = c.rows * c.cols;
  std::mt19937_64 rng(c.rows * 31 + c.cols);
  Stream stream;
  const std::vector<float> x = random_logits(c, rng);
  DeviceBuffer<float> d_x(n), d_y(n), d_inplace(n), d_dy(n), d_dx(n);
  d_x.upload(x);
  d_dy.upload(test::nn_support::random_floats(n, -1.0f, 1.0f, rng));

  for (const Kind& kind : kKinds) {
    std::vector<float> runs[2][2];  // [run][y, dx]
    for (auto& run : runs) {
      d_y.upload(test::nn_support::nans(n));
      d_dx.upload(test::nn_support::nans(n));
      forward(kind, d_y.data(), d_x.data(), c, stream.get());
      backward(kind, d_dx.data(), d_y.data(), d_dy.data(), c, nn::GradMode::Overwrite,
               stream.get());
      stream.synchronize();
      run[0] = d_y.download();
      run[1] = d_dx.download();
    }
    EXPECT_TRUE(test::nn_support::bit_identical(runs[0][0], runs[1][0])) << kind.name << " y";
    EXPECT_TRUE(test::nn_support::bit_identical(runs[0][1], runs[1][1])) << kind.name << " dx";

    d_inplace.upload(x);
    forward(kind, d_inplace.data(), d_inplace.data(), c, stream.get());
    stream.synchronize();
    EXPECT_TRUE(test::nn_support::bit_identical(d_inplace.download(), runs[0][0]))
        << kind.name << " in place";
  }
}

INSTANTIATE_TEST_SUITE_P(
    EdgeSizes, SoftmaxTest,
    ::testing::Values(Case{1, 1, nn::SoftmaxMask::None}, Case{1, 1, nn::SoftmaxMask::Causal},
                      Case{3, 4, nn::SoftmaxMask::None}, Case{8, 4, nn::SoftmaxMask::Causal},
                      Case{3, 5, nn::SoftmaxMask::None}, Case{5, 8, nn::SoftmaxMask::None},
                      Case{27, 9, nn::SoftmaxMask::Causal}, Case{4, 16, nn::SoftmaxMask::None},
                      Case{34, 17, nn::SoftmaxMask::Causal}, Case{3, 31, nn::SoftmaxMask::None},
                      Case{62, 31, nn::SoftmaxMask::Causal}, Case{5, 32, nn::SoftmaxMask::None},
                      Case{96, 32, nn::SoftmaxMask::Causal}, Case{4, 33, nn::SoftmaxMask::None},
                      Case{33, 33, nn::SoftmaxMask::Causal}, Case{3, 1024, nn::SoftmaxMask::None},
                      Case{2, 1025, nn::SoftmaxMask::None},
                      Case{1025, 1025, nn::SoftmaxMask::Causal},
                      Case{3, 4097, nn::SoftmaxMask::None}, Case{10001, 3, nn::SoftmaxMask::None},
                      Case{9999, 3, nn::SoftmaxMask::Causal},
                      Case{4096, 100, nn::SoftmaxMask::None},
                      Case{2000, 40, nn::SoftmaxMask::Causal}),
    [](const auto& test_case) {
      return test::param_name(test::dims({test_case.param.rows, test_case.param.cols}),
                              test_case.param.mask);
    });

// Shape checks happen on the host, before any launch: these run without a GPU.
TEST(SoftmaxShapeTest, CausalMaskNeedsRowsAMultipleOfCols) {
  EXPECT_THROW(
      kernels::launch_softmax_forward(nullptr, nullptr, 10, 4, nn::SoftmaxMask::Causal, nullptr),
      Error);
  EXPECT_THROW(
      kernels::launch_log_softmax_backward(nullptr, nullptr, nullptr, 5, 2, nn::SoftmaxMask::Causal,
                                           nn::GradMode::Overwrite, nullptr),
      Error);
}

TEST(SoftmaxShapeTest, EmptyShapesLaunchNothing) {
  EXPECT_NO_THROW(
      kernels::launch_softmax_forward(nullptr, nullptr, 0, 7, nn::SoftmaxMask::Causal, nullptr));
  EXPECT_NO_THROW(kernels::launch_softmax_backward(
      nullptr, nullptr, nullptr, 7, 0, nn::SoftmaxMask::None, nn::GradMode::Accumulate, nullptr));
}

}  // namespace
