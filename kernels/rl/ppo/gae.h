// GAE(lambda) over a rollout in one kernel (kernels/rl/ppo/gae.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace resident::kernels::ppo {

// The recursion of tests/reference/gae_reference.h, per env backwards over t, in fp32:
//   terminated_t:  A_t = r_t - V_t
//   truncated_t:   A_t = r_t + gamma V_final,t - V_t
//   otherwise:     A_t = r_t + gamma V_{t+1} - V_t + gamma lambda A_{t+1}     (A_T = 0)
//   returns_t = A_t + V_t
// rewards, final_values [T, N]; values [T + 1, N] (row T bootstraps the unfinished episodes);
// terminated, truncated [T, N] 0/1; advantages, returns [T, N] overwritten. Time-major: (t, n) at
// t * N + n. One thread per env (inputs of 8 steps loaded ahead); deterministic; final_values
// is used only where truncated and not terminated (it may hold NaN elsewhere). Outputs must not
// alias the inputs. Capturable.
void launch_gae(float* advantages, float* returns, const float* rewards, const float* values,
                const std::uint8_t* terminated, const std::uint8_t* truncated,
                const float* final_values, std::size_t steps, std::size_t env_count, float gamma,
                float lambda, cudaStream_t stream);

}  // namespace resident::kernels::ppo
