#include <string>

#include "kernels/core/error.h"
#include "kernels/core/launch_config.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/diffusion/diffusion_sample_summary.h"

namespace resident::kernels::diffusion {

namespace {

constexpr unsigned kThreads = 128;

__global__ void __launch_bounds__(kThreads)
    diffusion_sample_summary(float* __restrict__ mean, float* __restrict__ quantiles,
                             const float* __restrict__ samples, std::size_t windows,
                             int samples_per, std::size_t outputs, QuantileLevels levels) {
  const std::size_t total = windows * outputs;
  for (std::size_t e = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; e < total;
       e += std::size_t{gridDim.x} * blockDim.x) {
    const std::size_t w = e / outputs, o = e % outputs;
    float v[kMaxSummarySamples];
    double sum = 0.0;
    for (int s = 0; s < samples_per; ++s) {
      v[s] = samples[(w * samples_per + s) * outputs + o];
      sum += v[s];
    }
    if (mean != nullptr) mean[e] = static_cast<float>(sum / samples_per);
    if (quantiles == nullptr || levels.count == 0) continue;
    for (int i = 1; i < samples_per; ++i) {  // insertion sort: stable, S small
      const float key = v[i];
      int j = i - 1;
      while (j >= 0 && v[j] > key) {
        v[j + 1] = v[j];
        --j;
      }
      v[j + 1] = key;
    }
    for (int k = 0; k < levels.count; ++k) {
      const double pos = static_cast<double>(levels.level[k]) * (samples_per - 1);
      int lo = static_cast<int>(floor(pos));
      lo = lo < 0 ? 0 : (lo > samples_per - 1 ? samples_per - 1 : lo);
      const int hi = lo + 1 < samples_per ? lo + 1 : samples_per - 1;
      const auto frac = static_cast<float>(pos - lo);
      quantiles[e * levels.count + k] = v[lo] + frac * (v[hi] - v[lo]);
    }
  }
}

}  // namespace

void launch_diffusion_sample_summary(float* mean, float* quantiles, const float* samples,
                                     std::size_t windows, std::size_t samples_per_window,
                                     std::size_t outputs, const QuantileLevels& levels,
                                     cudaStream_t stream) {
  const NvtxRange range("diffusion/sample_summary");
  if (samples_per_window < 1 || samples_per_window > kMaxSummarySamples)
    throw Error("launch_diffusion_sample_summary", "invalid argument",
                "samples_per_window = " + std::to_string(samples_per_window) + ", allowed [1, " +
                    std::to_string(kMaxSummarySamples) + "]",
                __FILE__, __LINE__);
  if (levels.count < 0 || levels.count > kMaxSummaryLevels)
    throw Error("launch_diffusion_sample_summary", "invalid argument",
                "levels.count = " + std::to_string(levels.count) + ", allowed [0, " +
                    std::to_string(kMaxSummaryLevels) + "]",
                __FILE__, __LINE__);
  const std::size_t total = windows * outputs;
  if (total == 0 || (mean == nullptr && quantiles == nullptr)) return;
  diffusion_sample_summary<<<grid_stride_blocks(total, kThreads), kThreads, 0, stream>>>(
      mean, quantiles, samples, windows, static_cast<int>(samples_per_window), outputs, levels);
  RESIDENT_CHECK_LAUNCH("diffusion_sample_summary");
}

}  // namespace resident::kernels::diffusion
