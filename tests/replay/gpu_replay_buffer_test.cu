// GpuReplayBuffer on a GPU against its CPU oracle (CpuReplayBuffer). Given the same inserts,
// the same priorities and the same uniforms, both must draw the same slots (exactly: the trees
// have the same layout and fp64 additions), the same generations and rows, and IS weights
// within rel 1e-6 (device pow vs host pow). Then each semantic rule on its own: wrap-around,
// updates (duplicates, stale, non-finite, bad index), zero priority, stratum boundaries,
// 10^6 updates without drift, graph capture under the audit, and the CPU fallback.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "audit/testing.h"
#include "audit/tracer.h"
#include "kernels/replay/replay_kernels.h"
#include "lib/core/scalar_readback.h"
#include "lib/core/stream.h"
#include "lib/replay/replay_factory.h"
#include "lib/replay/unit_uniform.h"
#include "tests/replay/gpu_replay_test_support.h"
#include "tests/support/gpu.h"
#include "tests/support/param_name.h"

namespace {

using namespace resident;
using resident::test::download;
using resident::test::HostSample;
using resident::test::HostTransitions;
using resident::test::kept_levels_mismatch;
using resident::test::to_device;
using resident::test::TwinInsert;

constexpr std::size_t kDim = 5;

ReplayConfig make_config(std::size_t capacity, ReplayPriorityMode mode, ReplaySampling sampling) {
  return test::replay_test_config(capacity, kDim, mode, sampling, /*beta_annealing_steps=*/7);
}

// Compares one GPU sample with the CPU oracle's sample from the same uniforms.
void expect_same_sample(const HostSample& gpu, const SampledBatch& cpu, const std::string& where) {
  ASSERT_EQ(gpu.indices, cpu.indices) << where;
  EXPECT_EQ(gpu.generations, cpu.generations) << where;
  EXPECT_EQ(gpu.states, cpu.states) << where;
  EXPECT_EQ(gpu.next_states, cpu.next_states) << where;
  EXPECT_EQ(gpu.actions, cpu.actions) << where;
  EXPECT_EQ(gpu.rewards, cpu.rewards) << where;
  EXPECT_EQ(gpu.dones, cpu.dones) << where;
  double worst = 0;
  for (std::size_t k = 0; k < cpu.is_weights.size(); ++k) {
    const double rel = std::fabs(static_cast<double>(gpu.weights[k]) - cpu.is_weights[k]) /
                       std::fabs(static_cast<double>(cpu.is_weights[k]));
    worst = std::max(worst, rel);
    EXPECT_LE(rel, 1e-6) << where << " draw " << k;
  }
  std::printf("  %s: %zu draws equal, IS weight max rel err %.2e (tol 1e-6), beta %.4f\n",
              where.c_str(), cpu.indices.size(), worst, cpu.beta);
}

// `draws` draws from both buffers with the same fresh uniforms: the same slots, weights and rows
// (call sync_cpu_priorities first where the GPU's priorities moved).
void expect_same_draws(GpuReplayBuffer& gpu, CpuReplayBuffer& cpu, std::size_t draws,
                       std::size_t dim, std::mt19937_64& rng, const std::string& where) {
  std::vector<double> uniforms(draws);
  for (double& u : uniforms) u = unit_uniform(rng);
  const auto device_uniforms = to_device(uniforms);
  SampledBatch want;
  cpu.sample_with_uniforms(uniforms, want);
  expect_same_sample(download(gpu.sample_with_uniforms(device_uniforms.data(), draws), dim), want,
                     where);
}

// Makes the CPU tree hold exactly the GPU's leaves (after comparing them to rel 1e-12).
void sync_cpu_priorities(const GpuReplayBuffer& gpu, CpuReplayBuffer& cpu) {
  const std::vector<double> leaves = gpu.read_leaf_priorities();
  std::vector<std::uint32_t> slots, generations;
  std::vector<double> priorities;
  for (std::size_t s = 0; s < cpu.size(); ++s) {
    const double ref = cpu.leaf_priority(s);
    EXPECT_LE(std::fabs(leaves[s] - ref), 1e-12 * std::fabs(ref)) << "slot " << s;
    slots.push_back(static_cast<std::uint32_t>(s));
    generations.push_back(cpu.generation(s));
    priorities.push_back(leaves[s]);
  }
  for (std::size_t s = cpu.size(); s < leaves.size(); ++s) EXPECT_EQ(leaves[s], 0.0) << "slot " << s;
  cpu.assign_priorities(slots, generations, priorities);
}

class GpuReplayMatchesCpu
    : public ::testing::TestWithParam<std::tuple<std::size_t, ReplayPriorityMode, ReplaySampling>> {};

TEST_P(GpuReplayMatchesCpu, SameDrawsWeightsRowsAndPriorities) {
  RESIDENT_REQUIRE_GPU();
  const auto [capacity, mode, sampling] = GetParam();
  const ReplayConfig config = make_config(capacity, mode, sampling);
  Stream stream;
  const std::size_t max_batch = std::min<std::size_t>(64, capacity);
  GpuReplayBuffer gpu(config, max_batch, /*seed=*/11, stream.get());
  CpuReplayBuffer cpu(config);
  std::mt19937_64 rng(capacity * 7919 + static_cast<int>(mode) * 31 + static_cast<int>(sampling));

  for (const std::size_t n : {std::min<std::size_t>(3, capacity), capacity / 2 + 1, capacity + 5}) {
    const HostTransitions rows(n, kDim, rng);
    TwinInsert insert(rows, gpu, cpu);
    ASSERT_EQ(gpu.size(), cpu.size());
    sync_cpu_priorities(gpu, cpu);  // new items: the live max, bit for bit
    for (int round = 0; round < 4; ++round) {
      const std::size_t batch = std::min(max_batch, cpu.size());
      std::vector<double> uniforms(batch);
      for (double& u : uniforms) u = unit_uniform(rng);
      const auto device_uniforms = to_device(uniforms);
      const DeviceSampledBatch sampled = gpu.sample_with_uniforms(device_uniforms.data(), batch);
      // DeviceSampledBatch's promise: one [2 batch, dim] block (DQN's merged forward uses it).
      ASSERT_EQ(sampled.next_states, sampled.states + batch * kDim) << "batch " << batch;
      const HostSample got = download(sampled, kDim);
      SampledBatch want;
      cpu.sample_with_uniforms(uniforms, want);
      expect_same_sample(got, want, "capacity " + std::to_string(capacity) + " insert " +
                                        std::to_string(n) + " round " + std::to_string(round));
      // Update the drawn slots (duplicates included) with fresh TD errors.
      std::vector<float> td(batch);
      std::normal_distribution<float> normal(0.0f, 3.0f);
      for (float& t : td) t = normal(rng);
      const auto d_idx = to_device(got.indices);
      const auto d_gen = to_device(got.generations);
      const auto d_td = to_device(td);
      gpu.update_priorities(d_idx.data(), d_gen.data(), d_td.data(), batch);
      cpu.update_priorities(got.indices, got.generations, td);
      sync_cpu_priorities(gpu, cpu);
    }
  }
  const kernels::ReplayCounters counters = gpu.read_counters();
  EXPECT_EQ(counters.step, cpu.step());
  EXPECT_EQ(counters.size, cpu.size());
  EXPECT_EQ(counters.cursor, cpu.insert_position());
  EXPECT_EQ(counters.nonfinite + counters.stale + counters.bad_index, 0u);
  EXPECT_EQ(counters.sample_blocks_done, 0u);  // every draw's block count reset for the next
  EXPECT_EQ(gpu.read_tree_sums()[1], cpu.total_priority());  // same layout, same additions
}

INSTANTIATE_TEST_SUITE_P(Capacities, GpuReplayMatchesCpu,
                         ::testing::Combine(::testing::Values(1, 5, 64, 1000, 1025),
                                            ::testing::Values(ReplayPriorityMode::Proportional,
                                                              ReplayPriorityMode::Rank),
                                            ::testing::Values(ReplaySampling::Stratified,
                                                              ReplaySampling::Independent)),
                         [](const auto& test_case) {
                           const auto& p = test_case.param;
                           return test::param_name("capacity", std::get<0>(p), std::get<1>(p),
                                                   std::get<2>(p));
                         });

TEST(GpuReplay, UpdateRulesDuplicatesStaleNonFiniteAndBadIndex) {
  RESIDENT_REQUIRE_GPU();
  const ReplayConfig config = make_config(8, ReplayPriorityMode::Proportional, ReplaySampling::Stratified);
  Stream stream;
  GpuReplayBuffer gpu(config, 8, 3, stream.get());
  CpuReplayBuffer cpu(config);
  std::mt19937_64 rng(5);
  { TwinInsert first(HostTransitions(8, kDim, rng), gpu, cpu); }
  { TwinInsert overwrite(HostTransitions(1, kDim, rng), gpu, cpu); }  // slot 0: generation 2
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  //                                   dup: later wins  stale  finite then NaN   bad    inf
  const std::vector<std::uint32_t> idx = {2, 2,          0,     4, 4,             9,     6};
  const std::vector<std::uint32_t> gen = {1, 1,          1,     1, 1,             1,     1};
  const std::vector<float> td =         {1.0f, 4.0f,     2.0f,  2.0f, nan,        1.0f,  inf};
  const auto d_idx = to_device(idx);
  const auto d_gen = to_device(gen);
  const auto d_td = to_device(td);
  const std::vector<double> before = gpu.read_leaf_priorities();
  gpu.update_priorities(d_idx.data(), d_gen.data(), d_td.data(), idx.size());
  const std::vector<double> after = gpu.read_leaf_priorities();
  const double p4 = std::pow(4.0 + 1e-3, 0.6), p2 = std::pow(2.0 + 1e-3, 0.6);
  EXPECT_NEAR(after[2], p4, 1e-12 * p4);       // the later of the duplicates
  EXPECT_EQ(after[0], before[0]);              // stale: dropped
  EXPECT_NEAR(after[4], p2, 1e-12 * p2);       // the NaN after it is not written
  EXPECT_EQ(after[6], before[6]);              // inf: not written
  for (std::size_t s : {1u, 3u, 5u, 7u}) EXPECT_EQ(after[s], before[s]) << s;
  const kernels::ReplayCounters c = gpu.read_counters();
  EXPECT_EQ(c.nonfinite, 2u);
  EXPECT_EQ(c.stale, 1u);
  EXPECT_EQ(c.bad_index, 1u);
  // The oracle agrees (without the bad index, which it rejects by throwing).
  std::vector<std::uint32_t> cpu_idx = idx, cpu_gen = gen;
  std::vector<float> cpu_td = td;
  cpu_idx.erase(cpu_idx.begin() + 5);
  cpu_gen.erase(cpu_gen.begin() + 5);
  cpu_td.erase(cpu_td.begin() + 5);
  cpu.update_priorities(cpu_idx, cpu_gen, cpu_td);
  for (std::size_t s = 0; s < 8; ++s) EXPECT_NEAR(after[s], cpu.leaf_priority(s), 1e-12 * after[s]) << s;
  EXPECT_EQ(cpu.take_nonfinite_count(), 2u);
  EXPECT_EQ(cpu.take_stale_count(), 1u);
  // The tree stays consistent.
  const std::vector<double> sums = gpu.read_tree_sums();
  long double total = 0;
  for (double p : after) total += p;
  EXPECT_NEAR(sums[1], static_cast<double>(total), 1e-12 * sums[1]);
}

// The update kernel at its shape boundaries (256 nodes per pass over a chunk: one per warp of
// its 8-block cluster; 1024 entries per chunk), with duplicates (within and across chunks; many entries on a few slots, so hash
// probes collide), stale, non-finite and bad-index entries, chunks with no writable entry, a full
// buffer (depth 12: kept heights 5, 10 and the root 2 above), a partly filled one whose size is a
// power of two (depth 11: the root 1 above height 10) and a full one of 1.1M slots (depth 21):
// every leaf is the CPU oracle's, every kept node of the sum, min and max trees is the
// combination of its descendants, the next insert gets the maximum, IS weights use the minimum.
TEST(GpuReplay, UpdateMatchesCpuAtBlockShapeBoundaries) {
  RESIDENT_REQUIRE_GPU();
  struct Fill {
    std::size_t capacity, inserted;
  };
  for (const Fill fill : {Fill{3000, 3000}, Fill{1500, 1024}, Fill{1100000, 1100000}}) {
    const std::string where = "capacity " + std::to_string(fill.capacity) + ", size " +
                              std::to_string(fill.inserted);
    const ReplayConfig config =
        make_config(fill.capacity, ReplayPriorityMode::Proportional, ReplaySampling::Stratified);
    Stream stream;
    GpuReplayBuffer gpu(config, 8, 21, stream.get());
    CpuReplayBuffer cpu(config);
    std::mt19937_64 rng(31 + fill.capacity);
    { TwinInsert rows(HostTransitions(fill.inserted, kDim, rng), gpu, cpu); }
    std::lognormal_distribution<float> magnitude(0.0f, 2.0f);
    std::uint64_t bad = 0;
    for (const std::size_t count : {1u, 255u, 256u, 257u, 1024u, 1025u, 1500u, 5u, 300u, 2100u}) {
      const bool none_writable = count == 5 || count == 300;  // every entry stale
      // The GPU gets `count` entries (every 97th a bad index >= size); the oracle, which refuses
      // bad indices by throwing, the others in the same order.
      std::vector<std::uint32_t> gpu_idx(count), gpu_gen(count, 1), idx, gen;
      std::vector<float> gpu_td(count), td;
      for (std::size_t e = 0; e < count; ++e) {
        gpu_idx[e] = static_cast<std::uint32_t>(e % 3 == 0 ? rng() % 40 : rng() % fill.inserted);
        gpu_td[e] = magnitude(rng);
        if (none_writable || rng() % 17 == 0) gpu_gen[e] = 2;  // stale: every slot holds generation 1
        if (rng() % 23 == 0) gpu_td[e] = std::numeric_limits<float>::quiet_NaN();
        if (e % 97 == 50) {
          gpu_idx[e] = static_cast<std::uint32_t>(fill.inserted + rng() % 4000);
          gpu_td[e] = 1.0f;
          gpu_gen[e] = 1;
          ++bad;
          continue;
        }
        idx.push_back(gpu_idx[e]);
        gen.push_back(gpu_gen[e]);
        td.push_back(gpu_td[e]);
      }
      const auto d_idx = to_device(gpu_idx);
      const auto d_gen = to_device(gpu_gen);
      const auto d_td = to_device(gpu_td);
      gpu.update_priorities(d_idx.data(), d_gen.data(), d_td.data(), gpu_idx.size());
      cpu.update_priorities(idx, gen, td);
      const std::vector<double> sums = gpu.read_tree_sums();
      const GpuReplayBuffer::TreeExtremes extremes = gpu.read_tree_extremes();
      const std::size_t leaves = sums.size() / 2;
      for (std::size_t s = 0; s < fill.inserted; ++s)
        ASSERT_LE(std::fabs(sums[leaves + s] - cpu.leaf_priority(s)), 1e-12 * cpu.leaf_priority(s))
            << where << ", count " << count << ", slot " << s;
      ASSERT_EQ(kept_levels_mismatch(sums, extremes.min_positive, extremes.max), "")
          << where << ", count " << count;
    }
    const kernels::ReplayCounters counters = gpu.read_counters();
    EXPECT_EQ(counters.nonfinite, cpu.take_nonfinite_count()) << where;
    EXPECT_EQ(counters.stale, cpu.take_stale_count()) << where;
    EXPECT_EQ(counters.bad_index, bad) << where;
    EXPECT_GT(counters.nonfinite, 0u) << where;
    const std::vector<double> before = gpu.read_leaf_priorities();
    const double max_leaf = *std::max_element(before.begin(), before.begin() + fill.inserted);
    { TwinInsert one(HostTransitions(1, kDim, rng), gpu, cpu); }  // slot 0 or the next free one
    EXPECT_EQ(gpu.read_leaf_priorities()[fill.inserted % fill.capacity], max_leaf) << where;
    sync_cpu_priorities(gpu, cpu);
    expect_same_draws(gpu, cpu, 8, kDim, rng, where + ", after the boundary updates");
  }
}

// The insert's two paths: up to 64 rows in one 256-thread launch that copies the rows too, more
// rows copied apart and a 1024-thread tree block; either with two ranges after a wrap. Repeated
// inserts of 1 to 100 rows, with priority updates between them so the live maximum moves, into
// capacities that wrap often (depths 0, 4, 7, 10 and 13: no kept level, the root alone, a short
// and a full top step): every leaf is the CPU's, every kept node of the sum, min and max trees
// the combination of its descendants, the cursor and size agree, and draws with the same
// uniforms return the same slots and rows (the copied rows, on both paths).
TEST(GpuReplay, InsertKeepsTheTreesExactOnBothPaths) {
  RESIDENT_REQUIRE_GPU();
  for (const std::size_t capacity : {1u, 10u, 100u, 1024u, 4097u}) {
    const ReplayConfig config =
        make_config(capacity, ReplayPriorityMode::Proportional, ReplaySampling::Stratified);
    Stream stream;
    GpuReplayBuffer gpu(config, std::min<std::size_t>(8, capacity), 5, stream.get());
    CpuReplayBuffer cpu(config);
    std::mt19937_64 rng(400 + capacity);
    std::lognormal_distribution<float> magnitude(0.0f, 1.5f);
    const std::size_t sizes[] = {1, 2, 7, 31, 32, 33, 40, 16, 3, 64, 65, 100};
    for (std::size_t round = 0; round < 45; ++round) {
      const std::size_t n = sizes[round % std::size(sizes)];
      const std::string where = "capacity " + std::to_string(capacity) + ", round " +
                                std::to_string(round) + ", " + std::to_string(n) + " rows";
      { TwinInsert rows(HostTransitions(n, kDim, rng), gpu, cpu); }
      if (round % 2 == 1) {  // move the live maximum (up or down) before the next insert
        std::vector<std::uint32_t> idx(4), gen(4);
        std::vector<float> td(4);
        for (std::size_t e = 0; e < 4; ++e) {
          idx[e] = static_cast<std::uint32_t>(rng() % cpu.size());
          gen[e] = cpu.generation(idx[e]);
          td[e] = magnitude(rng);
        }
        const auto d_idx = to_device(idx);
        const auto d_gen = to_device(gen);
        const auto d_td = to_device(td);
        gpu.update_priorities(d_idx.data(), d_gen.data(), d_td.data(), 4);
        cpu.update_priorities(idx, gen, td);
      }
      const kernels::ReplayCounters counters = gpu.read_counters();
      ASSERT_EQ(counters.cursor, cpu.insert_position()) << where;
      ASSERT_EQ(counters.size, cpu.size()) << where;
      const std::vector<double> sums = gpu.read_tree_sums();
      const GpuReplayBuffer::TreeExtremes extremes = gpu.read_tree_extremes();
      const std::size_t leaves = sums.size() / 2;
      for (std::size_t slot = 0; slot < cpu.size(); ++slot)
        ASSERT_LE(std::fabs(sums[leaves + slot] - cpu.leaf_priority(slot)),
                  1e-12 * cpu.leaf_priority(slot))
            << where << ", slot " << slot;
      ASSERT_EQ(kept_levels_mismatch(sums, extremes.min_positive, extremes.max), "") << where;
      sync_cpu_priorities(gpu, cpu);  // the next insert's maximum, bit for bit on both sides
      expect_same_draws(gpu, cpu, std::min<std::size_t>(8, cpu.size()), kDim, rng, where);
    }
  }
}

// Rows too wide for the one-launch insert (50 to 64 rows of 300 elements > 16384): the copy
// kernel's path at small row counts, wrapping, then 3 rows on the one-launch path; every draw's
// slots, weights and rows equal the oracle's.
TEST(GpuReplay, WideRowsTakeTheCopyKernelAndLandWhereTheCpuPutsThem) {
  RESIDENT_REQUIRE_GPU();
  // 300: a warp per row in the copy kernel; 1100 (> 1024): a block per row there. Both also
  // take the one-launch path at 3 rows.
  for (const std::size_t wide : {300u, 1100u}) {
    ReplayConfig config =
        make_config(150, ReplayPriorityMode::Proportional, ReplaySampling::Stratified);
    config.state_dim = wide;
    Stream stream;
    GpuReplayBuffer gpu(config, 16, 9, stream.get());
    CpuReplayBuffer cpu(config);
    std::mt19937_64 rng(4242 + wide);
    for (const std::size_t n : {60u, 64u, 50u, 3u}) {  // wraps at the third insert
      { TwinInsert rows(HostTransitions(n, wide, rng), gpu, cpu); }
      sync_cpu_priorities(gpu, cpu);
      expect_same_draws(gpu, cpu, std::min<std::size_t>(16, cpu.size()), wide, rng,
                        "width " + std::to_string(wide) + ", after inserting " +
                            std::to_string(n) + " rows");
    }
  }
}

TEST(GpuReplay, NonFiniteTdErrorIsReportedAtTheReadback) {
  RESIDENT_REQUIRE_GPU();
  const ReplayConfig config = make_config(16, ReplayPriorityMode::Proportional, ReplaySampling::Stratified);
  Stream stream;
  GpuReplayBuffer gpu(config, 4, 3, stream.get());
  CpuReplayBuffer cpu(config);
  std::mt19937_64 rng(9);
  TwinInsert insert(HostTransitions(16, kDim, rng), gpu, cpu);
  const DeviceSampledBatch b = gpu.sample(4);
  const auto d_td = to_device(std::vector<float>{1.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f, 3.0f});
  gpu.update_priorities(b.indices, b.generations, d_td.data(), 4);
  ScalarReadback<std::uint64_t> readback;
  readback.enqueue(&gpu.device_counters()->nonfinite, stream.get());
  const std::uint64_t nonfinite = readback.wait();
  EXPECT_EQ(nonfinite, 1u);
  try {
    GpuReplayBuffer::throw_if_nonfinite(nonfinite, 0, "epoch 3");
    FAIL() << "a non-finite TD error was not reported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("epoch 3: 1 non-finite TD errors"), std::string::npos) << e.what();
  }
}

TEST(GpuReplay, ZeroPriorityIsNeverSampled) {
  RESIDENT_REQUIRE_GPU();
  // 1000 slots, 10 written: 990 leaves of priority 0 that must never come out.
  const ReplayConfig config = make_config(1000, ReplayPriorityMode::Proportional, ReplaySampling::Independent);
  Stream stream;
  GpuReplayBuffer gpu(config, 10, 21, stream.get());
  CpuReplayBuffer cpu(config);
  std::mt19937_64 rng(1);
  TwinInsert insert(HostTransitions(10, kDim, rng), gpu, cpu);
  std::size_t draws = 0;
  for (int call = 0; call < 200; ++call) {
    const HostSample s = download(gpu.sample(10), kDim);
    for (std::uint32_t slot : s.indices) ASSERT_LT(slot, 10u) << "call " << call;
    draws += s.indices.size();
  }
  std::printf("  %zu Philox draws, none of a zero-priority slot\n", draws);
}

TEST(GpuReplay, DrawOnAStratumBoundaryPicksTheNextLeaf) {
  RESIDENT_REQUIRE_GPU();
  // Four equal priorities, four strata, u = 0: masses 0, 1, 2, 3 (of 4) sit exactly on the
  // cumulative sums; half-open intervals [c_{i-1}, c_i) put mass c_i in leaf i + 1.
  ReplayConfig config = make_config(4, ReplayPriorityMode::Proportional, ReplaySampling::Stratified);
  config.alpha = 0.0;  // every priority exactly 1
  Stream stream;
  GpuReplayBuffer gpu(config, 4, 1, stream.get());
  CpuReplayBuffer cpu(config);
  std::mt19937_64 rng(2);
  TwinInsert insert(HostTransitions(4, kDim, rng), gpu, cpu);
  const auto zeros = to_device(std::vector<double>(4, 0.0));
  const HostSample s = download(gpu.sample_with_uniforms(zeros.data(), 4), kDim);
  EXPECT_EQ(s.indices, (std::vector<std::uint32_t>{0, 1, 2, 3}));
  SampledBatch want;
  cpu.sample_with_uniforms(std::vector<double>(4, 0.0), want);
  EXPECT_EQ(s.indices, want.indices);
}

TEST(GpuReplay, RootEqualsSumOfLeavesAfterAMillionUpdates) {
  RESIDENT_REQUIRE_GPU();
  const std::size_t capacity = 4097;  // not a power of two
  const ReplayConfig config = make_config(capacity, ReplayPriorityMode::Proportional, ReplaySampling::Stratified);
  Stream stream;
  GpuReplayBuffer gpu(config, 64, 4, stream.get());
  CpuReplayBuffer cpu(config);
  std::mt19937_64 rng(77);
  TwinInsert insert(HostTransitions(capacity, kDim, rng), gpu, cpu);
  const std::size_t per_call = 1000, calls = 1000;
  std::vector<std::uint32_t> idx(per_call);
  const std::vector<std::uint32_t> gen(per_call, 1);
  std::vector<float> td(per_call);
  DeviceBuffer<std::uint32_t> d_idx(per_call), d_gen(per_call);
  DeviceBuffer<float> d_td(per_call);
  d_gen.upload(gen);
  std::lognormal_distribution<float> magnitude(0.0f, 2.0f);
  for (std::size_t call = 0; call < calls; ++call) {
    for (auto& i : idx) i = static_cast<std::uint32_t>(rng() % capacity);
    for (auto& t : td) t = magnitude(rng);
    d_idx.upload(idx);
    d_td.upload(td);
    gpu.update_priorities(d_idx.data(), d_gen.data(), d_td.data(), per_call);
    cpu.update_priorities(idx, gen, td);
  }
  const std::vector<double> sums = gpu.read_tree_sums();
  const std::size_t leaves = sums.size() / 2;
  long double exact = 0;
  for (std::size_t s = 0; s < leaves; ++s) exact += sums[leaves + s];
  const double rel = std::fabs(static_cast<double>((sums[1] - exact) / exact));
  std::printf("  root %.17g, long-double sum of leaves %.17Lg, rel %.2e (tol 1e-9)\n", sums[1], exact, rel);
  EXPECT_LE(rel, 1e-9);
  const GpuReplayBuffer::TreeExtremes extremes = gpu.read_tree_extremes();
  EXPECT_EQ(kept_levels_mismatch(sums, extremes.min_positive, extremes.max), "");
  EXPECT_NEAR(sums[1], cpu.total_priority(), 1e-12 * sums[1]);
  // 1000 entries per call span two chunks of the update kernel, with indices repeated within and
  // across them: every leaf must hold the CPU's (last writable entry wins), to pow's rounding.
  for (std::size_t s = 0; s < capacity; ++s)
    ASSERT_LE(std::fabs(sums[leaves + s] - cpu.leaf_priority(s)), 1e-12 * cpu.leaf_priority(s))
        << "slot " << s;
}

TEST(GpuReplay, GraphReplayMatchesEagerAndTouchesNoHost) {
  RESIDENT_REQUIRE_GPU();
  const ReplayConfig config = make_config(100000, ReplayPriorityMode::Proportional, ReplaySampling::Stratified);
  const std::size_t batch = 256, inserted = 64, steps = 50;
  Stream eager_stream, graph_stream;
  GpuReplayBuffer eager(config, batch, 99, eager_stream.get());
  GpuReplayBuffer graphed(config, batch, 99, graph_stream.get());
  CpuReplayBuffer unused(config);
  std::mt19937_64 rng(3);
  const HostTransitions warm(2000, kDim, rng);
  const HostTransitions fresh(inserted, kDim, rng);
  std::vector<float> td(batch);
  for (float& t : td) t = std::normal_distribution<float>(0.0f, 1.0f)(rng);
  const auto d_td = to_device(td);
  TwinInsert warm_eager(warm, eager, unused);
  CpuReplayBuffer unused2(config);
  TwinInsert warm_graph(warm, graphed, unused2);
  const auto d_states = to_device(fresh.states), d_next = to_device(fresh.next_states);
  const auto d_rewards = to_device(fresh.rewards);
  const auto d_actions = to_device(fresh.actions);
  const auto d_dones = to_device(fresh.dones);
  const DeviceTransitions rows{d_states.data(), d_actions.data(), d_rewards.data(), d_next.data(), d_dones.data()};
  const auto step = [&](GpuReplayBuffer& buffer) {
    buffer.insert_batch(rows, inserted);
    const DeviceSampledBatch b = buffer.sample(batch);
    buffer.update_priorities(b.indices, b.generations, d_td.data(), batch);
  };
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(graph_stream.get(), cudaStreamCaptureModeGlobal), cudaSuccess);
  step(graphed);  // any host interaction here fails the capture
  ASSERT_EQ(cudaStreamEndCapture(graph_stream.get(), &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);

  auto& tracer = audit::Tracer::instance();
  tracer.start();
  tracer.reset();
  {
    const audit::Phase phase("replay/graph_loop");
    for (std::size_t i = 0; i < steps; ++i) ASSERT_EQ(cudaGraphLaunch(exec, graph_stream.get()), cudaSuccess);
  }
  {
    const audit::Phase phase("replay/eager_loop");
    for (std::size_t i = 0; i < steps; ++i) step(eager);
  }
  const audit::AuditReport report = tracer.snapshot();
  std::printf("%s", audit::format_table(report).c_str());
  const audit::TransferContract resident_contract{.max_d2h_scalar = 0, .max_d2h_bulk = 0,
                                                  .max_h2d = 0, .max_syncs = 0};
  auto graph_contract = resident_contract, eager_contract = resident_contract;
  graph_contract.phase = "replay/graph_loop";
  eager_contract.phase = "replay/eager_loop";
  RESIDENT_EXPECT_WITHIN_CONTRACT(report, (std::vector<audit::TransferContract>{graph_contract, eager_contract}));
  ASSERT_NE(report.find("replay/graph_loop"), nullptr);

  const kernels::ReplayCounters g = graphed.read_counters(), e = eager.read_counters();
  EXPECT_EQ(g.step, steps);
  EXPECT_EQ(g.step, e.step);
  EXPECT_EQ(g.cursor, e.cursor);
  EXPECT_EQ(g.size, e.size);
  EXPECT_EQ(graphed.read_leaf_priorities(), eager.read_leaf_priorities());  // bit for bit
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

// save_state -> load_state into a fresh buffer of the same config and seed reproduces the source:
// the next samples (indices, generations, weights, rows) and updates are bit-identical; a buffer
// of another shape rejects the state naming the mismatch and keeps its own; a truncated state is
// rejected.
TEST(GpuReplay, SavedStateLoadsIntoAFreshBufferAndContinuesBitForBit) {
  RESIDENT_REQUIRE_GPU();
  const ReplayConfig config = make_config(1025, ReplayPriorityMode::Proportional, ReplaySampling::Stratified);
  const std::size_t batch = 64;
  Stream stream;
  GpuReplayBuffer source(config, batch, 5, stream.get()), fresh(config, batch, 5, stream.get());
  CpuReplayBuffer unused(config);
  std::mt19937_64 rng(8);
  TwinInsert fill(HostTransitions(900, kDim, rng), source, unused);
  std::vector<float> td(batch);
  for (float& t : td) t = std::normal_distribution<float>(0.0f, 1.0f)(rng);
  const auto d_td = to_device(td);
  for (int i = 0; i < 3; ++i) {
    const DeviceSampledBatch b = source.sample(batch);
    source.update_priorities(b.indices, b.generations, d_td.data(), batch);
  }
  const std::vector<std::uint8_t> state = source.save_state();
  fresh.load_state(state);
  EXPECT_EQ(fresh.size(), source.size());
  EXPECT_EQ(fresh.save_state(), state) << "a loaded state saves to the same bytes";
  for (int i = 0; i < 3; ++i) {
    const DeviceSampledBatch a = source.sample(batch), b = fresh.sample(batch);
    stream.synchronize();
    const HostSample ha = download(a, kDim), hb = download(b, kDim);
    EXPECT_EQ(ha.indices, hb.indices) << "draw " << i;
    EXPECT_EQ(ha.generations, hb.generations) << "draw " << i;
    EXPECT_EQ(ha.weights, hb.weights) << "draw " << i;
    EXPECT_EQ(ha.states, hb.states) << "draw " << i;
    EXPECT_EQ(ha.next_states, hb.next_states) << "draw " << i;
    EXPECT_EQ(ha.rewards, hb.rewards) << "draw " << i;
    source.update_priorities(a.indices, a.generations, d_td.data(), batch);
    fresh.update_priorities(b.indices, b.generations, d_td.data(), batch);
  }
  EXPECT_EQ(fresh.read_tree_sums(), source.read_tree_sums());

  const ReplayConfig smaller = make_config(1000, ReplayPriorityMode::Proportional, ReplaySampling::Stratified);
  GpuReplayBuffer other(smaller, batch, 5, stream.get());
  const std::vector<std::uint8_t> before = other.save_state();
  std::string message;
  try {
    other.load_state(state);
  } catch (const Error& e) {
    message = e.what();
  }
  std::printf("  capacity 1000 <- state of capacity 1025: %s\n", message.c_str());
  EXPECT_NE(message.find("state mismatch"), std::string::npos) << message;
  EXPECT_EQ(other.save_state(), before) << "a rejected state changed the buffer";
  std::vector<std::uint8_t> truncated(state.begin(), state.end() - 1);
  EXPECT_THROW(fresh.load_state(truncated), Error);
}

TEST(GpuReplay, FactoryFallsBackToTheCpuNamingTheBytes) {
  RESIDENT_REQUIRE_GPU();
  const ReplayConfig config = make_config(1000, ReplayPriorityMode::Proportional, ReplaySampling::Stratified);
  Stream stream;
  const ReplayBackend on_gpu = make_replay_buffer(config, 32, 1, stream.get());
  EXPECT_TRUE(on_gpu.on_gpu());
  EXPECT_TRUE(on_gpu.warning.empty());
  const ReplayBackend fallback = make_replay_buffer(config, 32, 1, stream.get(), /*budget=*/1024);
  ASSERT_FALSE(fallback.on_gpu());
  ASSERT_NE(fallback.cpu, nullptr);
  const std::string needed = std::to_string(GpuReplayBuffer::device_bytes(config, 32));
  EXPECT_NE(fallback.warning.find("needs " + needed + " bytes"), std::string::npos) << fallback.warning;
  EXPECT_NE(fallback.warning.find("1024 bytes"), std::string::npos) << fallback.warning;
}

TEST(GpuReplay, InvalidArgumentsNameTheValue) {
  RESIDENT_REQUIRE_GPU();
  Stream stream;
  const ReplayConfig config = make_config(10, ReplayPriorityMode::Proportional, ReplaySampling::Stratified);
  try {
    GpuReplayBuffer bad(config, 11, 1, stream.get());
    FAIL() << "max_batch above capacity accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_batch = 11, allowed [1, 10]"), std::string::npos) << e.what();
  }
  GpuReplayBuffer gpu(config, 4, 1, stream.get());
  EXPECT_THROW(gpu.sample(1), Error);  // empty
  CpuReplayBuffer cpu(config);
  std::mt19937_64 rng(1);
  TwinInsert insert(HostTransitions(6, kDim, rng), gpu, cpu);
  EXPECT_THROW(gpu.sample(5), Error);  // above max_batch
  EXPECT_NO_THROW(gpu.sample(4));
}

}  // namespace
