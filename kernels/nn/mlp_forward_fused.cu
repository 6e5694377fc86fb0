// Fused narrow-MLP forward (mlp_forward_fused.h; the kernel is in mlp_forward_fused.cuh): the
// launch plan and checks, and the plain forward (no epilogue).
#include "kernels/nn/mlp_forward_fused.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/nn/mlp_forward_fused.cuh"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels {

namespace {

[[noreturn]] void invalid(const char* caller, const std::string& what) {
  throw Error(caller, "invalid argument", what, __FILE__, __LINE__);
}

bool misaligned(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 != 0; }

std::size_t shared_bytes_of(const FusedMlp& mlp) {
  return (fused_mlp::weight_floats(mlp) + 2 * fused_mlp::kRows * fused_mlp::tile_stride(mlp)) *
         sizeof(float);
}

}  // namespace

bool fused_mlp_forward_supports(std::span<const std::size_t> widths) noexcept {
  if (widths.size() < 2 || widths.size() > kFusedMlpMaxLayers + 1) return false;
  for (const std::size_t w : widths)
    if (w == 0 || w > kFusedMlpMaxWidth) return false;
  return true;
}

std::size_t fused_mlp_forward_shared_bytes(std::span<const std::size_t> widths) {
  if (!fused_mlp_forward_supports(widths))
    throw Error("fused_mlp_forward_shared_bytes", "invalid argument",
                std::to_string(widths.size()) + " widths; allowed 2 to " +
                    std::to_string(kFusedMlpMaxLayers + 1) + ", each in [1, " +
                    std::to_string(kFusedMlpMaxWidth) + "]",
                __FILE__, __LINE__);
  FusedMlp mlp;
  mlp.layers = static_cast<unsigned>(widths.size() - 1);
  for (std::size_t l = 0; l < widths.size(); ++l) mlp.widths[l] = static_cast<unsigned>(widths[l]);
  return shared_bytes_of(mlp);
}

std::size_t fused_mlp_forward_shared_limit() {
  static const std::size_t limit = [] {
    int device = 0, bytes = 0;
    RESIDENT_CUDA_CHECK(cudaGetDevice(&device));
    RESIDENT_CUDA_CHECK(
        cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    return static_cast<std::size_t>(bytes);
  }();
  return limit;
}

namespace fused_mlp {

LaunchPlan plan_launch(const FusedMlp& mlp, const float* x, std::size_t rows, const char* caller) {
  if (mlp.layers < 1 || mlp.layers > kFusedMlpMaxLayers)
    invalid(caller, "layers = " + std::to_string(mlp.layers) + ", allowed [1, " +
            std::to_string(kFusedMlpMaxLayers) + "]");
  for (unsigned l = 0; l <= mlp.layers; ++l)
    if (mlp.widths[l] < 1 || mlp.widths[l] > kFusedMlpMaxWidth)
      invalid(caller, "widths[" + std::to_string(l) + "] = " + std::to_string(mlp.widths[l]) +
              ", allowed [1, " + std::to_string(kFusedMlpMaxWidth) + "]");
  if (x == nullptr) invalid(caller, "x is null");
  for (unsigned l = 0; l < mlp.layers; ++l) {
    const FusedMlpLayer& layer = mlp.layer[l];
    const bool hidden_layer = l + 1 < mlp.layers;
    const std::string name = "layer[" + std::to_string(l) + "]";
    if (layer.weight == nullptr || layer.bias == nullptr ||
        (hidden_layer ? layer.activation == nullptr : layer.pre_activation == nullptr))
      invalid(caller, name + ": a weight, bias, (last layer) pre_activation or (hidden layer) "
                             "activation is null");
    if (mlp.widths[l + 1] % 4 == 0 &&
        ((layer.pre_activation != nullptr && misaligned(layer.pre_activation)) ||
         (hidden_layer && misaligned(layer.activation))))
      invalid(caller,
              name + ": outputs of a width that is a multiple of 4 must be 16-byte aligned");
  }
  if (rows == 0) return {};
  // At most a few resident blocks per multiprocessor, each walking several tiles, so the weights
  // are loaded once per block rather than once per 32 rows.
  static const int multiprocessors = [] {
    int device = 0, count = 0;
    RESIDENT_CUDA_CHECK(cudaGetDevice(&device));
    RESIDENT_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
    return count;
  }();
  const std::size_t tiles = (rows + fused_mlp::kRows - 1) / fused_mlp::kRows;
  const std::size_t blocks = std::min<std::size_t>(tiles, std::size_t{4} * multiprocessors);
  const std::size_t shared_bytes = shared_bytes_of(mlp);
  if (shared_bytes > fused_mlp_forward_shared_limit())
    invalid(caller, "the weights and tiles need " + std::to_string(shared_bytes) +
            " bytes of shared memory, the device allows " +
            std::to_string(fused_mlp_forward_shared_limit()) + " per block");
  return {blocks, shared_bytes, tiles >= 2 * blocks};
}

}  // namespace fused_mlp

void launch_fused_mlp_forward(const FusedMlp& mlp, const float* x, std::size_t rows,
                              const Activation& hidden, cudaStream_t stream) {
  const NvtxRange range("nn/fused_mlp_forward");
  fused_mlp::launch(mlp, x, rows, hidden, fused_mlp::NoEpilogue{}, "launch_fused_mlp_forward",
                    stream);
}

}  // namespace resident::kernels
