// What the proportional and rank-based draws share: the uniform of draw k, the annealed beta,
// and the (stratified or independent) position of a draw, each as CpuReplayBuffer computes it.
#pragma once

#include <cstdint>

#include "kernels/core/philox.cuh"
#include "kernels/replay/replay_kernels.h"
#include "kernels/replay/replay_tree.cuh"

namespace resident::kernels {

// u in [0, 1), a multiple of 2^-53: draw k of sample call `step` (Philox subsequence k,
// counter block `step`), or uniforms[k] when the caller supplies them.
__device__ inline double draw_uniform(const double* uniforms, std::uint64_t seed,
                                      std::uint64_t step, std::uint32_t k) {
  if (uniforms != nullptr) return uniforms[k];
  curandStatePhilox4_32_10_t state = philox_state(PhiloxKey{seed, step * 4}, k);
  const std::uint32_t hi = curand(&state) >> 5;  // 27 bits
  const std::uint32_t lo = curand(&state) >> 6;  // 26 bits
  return (static_cast<double>(hi) * 67108864.0 + static_cast<double>(lo)) * 0x1.0p-53;
}

// beta_at(config, step) of lib/replay/replay_config.cpp.
__device__ inline double beta_at_step(const ReplayParams& params, std::uint64_t step) {
  if (step >= params.beta_annealing_steps) return params.beta_max;
  const double fraction =
      static_cast<double>(step) / static_cast<double>(params.beta_annealing_steps);
  const double beta = params.beta_start + (params.beta_max - params.beta_start) * fraction;
  return fmin(fmax(beta, params.beta_start), params.beta_max);
}

// The mass draw k of `batch` aims at, out of `total`: ((k + u) * total) / batch when
// stratified, u * total otherwise.
__device__ inline double draw_mass(const ReplayParams& params, std::uint32_t k,
                                   std::uint32_t batch, double u, double total) {
  const double position = params.stratified ? static_cast<double>(k) + u : u;
  const double strata = params.stratified ? static_cast<double>(batch) : 1.0;
  return position * total / strata;
}

// The IS weight (P / P_min)^-beta of a draw of probability P.
__device__ inline float is_weight(double probability, double min_probability, double beta) {
  return static_cast<float>(pow(probability / min_probability, -beta));
}

// Writes draw k: its slot, the slot's generation and its IS weight (values: the caller loads
// and computes them before the first store, so they are not serialized behind it).
__device__ inline void write_draw(std::uint32_t* out_indices, std::uint32_t* out_generations,
                                  float* out_weights, std::uint32_t k, std::uint32_t slot,
                                  std::uint32_t generation, float weight) {
  out_indices[k] = slot;
  out_generations[k] = generation;
  out_weights[k] = weight;
}

}  // namespace resident::kernels
