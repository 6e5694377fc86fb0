// The GPU sampler (Philox uniforms, as in training) draws the exact P(i): chi-square of pooled
// GPU draws against P(i) from the CPU oracle, and two-sample KS tests of GPU draws against
// CPU sum-tree draws from the same priorities (on the drawn slots' priorities, which a wrong
// alpha or a neighbouring leaf changes, and on the slot order, which truncated strata change;
// the sampler must pass both, a control is rejected when either rejects), proportional and
// rank-based. Each with three
// negative controls that the same tests must reject: the GPU sampler with the wrong alpha, its
// draws moved one leaf over, and its strata truncated (uniforms squeezed into [0, 0.5)).
// Pinned seeds, level 0.01 (DESIGN.md). Stratified pooled draws make chi-square conservative
// (p near 1 is expected for the right sampler). With RESIDENT_SAMPLER_REPORT_DIR set, each mode
// also writes its p-values and priority CDFs for the main job's report (write_report below).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "lib/core/jsonl_log.h"
#include "lib/core/stream.h"
#include "lib/replay/unit_uniform.h"
#include "tests/replay/gpu_replay_test_support.h"
#include "tests/stats/chi_square.h"
#include "tests/stats/ks_two_sample.h"
#include "tests/support/gpu.h"

namespace {

using namespace resident;
using resident::test::download;
using resident::test::HostTransitions;
using resident::test::to_device;
using resident::test::TwinInsert;

constexpr double kLevel = 0.01;
constexpr std::size_t kCapacity = 1000;  // not a power of two
constexpr std::size_t kDim = 2;
constexpr std::size_t kBatch = 32;
constexpr std::size_t kCalls = 4000;  // 128,000 pooled draws
constexpr double kAlpha = 0.6;
constexpr double kWrongAlpha = 0.5;

ReplayConfig config_for(ReplayPriorityMode mode, double alpha) {
  ReplayConfig c;
  c.capacity = kCapacity;
  c.state_dim = kDim;
  c.alpha = alpha;
  c.epsilon = 1e-3;
  c.mode = mode;
  c.sampling = ReplaySampling::Stratified;
  return c;
}

// A GPU buffer and its CPU oracle, full, with the same TD errors (log-uniform magnitudes) and
// the oracle holding the GPU's exact leaves.
struct Twins {
  Stream stream;
  GpuReplayBuffer gpu;
  CpuReplayBuffer cpu;

  Twins(ReplayPriorityMode mode, double alpha, std::uint64_t seed)
      : gpu(config_for(mode, alpha), kBatch, seed, stream.get()), cpu(config_for(mode, alpha)) {
    std::mt19937_64 rng(20261130);
    TwinInsert insert(HostTransitions(kCapacity, kDim, rng), gpu, cpu);
    std::uniform_real_distribution<double> exponent(-3.0, 1.0);
    std::vector<std::uint32_t> slots(kCapacity), generations(kCapacity, 1);
    std::vector<float> td(kCapacity);
    for (std::size_t i = 0; i < kCapacity; ++i) {
      slots[i] = static_cast<std::uint32_t>(i);
      td[i] = static_cast<float>(std::pow(10.0, exponent(rng)));
    }
    const auto d_slots = to_device(slots), d_gen = to_device(generations);
    const auto d_td = to_device(td);
    gpu.update_priorities(d_slots.data(), d_gen.data(), d_td.data(), kCapacity);
    const std::vector<double> leaves = gpu.read_leaf_priorities();
    cpu.assign_priorities(slots, generations, leaves);
  }
};

enum class Control { kNone, kOffByOneLeaf, kTruncatedStrata };

// kCalls * kBatch slots drawn on the GPU, as doubles.
std::vector<double> gpu_draws(GpuReplayBuffer& gpu, Control control) {
  std::vector<double> draws;
  draws.reserve(kCalls * kBatch);
  std::mt19937_64 rng(7);
  DeviceBuffer<double> squeezed(kBatch);
  for (std::size_t call = 0; call < kCalls; ++call) {
    DeviceSampledBatch batch;
    if (control == Control::kTruncatedStrata) {
      std::vector<double> u(kBatch);
      for (double& x : u) x = 0.5 * unit_uniform(rng);
      squeezed.upload(u);
      batch = gpu.sample_with_uniforms(squeezed.data(), kBatch);
    } else {
      batch = gpu.sample(kBatch);
    }
    for (std::uint32_t slot : download(batch, kDim).indices) {
      const std::uint32_t drawn = control == Control::kOffByOneLeaf ? (slot + 1) % kCapacity : slot;
      draws.push_back(static_cast<double>(drawn));
    }
  }
  return draws;
}

std::vector<double> cpu_draws(CpuReplayBuffer& cpu) {
  std::vector<double> draws;
  std::mt19937_64 rng(8);
  SampledBatch out;
  for (std::size_t call = 0; call < kCalls; ++call) {
    cpu.sample(kBatch, rng, out);
    for (std::uint32_t slot : out.indices) draws.push_back(static_cast<double>(slot));
  }
  return draws;
}

double chi_square_p(const std::vector<double>& draws, const CpuReplayBuffer& oracle) {
  std::vector<std::uint64_t> observed(kCapacity, 0);
  for (double d : draws) ++observed[static_cast<std::size_t>(d)];
  std::vector<double> expected(kCapacity);
  for (std::size_t i = 0; i < kCapacity; ++i)
    expected[i] = oracle.probability(i) * static_cast<double>(draws.size());
  return stats::chi_square_goodness_of_fit(observed, expected).p_value;
}

std::vector<double> drawn_priorities(const std::vector<double>& slots,
                                     const CpuReplayBuffer& oracle) {
  std::vector<double> p;
  p.reserve(slots.size());
  for (double s : slots) p.push_back(oracle.leaf_priority(static_cast<std::size_t>(s)));
  return p;
}

// Two-sample KS on the drawn slots' priorities and on the slots themselves; the smaller p.
struct KsPair {
  double priority_p, slot_p;
  double min_p() const { return std::min(priority_p, slot_p); }
};

KsPair ks_pair(const std::vector<double>& draws, const std::vector<double>& reference,
               const CpuReplayBuffer& oracle) {
  return {stats::ks_two_sample(drawn_priorities(draws, oracle),
                               drawn_priorities(reference, oracle)).p_value,
          stats::ks_two_sample(draws, reference).p_value};
}

// The report file: with RESIDENT_SAMPLER_REPORT_DIR set (the main job sets it), each mode's
// case also writes DIR/sampler_distribution_<mode>.json for reports/render: the settings, the
// p-values of the sampler and of each negative control, and the empirical CDFs of the drawn
// slots' priorities (CPU sum tree, GPU, each control) at kCdfPoints log-spaced priorities from
// the smallest to the largest leaf (evenly spaced if a leaf is 0). Nothing is written without
// the variable.
constexpr std::size_t kCdfPoints = 200;

struct ReportedDraws {
  std::string name;
  const std::vector<double>* slots;
  double chi_square_p;
  KsPair ks;
};

std::vector<double> ecdf_at(std::vector<double> values, const std::vector<double>& grid) {
  std::sort(values.begin(), values.end());
  std::vector<double> cdf;
  cdf.reserve(grid.size());
  for (double x : grid) {
    const auto below = std::upper_bound(values.begin(), values.end(), x) - values.begin();
    cdf.push_back(static_cast<double>(below) / static_cast<double>(values.size()));
  }
  return cdf;
}

void write_report(ReplayPriorityMode mode, const CpuReplayBuffer& oracle,
                  const std::vector<double>& reference, const std::vector<ReportedDraws>& sets) {
  const char* dir = std::getenv("RESIDENT_SAMPLER_REPORT_DIR");
  if (dir == nullptr || *dir == '\0') return;
  double lo = oracle.leaf_priority(0), hi = lo;
  for (std::size_t i = 1; i < kCapacity; ++i) {
    lo = std::min(lo, oracle.leaf_priority(i));
    hi = std::max(hi, oracle.leaf_priority(i));
  }
  std::vector<double> grid(kCdfPoints);
  for (std::size_t i = 0; i < kCdfPoints; ++i) {
    const double at = static_cast<double>(i) / (kCdfPoints - 1);
    grid[i] = lo > 0.0 ? lo * std::pow(hi / lo, at) : lo + (hi - lo) * at;  // log-spaced if > 0
  }
  const std::vector<double> cpu_cdf = ecdf_at(drawn_priorities(reference, oracle), grid);
  std::vector<JsonRecord> samplers;
  for (const ReportedDraws& set : sets) {
    const std::vector<double> cdf = ecdf_at(drawn_priorities(*set.slots, oracle), grid);
    samplers.push_back(JsonRecord()
                           .add("name", set.name)
                           .add("chi_square_p", set.chi_square_p)
                           .add("ks_priority_p", set.ks.priority_p)
                           .add("ks_slot_p", set.ks.slot_p)
                           .add("cdf", std::span<const double>(cdf)));
  }
  const std::string name = mode == ReplayPriorityMode::Rank ? "rank" : "proportional";
  JsonlLog(std::filesystem::path(dir) / ("sampler_distribution_" + name + ".json"))
      .write(JsonRecord()
                 .add("mode", name)
                 .add("capacity", kCapacity)
                 .add("batch", kBatch)
                 .add("draws", static_cast<std::uint64_t>(reference.size()))
                 .add("alpha", kAlpha)
                 .add("level", kLevel)
                 .add("priority_grid", std::span<const double>(grid))
                 .add("cpu_cdf", std::span<const double>(cpu_cdf))
                 .add("samplers", std::span<const JsonRecord>(samplers)));
}

class GpuSamplerDistribution : public ::testing::TestWithParam<ReplayPriorityMode> {};

TEST_P(GpuSamplerDistribution, MatchesExactProbabilitiesAndTheCpuSampler) {
  RESIDENT_REQUIRE_GPU();
  const ReplayPriorityMode mode = GetParam();
  Twins right(mode, kAlpha, 101);
  const std::vector<double> reference = cpu_draws(right.cpu);
  const std::vector<double> drawn = gpu_draws(right.gpu, Control::kNone);
  const double chi_p = chi_square_p(drawn, right.cpu);
  const KsPair ks = ks_pair(drawn, reference, right.cpu);
  std::printf("  GPU sampler: chi-square p = %.4f, KS p = %.4f (priorities) %.4f (slots), %zu draws\n",
              chi_p, ks.priority_p, ks.slot_p, drawn.size());
  EXPECT_GT(chi_p, kLevel);
  EXPECT_GT(ks.priority_p, kLevel);
  EXPECT_GT(ks.slot_p, kLevel);
  std::vector<ReportedDraws> reported = {{"GPU sampler", &drawn, chi_p, ks}};

  Twins wrong_alpha(mode, kWrongAlpha, 101);
  const std::vector<double> wrong = gpu_draws(wrong_alpha.gpu, Control::kNone);
  const std::vector<double> shifted = gpu_draws(right.gpu, Control::kOffByOneLeaf);
  const std::vector<double> truncated = gpu_draws(right.gpu, Control::kTruncatedStrata);
  struct Case {
    const char* name;
    const std::vector<double>* draws;
  };
  for (const Case& c : {Case{"wrong alpha", &wrong}, Case{"off-by-one leaf", &shifted},
                        Case{"truncated strata", &truncated}}) {
    const double p = chi_square_p(*c.draws, right.cpu);
    const KsPair k = ks_pair(*c.draws, reference, right.cpu);
    std::printf("  negative control %-16s: chi-square p = %.3g, KS p = %.3g (priorities) %.3g (slots)\n",
                c.name, p, k.priority_p, k.slot_p);
    EXPECT_LT(p, kLevel) << c.name << ": chi-square failed to reject";
    EXPECT_LT(k.min_p(), kLevel) << c.name << ": KS failed to reject";
    reported.push_back({std::string("control: ") + c.name, c.draws, p, k});
  }
  write_report(mode, right.cpu, reference, reported);
}

INSTANTIATE_TEST_SUITE_P(Modes, GpuSamplerDistribution,
                         ::testing::Values(ReplayPriorityMode::Proportional, ReplayPriorityMode::Rank),
                         [](const auto& info) {
                           return info.param == ReplayPriorityMode::Rank ? "rank" : "proportional";
                         });

}  // namespace
