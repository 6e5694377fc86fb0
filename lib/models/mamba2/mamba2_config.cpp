#include "lib/models/mamba2/mamba2_config.h"

#include <algorithm>
#include <climits>

#include "kernels/core/error.h"
#include "kernels/models/mamba2/ssd.h"

namespace resident::models {

namespace {

void require_range(const char* field, std::size_t value, std::size_t low, std::size_t high) {
  if (value < low || value > high)
    throw Error("validate_mamba2_config", "invalid config",
                std::string(field) + " = " + std::to_string(value) + ", allowed [" +
                    std::to_string(low) + ", " + std::to_string(high) + "]",
                __FILE__, __LINE__);
}

}  // namespace

std::size_t mamba2_ssd_shared_bytes(const Mamba2Config& c, std::size_t window) {
  const int Q = static_cast<int>(std::min(c.chunk, window)), P = static_cast<int>(c.headdim),
            N = static_cast<int>(c.d_state);
  return std::max(kernels::mamba2::ssd_forward_shared_bytes(Q, P, N),
                  kernels::mamba2::ssd_backward_shared_bytes(Q, P, N));
}

void validate_mamba2_config(const Mamba2Config& c, const ModelShape& shape,
                            std::size_t shared_memory_limit_bytes) {
  require_range("d_model", c.d_model, 1, 1024);
  require_range("n_layers", c.n_layers, 1, 32);
  require_range("expand", c.expand, 1, 4);
  require_range("headdim", c.headdim, 1, 64);
  require_range("d_state", c.d_state, 1, 64);
  require_range("d_conv", c.d_conv, 1, 8);
  require_range("chunk", c.chunk, 1, 128);
  if (c.d_inner() % c.headdim != 0)
    throw Error("validate_mamba2_config", "invalid config",
                "headdim = " + std::to_string(c.headdim) + " must divide d_inner = expand * "
                "d_model = " + std::to_string(c.d_inner()),
                __FILE__, __LINE__);
  require_range("shape.window", shape.window, 1, 4096);
  require_range("shape.features", shape.features, 1, 4096);
  require_range("shape.outputs", shape.outputs, 1, 4096);
  require_range("shape.max_batch", shape.max_batch, 1, 65536);
  const std::size_t rows = shape.max_batch * shape.window;
  if (rows * c.proj_width() > static_cast<std::size_t>(INT_MAX))
    throw Error("validate_mamba2_config", "invalid config",
                "shape.max_batch * shape.window * proj_width = " +
                    std::to_string(rows * c.proj_width()) + ", allowed [1, 2147483647]",
                __FILE__, __LINE__);
  const std::size_t bytes = mamba2_ssd_shared_bytes(c, shape.window);
  if (bytes > shared_memory_limit_bytes)
    throw Error("validate_mamba2_config", "invalid config",
                "min(chunk, window) = " + std::to_string(std::min(c.chunk, shape.window)) + ", headdim = " + std::to_string(c.headdim) +
                    ", d_state = " + std::to_string(c.d_state) + " need " +
                    std::to_string(bytes) + " bytes of shared memory per SSD block, allowed " +
                    std::to_string(shared_memory_limit_bytes) + "; lower chunk",
                __FILE__, __LINE__);
}

std::string describe_mamba2_config(const Mamba2Config& c) {
  return "mamba2 D=" + std::to_string(c.d_model) + " layers=" + std::to_string(c.n_layers) +
         " expand=" + std::to_string(c.expand) + " headdim=" + std::to_string(c.headdim) +
         " heads=" + std::to_string(c.d_inner() % c.headdim == 0 && c.headdim > 0 ? c.heads() : 0) +
         " d_state=" + std::to_string(c.d_state) + " d_conv=" + std::to_string(c.d_conv) +
         " chunk=" + std::to_string(c.chunk);
}

}  // namespace resident::models
