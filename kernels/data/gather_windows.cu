// Window gather (contract in gather_windows.h).
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/launch_config.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/data/gather_windows.h"

namespace resident::kernels::data {

namespace {

constexpr unsigned kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    gather_windows(float* x, float* y, WindowLayout layout, WindowSelection selection,
                   std::size_t batch) {
  const std::size_t per_x = layout.window * layout.features;
  const std::size_t outputs = layout.horizon * layout.targets;
  const std::size_t x_elements = batch * per_x;
  const std::size_t total = x_elements + batch * outputs;
  const std::size_t base =
      (selection.counter != nullptr ? (*selection.counter % selection.counter_modulo) * batch
                                    : 0) +
      selection.offset;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t e = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; e < total;
       e += stride) {
    const bool is_x = e < x_elements;
    const std::size_t local = is_x ? e : e - x_elements;
    const std::size_t per_row = is_x ? per_x : outputs;
    const std::size_t i = local / per_row, r = local % per_row;
    const std::size_t position = base + i;
    const std::size_t start =
        selection.first_start +
        (selection.order != nullptr ? static_cast<std::size_t>(selection.order[position])
                                    : position);
    if (is_x) {
      const std::size_t t = r / layout.features, f = r % layout.features;
      x[e] = layout.series[(start + t) * layout.columns + f];
    } else {
      const std::size_t k = r / layout.targets, j = r % layout.targets;
      y[local] =
          layout.series[(start + layout.window + k) * layout.columns + layout.target_columns[j]];
    }
  }
}

}  // namespace

void launch_gather_windows(float* x, float* y, const WindowLayout& layout,
                           const WindowSelection& selection, std::size_t batch,
                           cudaStream_t stream) {
  if (batch == 0 || layout.rows == 0 || layout.columns == 0 || layout.window == 0 ||
      layout.features == 0 || layout.features > layout.columns || layout.horizon == 0 ||
      layout.targets == 0 || selection.counter_modulo == 0)
    throw Error("launch_gather_windows", "invalid argument",
                "batch = " + std::to_string(batch) + ", rows = " + std::to_string(layout.rows) +
                    ", columns = " + std::to_string(layout.columns) +
                    ", window = " + std::to_string(layout.window) +
                    ", features = " + std::to_string(layout.features) +
                    ", horizon = " + std::to_string(layout.horizon) +
                    ", targets = " + std::to_string(layout.targets) +
                    ", counter_modulo = " + std::to_string(selection.counter_modulo) +
                    "; allowed: all >= 1 and features <= columns",
                __FILE__, __LINE__);
  const NvtxRange range("data/gather_windows");
  const std::size_t total =
      batch * (layout.window * layout.features + layout.horizon * layout.targets);
  gather_windows<<<grid_stride_blocks(total, kThreads), kThreads, 0, stream>>>(x, y, layout,
                                                                               selection, batch);
  RESIDENT_CHECK_LAUNCH("gather_windows");
}

}  // namespace resident::kernels::data
