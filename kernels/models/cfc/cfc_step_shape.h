// The sizes the CfC step kernels (cfc_forward_steps.h, cfc_backward_steps.h) work on, and their
// block shape: a block carries kCfcRowsPerBlock batch rows through its time steps (rows are
// independent, so no grid-wide synchronization is needed), kCfcStepThreads threads striding over
// the units, heads and hidden units of those rows. Host-only header (no CUDA).
#pragma once

#include <cstddef>

namespace resident::kernels::cfc {

inline constexpr int kCfcRowsPerBlock = 4;
inline constexpr int kCfcStepThreads = 128;
// Dynamic shared memory without the opt-in attribute.
inline constexpr std::size_t kCfcMaxStepSharedBytes = 48 * 1024;

struct CfcStepShape {
  int batch = 0;        // B rows of this call
  int window = 0;       // L
  int features = 0;     // F (the row width of the time-major input)
  int hidden = 0;       // H
  int units = 0;        // U
  bool pure = false;    // heads = 1 (pure) or 4 (default)
  int time_column = -1; // -1: ts = 1; else the input column holding ts

  constexpr int heads() const { return pure ? 1 : 4; }
  // What the forward saves per (step, row) for the backward: f1, f2, s (default) or f (pure).
  constexpr int cell_width() const { return pure ? hidden : 3 * hidden; }
};

// Shared memory of either step kernel: rows x (H + U + heads * H) floats.
constexpr std::size_t cfc_step_shared_bytes(std::size_t hidden, std::size_t units,
                                            std::size_t heads) {
  return sizeof(float) * static_cast<std::size_t>(kCfcRowsPerBlock) *
         (hidden + units + heads * hidden);
}

}  // namespace resident::kernels::cfc
