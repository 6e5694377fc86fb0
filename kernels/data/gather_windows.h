// Gathers a batch of windows and their targets from a device series in one launch
// (kernels/data/gather_windows.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace resident::kernels::data {

// The series and the sample layout: series [rows, columns] row-major fp32; a sample starting at
// row s has inputs rows s .. s + window - 1, columns 0 .. features - 1, and targets rows
// s + window .. s + window + horizon - 1 of the columns target_columns [targets] (a device array
// of column indices < columns).
struct WindowLayout {
  const float* series = nullptr;
  std::size_t rows = 0;
  std::size_t columns = 0;
  std::size_t window = 0;    // L >= 1
  std::size_t features = 0;  // F, 1 <= F <= columns
  std::size_t horizon = 0;   // h >= 1
  const std::uint32_t* target_columns = nullptr;
  std::size_t targets = 0;   // >= 1
};

// Which windows row i of the batch takes:
//   position p_i = (counter ? (*counter % counter_modulo) * batch : 0) + offset + i
//   window w_i   = order ? order[p_i] : p_i
//   start s_i    = first_start + w_i
// `counter` (a device batch counter, only read) lets a captured graph walk through `order` one
// batch per replay; `order` is e.g. a permutation of the training windows, or a caller's list of
// start rows (then first_start = 0).
struct WindowSelection {
  const std::uint32_t* order = nullptr;
  const std::uint64_t* counter = nullptr;
  std::uint64_t counter_modulo = 1;  // >= 1
  std::size_t offset = 0;
  std::size_t first_start = 0;
};

// x [batch, window, features] (overwritten): x[i, t, f] = series[s_i + t, f].
// y [batch, horizon * targets] (overwritten): y[i, k * targets + j] =
//   series[s_i + window + k, target_columns[j]]   (horizon-major, target fastest).
// Exact copies (no arithmetic); one launch, one grid-stride thread per output element. The caller
// guarantees s_i + window + horizon <= rows for every row (the launcher cannot read `order`);
// x and y may not alias the series. Nothing allocated or synchronized (capturable). Throws
// resident::Error for batch == 0, an empty layout, features > columns or counter_modulo == 0.
void launch_gather_windows(float* x, float* y, const WindowLayout& layout,
                           const WindowSelection& selection, std::size_t batch,
                           cudaStream_t stream);

}  // namespace resident::kernels::data
