// CpuReplayBuffer: storage (insert, len, wrap, rows), priorities (formula, new-item maximum,
// duplicates, stale and non-finite updates), sampling (IS weights against the formula in long
// double, beta annealing, zero priorities, non-power-of-two capacities, stratum boundaries,
// the documented draw order), tree consistency after 10^6 updates, rank mode, and errors.
#include "lib/replay/cpu_replay_buffer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/core/error.h"
#include "lib/replay/unit_uniform.h"
#include "tests/replay/replay_test_config.h"

namespace {

using resident::CpuReplayBuffer;
using resident::Error;
using resident::ReplayConfig;
using resident::ReplayPriorityMode;
using resident::ReplaySampling;
using resident::SampledBatch;
using resident::TransitionBatchView;

ReplayConfig make_config(std::size_t capacity, std::size_t state_dim,
                         ReplayPriorityMode mode = ReplayPriorityMode::Proportional,
                         ReplaySampling sampling = ReplaySampling::Stratified) {
  return resident::test::replay_test_config(capacity, state_dim, mode, sampling,
                                            /*beta_annealing_steps=*/1000);
}

// Rows whose every field is a function of a transition id, so a sampled row names its id.
struct Rows {
  std::vector<float> states, next_states, rewards;
  std::vector<std::int32_t> actions;
  std::vector<std::uint8_t> dones;
  TransitionBatchView view() const { return {states, actions, rewards, next_states, dones}; }
};

float state_value(std::int32_t id, std::size_t c) {
  return static_cast<float>(id) * 16.0f + static_cast<float>(c);
}

Rows make_rows(std::int32_t first_id, std::size_t n, std::size_t dim) {
  Rows rows;
  for (std::size_t r = 0; r < n; ++r) {
    const auto id = first_id + static_cast<std::int32_t>(r);
    for (std::size_t c = 0; c < dim; ++c) {
      rows.states.push_back(state_value(id, c));
      rows.next_states.push_back(-state_value(id, c));
    }
    rows.actions.push_back(id);
    rows.rewards.push_back(static_cast<float>(id) * 0.5f);
    rows.dones.push_back(static_cast<std::uint8_t>(id % 2));
  }
  return rows;
}

void insert(CpuReplayBuffer& buffer, std::int32_t first_id, std::size_t n) {
  const Rows rows = make_rows(first_id, n, buffer.config().state_dim);
  buffer.insert_batch(rows.view());
}

// The id stored in each slot after ids 0..inserted-1 went in one after another from slot 0.
std::int32_t id_in_slot(std::size_t slot, std::size_t inserted, std::size_t capacity) {
  std::size_t id = slot;
  while (id + capacity < inserted) id += capacity;
  return static_cast<std::int32_t>(id);
}

// Applies `td` to every live slot at its current generation.
void update_all(CpuReplayBuffer& buffer, const std::vector<float>& td) {
  std::vector<std::uint32_t> indices(buffer.size()), generations(buffer.size());
  for (std::uint32_t i = 0; i < buffer.size(); ++i) {
    indices[i] = i;
    generations[i] = buffer.generation(i);
  }
  buffer.update_priorities(indices, generations, std::span<const float>(td.data(), buffer.size()));
}

std::vector<float> random_td(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> td(-3.0f, 3.0f);
  std::vector<float> out(n);
  for (float& v : out) v = td(rng);
  return out;
}

TEST(CpuReplayBuffer, InsertLenAndWrapAround) {
  CpuReplayBuffer buffer(make_config(5, 2));
  EXPECT_EQ(buffer.size(), 0u);
  EXPECT_EQ(buffer.capacity(), 5u);
  EXPECT_FALSE(buffer.can_sample(1));
  insert(buffer, 0, 3);
  EXPECT_EQ(buffer.size(), 3u);
  EXPECT_EQ(buffer.insert_position(), 3u);
  insert(buffer, 3, 4);  // slots 3, 4, 0, 1
  EXPECT_EQ(buffer.size(), 5u);
  EXPECT_EQ(buffer.insert_position(), 2u);
  const std::vector<std::uint32_t> generations = {2, 2, 1, 1, 1};
  for (std::size_t s = 0; s < 5; ++s) EXPECT_EQ(buffer.generation(s), generations[s]) << s;
  // A batch longer than the capacity: only its last 5 rows remain.
  insert(buffer, 100, 12);  // ids 100..111 into slots 2,3,4,0,1,2,3,4,0,1,2,3
  EXPECT_EQ(buffer.insert_position(), 4u);
  EXPECT_EQ(buffer.size(), 5u);
  SampledBatch out;
  std::vector<double> uniforms(5, 0.5);
  buffer.sample_with_uniforms(uniforms, out);  // equal priorities: one draw from each slot
  for (std::size_t k = 0; k < 5; ++k) {
    const std::uint32_t slot = out.indices[k];
    EXPECT_EQ(slot, k);
    const std::int32_t expected_id = 107 + static_cast<std::int32_t>((slot + 5 - 4) % 5);
    EXPECT_EQ(out.actions[k], expected_id) << "slot " << slot;
  }
  insert(buffer, 0, 0);  // an empty batch changes nothing
  EXPECT_EQ(buffer.insert_position(), 4u);
}

TEST(CpuReplayBuffer, SampledRowsEqualTheRowsInserted) {
  const std::size_t capacity = 37;
  const std::size_t dim = 3;
  CpuReplayBuffer buffer(make_config(capacity, dim));
  insert(buffer, 0, 20);
  insert(buffer, 20, 30);  // wraps: 50 inserted in all
  update_all(buffer, random_td(capacity, 5));
  std::mt19937_64 rng(6);
  SampledBatch out;
  std::size_t rows_checked = 0;
  for (int call = 0; call < 200; ++call) {
    buffer.sample(16, rng, out);
    ASSERT_EQ(out.indices.size(), 16u);
    ASSERT_EQ(out.states.size(), 16u * dim);
    for (std::size_t k = 0; k < 16; ++k) {
      const std::uint32_t slot = out.indices[k];
      ASSERT_LT(slot, capacity);
      const std::int32_t id = id_in_slot(slot, 50, capacity);
      EXPECT_EQ(out.actions[k], id);
      EXPECT_EQ(out.rewards[k], static_cast<float>(id) * 0.5f);
      EXPECT_EQ(out.dones[k], id % 2);
      EXPECT_EQ(out.generations[k], buffer.generation(slot));
      for (std::size_t c = 0; c < dim; ++c) {
        EXPECT_EQ(out.states[k * dim + c], state_value(id, c));
        EXPECT_EQ(out.next_states[k * dim + c], -state_value(id, c));
      }
      ++rows_checked;
    }
  }
  std::printf("checked %zu sampled rows against the rows inserted\n", rows_checked);
}

// w_i = (N P(i))^-beta / max_j (N P(j))^-beta, all in long double from the TD errors.
TEST(CpuReplayBuffer, ImportanceWeightsMatchTheFormulaInLongDouble) {
  for (ReplayPriorityMode mode : {ReplayPriorityMode::Proportional, ReplayPriorityMode::Rank}) {
    const std::size_t capacity = 250;
    ReplayConfig config = make_config(capacity, 1, mode);
    config.beta_start = 0.5;
    config.beta_annealing_steps = 7;
    CpuReplayBuffer buffer(config);
    insert(buffer, 0, 200);  // N = 200 live of 250
    const std::vector<float> td = random_td(200, 9);
    update_all(buffer, td);

    const std::size_t n = 200;
    std::vector<long double> p(n);
    for (std::size_t i = 0; i < n; ++i)
      p[i] = std::pow(std::fabs(static_cast<long double>(td[i])) + config.epsilon,
                      static_cast<long double>(config.alpha));
    std::vector<long double> probability(n);
    if (mode == ReplayPriorityMode::Proportional) {
      const long double total = std::accumulate(p.begin(), p.end(), 0.0L);
      for (std::size_t i = 0; i < n; ++i) probability[i] = p[i] / total;
    } else {
      std::vector<std::size_t> order(n);
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return p[a] > p[b] || (p[a] == p[b] && a < b);
      });
      long double harmonic = 0.0L;
      for (std::size_t r = 1; r <= n; ++r)
        harmonic += std::pow(static_cast<long double>(r), -static_cast<long double>(config.alpha));
      for (std::size_t r = 1; r <= n; ++r)
        probability[order[r - 1]] =
            std::pow(static_cast<long double>(r), -static_cast<long double>(config.alpha)) /
            harmonic;
    }
    const long double min_probability = *std::min_element(probability.begin(), probability.end());

    double max_probability_error = 0.0;
    for (std::size_t i = 0; i < n; ++i)
      max_probability_error = std::max(
          max_probability_error, static_cast<double>(std::fabs(
                                     (buffer.probability(i) - probability[i]) / probability[i])));
    EXPECT_LE(max_probability_error, 1e-12);

    // Float weights: rounding alone is 6e-8 relative; tolerance 1e-6 relative.
    std::mt19937_64 rng(10);
    SampledBatch out;
    double max_error = 0.0;
    for (int call = 0; call < 10; ++call) {
      buffer.sample(64, rng, out);
      const long double beta = out.beta;
      for (std::size_t k = 0; k < 64; ++k) {
        const std::size_t i = out.indices[k];
        const long double nn = static_cast<long double>(n);
        const long double w =
            std::pow(nn * probability[i], -beta) / std::pow(nn * min_probability, -beta);
        const double error = static_cast<double>(std::fabs((out.is_weights[k] - w) / w));
        max_error = std::max(max_error, error);
        EXPECT_LE(out.is_weights[k], 1.0f);
        EXPECT_GT(out.is_weights[k], 0.0f);
      }
    }
    std::printf(
        "%s: max relative error of P(i) %.2e (tolerance 1e-12), of IS weights %.2e "
        "(tolerance 1e-6, %.0f%% used)\n",
        mode == ReplayPriorityMode::Rank ? "rank" : "proportional", max_probability_error,
        max_error, 100.0 * max_error / 1e-6);
    EXPECT_LE(max_error, 1e-6);
  }
}

TEST(CpuReplayBuffer, BetaAnnealsWithTheSampleCount) {
  ReplayConfig config = make_config(10, 1);
  config.beta_start = 0.4;
  config.beta_max = 1.0;
  config.beta_annealing_steps = 6;
  CpuReplayBuffer buffer(config);
  insert(buffer, 0, 10);
  std::vector<float> td(10, 0.1f);
  td[3] = 2.0f;  // slot 3 is the most likely; its weight is (P3 / Pmin)^-beta
  update_all(buffer, td);
  const double ratio = buffer.probability(3) / buffer.probability(0);
  SampledBatch out;
  const std::vector<double> hit_slot_3 = {
      (3.0 * buffer.leaf_priority(0) + 0.5 * buffer.leaf_priority(3)) / buffer.total_priority()};
  for (std::uint64_t step = 0; step < 9; ++step) {
    EXPECT_EQ(buffer.step(), step);
    const double expected_beta = step >= 6 ? 1.0 : 0.4 + 0.6 * static_cast<double>(step) / 6.0;
    EXPECT_NEAR(buffer.beta(), expected_beta, 1e-15);
    buffer.sample_with_uniforms(hit_slot_3, out);
    ASSERT_EQ(out.indices[0], 3u);
    EXPECT_NEAR(out.beta, expected_beta, 1e-15);
    EXPECT_NEAR(out.is_weights[0], std::pow(ratio, -expected_beta), 1e-6);
  }
  buffer.set_step(3);
  EXPECT_NEAR(buffer.beta(), 0.7, 1e-15);
}

TEST(CpuReplayBuffer, PriorityIsTheFormulaAndNewItemsGetTheLiveMaximum) {
  ReplayConfig config = make_config(2, 1);
  CpuReplayBuffer buffer(config);
  EXPECT_EQ(buffer.new_item_priority(), 1.0);  // empty
  insert(buffer, 0, 2);                        // A in slot 0, B in slot 1
  EXPECT_EQ(buffer.leaf_priority(0), 1.0);
  EXPECT_EQ(buffer.leaf_priority(1), 1.0);
  const auto priority_of = [&](float td) {
    return std::pow(std::fabs(static_cast<double>(td)) + config.epsilon, config.alpha);
  };
  const std::uint32_t slot0 = 0, slot1 = 1;
  buffer.update_priorities({&slot0, 1}, std::vector<std::uint32_t>{buffer.generation(0)},
                           std::vector<float>{-14.0f});
  EXPECT_EQ(buffer.leaf_priority(0), priority_of(-14.0f));
  EXPECT_NEAR(buffer.leaf_priority(0), static_cast<double>(std::pow(14.001L, 0.6L)),
              1e-15 * buffer.leaf_priority(0));
  const double big = buffer.leaf_priority(0);
  insert(buffer, 2, 1);  // C overwrites A; the live maximum when called is A's
  EXPECT_EQ(buffer.leaf_priority(0), big);
  buffer.update_priorities({&slot0, 1}, std::vector<std::uint32_t>{buffer.generation(0)},
                           std::vector<float>{0.5f});
  // Live now: C (0.5 -> p), B (1.0). The largest ever was `big`; the live maximum is 1.0.
  EXPECT_EQ(buffer.new_item_priority(), 1.0);
  buffer.update_priorities({&slot1, 1}, std::vector<std::uint32_t>{buffer.generation(1)},
                           std::vector<float>{2.0f});
  // Live: C (p(0.5)) in slot 0, B (p(2)) in slot 1. D overwrites B (the cursor is at 1) and
  // gets p(2), the live maximum when called -- not p(14), the largest ever seen.
  insert(buffer, 3, 1);
  EXPECT_EQ(buffer.leaf_priority(1), priority_of(2.0f));
  EXPECT_EQ(buffer.leaf_priority(0), priority_of(0.5f));
  EXPECT_DOUBLE_EQ(buffer.total_priority(), priority_of(0.5f) + priority_of(2.0f));
}

TEST(CpuReplayBuffer, DuplicateIndicesInOneUpdateLaterEntryWins) {
  for (ReplayPriorityMode mode : {ReplayPriorityMode::Proportional, ReplayPriorityMode::Rank}) {
    CpuReplayBuffer buffer(make_config(10, 1, mode));
    insert(buffer, 0, 10);
    const std::vector<std::uint32_t> indices = {3, 5, 3, 7, 3};
    std::vector<std::uint32_t> generations;
    for (auto i : indices) generations.push_back(buffer.generation(i));
    buffer.update_priorities(indices, generations,
                             std::vector<float>{1.0f, 2.0f, 9.0f, 0.2f, 4.0f});
    const double p4 = std::pow(4.0 + 1e-3, 0.6);
    EXPECT_EQ(buffer.leaf_priority(3), p4);
    // The tree stays consistent: root = sum of leaves, probabilities sum to 1.
    double sum = 0.0, probability_sum = 0.0;
    for (std::size_t i = 0; i < 10; ++i) {
      sum += buffer.leaf_priority(i);
      probability_sum += buffer.probability(i);
    }
    EXPECT_NEAR(buffer.total_priority(), sum, 1e-13);
    EXPECT_NEAR(probability_sum, 1.0, 1e-13);
    if (mode == ReplayPriorityMode::Rank) {
      // p(4) is the largest: slot 3 has rank 1.
      EXPECT_NEAR(buffer.probability(3), buffer.probability(5) * std::pow(2.0, 0.6), 1e-12);
    }
  }
}

TEST(CpuReplayBuffer, StaleUpdatesAreDropped) {
  CpuReplayBuffer buffer(make_config(4, 1));
  insert(buffer, 0, 4);
  std::mt19937_64 rng(3);
  SampledBatch out;
  buffer.sample(4, rng, out);
  const std::vector<std::uint32_t> indices = out.indices;
  const std::vector<std::uint32_t> generations = out.generations;
  insert(buffer, 4, 2);  // overwrites slots 0 and 1 after they were sampled
  std::vector<double> before(4);
  for (std::size_t s = 0; s < 4; ++s) before[s] = buffer.leaf_priority(s);
  buffer.update_priorities(indices, generations, std::vector<float>(4, 20.0f));
  const double p20 = std::pow(20.0 + 1e-3, 0.6);
  std::uint64_t expected_stale = 0;
  for (std::size_t k = 0; k < 4; ++k) {
    const std::uint32_t slot = indices[k];
    if (slot < 2) {
      ++expected_stale;
      EXPECT_EQ(buffer.leaf_priority(slot), before[slot]) << "stale update written to " << slot;
    } else {
      EXPECT_EQ(buffer.leaf_priority(slot), p20);
    }
  }
  EXPECT_GT(expected_stale, 0u);
  EXPECT_EQ(buffer.take_stale_count(), expected_stale);
  EXPECT_EQ(buffer.take_stale_count(), 0u);
  // With the current generation the same slot is updated.
  const std::uint32_t slot0 = 0;
  buffer.update_priorities({&slot0, 1}, std::vector<std::uint32_t>{buffer.generation(0)},
                           std::vector<float>{20.0f});
  EXPECT_EQ(buffer.leaf_priority(0), p20);
}

TEST(CpuReplayBuffer, NonFiniteTdErrorsAreCountedAndNotWritten) {
  ReplayConfig config = make_config(6, 1);
  config.alpha = 10.0;  // (1e38)^10 overflows double: a finite TD error, an infinite priority
  CpuReplayBuffer buffer(config);
  insert(buffer, 0, 6);
  const std::vector<std::uint32_t> indices = {0, 1, 2, 3, 4, 4};
  std::vector<std::uint32_t> generations;
  for (auto i : indices) generations.push_back(buffer.generation(i));
  const float inf = INFINITY;
  buffer.update_priorities(indices, generations,
                           std::vector<float>{NAN, inf, -inf, 1e38f, 0.5f, NAN});
  for (std::size_t s = 0; s < 4; ++s) EXPECT_EQ(buffer.leaf_priority(s), 1.0) << s;
  EXPECT_EQ(buffer.leaf_priority(4), std::pow(0.5 + 1e-3, 10.0));  // the later NaN is skipped
  EXPECT_TRUE(std::isfinite(buffer.total_priority()));
  EXPECT_EQ(buffer.take_nonfinite_count(), 5u);
  EXPECT_EQ(buffer.take_nonfinite_count(), 0u);
  EXPECT_EQ(buffer.take_stale_count(), 0u);
}

TEST(CpuReplayBuffer, ZeroPriorityIsNeverSampled) {
  for (ReplayPriorityMode mode : {ReplayPriorityMode::Proportional, ReplayPriorityMode::Rank}) {
    for (ReplaySampling sampling : {ReplaySampling::Stratified, ReplaySampling::Independent}) {
      const std::size_t capacity = 37;  // padded to 64 leaves
      CpuReplayBuffer buffer(make_config(capacity, 1, mode, sampling));
      insert(buffer, 0, capacity);
      std::vector<std::uint32_t> indices, generations;
      std::vector<double> priorities;
      for (std::uint32_t s = 0; s < capacity; ++s) {
        indices.push_back(s);
        generations.push_back(buffer.generation(s));
        const bool zero = s == 0 || s % 3 == 1 || s >= capacity - 4;  // incl. the last leaves
        priorities.push_back(zero ? 0.0 : 1.0 + s * 0.25);
      }
      buffer.assign_priorities(indices, generations, priorities);
      std::mt19937_64 rng(99);
      SampledBatch out;
      std::vector<std::size_t> hits(capacity, 0);
      for (int call = 0; call < 4000; ++call) {
        buffer.sample(25, rng, out);
        for (auto slot : out.indices) ++hits[slot];
      }
      // The largest uniform in the last stratum: the mass nearest the end.
      std::vector<double> last(25, 0.0);
      last[24] = 1.0 - 0x1.0p-53;
      buffer.sample_with_uniforms(last, out);
      ++hits[out.indices[24]];
      for (std::size_t s = 0; s < capacity; ++s) {
        if (priorities[s] == 0.0) {
          EXPECT_EQ(hits[s], 0u) << "zero-priority slot " << s << " sampled";
          EXPECT_EQ(buffer.probability(s), 0.0);
        } else {
          EXPECT_GT(hits[s], 0u) << "slot " << s << " never sampled";
        }
      }
    }
  }
}

TEST(CpuReplayBuffer, NonPowerOfTwoCapacitiesReachEverySlotAndNoPadding) {
  for (std::size_t capacity : {1, 2, 3, 5, 6, 7, 9, 37, 1000, 1025}) {
    CpuReplayBuffer buffer(
        make_config(capacity, 2, ReplayPriorityMode::Proportional, ReplaySampling::Independent));
    insert(buffer, 0, capacity + 3);
    update_all(buffer, random_td(capacity, capacity));
    // A uniform in the middle of slot s's interval draws s.
    double cumulative = 0.0;
    SampledBatch out;
    for (std::size_t s = 0; s < capacity; ++s) {
      const double p = buffer.leaf_priority(s);
      const std::vector<double> u = {(cumulative + p / 2) / buffer.total_priority()};
      buffer.sample_with_uniforms(u, out);
      EXPECT_EQ(out.indices[0], s) << "capacity " << capacity;
      cumulative += p;
    }
    double probability_sum = 0.0;
    for (std::size_t s = 0; s < capacity; ++s) probability_sum += buffer.probability(s);
    EXPECT_NEAR(probability_sum, 1.0, 1e-12) << "capacity " << capacity;
    std::mt19937_64 rng(capacity);
    buffer.sample(capacity, rng, out);
    for (auto slot : out.indices) EXPECT_LT(slot, capacity);
  }
}

// Priorities with exact partial sums 2 4 4 8 11 12 12 16 and 4 strata of width 4: with
// u_k = 0 the draws land exactly on 0, 4, 8, 12, which belong to the leaf whose half-open
// interval [c_{i-1}, c_i) starts there: 0, 3 (leaf 2 is empty), 4, 7 (leaf 6 is empty).
TEST(CpuReplayBuffer, DrawOnAStratumBoundaryPicksTheLeafStartingThere) {
  CpuReplayBuffer buffer(make_config(8, 1));
  insert(buffer, 0, 8);
  std::vector<std::uint32_t> indices(8), generations(8);
  for (std::uint32_t s = 0; s < 8; ++s) {
    indices[s] = s;
    generations[s] = buffer.generation(s);
  }
  buffer.assign_priorities(indices, generations, std::vector<double>{2, 2, 0, 4, 3, 1, 0, 4});
  ASSERT_EQ(buffer.total_priority(), 16.0);
  SampledBatch out;
  buffer.sample_with_uniforms(std::vector<double>{0.0, 0.0, 0.0, 0.0}, out);
  EXPECT_EQ(out.indices, (std::vector<std::uint32_t>{0, 3, 4, 7}));
  // Just below each boundary: the leaf ending there. (k + u) must stay below k + 1 in double,
  // so u = 1 - 2^-50 rather than the largest double below 1.
  const double below = 1.0 - 0x1.0p-50;
  buffer.sample_with_uniforms(std::vector<double>{below, below, below, below}, out);
  EXPECT_EQ(out.indices, (std::vector<std::uint32_t>{1, 3, 5, 7}));
}

TEST(CpuReplayBuffer, SampleDrawsOneUnitUniformPerStratumInOrder) {
  for (ReplayPriorityMode mode : {ReplayPriorityMode::Proportional, ReplayPriorityMode::Rank}) {
    CpuReplayBuffer a(make_config(300, 1, mode));
    CpuReplayBuffer b(make_config(300, 1, mode));
    insert(a, 0, 300);
    insert(b, 0, 300);
    const auto td = random_td(300, 17);
    update_all(a, td);
    update_all(b, td);
    std::mt19937_64 rng(18);
    std::mt19937_64 replay = rng;
    SampledBatch from_rng, from_uniforms;
    a.sample(32, rng, from_rng);
    std::vector<double> uniforms(32);
    for (double& u : uniforms) u = resident::unit_uniform(replay);
    b.sample_with_uniforms(uniforms, from_uniforms);
    EXPECT_EQ(from_rng.indices, from_uniforms.indices);
    EXPECT_EQ(from_rng.is_weights, from_uniforms.is_weights);
    EXPECT_EQ(rng(), replay());  // the same number of draws
  }
}

// Root = sum of leaves to 1e-9 relative after 10^6 random updates (TD errors over 12 decades).
TEST(CpuReplayBuffer, RootEqualsSumOfLeavesAfterAMillionUpdates) {
  const std::size_t capacity = 1000;
  CpuReplayBuffer buffer(make_config(capacity, 1));
  insert(buffer, 0, capacity);
  std::mt19937_64 rng(2024);
  std::uniform_real_distribution<float> exponent(-8.0f, 4.0f);
  std::vector<std::uint32_t> indices(100), generations(100);
  std::vector<float> td(100);
  for (int batch = 0; batch < 10000; ++batch) {
    for (std::size_t e = 0; e < 100; ++e) {
      indices[e] = static_cast<std::uint32_t>(rng() % capacity);
      generations[e] = buffer.generation(indices[e]);
      td[e] = std::pow(10.0f, exponent(rng)) * ((rng() & 1) ? 1.0f : -1.0f);
    }
    buffer.update_priorities(indices, generations, td);
  }
  long double sum = 0.0L;
  double max_leaf = 0.0;
  for (std::size_t s = 0; s < capacity; ++s) {
    sum += buffer.leaf_priority(s);
    max_leaf = std::max(max_leaf, buffer.leaf_priority(s));
  }
  const double relative = static_cast<double>(
      std::fabs((static_cast<long double>(buffer.total_priority()) - sum) / sum));
  std::printf(
      "after 10^6 updates: root %.17g, sum of leaves %.17Lg, relative error %.2e "
      "(tolerance 1e-9)\n",
      buffer.total_priority(), sum, relative);
  EXPECT_LE(relative, 1e-9);
  EXPECT_EQ(buffer.new_item_priority(), max_leaf);
  EXPECT_EQ(buffer.take_nonfinite_count(), 0u);
}

TEST(CpuReplayBuffer, RankModeRanksByPriorityThenSlot) {
  CpuReplayBuffer buffer(make_config(7, 1, ReplayPriorityMode::Rank));
  insert(buffer, 0, 7);
  std::vector<std::uint32_t> indices(7), generations(7);
  for (std::uint32_t s = 0; s < 7; ++s) {
    indices[s] = s;
    generations[s] = buffer.generation(s);
  }
  // ranks: slot 2 (5.0) 1; slots 1, 4, 6 (3.0) 2, 3, 4; slot 0 (1.0) 5; slot 5 (0.5) 6;
  // slot 3 (0) unranked.
  buffer.assign_priorities(indices, generations, std::vector<double>{1, 3, 5, 0, 3, 0.5, 3});
  const std::vector<int> rank = {5, 2, 1, 0, 3, 6, 4};
  double harmonic = 0.0;
  for (int r = 1; r <= 6; ++r) harmonic += std::pow(r, -0.6);
  for (std::size_t s = 0; s < 7; ++s) {
    const double expected = rank[s] == 0 ? 0.0 : std::pow(rank[s], -0.6) / harmonic;
    EXPECT_NEAR(buffer.probability(s), expected, 1e-15) << "slot " << s;
  }
  // Rank r owns [H_{r-1}, H_r) of the rank mass H_6: a uniform in the middle of rank r's
  // interval draws the slot of rank r.
  SampledBatch out;
  double cumulative = 0.0;
  for (int r = 1; r <= 6; ++r) {
    const double mass = std::pow(r, -0.6);
    // A batch of 1 is one stratum: the draw's rank mass is u * H_6.
    buffer.sample_with_uniforms(std::vector<double>{(cumulative + mass / 2) / harmonic}, out);
    const auto slot =
        static_cast<std::size_t>(std::find(rank.begin(), rank.end(), r) - rank.begin());
    EXPECT_EQ(out.indices[0], slot) << "rank " << r;
    cumulative += mass;
  }
}

TEST(CpuReplayBuffer, ErrorsNameTheProblem) {
  EXPECT_THROW(CpuReplayBuffer(make_config(0, 1)), Error);
  CpuReplayBuffer buffer(make_config(8, 2));
  Rows rows = make_rows(0, 3, 2);
  rows.states.pop_back();
  EXPECT_THROW(buffer.insert_batch(rows.view()), Error);
  EXPECT_EQ(buffer.size(), 0u);
  insert(buffer, 0, 4);
  SampledBatch out;
  std::mt19937_64 rng(1);
  EXPECT_THROW(buffer.sample(5, rng, out), Error);  // batch > size
  EXPECT_THROW(buffer.sample(0, rng, out), Error);
  EXPECT_THROW(buffer.sample_with_uniforms(std::vector<double>{1.0}, out), Error);
  EXPECT_THROW(buffer.sample_with_uniforms(std::vector<double>{-0.1}, out), Error);
  // An index past size() rejects the whole update: nothing is written.
  const std::vector<std::uint32_t> indices = {1, 4};
  const std::vector<std::uint32_t> generations = {1, 0};
  try {
    buffer.update_priorities(indices, generations, std::vector<float>{5.0f, 5.0f});
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index 4, allowed [0, 4)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(buffer.leaf_priority(1), 1.0);
  EXPECT_THROW(buffer.update_priorities(indices, generations, std::vector<float>{1.0f}), Error);
  EXPECT_THROW(buffer.assign_priorities(std::vector<std::uint32_t>{1},
                                        std::vector<std::uint32_t>{1}, std::vector<double>{-1.0}),
               Error);
  EXPECT_THROW(buffer.probability(8), Error);
  // All live priorities 0: nothing can be sampled, and new items get 1.0.
  buffer.assign_priorities(std::vector<std::uint32_t>{0, 1, 2, 3},
                           std::vector<std::uint32_t>{1, 1, 1, 1}, std::vector<double>{0, 0, 0, 0});
  EXPECT_FALSE(buffer.can_sample(1));
  try {
    buffer.sample(1, rng, out);
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("priority 0"), std::string::npos) << e.what();
  }
  EXPECT_EQ(buffer.new_item_priority(), 1.0);
  insert(buffer, 4, 1);
  EXPECT_TRUE(buffer.can_sample(1));
  EXPECT_FALSE(buffer.can_sample(6));
}

}  // namespace
