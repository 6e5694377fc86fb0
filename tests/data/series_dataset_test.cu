// The device side of the supervised dataset (GPU; skips without one): the column statistics
// kernel against a double-precision two-pass reference, the normalization against the same
// formula on the host, statistics taken from the training range only, the window gather against
// an independent host loop (exact), and the device shuffle against its host mirror (exact).
// Inputs are fresh random values; outputs are poisoned with NaN before each launch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/data/column_stats.h"
#include "kernels/data/gather_windows.h"
#include "kernels/data/normalize_columns.h"
#include "kernels/data/random_permutation.h"
#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "lib/data/host_permutation.h"
#include "lib/data/series_dataset.h"
#include "tests/support/gpu.h"

namespace {

using namespace resident;
using namespace resident::data;
namespace kd = resident::kernels::data;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> download(const float* device, std::size_t n) {
  std::vector<float> host(n);
  RESIDENT_CUDA_CHECK(cudaDeviceSynchronize());
  RESIDENT_CUDA_CHECK(cudaMemcpy(host.data(), device, n * sizeof(float), cudaMemcpyDeviceToHost));
  return host;
}

// Columns with different offsets and scales (column c: offset 100 c - 50, scale 1 + c).
std::vector<float> random_values(std::size_t rows, std::size_t columns, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<float> v(rows * columns);
  for (std::size_t t = 0; t < rows; ++t)
    for (std::size_t c = 0; c < columns; ++c)
      v[t * columns + c] = static_cast<float>(100.0 * static_cast<double>(c) - 50.0 +
                                              (1.0 + static_cast<double>(c)) * normal(rng));
  return v;
}

struct Stats {
  std::vector<double> mean, stddev;
};

// Two-pass, double, population variance over rows [0, rows).
Stats reference_stats(const std::vector<float>& v, std::size_t rows, std::size_t columns,
                      double epsilon) {
  Stats s{std::vector<double>(columns), std::vector<double>(columns)};
  for (std::size_t c = 0; c < columns; ++c) {
    double sum = 0.0;
    for (std::size_t t = 0; t < rows; ++t) sum += v[t * columns + c];
    const double mean = sum / static_cast<double>(rows);
    double squares = 0.0;
    for (std::size_t t = 0; t < rows; ++t) {
      const double d = v[t * columns + c] - mean;
      squares += d * d;
    }
    s.mean[c] = mean;
    s.stddev[c] = std::sqrt(squares / static_cast<double>(rows) + epsilon);
  }
  return s;
}

// max |got - want| / (atol + rtol |want|) over the pairs: <= 1 passes.
double tolerance_share(const std::vector<double>& got, const std::vector<double>& want, double atol,
                       double rtol, double* max_error) {
  double share = 0.0;
  *max_error = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double error = std::fabs(got[i] - want[i]);
    if (!(error == error)) return std::numeric_limits<double>::infinity();
    *max_error = std::max(*max_error, error);
    share = std::max(share, error / (atol + rtol * std::fabs(want[i])));
  }
  return share;
}

TEST(ColumnStats, MatchesTheDoubleReference) {
  RESIDENT_REQUIRE_GPU();
  const StreamContext ctx;
  struct Case {
    std::size_t rows, total_rows, columns;
  };
  for (const Case k : {Case{1, 3, 1}, Case{255, 300, 3}, Case{256, 256, 1}, Case{257, 400, 7},
                       Case{20000, 25000, 5}}) {
    const std::vector<float> host = random_values(k.total_rows, k.columns, k.rows * 31 + k.columns);
    DeviceBuffer<float> values(host.size());
    values.upload(host);
    DeviceBuffer<double> mean(k.columns), stddev(k.columns);
    const std::vector<double> poison(k.columns, std::numeric_limits<double>::quiet_NaN());
    mean.upload(poison);
    stddev.upload(poison);
    const double epsilon = 1e-8;
    kd::launch_column_stats(mean.data(), stddev.data(), values.data(), k.rows, k.columns, epsilon,
                            ctx.stream());
    ctx.synchronize();
    const Stats want = reference_stats(host, k.rows, k.columns, epsilon);
    // fp64 sums of fp32 inputs in another order: the difference is a few ulps of fp64 times the
    // row count at most.
    constexpr double kAtol = 1e-10, kRtol = 1e-10;
    double mean_error = 0.0, std_error = 0.0;
    const double mean_share =
        tolerance_share(mean.download(), want.mean, kAtol, kRtol, &mean_error);
    const double std_share =
        tolerance_share(stddev.download(), want.stddev, kAtol, kRtol, &std_error);
    std::printf(
        "rows %zu of %zu, columns %zu: mean max error %.3g (%.3g of tolerance), std max "
        "error %.3g (%.3g of tolerance)\n",
        k.rows, k.total_rows, k.columns, mean_error, mean_share, std_error, std_share);
    EXPECT_LE(mean_share, 1.0);
    EXPECT_LE(std_share, 1.0);
  }
}

TEST(NormalizeColumns, EqualsTheSameFormulaOnTheHost) {
  RESIDENT_REQUIRE_GPU();
  const StreamContext ctx;
  const std::size_t rows = 1031, columns = 6;
  const std::vector<float> host = random_values(rows, columns, 77);
  std::vector<double> mean(columns), stddev(columns);
  std::mt19937_64 rng(78);
  std::uniform_real_distribution<double> u(0.5, 3.0);
  for (std::size_t c = 0; c < columns; ++c) {
    mean[c] = 100.0 * static_cast<double>(c) + u(rng);
    stddev[c] = u(rng);
  }
  DeviceBuffer<float> values(host.size());
  values.upload(host);
  DeviceBuffer<double> d_mean(columns), d_std(columns);
  d_mean.upload(mean);
  d_std.upload(stddev);
  kd::launch_normalize_columns(values.data(), d_mean.data(), d_std.data(), rows, columns,
                               ctx.stream());
  ctx.synchronize();
  const std::vector<float> got = values.download();
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const std::size_t c = i % columns;
    const auto want = static_cast<float>((static_cast<double>(host[i]) - mean[c]) / stddev[c]);
    mismatches += std::memcmp(&want, &got[i], sizeof(float)) != 0;
  }
  std::printf("%zu of %zu normalized values differ from the host formula (exact compare)\n",
              mismatches, got.size());
  EXPECT_EQ(mismatches, 0u);
}

// The validation range is offset by +1000: statistics over the whole series would show it.
TEST(SeriesDataset, StatisticsComeFromTheTrainingRangeOnly) {
  RESIDENT_REQUIRE_GPU();
  const StreamContext ctx;
  HostSeries s;
  s.steps = 2000;
  s.columns = 3;
  s.column_names = {"a", "b", "c"};
  s.values = random_values(s.steps, s.columns, 5);
  s.input_columns = 3;
  s.target_columns = {2};
  WindowSpec spec;
  spec.window = 16;
  spec.validation_fraction = 0.25;
  const std::size_t train_rows = 1500;
  for (std::size_t t = train_rows; t < s.steps; ++t)
    for (std::size_t c = 0; c < s.columns; ++c) s.values[t * s.columns + c] += 1000.0f;
  const std::vector<float> shifted = s.values;
  const SeriesDataset dataset(std::move(s), spec, ctx.stream());
  ASSERT_EQ(dataset.split().train_rows, train_rows);
  const Stats want = reference_stats(shifted, train_rows, 3, spec.epsilon);
  double error = 0.0;
  EXPECT_LE(tolerance_share(dataset.host_mean(), want.mean, 1e-10, 1e-10, &error), 1.0);
  EXPECT_LE(tolerance_share(dataset.host_stddev(), want.stddev, 1e-10, 1e-10, &error), 1.0);
  // Normalized values: (x - mean) / std with the dataset's statistics, exactly.
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < shifted.size(); ++i) {
    const std::size_t c = i % 3;
    const auto z = static_cast<float>((static_cast<double>(shifted[i]) - dataset.host_mean()[c]) /
                                      dataset.host_stddev()[c]);
    mismatches += z != dataset.host_values()[i];
  }
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(dataset.host_values(), download(dataset.values(), shifted.size()));
}

// x and y of the windows starting at `starts`, by a plain loop over the normalized series.
void reference_gather(const SeriesDataset& d, const std::vector<std::size_t>& starts,
                      std::vector<float>* x, std::vector<float>* y) {
  const std::vector<float>& v = d.host_values();
  const std::size_t L = d.window(), F = d.features(), C = d.columns(), J = d.targets();
  x->clear();
  y->clear();
  for (const std::size_t s : starts) {
    for (std::size_t t = 0; t < L; ++t)
      for (std::size_t f = 0; f < F; ++f) x->push_back(v[(s + t) * C + f]);
    for (std::size_t k = 0; k < d.horizon(); ++k)
      for (std::size_t j = 0; j < J; ++j) y->push_back(v[(s + L + k) * C + d.target_columns()[j]]);
  }
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Inputs are the first 3 of 5 columns; the targets are column 4 (not an input) and column 1.
TEST(SeriesDataset, GatherEqualsAnIndependentHostLoopExactly) {
  RESIDENT_REQUIRE_GPU();
  const StreamContext ctx;
  HostSeries s;
  s.steps = 3000;
  s.columns = 5;
  s.column_names = {"a", "b", "c", "d", "e"};
  s.values = random_values(s.steps, s.columns, 11);
  s.input_columns = 3;
  s.target_columns = {4, 1};
  WindowSpec spec;
  spec.window = 7;
  spec.horizon = 3;
  spec.validation_fraction = 0.2;
  const SeriesDataset d(std::move(s), spec, ctx.stream());
  ASSERT_EQ(d.outputs(), 6u);
  const std::size_t n = d.split().train_windows;
  const std::uint64_t seed = 1234;
  DeviceBuffer<std::uint32_t> permutation(n), keys_in(n), keys_out(n), values_in(n);
  DeviceBuffer<std::byte> temp(kd::permutation_temp_bytes(n));
  const kd::PermutationScratch scratch{keys_in.data(), keys_out.data(), values_in.data(),
                                       temp.data(), temp.size()};
  DeviceBuffer<std::uint64_t> counter(1);
  for (const std::size_t batch : {1u, 255u, 256u, 257u}) {
    const std::size_t batches = n / batch;
    for (const std::uint64_t count :
         {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{batches + 2}}) {
      const std::uint64_t epoch = count % 3;
      counter.upload(std::vector<std::uint64_t>{count});
      // The epoch's permutation (draw = count / batches, as the trainer's divisor would give).
      std::vector<std::uint64_t> draw_counter{epoch};
      DeviceBuffer<std::uint64_t> epoch_counter(1);
      epoch_counter.upload(draw_counter);
      kd::launch_random_permutation(permutation.data(), scratch, n, seed, epoch_counter.data(), 1,
                                    ctx.stream());
      DeviceBuffer<float> x(batch * d.window() * d.features()), y(batch * d.outputs());
      x.upload(std::vector<float>(x.size(), kNaN));
      y.upload(std::vector<float>(y.size(), kNaN));
      kd::WindowSelection selection;
      selection.order = permutation.data();
      selection.counter = counter.data();
      selection.counter_modulo = batches;
      selection.first_start = 0;
      d.gather(x.data(), y.data(), selection, batch, ctx.stream());
      ctx.synchronize();
      const std::vector<std::uint32_t> order = host_random_permutation(n, seed, epoch);
      ASSERT_EQ(permutation.download(), order) << "device permutation, epoch " << epoch;
      std::vector<std::size_t> starts;
      for (std::size_t i = 0; i < batch; ++i)
        starts.push_back(d.train_start(order[(count % batches) * batch + i]));
      std::vector<float> want_x, want_y;
      reference_gather(d, starts, &want_x, &want_y);
      EXPECT_TRUE(same_bits(x.download(), want_x)) << "x, batch " << batch << ", counter " << count;
      EXPECT_TRUE(same_bits(y.download(), want_y)) << "y, batch " << batch << ", counter " << count;
      std::vector<float> host_x(want_x.size(), kNaN), host_y(want_y.size(), kNaN);
      d.gather_host(host_x.data(), host_y.data(), starts.data(), batch);
      EXPECT_TRUE(same_bits(host_x, want_x) && same_bits(host_y, want_y)) << "gather_host";
    }
  }
  // Validation windows by position (no order, no counter): the last batch ends at the last row.
  const std::size_t v = d.split().validation_windows, batch = 100;
  DeviceBuffer<float> x(batch * d.window() * d.features()), y(batch * d.outputs());
  x.upload(std::vector<float>(x.size(), kNaN));
  y.upload(std::vector<float>(y.size(), kNaN));
  kd::WindowSelection selection;
  selection.offset = v - batch;
  selection.first_start = d.split().validation_first;
  d.gather(x.data(), y.data(), selection, batch, ctx.stream());
  ctx.synchronize();
  std::vector<std::size_t> starts;
  for (std::size_t i = 0; i < batch; ++i) starts.push_back(d.validation_start(v - batch + i));
  ASSERT_EQ(starts.back() + d.window() + d.horizon(), d.steps());
  std::vector<float> want_x, want_y;
  reference_gather(d, starts, &want_x, &want_y);
  EXPECT_TRUE(same_bits(x.download(), want_x)) << "validation x";
  EXPECT_TRUE(same_bits(y.download(), want_y)) << "validation y";
}

TEST(RandomPermutation, DeviceEqualsHostMirrorAndCounterSelectsTheDraw) {
  RESIDENT_REQUIRE_GPU();
  const StreamContext ctx;
  for (const std::size_t n : {1u, 2u, 257u, 4099u}) {
    DeviceBuffer<std::uint32_t> permutation(n), keys_in(n), keys_out(n), values_in(n);
    DeviceBuffer<std::byte> temp(kd::permutation_temp_bytes(n));
    const kd::PermutationScratch scratch{keys_in.data(), keys_out.data(), values_in.data(),
                                         temp.data(), temp.size()};
    DeviceBuffer<std::uint64_t> counter(1);
    for (const std::uint64_t count : {0ull, 5ull, 11ull}) {
      counter.upload(std::vector<std::uint64_t>{count});
      permutation.upload(std::vector<std::uint32_t>(n, 0xFFFFFFFFu));
      kd::launch_random_permutation(permutation.data(), scratch, n, 99, counter.data(), 4,
                                    ctx.stream());
      ctx.synchronize();
      EXPECT_EQ(permutation.download(), host_random_permutation(n, 99, count / 4))
          << "n " << n << ", counter " << count;
    }
  }
}

}  // namespace
