// Plain-data views of a GpuReplayBuffer's device state, shared by the kernels and their host
// owner (no device code here): the fp64 sum/min/max trees, the transition storage, the
// device-resident counters and the parameters. Tree layout is CpuSumTree's: P = next power of
// two >= capacity leaves, heap-ordered (node 1 the root, children 2n and 2n+1, leaf i at node
// P + i). The GPU keeps every fifth level (heights 0, 5, 10, ... and the root) up to date, each
// such node the pairwise combination of its descendants five (or, below the root, fewer) levels
// down (kernels/replay/replay_tree.cuh), so GPU and CPU trees holding the same leaves hold
// bit-identical nodes at those heights; the heights in between are not maintained.
#pragma once

#include <cstdint>

namespace resident::kernels {

// Device-resident scalars: everything a replayed CUDA graph must read or advance.
struct ReplayCounters {
  std::uint32_t cursor;      // slot of the next insert
  std::uint32_t size;        // live slots
  std::uint64_t step;        // sample calls so far (beta annealing, Philox offset)
  std::uint64_t nonfinite;   // TD errors (or priorities) that were not finite: never written
  std::uint64_t stale;       // update entries for slots overwritten since they were sampled
  std::uint64_t bad_index;   // update entries naming a slot >= size: dropped
  std::uint32_t sample_blocks_done;  // blocks of the current proportional draw that finished
};

struct ReplayTreeView {
  double* sum;           // [2P]
  double* min_positive;  // [2P], +inf for zero leaves
  double* max;           // [2P]
  std::uint32_t leaves;  // P
  std::uint32_t capacity;
};

struct ReplayStorageView {
  float* states;               // [capacity, state_dim]
  std::int32_t* actions;       // [capacity]
  float* rewards;              // [capacity]
  float* next_states;          // [capacity, state_dim]
  std::uint8_t* dones;         // [capacity]
  std::uint32_t* generations;  // [capacity]
  std::uint32_t state_dim;
};

// Transition rows outside the storage (an insert's input): states/next_states [n, state_dim],
// the rest [n], row-major.
struct TransitionRowsView {
  const float* states;
  const std::int32_t* actions;
  const float* rewards;
  const float* next_states;
  const std::uint8_t* dones;
};

// Where a sample's rows go: states/next_states [batch, state_dim], the rest [batch].
struct SampledRowsView {
  float* states;
  std::int32_t* actions;
  float* rewards;
  float* next_states;
  std::uint8_t* dones;
};

// Device copies of the replay parameters the kernels need.
struct ReplayParams {
  double alpha;
  double epsilon;
  double beta_start;
  double beta_max;
  std::uint64_t beta_annealing_steps;
  bool stratified;
};

}  // namespace resident::kernels
