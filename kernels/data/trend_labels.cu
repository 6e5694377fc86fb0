// Trend labels (contract in trend_labels.h).
#include <cmath>
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/launch_config.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/data/trend_labels.h"

namespace resident::kernels::data {

namespace {

constexpr unsigned kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    trend_labels(std::int32_t* labels, WindowLayout layout, WindowSelection selection,
                 TrendRule rule, std::size_t batch) {
  const std::size_t base =
      (selection.counter != nullptr ? (*selection.counter % selection.counter_modulo) * batch
                                    : 0) +
      selection.offset;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < batch;
       i += stride) {
    const std::size_t position = base + i;
    const std::size_t start =
        selection.first_start +
        (selection.order != nullptr ? static_cast<std::size_t>(selection.order[position])
                                    : position);
    const std::size_t h = rule.smoothing;
    double past = 0.0, future = 0.0;
    for (std::size_t k = 0; k < h; ++k) {
      past = __dadd_rn(past, static_cast<double>(
                                 layout.series[(start + layout.window - h + k) * layout.columns +
                                               rule.column]));
      future = __dadd_rn(future, static_cast<double>(
                                     layout.series[(start + layout.window + k) * layout.columns +
                                                   rule.column]));
    }
    const double change = __dsub_rn(__ddiv_rn(future, static_cast<double>(h)),
                                    __ddiv_rn(past, static_cast<double>(h)));
    labels[i] = change > rule.theta ? 2 : (change < -rule.theta ? 0 : 1);
  }
}

}  // namespace

void launch_trend_labels(std::int32_t* labels, const WindowLayout& layout,
                         const WindowSelection& selection, const TrendRule& rule,
                         std::size_t batch, cudaStream_t stream) {
  if (batch == 0 || rule.column >= layout.columns || rule.smoothing < 1 ||
      rule.smoothing > layout.window || !std::isfinite(rule.theta) || rule.theta < 0.0 ||
      selection.counter_modulo == 0)
    throw Error("launch_trend_labels", "invalid argument",
                "batch = " + std::to_string(batch) + ", column = " + std::to_string(rule.column) +
                    " of " + std::to_string(layout.columns) +
                    ", smoothing = " + std::to_string(rule.smoothing) +
                    " (window " + std::to_string(layout.window) +
                    "), theta = " + std::to_string(rule.theta) +
                    ", counter_modulo = " + std::to_string(selection.counter_modulo) +
                    "; allowed batch >= 1, column < columns, 1 <= smoothing <= window, "
                    "finite theta >= 0, counter_modulo >= 1",
                __FILE__, __LINE__);
  const NvtxRange range("data/trend_labels");
  trend_labels<<<grid_stride_blocks(batch, kThreads), kThreads, 0, stream>>>(
      labels, layout, selection, rule, batch);
  RESIDENT_CHECK_LAUNCH("trend_labels");
}

}  // namespace resident::kernels::data
