// GpuReplayBuffer's split insert (insert_leaves on a second stream, then sample_inserting; or,
// in every other round, draw_ahead on that stream too and gather_drawn after the join) against
// the plain insert_batch + sample of a twin buffer with the same config and seed: every draw's
// indices, generations, IS weights and rows bit for bit, and the whole saved state (storage,
// trees, generations, counters) after many rounds with wrap-around, priority updates and draws
// of the rows still pending in the draw itself (by both paths). Then the call-order rules: while
// rows are pending or a batch is drawn ahead every other call throws naming them, and bad n /
// rank mode are refused up front.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "lib/core/stream.h"
#include "tests/replay/gpu_replay_test_support.h"
#include "tests/support/gpu.h"

namespace {

using namespace resident;
using resident::test::download;
using resident::test::HostSample;
using resident::test::HostTransitions;
using resident::test::to_device;
using resident::test::TwinInsert;

ReplayConfig split_config(std::size_t capacity, std::size_t dim, ReplayPriorityMode mode) {
  return test::replay_test_config(capacity, dim, mode, ReplaySampling::Stratified,
                                  /*beta_annealing_steps=*/50);
}

// Host rows copied to the device.
struct DeviceRows {
  DeviceBuffer<float> states, rewards, next_states;
  DeviceBuffer<std::int32_t> actions;
  DeviceBuffer<std::uint8_t> dones;
  explicit DeviceRows(const HostTransitions& h)
      : states(to_device(h.states)),
        rewards(to_device(h.rewards)),
        next_states(to_device(h.next_states)),
        actions(to_device(h.actions)),
        dones(to_device(h.dones)) {}
  DeviceTransitions view() const {
    return {states.data(), actions.data(), rewards.data(), next_states.data(), dones.data()};
  }
};

// NaN bytes over a sample's outputs: whatever the next draw does not write stays NaN (or 0xff).
void poison(const DeviceSampledBatch& b, std::size_t dim, cudaStream_t stream) {
  const auto fill = [stream](const void* p, std::size_t bytes) {
    ASSERT_EQ(cudaMemsetAsync(const_cast<void*>(p), 0xff, bytes, stream), cudaSuccess);
  };
  fill(b.indices, b.batch * sizeof(std::uint32_t));
  fill(b.generations, b.batch * sizeof(std::uint32_t));
  fill(b.is_weights, b.batch * sizeof(float));
  fill(b.states, 2 * b.batch * dim * sizeof(float));  // states then next_states
  fill(b.actions, b.batch * sizeof(std::int32_t));
  fill(b.rewards, b.batch * sizeof(float));
  fill(b.dones, b.batch);
}

struct SplitCase {
  std::size_t capacity, dim, n, batch, rounds;
  std::size_t warm = 0;  // rows inserted first (0: batch): where the cursor starts
  // Whether draws must hit pending rows: false where the pending rows are a few of millions
  // (those cases test the tree work; the small ones the draws of pending rows).
  bool expect_pending = true;
};

class GpuReplaySplitInsert : public ::testing::TestWithParam<SplitCase> {};

TEST_P(GpuReplaySplitInsert, EqualsInsertThenSampleBitForBit) {
  RESIDENT_REQUIRE_GPU();
  const SplitCase c = GetParam();
  const ReplayConfig config = split_config(c.capacity, c.dim, ReplayPriorityMode::Proportional);
  Stream stream, side;
  GpuReplayBuffer twin(config, c.batch, 21, stream.get()), split(config, c.batch, 21, stream.get());
  Event fork, join;
  std::mt19937_64 rng(c.capacity * 131 + c.n);
  {  // the same warm rows in both, by the plain insert
    CpuReplayBuffer unused_a(config), unused_b(config);
    const HostTransitions warm(c.warm == 0 ? c.batch : c.warm, c.dim, rng);
    TwinInsert a(warm, twin, unused_a), b(warm, split, unused_b);
    stream.synchronize();
  }
  // Draws that hit a pending row, by path: [0] sample_inserting, [1] draw_ahead + gather_drawn.
  std::size_t pending_draws[2] = {0, 0};
  std::size_t cursor = (c.warm == 0 ? c.batch : c.warm) % c.capacity;
  DeviceSampledBatch last{};
  for (std::size_t round = 0; round < c.rounds; ++round) {
    const HostTransitions fresh(c.n, c.dim, rng);
    const DeviceRows rows(fresh);
    std::vector<float> td(c.batch);
    for (float& t : td) t = std::normal_distribution<float>(0.0f, round % 3 == 0 ? 5.0f : 1.0f)(rng);
    const auto d_td = to_device(td);
    if (last.batch != 0) poison(last, c.dim, stream.get());

    twin.insert_batch(rows.view(), c.n);
    const DeviceSampledBatch expected = twin.sample(c.batch);
    const int path = static_cast<int>(round % 2);
    fork.record(stream.get());
    fork.make_wait(side.get());
    split.insert_leaves(c.n, side.get());
    if (path == 1) split.draw_ahead(c.batch, side.get());
    join.record(side.get());
    join.make_wait(stream.get());
    ASSERT_EQ(split.pending_rows(), c.n);
    ASSERT_EQ(split.drawn_ahead(), path == 1 ? c.batch : 0u);
    const DeviceSampledBatch got = path == 0 ? split.sample_inserting(rows.view(), c.n, c.batch)
                                             : split.gather_drawn(rows.view(), c.n);
    ASSERT_EQ(split.pending_rows(), 0u);
    ASSERT_EQ(split.drawn_ahead(), 0u);
    stream.synchronize();
    const HostSample e = download(expected, c.dim), g = download(got, c.dim);
    const std::string where =
        "round " + std::to_string(round) + (path == 0 ? " (sample_inserting)" : " (draw ahead)");
    ASSERT_EQ(g.indices, e.indices) << where;
    ASSERT_EQ(g.generations, e.generations) << where;
    ASSERT_EQ(g.weights, e.weights) << where;
    ASSERT_EQ(g.states, e.states) << where;
    ASSERT_EQ(g.next_states, e.next_states) << where;
    ASSERT_EQ(g.actions, e.actions) << where;
    ASSERT_EQ(g.rewards, e.rewards) << where;
    ASSERT_EQ(g.dones, e.dones) << where;
    for (const std::uint32_t slot : g.indices)  // drawn while its row was still pending
      pending_draws[path] += (slot + c.capacity - cursor) % c.capacity < c.n;
    cursor = (cursor + c.n) % c.capacity;
    last = got;

    twin.update_priorities(expected.indices, expected.generations, d_td.data(), c.batch);
    split.update_priorities(got.indices, got.generations, d_td.data(), c.batch);
  }
  std::printf("  capacity %zu, dim %zu, n %zu, batch %zu: %zu (sample_inserting) and %zu (draw "
              "ahead) of %zu draws hit pending rows\n",
              c.capacity, c.dim, c.n, c.batch, pending_draws[0], pending_draws[1],
              c.rounds * c.batch);
  if (c.expect_pending) {
    EXPECT_GT(pending_draws[0], 0u) << "no sample_inserting draw read a pending row";
    EXPECT_GT(pending_draws[1], 0u) << "no gather_drawn draw read a pending row";
  }
  EXPECT_EQ(split.size(), twin.size());
  EXPECT_TRUE(split.save_state() == twin.save_state())
      << "storage, trees, generations or counters differ after the rounds";
}

// (capacity, state_dim, n, batch, rounds[, warm rows, expect pending draws]): the DQN bench's 32
// rows of 64 into a non-power-of-two ring that wraps; every slot pending (n = capacity); odd
// widths (not float4-aligned) and more pending rows than the draw has blocks (each step warp
// writes several). n <= 32 runs insert_few_leaves: one kept level (P = 1, 4, 32), several (P =
// 1024; P = 2048, 2^16 and 2^21 with a top level shorter than 5, wrapping in their first rounds;
// P = 2048 has few draws: the shape a racecheck run can afford). n > 32 runs
// write_inserted_leaves.
INSTANTIATE_TEST_SUITE_P(Shapes, GpuReplaySplitInsert,
                         ::testing::Values(SplitCase{1000, 64, 32, 256, 60},
                                           SplitCase{37, 5, 37, 16, 12},
                                           SplitCase{301, 70, 45, 8, 20},
                                           SplitCase{4096, 3, 200, 64, 30},
                                           SplitCase{1, 2, 1, 1, 6},
                                           SplitCase{4, 3, 3, 2, 12},
                                           SplitCase{32, 4, 32, 16, 8},
                                           SplitCase{2000, 2, 32, 8, 6, 1990, false},
                                           SplitCase{50000, 3, 32, 64, 12, 49990, false},
                                           SplitCase{(1u << 21) - 5, 2, 31, 64, 6,
                                                     (1u << 21) - 40, false}),
                         [](const ::testing::TestParamInfo<SplitCase>& info) {
                           const SplitCase& c = info.param;
                           return "cap" + std::to_string(c.capacity) + "_dim" +
                                  std::to_string(c.dim) + "_n" + std::to_string(c.n) + "_b" +
                                  std::to_string(c.batch);
                         });

std::string message_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(GpuReplaySplitInsert, OtherCallsWhileRowsArePendingThrowNamingThem) {
  RESIDENT_REQUIRE_GPU();
  const ReplayConfig config = split_config(50, 4, ReplayPriorityMode::Proportional);
  Stream stream;
  GpuReplayBuffer buffer(config, 8, 3, stream.get());
  std::mt19937_64 rng(5);
  const HostTransitions warm(20, 4, rng), fresh(3, 4, rng);
  const DeviceRows warm_rows(warm), rows(fresh);
  buffer.insert_batch(warm_rows.view(), 20);

  EXPECT_NE(message_of([&] { buffer.insert_leaves(0, stream.get()); }).find("n = 0, allowed [1, 50]"),
            std::string::npos);
  EXPECT_NE(message_of([&] { buffer.insert_leaves(51, stream.get()); }).find("n = 51, allowed [1, 50]"),
            std::string::npos);
  EXPECT_EQ(buffer.pending_rows(), 0u) << "a refused insert_leaves left rows pending";

  buffer.insert_leaves(3, stream.get());
  const std::string pending = "3 rows of insert_leaves are pending";
  const DeviceSampledBatch none{};
  std::vector<std::string> messages = {
      message_of([&] { buffer.sample(4); }),
      message_of([&] { buffer.insert_batch(rows.view(), 3); }),
      message_of([&] { buffer.insert_leaves(3, stream.get()); }),
      message_of([&] { buffer.update_priorities(none.indices, none.generations, nullptr, 1); }),
      message_of([&] { (void)buffer.save_state(); }),
  };
  for (const std::string& m : messages) EXPECT_NE(m.find(pending), std::string::npos) << m;
  const std::string wrong_n = message_of([&] { buffer.sample_inserting(rows.view(), 4, 4); });
  std::printf("  %s\n  %s\n", messages[0].c_str(), wrong_n.c_str());
  EXPECT_NE(wrong_n.find("n = 4, but insert_leaves left 3 rows pending"), std::string::npos)
      << wrong_n;
  EXPECT_NO_THROW(buffer.sample_inserting(rows.view(), 3, 4));
  EXPECT_EQ(buffer.pending_rows(), 0u);
  EXPECT_EQ(buffer.size(), 23u);
  EXPECT_NO_THROW(buffer.sample(4));

  // The draw ahead: only after insert_leaves, a batch the buffer can draw, then only gather_drawn
  // with the pending rows' n.
  const std::string no_leaves = message_of([&] { buffer.draw_ahead(4, stream.get()); });
  EXPECT_NE(no_leaves.find("no rows of insert_leaves are pending"), std::string::npos) << no_leaves;
  const std::string nothing_drawn = message_of([&] { buffer.gather_drawn(rows.view(), 3); });
  EXPECT_NE(nothing_drawn.find("nothing was drawn ahead"), std::string::npos) << nothing_drawn;
  buffer.insert_leaves(3, stream.get());
  const std::string too_many = message_of([&] { buffer.draw_ahead(9, stream.get()); });
  EXPECT_NE(too_many.find("batch = 9, allowed [1, 8]"), std::string::npos) << too_many;
  EXPECT_EQ(buffer.drawn_ahead(), 0u) << "a refused draw_ahead left a batch drawn";
  buffer.draw_ahead(5, stream.get());
  const std::string drawn = "3 rows of insert_leaves are pending and a batch of 5 was drawn ahead";
  const std::vector<std::string> while_drawn = {
      message_of([&] { buffer.sample(4); }),
      message_of([&] { buffer.sample_inserting(rows.view(), 3, 4); }),
      message_of([&] { buffer.draw_ahead(5, stream.get()); }),
      message_of([&] { buffer.insert_leaves(3, stream.get()); }),
      message_of([&] { buffer.update_priorities(none.indices, none.generations, nullptr, 1); }),
      message_of([&] { (void)buffer.save_state(); }),
  };
  for (const std::string& m : while_drawn) EXPECT_NE(m.find(drawn), std::string::npos) << m;
  std::printf("  %s\n", while_drawn[0].c_str());
  const std::string gather_wrong_n = message_of([&] { buffer.gather_drawn(rows.view(), 2); });
  EXPECT_NE(gather_wrong_n.find("n = 2, but insert_leaves left 3 rows pending"), std::string::npos)
      << gather_wrong_n;
  const DeviceSampledBatch gathered = buffer.gather_drawn(rows.view(), 3);
  EXPECT_EQ(gathered.batch, 5u);
  EXPECT_EQ(buffer.pending_rows(), 0u);
  EXPECT_EQ(buffer.drawn_ahead(), 0u);
  EXPECT_EQ(buffer.size(), 26u);
  EXPECT_NO_THROW(buffer.sample(4));

  GpuReplayBuffer rank(split_config(50, 4, ReplayPriorityMode::Rank), 8, 3, stream.get());
  rank.insert_batch(warm_rows.view(), 20);
  EXPECT_NE(message_of([&] { rank.insert_leaves(3, stream.get()); }).find("mode = rank"),
            std::string::npos);
  EXPECT_EQ(rank.pending_rows(), 0u);
}

}  // namespace
