// Trend labels of a batch of windows, on the device from the series (kernels/data/trend_labels.cu):
// the classification targets of the supervised trainer (MODELS.md section 7's labeling).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/data/gather_windows.h"

namespace resident::kernels::data {

// The label rule: h = `smoothing` rows (1 <= h <= layout.window, start + window + h <= rows),
// column `column` of the series:
//   past   = (sum of rows s + L - h .. s + L - 1) / h      (the window's last h rows)
//   future = (sum of rows s + L .. s + L + h - 1) / h      (the next h rows)
//   change = future - past        (fp64: the floats widened, summed in row order, each sum divided
//                                  by h, then subtracted; no contraction)
//   label  = 2 (up) when change > theta, 0 (down) when change < -theta, else 1 (stationary).
// tests/reference/tlob_reference.h (trend_change, trend_label) is the same formula.
struct TrendRule {
  std::size_t column = 0;
  std::size_t smoothing = 1;
  double theta = 0.0;  // >= 0
};

// labels [batch] (overwritten) for the windows `selection` names (the same windows and order as
// launch_gather_windows with the same layout and selection). One thread per row; exact integers,
// deterministic; nothing allocated or synchronized (capturable). Throws resident::Error for
// batch == 0, column >= layout.columns, smoothing outside [1, layout.window], a negative or
// non-finite theta, or counter_modulo == 0.
void launch_trend_labels(std::int32_t* labels, const WindowLayout& layout,
                         const WindowSelection& selection, const TrendRule& rule,
                         std::size_t batch, cudaStream_t stream);

}  // namespace resident::kernels::data
