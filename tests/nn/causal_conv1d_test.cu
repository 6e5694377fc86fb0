// The causal depthwise conv kit op (kernels/nn/causal_conv1d.h) against the double reference
// (tests/reference/mamba2_reference.h causal_conv1d_*), on a GPU: forward and backward, with and
// without SiLU, strided views (a column block of a wider matrix), sizes that hit edges (one
// element, several 64-row blocks, channels past a 32-channel tile, K = 1 and the maximum 8);
// outputs poisoned with NaN; dweight and dbias accumulated onto random start values and
// overwritten. Tolerance |gpu - ref| <= 1e-5 + 1e-4 |ref| (fp32 sums of at most batch * L
// terms against double).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/nn/causal_conv1d.cuh"
#include "kernels/nn/causal_conv1d.h"
#include "lib/core/device_buffer.h"
#include "tests/reference/mamba2_reference.h"
#include "tests/support/gpu.h"

namespace {

namespace ref = resident::reference;
using resident::DeviceBuffer;

std::vector<double> uniform(std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = u(rng);
  return v;
}

DeviceBuffer<float> upload(const std::vector<double>& v) {
  DeviceBuffer<float> b(v.size());
  b.upload(std::vector<float>(v.begin(), v.end()));
  return b;
}

double check(const char* what, const std::vector<float>& got, const std::vector<double>& want) {
  const double rtol = 1e-4, atol = 1e-5;
  double worst = 0.0, max_err = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double share = std::isfinite(got[i]) ? err / (atol + rtol * std::fabs(want[i])) : INFINITY;
    worst = std::max(worst, share);
    max_err = std::max(max_err, err);
  }
  std::printf("    %-8s max |err| %.3e, share of tolerance %.3f\n", what, max_err, worst);
  EXPECT_LE(worst, 1.0) << what;
  return worst;
}

struct Case {
  std::size_t batch, length, channels, kernel;
};

TEST(CausalConv1d, ForwardAndBackwardMatchReference) {
  RESIDENT_REQUIRE_GPU();
  const Case cases[] = {{1, 1, 1, 1}, {2, 5, 3, 4},  {3, 70, 33, 4},
                        {2, 9, 40, 8}, {5, 13, 64, 2}, {4, 64, 192, 4}};
  std::mt19937_64 rng(7);
  for (const Case& c : cases) {
    for (bool silu : {false, true}) {
      for (bool accumulate : {false, true}) {
        const std::size_t rows = c.batch * c.length, C = c.channels, K = c.kernel;
        const std::size_t in_stride = C + 5, out_stride = C + 3;  // column blocks of wider rows
        const std::vector<double> u = uniform(rows * C, rng), w = uniform(C * K, rng),
                                  b = uniform(C, rng), dy = uniform(rows * C, rng);
        std::vector<double> u_wide(rows * in_stride, 0.5), dy_wide(rows * in_stride, 0.25);
        for (std::size_t r = 0; r < rows; ++r)
          for (std::size_t ch = 0; ch < C; ++ch) {
            u_wide[r * in_stride + ch] = u[r * C + ch];
            dy_wide[r * in_stride + ch] = dy[r * C + ch];
          }
        DeviceBuffer<float> du_wide_in = upload(u_wide), ddy = upload(dy_wide), dw = upload(w),
                            dbias = upload(b);
        DeviceBuffer<float> y(rows * out_stride), du(rows * out_stride);
        RESIDENT_CUDA_CHECK(cudaMemset(y.data(), 0xFF, y.bytes()));
        RESIDENT_CUDA_CHECK(cudaMemset(du.data(), 0xFF, du.bytes()));
        const std::vector<double> gw0 = uniform(C * K, rng), gb0 = uniform(C, rng);
        DeviceBuffer<float> gw = upload(gw0), gb = upload(gb0);
        const std::size_t scratch_n =
            resident::kernels::causal_conv1d_backward_scratch_floats(c.batch, c.length, C, K);
        DeviceBuffer<float> scratch(scratch_n);
        resident::kernels::launch_causal_conv1d_forward(y.data(), out_stride, du_wide_in.data(),
                                                        in_stride, dw.data(), dbias.data(),
                                                        c.batch, c.length, C, K, silu, nullptr);
        resident::kernels::launch_causal_conv1d_backward(
            du.data(), out_stride, gw.data(), gb.data(), scratch.data(), scratch_n, ddy.data(),
            in_stride, du_wide_in.data(), in_stride, dw.data(), dbias.data(), c.batch, c.length,
            C, K, silu,
            accumulate ? resident::nn::GradMode::Accumulate : resident::nn::GradMode::Overwrite,
            nullptr);
        RESIDENT_CUDA_CHECK(cudaDeviceSynchronize());
        const std::vector<double> want_y = ref::causal_conv1d_forward(c.batch, c.length, C, K, u, w, b, silu);
        ref::CausalConv1dGrads want = ref::causal_conv1d_backward(c.batch, c.length, C, K, u, w, b, silu, dy);
        if (accumulate) {
          for (std::size_t i = 0; i < gw0.size(); ++i) want.dweight[i] += gw0[i];
          for (std::size_t i = 0; i < gb0.size(); ++i) want.dbias[i] += gb0[i];
        }
        const std::vector<float> y_wide = y.download(), du_got_wide = du.download();
        std::vector<float> y_got(rows * C), du_got(rows * C);
        for (std::size_t r = 0; r < rows; ++r)
          for (std::size_t ch = 0; ch < C; ++ch) {
            y_got[r * C + ch] = y_wide[r * out_stride + ch];
            du_got[r * C + ch] = du_got_wide[r * out_stride + ch];
          }
        std::printf("  batch %zu L %zu C %zu K %zu silu %d %s:\n", c.batch, c.length, C, K,
                    silu ? 1 : 0, accumulate ? "accumulate" : "overwrite");
        check("y", y_got, want_y);
        check("du", du_got, want.du);
        check("dweight", gw.download(), want.dweight);
        check("dbias", gb.download(), want.dbias);
      }
    }
  }
}

// The kernels' thread programs (causal_conv1d.cuh forward_run / backward_run) run on the host
// over every (channel, 16-row run), against the double reference: the register windows, the
// halos across sequence boundaries and the tap order are checked without a GPU.
TEST(CausalConv1dThreadPrograms, MatchTheReferenceOnTheHost) {
  namespace cc = resident::kernels::causal_conv;
  std::mt19937_64 rng(23);
  const Case cases[] = {{1, 1, 1, 1}, {2, 5, 3, 4}, {3, 70, 5, 4}, {2, 9, 4, 8}, {4, 17, 3, 2},
                        {2, 40, 2, 7}};
  for (const Case& c : cases) {
    for (bool silu : {false, true}) {
      const std::size_t rows = c.batch * c.length, C = c.channels, K = c.kernel;
      const std::size_t stride = C + 3;  // a column block of a wider matrix
      const std::vector<double> u = uniform(rows * C, rng), w = uniform(C * K, rng),
                                b = uniform(C, rng), dy = uniform(rows * C, rng);
      std::vector<float> uf(rows * stride, 0.0f), dyf(rows * stride, 0.0f), wf(C * K), bf(C);
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t ch = 0; ch < C; ++ch) {
          uf[r * stride + ch] = static_cast<float>(u[r * C + ch]);
          dyf[r * stride + ch] = static_cast<float>(dy[r * C + ch]);
        }
      for (std::size_t i = 0; i < C * K; ++i) wf[i] = static_cast<float>(w[i]);
      for (std::size_t i = 0; i < C; ++i) bf[i] = static_cast<float>(b[i]);
      const cc::View v{uf.data(), static_cast<long long>(stride), wf.data(), bf.data(),
                       static_cast<int>(c.length), static_cast<int>(K), silu};
      std::vector<float> y(rows * stride, std::nanf("")), du(rows * stride, std::nanf(""));
      std::vector<double> dw(C * K, 0.0), db(C, 0.0);
      for (std::size_t ch = 0; ch < C; ++ch)
        for (std::size_t base = 0; base < rows; base += cc::kRunRows) {
          const int t0 = static_cast<int>(base % c.length);
          cc::forward_run(y.data(), static_cast<long long>(stride), v,
                          static_cast<long long>(rows), static_cast<long long>(base), t0,
                          static_cast<int>(ch));
          float sums[cc::kMaxTaps + 1];
          cc::backward_run(du.data(), static_cast<long long>(stride), dyf.data(),
                           static_cast<long long>(stride), v, static_cast<long long>(rows),
                           static_cast<long long>(base), t0, static_cast<int>(ch), sums);
          for (std::size_t m = 0; m < K; ++m) dw[ch * K + (K - 1 - m)] += sums[m];
          db[ch] += sums[cc::kMaxTaps];
        }
      const std::vector<double> want_y =
          ref::causal_conv1d_forward(c.batch, c.length, C, K, u, w, b, silu);
      const ref::CausalConv1dGrads want =
          ref::causal_conv1d_backward(c.batch, c.length, C, K, u, w, b, silu, dy);
      std::vector<float> y_got(rows * C), du_got(rows * C), dw_got(dw.begin(), dw.end()),
          db_got(db.begin(), db.end());
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t ch = 0; ch < C; ++ch) {
          y_got[r * C + ch] = y[r * stride + ch];
          du_got[r * C + ch] = du[r * stride + ch];
        }
      std::printf("  host batch %zu L %zu C %zu K %zu silu %d:\n", c.batch, c.length, C, K,
                  silu ? 1 : 0);
      check("y", y_got, want_y);
      check("du", du_got, want.du);
      check("dweight", dw_got, want.dweight);
      check("dbias", db_got, want.dbias);
    }
  }
}

TEST(CausalConv1d, RejectsBadArguments) {
  float* p = nullptr;
  EXPECT_THROW(resident::kernels::launch_causal_conv1d_forward(p, 4, p, 4, p, p, 1, 4, 4, 9, true,
                                                               nullptr),
               resident::Error);
  EXPECT_THROW(resident::kernels::launch_causal_conv1d_backward(
                   p, 4, p, p, p, 0, p, 4, p, 4, p, p, 1, 4, 4, 4, true,
                   resident::nn::GradMode::Overwrite, nullptr),
               resident::Error);
}

}  // namespace
