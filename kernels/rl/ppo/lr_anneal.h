// Learning-rate annealing applied after a fixed-lr AdamW step (kernels/rl/ppo/lr_anneal.cu).
//
// The slab's AdamW takes its lr from the host (baked into a captured graph). Its update is
// linear in lr: p' = p (1 - lr wd) - lr u with u = m_hat / (sqrt(v_hat) + eps), and m, v do not
// depend on lr. So a step at lr * f equals p + f (p_lr - p), where p_lr is the step at the base
// lr: this kernel rescales the step just taken by f, read on the device from the update counter.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace resident::kernels::ppo {

// With u = (*counter - 1) / minibatches_per_update (the update the last step belonged to) and
// f = max(0, 1 - u / total_updates): params[i] = before[i] + f * (params[i] - before[i]) for
// i < n, in place; f == 1 leaves params untouched (bit for bit). before [n] holds the params as
// they were before the step. Elementwise, deterministic, capturable.
void launch_lr_anneal(float* params, const float* before, std::size_t n,
                      const std::uint64_t* counter, std::uint64_t minibatches_per_update,
                      std::uint64_t total_updates, cudaStream_t stream);

// The factor f the kernel applies for a given counter value (host mirror, for tests and logs).
double lr_anneal_factor(std::uint64_t counter, std::uint64_t minibatches_per_update,
                        std::uint64_t total_updates);

}  // namespace resident::kernels::ppo
