// Mamba2Config: the widths of the Mamba2 (SSD) supervised model (MODELS.md section 1), and its
// validation, a host function that needs no GPU.
#pragma once

#include <cstddef>
#include <string>

#include "lib/models/supervised_model.h"

namespace resident::models {

struct Mamba2Config {
  std::size_t d_model = 64;  // D, residual width: [1, 1024]
  std::size_t n_layers = 2;  // [1, 32]
  std::size_t expand = 2;    // d_inner = expand * d_model: [1, 4]
  std::size_t headdim = 32;  // P: [1, 64], divides d_inner
  std::size_t d_state = 32;  // N: [1, 64]
  std::size_t d_conv = 4;    // K: [1, 8]
  std::size_t chunk = 64;    // Q, SSD chunk: [1, 128]

  std::size_t d_inner() const { return expand * d_model; }
  std::size_t heads() const { return d_inner() / headdim; }
  std::size_t conv_channels() const { return d_inner() + 2 * d_state; }
  // in_proj's output row: z [d_inner] | xBC [d_inner + 2 N] | dt [heads]
  std::size_t proj_width() const { return 2 * d_inner() + 2 * d_state + heads(); }
};

// Shared memory per block the SSD kernels need at `config` over windows of `window` steps (the
// larger of forward and backward; the chunk is min(chunk, window)).
std::size_t mamba2_ssd_shared_bytes(const Mamba2Config& config, std::size_t window);

// Throws resident::Error naming the field, its value and the allowed range when `config` or
// `shape` is out of range, or when the SSD kernels would need more than
// `shared_memory_limit_bytes` of shared memory per block (the H100/H200 opt-in limit by default).
void validate_mamba2_config(const Mamba2Config& config, const ModelShape& shape,
                            std::size_t shared_memory_limit_bytes = 232448);

// "mamba2 D=64 layers=2 expand=2 headdim=32 heads=4 d_state=32 d_conv=4 chunk=64".
std::string describe_mamba2_config(const Mamba2Config& config);

}  // namespace resident::models
