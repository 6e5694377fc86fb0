// The sampled forecasts' summary on the device
// (kernels/models/diffusion/diffusion_sample_summary.cu): samples [windows * S, O] (row w * S + s),
// per (w, o):
//   mean[w, o]          = (sum over s in s order, in double) / S          (when mean != null)
//   quantiles[w, o, k]  = v_lo + frac (v_hi - v_lo), v the sorted samples, position
//                         levels[k] (S - 1) = lo + frac, hi = min(lo + 1, S - 1)
//                                                                          (when quantiles != null)
// quantile index fastest. Overwrites only what is asked for; one thread per (w, o), the samples
// sorted in registers (S <= kMaxSummarySamples); deterministic.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace resident::kernels::diffusion {

inline constexpr int kMaxSummarySamples = 64;
inline constexpr int kMaxSummaryLevels = 16;

struct QuantileLevels {
  float level[kMaxSummaryLevels] = {};
  int count = 0;
};

// Throws resident::Error when samples_per_window is outside [1, kMaxSummarySamples] or
// levels.count outside [0, kMaxSummaryLevels].
void launch_diffusion_sample_summary(float* mean, float* quantiles, const float* samples,
                                     std::size_t windows, std::size_t samples_per_window,
                                     std::size_t outputs, const QuantileLevels& levels,
                                     cudaStream_t stream);

}  // namespace resident::kernels::diffusion
